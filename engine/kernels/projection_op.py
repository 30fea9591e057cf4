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

from dataclasses import dataclass

import numpy as np
import openvino as ov
import openvino.opset13 as ops
from openvino import Op

from .int8_matvec import Int8Matrix, arena, padded_columns
from .row_split import RowSplit
from .vnni_jit import MAX_TOKENS, Kernels

_END = np.iinfo(np.int64).max
KERNEL_TOKENS = "decider_kernel_tokens"


@dataclass(frozen=True)
class _Int8Weights:
    weights: np.ndarray  # [N, K] u8 or i8
    zero_point: np.ndarray | float
    scale: np.ndarray  # [N]


def _const(output: ov.Output) -> np.ndarray | None:
    """A constant's value, through Converts of constants (f16 scales, u8 zero points)."""
    node = output.get_node()
    kind = node.get_type_name()
    if kind == "Constant":
        return node.get_data()
    if kind == "Convert":
        inner = _const(node.input_value(0))
        return None if inner is None else inner.astype(np.float64)
    return None


def _per_row(values: np.ndarray | None, rows: int) -> np.ndarray | None:
    """A per-output-row vector ([N, 1], [N] or a scalar), or None for any other shape (grouped scales)."""
    if values is None:
        return None
    if values.size == 1:
        return np.full(rows, float(values.reshape(-1)[0]))
    if values.shape in ((rows, 1), (rows,)):
        return values.astype(np.float64).reshape(rows)
    return None


def int8_weights(matmul: ov.Node) -> _Int8Weights | None:
    """The int8 weights of a MatMul(x, W, transpose_b) if W is int8 decompressed per row; None otherwise."""
    attrs = matmul.get_attributes()
    if attrs.get("transpose_a") or not attrs.get("transpose_b") or len(matmul.get_input_partial_shape(0)) != 3:
        return None
    node = matmul.input_value(1).get_node()
    if node.get_type_name() == "Convert":  # f16 decompression handed to an f32 MatMul
        node = node.input_value(0).get_node()
    if node.get_type_name() != "Multiply":
        return None
    for data_side in (0, 1):
        data, scale_side = node.input_value(data_side).get_node(), node.input_value(1 - data_side)
        zp: np.ndarray | None
        if data.get_type_name() == "Subtract":
            zp = _const(data.input_value(1))
            data = data.input_value(0).get_node()
        else:
            zp = np.zeros(1)
        if data.get_type_name() != "Convert" or data.input_value(0).get_node().get_type_name() != "Constant":
            continue
        raw = data.input_value(0).get_node().get_data()
        if raw.dtype not in (np.uint8, np.int8) or raw.ndim != 2:
            continue
        rows = raw.shape[0]
        scale, zero_point = _per_row(_const(scale_side), rows), _per_row(zp, rows)
        if scale is None or zero_point is None:
            continue
        return _Int8Weights(raw, zero_point, scale)
    return None


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
    groups: dict[tuple[str, int], list[tuple[ov.Node, _Int8Weights]]] = {}
    for node in model.get_ordered_ops():
        if node.get_type_name() != "MatMul":
            continue
        weights = int8_weights(node)
        if weights is not None:
            source = node.input_value(0)
            groups.setdefault((source.get_node().get_friendly_name(), source.get_index()), []).append((node, weights))
    if not groups:
        return 0
    limit = ops.parameter([1], np.int64, name=KERNEL_TOKENS)
    limit.output(0).get_tensor().set_names({KERNEL_TOKENS})
    model.add_parameters([limit])
    every = [w for members in groups.values() for _, w in members]
    storage = iter(arena([w.weights.shape[0] * padded_columns(w.weights.shape[1], kernels) for w in every]))
    for members in groups.values():
        matrices = tuple(Int8Matrix(w.weights, w.zero_point, w.scale, kernels, storage=next(storage)) for _, w in members)
        _route(members, matrices, limit.output(0), split or RowSplit())
    return sum(len(members) for members in groups.values())


def _route(members: list[tuple[ov.Node, _Int8Weights]], matrices: tuple[Int8Matrix, ...], limit: ov.Output,
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
