"""The decode step's graph with every shape fixed but the caches' length: one token, batch one.

The runner's compile serves prefill chunks, verify forwards and steps alike, so its token axis (and the batch the
export leaves open) are dynamic, and the CPU plugin infers every node's shapes and re-checks its kernel at every
infer. On a one-token step that bookkeeping is a fifth of the step at 0.8B (issue #35: 65.6 → 52.7 ms a step with
the same graph fixed at one token, 1 thread, paired; the widened projections 66.3 → 57.1). Only the attention
mask and the full-attention caches still grow; every other node is static and prepared once.
"""

from __future__ import annotations

import openvino as ov

TOKEN_INPUTS = ("input_ids", "inputs_embeds")  # [B, T] or [B, T, H]


def _fixed(name: str, shape: ov.PartialShape) -> ov.PartialShape | None:
    """The input's shape for one token at batch one; None: an input left as it is (already static)."""
    dims = [shape[i] for i in range(shape.rank.get_length())]
    if name in TOKEN_INPUTS:
        dims[0], dims[1] = 1, 1
    elif name == "position_ids":  # [B, T], or [3|4, B, T] for Qwen3.5's multimodal rotary positions
        dims[-2], dims[-1] = 1, 1
    elif name == "attention_mask":  # [B, past + T]: its length grows with the conversation
        dims[0] = 1
    elif name == "beam_idx":
        dims = [1]
    else:
        return None
    return ov.PartialShape(dims)


def one_token_graph(model: ov.Model) -> ov.Model:
    """A copy of `model` (already edited as the runner compiles it) for one-token steps: its token and batch axes
    fixed at 1, its states' batch at 1 too (a state of open batch feeding a MatMul makes the CPU plugin's
    MatMul-to-FullyConnected pass throw once the other side is static)."""
    step = model.clone()
    shapes = {}
    for port in step.inputs:
        fixed = _fixed(port.get_any_name(), port.get_partial_shape())
        if fixed is not None:
            shapes[port] = fixed
    step.reshape(shapes)
    for variable in step.get_variables():
        info = variable.get_info()
        dims = [info.data_shape[i] for i in range(info.data_shape.rank.get_length())]
        info.data_shape = ov.PartialShape([1, *dims[1:]])
        variable.update(info)
    step.validate_nodes_and_infer_types()
    return step
