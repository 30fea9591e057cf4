"""Graph edits applied at load time."""

from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops

from ..core.errors import ModelError

_PASS_THROUGH = {"Convert", "Multiply", "Divide", "Add", "Tanh", "Reshape"}


def _lm_head(logits: ov.Output) -> ov.Node:
    """Walk back from the logits output to the MatMul that projects hidden states on the vocabulary."""
    node = logits.get_node()
    for _ in range(8):
        if node.get_type_name() == "MatMul":
            return node
        if node.get_type_name() not in _PASS_THROUGH and node.get_type_name() != "Result":
            break
        node = node.input_value(0).get_node()
    raise ModelError(f"cannot find the lm_head MatMul behind the logits output (stopped at {node.get_type_name()})")


def slice_to_last_position(model: ov.Model, output_name: str = "logits") -> ov.Model:
    """Run the vocabulary projection on the last position only.

    The export computes logits for every prompt position; a decision needs the last one. Slicing the
    hidden states [B, S, H] → [B, 1, H] before the head makes prefill cost independent of
    prompt length × vocabulary, and the result equals the full model's last row exactly.
    """
    try:
        logits = model.output(output_name)
    except RuntimeError:
        raise ModelError(f"model has no {output_name!r} output") from None
    matmul = _lm_head(logits)
    for port in range(2):
        hidden = matmul.input_value(port)
        shape = hidden.get_partial_shape()
        if shape.rank.is_static and shape.rank.get_length() == 3 and shape[1].is_dynamic:
            last = ops.slice(
                hidden,
                ops.constant(np.array([-1], dtype=np.int64)),
                ops.constant(np.array([np.iinfo(np.int64).max], dtype=np.int64)),
                ops.constant(np.array([1], dtype=np.int64)),
                ops.constant(np.array([1], dtype=np.int64)),
            )
            matmul.input(port).replace_source_output(last.output(0))
            model.validate_nodes_and_infer_types()
            return model
    raise ModelError("the lm_head MatMul has no [batch, sequence, hidden] input to slice")


LOGITS_POSITIONS = "logits_positions"  # the input naming how many last positions get logits (counted head)


def slice_to_counted_positions(model: ov.Model, output_name: str = "logits") -> ov.Model:
    """Run the vocabulary projection on the last N positions, N an input (`logits_positions`, shape [1]).

    Fed 1, it is slice_to_last_position (measured bit-identical logits for prefill and steps on the CPU
    plugin); fed k + 1, one forward over a token and k drafts gives the logits a speculative decoder
    verifies them with (engine/generation/speculative.py), without a second compile of the weights.
    """
    slice_to_last_position(model, output_name)
    matmul = _lm_head(model.output(output_name))
    for port in range(2):
        last = matmul.input_value(port).get_node()
        if last.get_type_name() == "Slice":
            count = ops.parameter([1], ov.Type.i64, name=LOGITS_POSITIONS)
            count.output(0).get_tensor().set_names({LOGITS_POSITIONS})
            start = ops.negative(count)
            counted = ops.slice(last.input_value(0), start, last.input_value(2), last.input_value(3), last.input_value(4))
            matmul.input(port).replace_source_output(counted.output(0))
            model.add_parameters([count])
            model.validate_nodes_and_infer_types()
            return model
    raise ModelError("the lm_head MatMul has no sliced input")  # slice_to_last_position always leaves one


LAST_HIDDEN = "last_hidden"  # the extra output: the hidden states the head reads, at the positions that get logits


def expose_hidden(model: ov.Model, output_name: str = "logits") -> ov.Model:
    """Add an output `last_hidden` [1, N, H]: the lm head's input after slice_to_counted_positions (the main model's
    last hidden state after its final norm, at the positions that get logits). The MTP draft head is fed it
    (engine/runners/mtp_head.py). A second consumer of the same tensor: the logits are computed as before."""
    matmul = _lm_head(model.output(output_name))
    for port in range(2):
        source = matmul.input_value(port)
        if source.get_node().get_type_name() == "Slice":
            result = ops.result(source)
            result.output(0).get_tensor().set_names({LAST_HIDDEN})
            model.add_results([result])
            model.validate_nodes_and_infer_types()
            return model
    raise ModelError("the lm_head MatMul has no sliced input (slice_to_counted_positions first)")


def lm_head_weight(model: ov.Model, output_name: str = "logits") -> tuple[ov.Output, bool]:
    """The lm head's weight (the output feeding its MatMul that is not the hidden states) and whether the MatMul
    transposes it (the hidden states are its first input, as optimum exports it): what a draft head shares instead of a copy of the head."""
    matmul = _lm_head(model.output(output_name))
    if matmul.input_value(0).get_node().get_type_name() != "Slice":
        raise ModelError("the lm head's hidden states are not its MatMul's first input")
    return matmul.input_value(1), bool(matmul.get_attributes()["transpose_b"])
