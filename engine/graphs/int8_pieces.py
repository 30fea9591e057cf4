"""The int8 projections as integer-exact dot products the CPU plugin runs on its int8 kernels (AMX or VNNI).

optimum-intel's int8 export stores each projection's weights as u8 with a zero point and a scale per output row;
the exact compile widens every weight to f32 and multiplies in f32, which one core cannot do at its read rate
(issue #35: the widening is the wall). This rewrite keeps the arithmetic exact-grade and moves it to integers:

    x ≈ x̂ = s1·p1 + s2·p2 + s3·p3 + s4·p4     p_1 in [−127, 127], p_i in [−64, 64] after it, s1 = max|x|/127,
                                              s_{i+1} = s_i/128
    y[n] = scale[n] · Σ_i s_i · (⟨w_n − 128, p_i⟩ + (128 − zp[n])·Σ_k p_ik)

per token, in the graph: the four pieces of every token stacked as rows [B, 4T, K], a FakeQuantize that is the
identity on them (the plugin's low-precision pass reads it as "these are int8"), and the weights as i8 (w − 128:
exact) times a unit scale, so the plugin compiles the MatMul as an int8 FullyConnected (u8/s8 × s8, int32
accumulators: every ⟨w − 128, p_i⟩ is exact). The zero point's share is added per piece as an integer-valued f32
(exact while the sums stay below 2²⁴, which they do by a wide margin at these widths), then the pieces are scaled
and summed, then the row's scale applied: x̂ is x to within max|x|·2⁻²⁹, so y is f32-grade (relative error against
float64 ~1e-7, below the widened f32 path's serial sums).

The plugin's int8 kernels are exact only with an integer dot-product instruction (AVX-512 VNNI, AVX-VNNI or AMX):
without one, oneDNN's AVX2 int8 path sums pairs of products in 16 bits with saturation. `rewrite_int8_projections`
is therefore called only where the CPU has one (engine/compile/planner.py decides and states it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import openvino as ov
import openvino.opset13 as ops

from .int8_weights import Int8Weights, constant_value, decompressed, int8_groups

PIECES = 4
DESCRIPTION = "int8 projections as integer-exact dot products: 29-bit activations in four int8 pieces, int32 sums"


def _f32(value) -> ov.Output:
    return ops.constant(np.asarray(value, dtype=np.float32)).output(0)


@dataclass(frozen=True)
class _Pieces:
    rows: ov.Output  # [B, T·PIECES, K]: each token's pieces as int8-valued f32, through the identity FakeQuantize
    sums: ov.Output  # [B, T, PIECES, 1]: Σ_k p_ik
    scales: ov.Output  # [B, T, PIECES, 1]: s_i


_BASE = 128.0  # a power of two: scaling by it is exact, so every piece comes from one product and one rounding


def _pieces(x: ov.Output, columns: int) -> _Pieces:
    """x [B, T, K] f32 in PIECES signed 8-bit pieces, in units of s1 = max|x|/127: u = x/s1, q_i = round(u·128^i),
    p_1 = q_1, p_(i+1) = q_(i+1) − 128·q_i = round(128·(u·128^(i−1) − q_i)): |p_1| ≤ 127, |p_i| ≤ 64 after it.
    Every step is exact in f32: u·128^i is u scaled by a power of two (even where it passes 2²⁴ it is an integer
    already), 128·q_i too, and their difference is a small integer (Sterbenz). 8 + 3·7 = 29 bits of u."""
    bases = (_BASE ** np.arange(PIECES)).reshape(1, 1, PIECES, 1)
    # p_i = q_i − 128·q_(i−1) as a matrix along the pieces' axis: 1 on its diagonal, −128 below it
    differences = np.eye(PIECES) - _BASE * np.eye(PIECES, k=-1)
    top = ops.reduce_max(ops.abs(x), _i64([-1]), True)  # [B, T, 1]
    # An all-zero row: pieces of zeros (a floor far above f32's tiny, whose 127/tiny overflows to inf and 0·inf is NaN).
    safe = ops.unsqueeze(ops.maximum(top, _f32(1e-30)), _i64([2]))  # [B, T, 1, 1]
    factors = ops.multiply(ops.divide(_f32(127.0), safe), _f32(bases))  # 127/max·128^i
    rounded = ops.round(ops.multiply(ops.unsqueeze(x, _i64([2])), factors), "half_to_even")  # q [B, T, PIECES, K]
    stacked = ops.matmul(_f32(differences), rounded, False, False)  # p [B, T, PIECES, K]
    low, high = _f32(-128), _f32(127)
    rows = ops.fake_quantize(ops.reshape(stacked, _i64([0, -1, columns]), True), low, high, low, high, 256)
    scales = ops.multiply(ops.divide(safe, _f32(127.0)), _f32(1.0 / bases))  # s_i
    return _Pieces(rows.output(0), ops.reduce_sum(stacked, _i64([-1]), True).output(0), scales.output(0))


def _i64(values) -> ov.Output:
    return ops.constant(np.asarray(values, dtype=np.int64)).output(0)


def _projections(pieces: _Pieces, members: list[Int8Weights]) -> ov.Output:
    """The [B, T, ΣN] outputs of a group's projections, their rows stacked in one int8 FullyConnected."""
    signed, shift = [], []
    for weights in members:
        raw = weights.weights
        if raw.dtype == np.uint8:  # w − zp = (w − 128) + (128 − zp): the first exact in i8, the second added per piece
            signed.append((raw ^ np.uint8(0x80)).view(np.int8))  # w − 128, without an int16 copy of the table
            shift.append(128.0 - weights.zero_point)
        else:
            signed.append(raw)
            shift.append(-weights.zero_point)
    matrix = signed[0] if len(signed) == 1 else np.concatenate(signed)
    rows = matrix.shape[0]
    if matrix is members[0].weights and members[0].constant is not None:
        constant = members[0].constant  # the export's own i8 constant, as it is
    else:  # shared_memory: the Constant keeps this new array, not a copy of it (the plugin packs its own)
        constant = ops.constant(matrix, shared_memory=True).output(0)
    unit = ops.multiply(ops.convert(constant, ov.Type.f32), _f32(1.0))
    products = ops.matmul(pieces.rows, unit, False, True)  # [B, T·PIECES, N]: integers from the int8 kernel
    per_piece = ops.reshape(products, _i64([0, -1, PIECES, rows]), True)
    exact = ops.add(per_piece, ops.multiply(pieces.sums, _f32(np.concatenate(shift).reshape(1, 1, 1, rows))))
    summed = ops.reduce_sum(ops.multiply(exact, pieces.scales), _i64([2]), False)  # [B, T, N]
    scale = np.concatenate([w.scale for w in members]).reshape(1, 1, rows)
    return ops.multiply(summed, _f32(scale)).output(0)


def _gathers_decompress_rows(model: ov.Model) -> None:
    """Every table lookup (Gather) of int8 weights decompressed per row, as a lookup of the int8 rows decompressed
    after it: the same values ((w − zp)·scale in f32, row by row). Why: once the graph holds a FakeQuantize, the CPU
    plugin's low-precision pass folds a lookup's decompression into an f32 copy of the whole table (the tied
    embedding of Qwen3.5-0.8B: +1 GiB resident); on int8 rows it has nothing to fold."""
    for node in model.get_ordered_ops():
        if node.get_type_name() != "Gather":
            continue
        weights = decompressed(node.input_value(0))
        axis = constant_value(node.input_value(2))
        if weights is None or weights.constant is None or axis is None or int(np.asarray(axis).reshape(-1)[0]) != 0:
            continue
        ids = node.input_value(1)
        rows = ops.convert(ops.gather(weights.constant, ids, _i64(0)), ov.Type.f32)
        per_row = [ops.gather(_f32(v.reshape(-1, 1)), ids, _i64(0)) for v in (weights.zero_point, weights.scale)]
        values = ops.multiply(ops.subtract(rows, per_row[0]), per_row[1])
        for reader in list(node.output(0).get_target_inputs()):
            reader.replace_source_output(values.output(0))


def rewrite_int8_projections(model: ov.Model) -> int:
    """Every int8 per-row MatMul of `model` as the module docstring says, in place; how many were rewritten.
    The projections reading the same activations share one set of pieces and one FullyConnected."""
    groups = int8_groups(model)
    for members in groups:
        x = members[0][0].input_value(0)
        out = _projections(_pieces(x, members[0][1].weights.shape[1]), [w for _, w in members])
        widths = [w.weights.shape[0] for _, w in members]
        parts = [out] if len(members) == 1 else ops.variadic_split(out, _i64(-1), _i64(widths)).outputs()
        for (matmul, _), part in zip(members, parts):
            for reader in list(matmul.output(0).get_target_inputs()):
                reader.replace_source_output(part)
    if groups:
        _gathers_decompress_rows(model)
    model.validate_nodes_and_infer_types()
    return sum(len(members) for members in groups)
