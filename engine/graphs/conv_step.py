"""The DeltaNet conv window of a one-token step as a shift, beside the exported window that prefill chunks keep.

optimum-intel exports each DeltaNet layer's causal conv (depthwise, kernel K = 4, no padding) over the window
Concat(state [B, C, K], xᵀ [B, C, S]) on the last axis: the conv gives S + 1 positions of which the last S are kept,
and the window's last K columns are the new state. For one token the plugin runs that Concat in its reference kernel
(a copy of K floats, then 1, per channel), transposes the token's [B, 1, C] row into a [B, C, 1] column first and
slices the new state out of the window after: ~0.25 ms a layer at the 0.8B geometry (C = 6144), 4–5 ms of a step.

For one token the window IS the new state: state columns 1…K−1, then the token. Flattened per row that is one Gather
from Concat(state [B, C·K], x [B, C]) (two contiguous copies) with constant indices (c·K + j + 1 for j < K − 1, C·K + c
for the last column); the conv then runs over the K-wide window and gives the one position directly. The values the
conv reads are the exported ones and so is the conv (the same node kind, weights and attributes), so the step's
logits are bit-identical (tests/test_conv_step.py). Its SiLU follows, and the [B, C, 1] column is the [B, 1, C] row the
layer reads next without the exported Transpose back (a Reshape, no copy). The first window's transposed input also
sizes the exporter's attention mask: that ShapeOf reads the input's shape, permuted, so the Transpose goes.

As in engine/graphs/decode.py, the batch rows route the work in one graph: for a one-token infer the exported window's
inputs are cut to no rows (the plugin skips nodes with empty inputs) and the shift computes the row; for a longer
chunk it is the other way round and the chunk runs exactly as exported. Both results are joined on the batch axis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import openvino as ov
import openvino.opset13 as ops

from .building import END, first_rows, i64, is_op, merge_rows
from .lazy_commit import CONV_PARTS, tag, variable_of

def _readers(output: ov.Output) -> list[ov.Node]:
    return [target.get_node() for target in output.get_target_inputs()]


@dataclass(frozen=True)
class _Window:
    concat: ov.Node  # Concat(state [B, C, K], Transpose(x)) on the last axis: the conv's window [B, C, K + S]
    transpose: ov.Node  # x [B, S, C] → [B, C, S]
    conv: ov.Node  # the depthwise GroupConvolution over the window: [B, C, S + 1]
    tail: ov.Node  # the Slice keeping the conv's last S positions
    swish: ov.Node  # the SiLU after it
    back: ov.Node  # Transpose(Swish(tail)) → [B, S, C]: the layer's conv output, token-major again
    keep: ov.Node  # the Slice keeping the window's last K columns: the new state, read by an Assign
    channels: int
    kernel: int


def _static(output: ov.Output, rank: int) -> list[int] | None:
    shape = output.get_partial_shape()
    if shape.rank.is_dynamic or shape.rank.get_length() != rank or not all(d.is_static for d in list(shape)[1:]):
        return None
    return [d.get_length() for d in list(shape)[1:]]


def _transposed(node: ov.Node) -> ov.Node | None:
    """node if it is Transpose(x, [0, 2, 1])."""
    order = node.input_value(1).get_node() if is_op(node, "Transpose") else None
    return node if order is not None and is_op(order, "Constant") and list(order.get_data().ravel()) == [0, 2, 1] else None


def _match(conv: ov.Node) -> _Window | None:
    """The exporter's conv window behind a GroupConvolution, or None (a rewritten one, or another layout)."""
    concat = conv.input_value(0).get_node()
    attributes = conv.get_attributes()
    plain = (attributes.get("strides") == [1] and attributes.get("dilations") == [1]
             and not any(attributes.get("pads_begin", [1])) and not any(attributes.get("pads_end", [1])))
    if not plain or not is_op(concat, "Concat") or concat.get_input_size() != 2 or concat.get_attributes()["axis"] not in (-1, 2):
        return None
    if is_op(concat.input_value(0).get_node(), "Slice"):
        return None  # rewritten already: the state reaches the window through its rows cut
    transpose = _transposed(concat.input_value(1).get_node())
    if transpose is None:
        return None
    state = _static(concat.input_value(0), 3)
    weights = conv.input_value(1).get_partial_shape()
    if state is None or weights.is_dynamic or [d.get_length() for d in weights] != [state[0], 1, 1, state[1]]:
        return None
    readers = _readers(concat.output(0))
    keeps = [n for n in readers if is_op(n, "Slice")]
    tails = _readers(conv.output(0))
    if len(readers) != 2 or len(keeps) != 1 or len(tails) != 1 or not is_op(tails[0], "Slice"):
        return None
    if [n.get_type_name() for n in _readers(keeps[0].output(0))] != ["Assign"]:
        return None
    swish = _readers(tails[0].output(0))
    back = _readers(swish[0].output(0)) if len(swish) == 1 and is_op(swish[0], "Swish") else []
    if len(back) != 1 or _transposed(back[0]) is None:
        return None
    return _Window(concat, transpose, conv, tails[0], swish[0], back[0], keeps[0], *state)


def _shift_indices(channels: int, kernel: int) -> ov.Node:
    """Where each element of the shifted window [C, K] sits in Concat(state [C·K], token [C]), flattened."""
    index = np.arange(channels * kernel, dtype=np.int32).reshape(channels, kernel) + 1
    index[:, -1] = channels * kernel + np.arange(channels, dtype=np.int32)
    return ops.constant(index.reshape(-1))


SHIFT_PARTS = ("window", "shift", "conv")  # the one-token shift's named nodes (`shift_name`)


def shift_name(variable_id: str, part: str) -> str:
    """The friendly name of `part` of the one-token conv shift of `variable_id`'s state: what our native conv step
    finds (engine/kernels/native_deltanet.py)."""
    return f"{variable_id}/conv_shift/{part}"


def _shifted(window: _Window, rows: ov.Output, variable: str | None) -> tuple[ov.Output, ov.Output]:
    """(the new state [rows, C, K], the conv's one position after its SiLU [rows, C, 1]) for a one-token infer's
    `rows` rows; its nodes named after `variable`, the state it shifts, where known."""
    channels, kernel = window.channels, window.kernel
    x = window.transpose.input_value(0)  # [B, S, C]
    token = ops.slice(x, i64([0, -1]), ops.concat([rows, i64([END])], 0), i64([1, 1]), i64([0, 1]))
    token = ops.reshape(token, i64([0, channels]), True)  # [rows, C] (0: the rows as they are)
    state = ops.reshape(first_rows(window.concat.input_value(0), rows).output(0), i64([0, channels * kernel]), True)
    both = ops.concat([state, token], 1)
    flat = ops.gather(both, _shift_indices(channels, kernel), i64(1))
    shifted = ops.reshape(flat, i64([0, channels, kernel]), True)
    a = window.conv.get_attributes()
    out = ops.group_convolution(shifted, window.conv.input_value(1), a["strides"], a["pads_begin"], a["pads_end"],
                                a["dilations"], a["auto_pad"])
    if variable is not None:
        for node, part in zip((both, flat, out), SHIFT_PARTS):
            node.set_friendly_name(shift_name(variable, part))
    beta = window.swish.input_value(1) if window.swish.get_input_size() > 1 else None  # (the exporter's SiLU has none)
    return shifted.output(0), ops.swish(out, beta).output(0)


def _shapes_without(transpose: ov.Node) -> None:
    """The exporter sizes the attention mask by the first window's transposed input: its ShapeOf readers get the
    same shape from the input itself, and the Transpose (a copy, each step) goes when nothing else reads it."""
    source = transpose.input_value(0)
    for reader in _readers(transpose.output(0)):
        if is_op(reader, "ShapeOf"):
            shape = ops.gather(ops.shape_of(source, reader.get_output_element_type(0)), i64([0, 2, 1]), i64(0))
            for target in list(reader.output(0).get_target_inputs()):
                target.replace_source_output(shape.output(0))


def _rewrite(window: _Window, tokens: ov.Output, loop_rows: ov.Output, step_rows: ov.Output) -> None:
    back_readers = list(window.back.output(0).get_target_inputs())
    keep_readers = list(window.keep.output(0).get_target_inputs())
    variable = variable_of(window.concat.input_value(0))  # the state the window reads (before its rows are cut)
    new_state, out = _shifted(window, step_rows, variable)  # built from the sources before they are cut below
    # [step_rows, C, 1] → [step_rows, S, C], token-major as the exported Transpose hands it on: the same elements, in
    # the same order (none for a longer chunk, S = 1 otherwise)
    out = ops.reshape(out, ops.concat([step_rows, tokens, i64([window.channels])], 0), False).output(0)
    # The exported window gets loop_rows rows (none for one token: the plugin then skips it).
    window.concat.input(0).replace_source_output(first_rows(window.concat.input_value(0), loop_rows).output(0))
    # A Transpose of its own: the exported one has other readers (the exporter sizes the attention mask by its shape).
    cut = ops.transpose(first_rows(window.transpose.input_value(0), loop_rows).output(0), window.transpose.input_value(1))
    if variable is not None:  # a verify compile keeps the chunk's inputs pending (engine/graphs/lazy_commit.py)
        tag(cut, variable, CONV_PARTS[0])
    window.concat.input(1).replace_source_output(cut.output(0))
    _shapes_without(window.transpose)
    merge_rows(window.back.output(0), [out], back_readers)
    merge_rows(window.keep.output(0), [new_state], keep_readers)


def conv_windows(model: ov.Model) -> list[_Window]:
    """The exporter's conv windows of `model`, in graph order (none once rewritten)."""
    return [w for op in model.get_ordered_ops() if is_op(op, "GroupConvolution") and (w := _match(op)) is not None]


def window_input(window: _Window) -> ov.Output:
    """The token rows [B, S, C] the window reads: the first window's has the infer's batch and tokens, before any
    DeltaNet layer (the rows routing every path is computed from it)."""
    return window.transpose.input_value(0)


def shift_conv_windows(windows: list[_Window], tokens: ov.Output, loop_rows: ov.Output, step_rows: ov.Output) -> int:
    """Give each conv window a one-token shift (see the module doc), routed by the rows the caller computes from the
    infer's shape (engine/graphs/decode._Routing: the infer's token count [1], the exported window's rows and the
    shift's); return how many."""
    for window in windows:
        _rewrite(window, tokens, loop_rows, step_rows)
    return len(windows)
