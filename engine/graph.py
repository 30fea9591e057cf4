"""Graph edits applied at load time."""

from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops

from .errors import ModelError

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
