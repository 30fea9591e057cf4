"""The int8 weights of optimum-intel's export as they sit in the graph, found once for every reader.

The export stores a Linear's weights as an int8 constant decompressed per output row — u8 − zero point, × scale (or
i8 × scale) — in front of an f32 MatMul(x, W, transpose_b). `int8_weights` reads one such MatMul's weights back;
`int8_groups` gathers the MatMuls by the activations they read (q, k, v; a DeltaNet layer's input projections; gate
and up), which both the integer-pieces rewrite (int8_pieces.py) and our VNNI kernel (engine/kernels) share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import openvino as ov


@dataclass(frozen=True)
class Int8Weights:
    weights: np.ndarray  # [N, K] u8 or i8
    zero_point: np.ndarray  # [N] float64
    scale: np.ndarray  # [N] float64
    constant: ov.Output | None = None  # the graph's Constant holding `weights`


def constant_value(output: ov.Output) -> np.ndarray | None:
    """A constant's value, through Converts of constants (f16 scales, u8 zero points)."""
    node = output.get_node()
    kind = node.get_type_name()
    if kind == "Constant":
        return node.get_data()
    if kind == "Convert":
        inner = constant_value(node.input_value(0))
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


def int8_weights(matmul: ov.Node) -> Int8Weights | None:
    """The int8 weights of a MatMul(x, W, transpose_b) if W is int8 decompressed per row; None otherwise."""
    attrs = matmul.get_attributes()
    if attrs.get("transpose_a") or not attrs.get("transpose_b") or len(matmul.get_input_partial_shape(0)) != 3:
        return None
    return decompressed(matmul.input_value(1))


def decompressed(output: ov.Output) -> Int8Weights | None:
    """The int8 weights behind `output` if it is an int8 constant decompressed per row (through a last Convert)."""
    node = output.get_node()
    if node.get_type_name() == "Convert":  # f16 decompression handed to f32 readers
        node = node.input_value(0).get_node()
    if node.get_type_name() != "Multiply":
        return None
    for data_side in (0, 1):
        data, scale_side = node.input_value(data_side).get_node(), node.input_value(1 - data_side)
        zp: np.ndarray | None
        if data.get_type_name() == "Subtract":
            zp = constant_value(data.input_value(1))
            data = data.input_value(0).get_node()
        else:
            zp = np.zeros(1)
        if data.get_type_name() != "Convert" or data.input_value(0).get_node().get_type_name() != "Constant":
            continue
        raw = data.input_value(0).get_node().get_data()
        if raw.dtype not in (np.uint8, np.int8) or raw.ndim != 2:
            continue
        rows = raw.shape[0]
        scale, zero_point = _per_row(constant_value(scale_side), rows), _per_row(zp, rows)
        if scale is None or zero_point is None:
            continue
        return Int8Weights(raw, zero_point, scale, data.input_value(0))
    return None


def int8_groups(model: ov.Model) -> list[list[tuple[ov.Node, Int8Weights]]]:
    """The model's int8 MatMuls with their weights, grouped by the activations they read, in graph order."""
    groups: dict[tuple[str, int], list[tuple[ov.Node, Int8Weights]]] = {}
    for node in model.get_ordered_ops():
        if node.get_type_name() != "MatMul":
            continue
        weights = int8_weights(node)
        if weights is not None:
            source = node.input_value(0)
            groups.setdefault((source.get_node().get_friendly_name(), source.get_index()), []).append((node, weights))
    return list(groups.values())
