"""The decode step's graph with every shape fixed but the caches' length: one token, batch one.

The runner's compile serves prefill chunks, verify forwards and steps alike, so its token axis (and the batch the
export leaves open) are dynamic, and the CPU plugin infers every node's shapes and re-checks its kernel at every
infer. On a one-token step that bookkeeping is a fifth of the step at 0.8B (issue #35: 65.6 → 52.7 ms a step with
the same graph fixed at one token, 1 thread, paired; the widened projections 66.3 → 57.1). Only the attention
mask and the full-attention caches still grow; every other node is static and prepared once.

Fixed at one token, the routed graph's other paths (engine/graphs/decode.py: the fused kernel's rows, the few-token
path's, the exported conv window's) have no rows at all, yet each merge of the two paths still ran as a Concat copying the step path's
whole DeltaNet state (two per layer). A Concat one of whose inputs is statically empty along its axis is dropped here,
its readers reading the other input; the empty paths then have no reader and leave the graph.
"""

from __future__ import annotations

import openvino as ov

TOKEN_INPUTS = ("input_ids", "inputs_embeds")  # [B, T] or [B, T, H]


def _fixed(name: str, shape: ov.PartialShape, tokens: int) -> ov.PartialShape | None:
    """The input's shape for `tokens` tokens at batch one; None: an input left as it is (already static)."""
    dims = [shape[i] for i in range(shape.rank.get_length())]
    if name in TOKEN_INPUTS:
        dims[0], dims[1] = 1, tokens
    elif name == "position_ids":  # [B, T], or [3|4, B, T] for Qwen3.5's multimodal rotary positions
        dims[-2], dims[-1] = 1, tokens
    elif name == "attention_mask":  # [B, past + T]: its length grows with the conversation
        dims[0] = 1
    elif name == "beam_idx":
        dims = [1]
    else:
        return None
    return ov.PartialShape(dims)


def _empty_along(output: ov.Output, axis: int) -> bool:
    shape = output.get_partial_shape()
    return shape.rank.is_static and shape[axis].is_static and shape[axis].get_length() == 0


def drop_empty_merges(model: ov.Model) -> int:
    """Bypass every Concat all of whose inputs but one are statically empty along its axis; return how many."""
    dropped = 0
    for node in model.get_ordered_ops():
        if node.get_type_name() != "Concat" or node.get_input_size() < 2:
            continue
        rank = node.get_output_partial_shape(0).rank
        if rank.is_dynamic:
            continue
        axis = node.get_attributes()["axis"] % rank.get_length()
        full = [i for i in range(node.get_input_size()) if not _empty_along(node.input_value(i), axis)]
        if len(full) != 1:
            continue
        kept = node.input_value(full[0])
        if kept.get_partial_shape() != node.get_output_partial_shape(0):
            continue
        for reader in list(node.output(0).get_target_inputs()):
            reader.replace_source_output(kept)
        dropped += 1
    return dropped


def one_token_graph(model: ov.Model, drop_merges: bool = True) -> ov.Model:
    """A copy of `model` (already edited as the runner compiles it) for one-token steps: fixed_width_graph at one
    token. `drop_merges` off (only to measure without it) keeps the routed graph's empty paths."""
    return fixed_width_graph(model, 1, drop_merges)


def fixed_width_graph(model: ov.Model, tokens: int, drop_merges: bool = True) -> ov.Model:
    """A copy of `model` with its token axis fixed at `tokens` and its batch at 1, its states' batch at 1 too (a state
    of open batch feeding a MatMul makes the CPU plugin's MatMul-to-FullyConnected pass throw once the other side is
    static); the routed graph's paths that get no rows at this width leave it."""
    step = model.clone()
    shapes = {}
    for port in step.inputs:
        fixed = _fixed(port.get_any_name(), port.get_partial_shape(), tokens)
        if fixed is not None:
            shapes[port] = fixed
    step.reshape(shapes)
    for variable in step.get_variables():
        info = variable.get_info()
        dims = [info.data_shape[i] for i in range(info.data_shape.rank.get_length())]
        info.data_shape = ov.PartialShape([1, *dims[1:]])
        variable.update(info)
    step.validate_nodes_and_infer_types()
    if drop_merges and drop_empty_merges(step):
        step.validate_nodes_and_infer_types()
    return step
