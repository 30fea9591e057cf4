"""The int8 projections of a few-token infer through our kernel, as OpenVINO custom operations in the same graph.

Every MatMul whose weights are an int8 constant decompressed per output row (optimum-intel's int8 export:
u8 − zero point, × scale; or i8 × scale) is routed by the number of tokens in its activations:

    x [B, T, K] ─┬─ x[:, :cut] → the plugin's MatMul, as compiled today   (cut = T when T > limit, else 0)
                 └─ x[:, cut:] → Int8Projections (our kernel)  ─── Concat on the token axis → the MatMul's readers

The limit is an input of the model (KERNEL_TOKENS, one int64): MAX_TOKENS sends every infer of up to that many tokens
to the kernel, 0 sends everything to the plugin. So one compiled model runs either path, and the runner measures
both on the real model before it adopts the kernel (engine/kernels/adoption.py).

so a prompt chunk runs the plugin's kernels exactly as before (the custom operation gets no rows), and a decode step,
a k-token verify and the last-position head get our kernel (the plugin's MatMul gets no rows and does no work).
All the projections that read the same activations (q, k, v; a DeltaNet layer's four input projections; gate and
up) share one operation: the activations are split into pieces once, and Python is entered once for all of them.
"""

from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops
from openvino import Op

from ..graphs.int8_weights import Int8Weights, int8_groups
from .int8_matvec import Int8Matrix, arena, padded_columns
from .row_split import RowSplit
from .kernel_jit import MAX_TOKENS, Kernels

_END = np.iinfo(np.int64).max
KERNEL_TOKENS = "decider_kernel_tokens"


class Int8Projections(Op):
    """x [B, T, K] f32 → one output [B, T, N_i] per int8 matrix, with B·T ≤ MAX_TOKENS (no rows: empty outputs)."""

    def __init__(self, inputs=None, matrices: tuple[Int8Matrix, ...] = (), split: RowSplit | None = None):
        self._matrices = matrices  # before Op.__init__: it infers the output types, which need them
        self._split = split or RowSplit()
        super().__init__(self, inputs)

    def validate_and_infer_types(self) -> None:
        shape = self.get_input_partial_shape(0)
        for i, matrix in enumerate(self._matrices):
            self.set_output_type(i, ov.Type.f32, ov.PartialShape([shape[0], shape[1], ov.Dimension(matrix.rows)]))

    def clone_with_new_inputs(self, new_inputs):
        return Int8Projections(new_inputs, self._matrices, self._split)

    def visit_attributes(self, visitor) -> bool:
        return True

    def has_evaluate(self) -> bool:
        return True

    def evaluate(self, outputs, inputs) -> bool:
        x = inputs[0].data
        batch, tokens, columns = x.shape
        for i, matrix in enumerate(self._matrices):
            outputs[i].shape = [batch, tokens, matrix.rows]
        if batch * tokens == 0:
            return True
        rows = np.ascontiguousarray(x.reshape(batch * tokens, columns), dtype=np.float32)
        outs = [outputs[i].data.reshape(batch * tokens, matrix.rows) for i, matrix in enumerate(self._matrices)]
        for start in range(0, batch * tokens, MAX_TOKENS):  # more rows than the kernels take: in turns
            pieces, coef = self._matrices[0].pieces(rows[start : start + MAX_TOKENS])
            self._split.products([(m, out[start : start + MAX_TOKENS]) for m, out in zip(self._matrices, outs)], pieces, coef)
        return True


def route_int8_projections(model: ov.Model, kernels: Kernels, split: RowSplit | None = None) -> int:
    """Rewrite `model` in place as the module docstring says; return how many MatMuls now have the kernel's path.
    `split`: how the operations share their rows between threads (one thread where None)."""
    # wider rows than the instruction set's sums hold exactly stay with the plugin (AVX2: beyond 16,384 columns)
    groups = [members for members in int8_groups(model) if members[0][1].weights.shape[1] <= kernels.isa.max_columns]
    if not groups:
        return 0
    limit = ops.parameter([1], np.int64, name=KERNEL_TOKENS)
    limit.output(0).get_tensor().set_names({KERNEL_TOKENS})
    model.add_parameters([limit])
    every = [w for members in groups for _, w in members]
    storage = iter(arena([w.weights.shape[0] * padded_columns(w.weights.shape[1], kernels) for w in every]))
    for members in groups:
        matrices = tuple(Int8Matrix(w.weights, w.zero_point, w.scale, kernels, storage=next(storage)) for _, w in members)
        _route(members, matrices, limit.output(0), split or RowSplit())
    return sum(len(members) for members in groups)


def _route(members: list[tuple[ov.Node, Int8Weights]], matrices: tuple[Int8Matrix, ...], limit: ov.Output,
           split: RowSplit) -> None:
    x = members[0][0].input_value(0)
    tokens = ops.gather(ops.shape_of(x), ops.constant(np.array([1], np.int64)), ops.constant(np.int64(0)))
    cut = ops.select(ops.greater(tokens, limit), tokens, ops.constant(np.array([0], np.int64)))
    axis, one, zero = (ops.constant(np.array([v], np.int64)) for v in (1, 1, 0))
    plugin_x = ops.slice(x, zero, cut, one, axis)
    kernel_x = ops.slice(x, cut, ops.constant(np.array([_END], np.int64)), one, axis)
    ours = Int8Projections([kernel_x.output(0)], matrices, split)
    ours.set_friendly_name(members[0][0].get_friendly_name() + "/int8_kernel")
    for i, (matmul, _) in enumerate(members):
        readers = list(matmul.output(0).get_target_inputs())
        matmul.input(0).replace_source_output(plugin_x.output(0))
        joined = ops.concat([matmul.output(0), ours.output(i)], 1)
        for reader in readers:
            reader.replace_source_output(joined.output(0))
