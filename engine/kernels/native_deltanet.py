"""A Gated DeltaNet layer's one-token work as our native operations, in a step graph: the states' update
(native/deltanet_step.hpp's DeltaNetStep) and the conv window's shift and conv (native/conv_step.hpp's ConvShiftStep).

engine/graphs/decode.py builds each layer's one-token update from plugin nodes: one MatMul for [q; k]ᵀS (one read of
the state S), one fused eltwise node for S' = e·S + k ⊗ delta (a second read, one write). Ours reads each head's S once
from memory and writes S' from the head still in cache: 2 instead of 3 state transfers a layer.
engine/graphs/conv_step.py shifts the conv window with a Concat, a Gather of C·K constant indices and the plugin's
depthwise GroupConvolution (with its layouts' Reorders): ~0.1 ms a layer for 96 KiB; ours is one pass over the window.
Both are found by their nodes' names (decode.step_name, conv_step.shift_name) and take their inputs from them; like the
int8 projections' operation they go in the one-token step compile only, so the prompt's and the verifies' forwards are
unchanged.
"""

from __future__ import annotations

import openvino as ov

from ..graphs.conv_step import SHIFT_PARTS, shift_name
from ..graphs.decode import STEP_PARTS, step_name
from . import native_op

OP_TYPE = "DeciderDeltaNetStep"
CONV_OP_TYPE = "DeciderConvShiftStep"


def _parts(model: ov.Model, name, parts: tuple[str, ...]) -> dict[str, dict[str, ov.Node]]:
    """Each layer's `parts`, named name(variable, part): its variable → part → node, where every part is there."""
    marker = name("", "")  # the names' fixed middle, e.g. "/one_token/"
    found: dict[str, dict[str, ov.Node]] = {}
    for node in model.get_ordered_ops():
        prefix, _, part = node.get_friendly_name().rpartition(marker)
        if prefix and part in parts:
            found.setdefault(prefix, {})[part] = node
    return {prefix: named for prefix, named in found.items() if len(named) == len(parts)}


def _read_from(outputs: list[ov.Output], old: list[ov.Node]) -> None:
    """Every reader of each of `old`'s nodes reads the matching output instead."""
    for output, node in zip(outputs, old):
        for reader in list(node.output(0).get_target_inputs()):
            reader.replace_source_output(output)


def replace_deltanet_steps(model: ov.Model) -> int:
    """Every layer's one-token update and conv shift in `model` replaced by the native operations, in place; call only
    where native_op.unavailable() is None. Returns how many updates (as many shifts go where the graph has them)."""
    for prefix, parts in _parts(model, shift_name, SHIFT_PARTS).items():
        window = parts["window"]  # Concat(state [b, C·K], token [b, C])
        step = native_op.create(CONV_OP_TYPE, [window.input_value(0), window.input_value(1), parts["conv"].input_value(1)], {})
        step.set_friendly_name(prefix + "/native_conv_shift")
        _read_from(step.outputs(), [parts["shift"], parts["conv"]])
    layers = _parts(model, step_name, STEP_PARTS)
    for prefix, parts in layers.items():
        both, decay, delta = parts["both"], parts["decay"], parts["delta"]
        pair = both.input_value(0).get_node()  # Concat([q, k])
        q, k, state = pair.input_value(0), pair.input_value(1), both.input_value(1)
        v = delta.input_value(0).get_node().input_value(0)  # (v − e·kS)·Unsqueeze(beta)
        beta = delta.input_value(1).get_node().input_value(0)
        g = decay.input_value(0).get_node().input_value(0)  # Unsqueeze(Exp(g))
        step = native_op.create(OP_TYPE, [q, k, v, g, beta, state], {})
        step.set_friendly_name(prefix + "/native_deltanet")
        _read_from(step.outputs(), [parts["out"], parts["state"]])
    model.validate_nodes_and_infer_types()
    return len(layers)
