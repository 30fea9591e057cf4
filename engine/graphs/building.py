"""Small pieces the graph edits build with (decode.py's one-token DeltaNet step, conv_step.py's conv window): int64
constants, a slice along one axis, the first rows of a tensor, and the merge of the exported path's rows with the
step path's for every reader of the exported result."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import openvino as ov
import openvino.opset13 as ops

END = np.iinfo(np.int64).max  # a slice's "to the end"


def i64(values) -> ov.Node:
    return ops.constant(np.array(values, dtype=np.int64))


def is_op(node: ov.Node, kind: str) -> bool:
    return node.get_type_name() == kind


def cut(x, start, stop, axis: int) -> ov.Node:
    return ops.slice(x, start, stop, i64([1]), i64([axis]))


def first_rows(x, rows) -> ov.Node:
    """x's first `rows` rows (axis 0): the rows one path of a routed graph takes."""
    return cut(x, i64([0]), rows, 0)


def merge_rows(exported: ov.Output, others: list[ov.Output], readers: Iterable[ov.Input]) -> None:
    """The exported path's rows followed by the other paths' (all but one have none), read by `readers` in place
    of the exported result."""
    merged = ops.concat([exported, *others], 0)
    for reader in readers:
        reader.replace_source_output(merged.output(0))
