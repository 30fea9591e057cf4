"""The Gated DeltaNet update for a few tokens at once (2…FEW_TOKENS: a verify forward of a token and its drafts, a
short prompt chunk) as matrix products over the chunk, beside the one-token step (decode.py) and the fused kernel
longer chunks keep.

The plugin's fused kernel walks the state per (head, value column), copying a strided column out and back for every
chunk: for a 4-token forward at the 0.8B geometry that is 22.3 ms of 117.6 (1 thread, issue #35), ~5× the memory the
state needs. Unrolled, T tokens of the recurrence (decode.py's one-token form, per head, S [Dk, Dv], q and k
normalised as exported)

    S_t = e^(g_t)·S_(t−1) + k_t ⊗ δ_t,   δ_t = β_t·(v_t − e^(g_t)·k_tᵀS_(t−1)),   o_t = q_tᵀS_t

are, with G = cumsum(g), γ_t = e^(G_t), Γ_tj = e^(G_t − G_j) for j ≤ t (else 0), in matrix form over the chunk:

    (I + L)·Δ = β ⊙ (V − γ ⊙ K·S_0)        L_tj = β_t·Γ_tj·(k_t·k_j) for j < t (strictly lower: nilpotent)
    O   = γ ⊙ Q·S_0 + (Q·Kᵀ ⊙ Γ)·Δ
    S_T = γ_T·S_0 + Kᵀ·(e^(G_T − G) ⊙ Δ)

(I + L)⁻¹ = (I − L)(I + L²)(I + L⁴) exactly for T ≤ 8 (L⁸ = 0): three small products, no inverse. S_0 is read
twice ([Q; K]·S_0 in one MatMul, then S_T) and S_T written once, as in the one-token step, whatever T. Every
exponent is ≤ 0 (g ≤ 0: the exporter's −exp(A)·softplus(…)), so nothing overflows; the masked entries are zeroed
after their exponent is clamped at 0. The products over the chunk sum in another order than the token-by-token
recurrence: f32 rounding apart, the same numbers (tests/test_few_tokens.py: float64, and the fused kernel).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import openvino as ov
import openvino.opset13 as ops

from .building import END, cut, i64

FEW_TOKENS = 8  # the product form of (I + L)⁻¹ above is exact up to 8 tokens


def _f32(value: float) -> ov.Node:
    return ops.constant(np.array(value, dtype=np.float32))


def _triangles(g: ov.Output) -> tuple[ov.Node, ov.Node]:
    """([T, T] with ones on and below the diagonal, ones strictly below it) for g's T tokens [r, H, T]."""
    tokens = ops.squeeze(ops.gather(ops.shape_of(g), i64([2]), i64(0)), i64([0]))
    index = ops.range(i64(0), tokens, i64(1), ov.Type.i64)
    row, column = ops.unsqueeze(index, i64([1])), ops.unsqueeze(index, i64([0]))
    on_and_below = ops.convert(ops.greater_equal(row, column), ov.Type.f32)
    below = ops.convert(ops.greater(row, column), ov.Type.f32)
    return on_and_below, below


class Chunk(NamedTuple):
    out: ov.Node  # o [r,H,T,Dv]
    state: ov.Node  # the state after the chunk [r,H,Dk,Dv]
    deltas: ov.Node  # Δ [r,H,T,Dv] and G [r,H,T]: with k, the state after any prefix of the chunk (lazy_commit.py)
    cumulative: ov.Node


def few_tokens(q, k, v, g, beta, state) -> Chunk:
    """The chunk's outputs from q, k [r,H,T,Dk] (normalised, q scaled), v [r,H,T,Dv], g, beta [r,H,T] and the state
    before it [1 or r,H,Dk,Dv] (its one row broadcasts against r = 0 or 1)."""
    last = i64([-1])
    cumulative = ops.cumsum(g, i64(-1))  # G [r,H,T]
    on_and_below, below = _triangles(g)
    gaps = ops.subtract(ops.unsqueeze(cumulative, last), ops.unsqueeze(cumulative, i64([-2])))  # G_t − G_j
    decays = ops.multiply(ops.exp(ops.minimum(gaps, _f32(0.0))), on_and_below)  # Γ [r,H,T,T]
    lower = ops.multiply(ops.multiply(ops.unsqueeze(beta, last), decays),
                         ops.multiply(ops.matmul(k, k, False, True), below))  # L
    identity = ops.subtract(on_and_below, below)
    square = ops.matmul(lower, lower, False, False)
    inverse = ops.matmul(ops.matmul(ops.subtract(identity, lower), ops.add(identity, square), False, False),
                         ops.add(identity, ops.matmul(square, square, False, False)), False, False)  # (I + L)⁻¹
    tokens = ops.gather(ops.shape_of(q), i64([2]), i64(0))
    both = ops.matmul(ops.concat([q, k], 2), state, False, False)  # [Q; K]·S_0: one read of S_0
    q_s, k_s = cut(both, i64([0]), tokens, 2), cut(both, tokens, i64([END]), 2)
    growth = ops.unsqueeze(ops.exp(cumulative), last)  # γ [r,H,T,1]
    deltas = ops.matmul(inverse, ops.multiply(ops.unsqueeze(beta, last), ops.subtract(v, ops.multiply(growth, k_s))),
                        False, False)  # Δ [r,H,T,Dv]
    out = ops.add(ops.multiply(growth, q_s),
                  ops.matmul(ops.multiply(ops.matmul(q, k, False, True), decays), deltas, False, False))
    final = cut(cumulative, i64([-1]), i64([END]), 2)  # G_T [r,H,1]
    carried = ops.unsqueeze(ops.exp(ops.subtract(final, cumulative)), last)  # e^(G_T − G_j) [r,H,T,1]
    new_state = ops.add(ops.multiply(state, ops.unsqueeze(ops.exp(final), last)),
                        ops.matmul(k, ops.multiply(carried, deltas), True, False))
    return Chunk(out, new_state, deltas, cumulative)
