"""The one-token Gated DeltaNet update as our native operation (native/int8_projection.cpp's DeltaNetStep), in a step
graph.

engine/graphs/decode.py builds each layer's one-token update from plugin nodes: one MatMul for [q; k]ᵀS (one read of
the state S), one fused eltwise node for S' = e·S + k ⊗ delta (a second read, one write). Ours reads each head's S once
from memory and writes S' from the head still in cache: 2 instead of 3 state transfers a layer. It finds the update
by its nodes' names (decode.step_name) and takes its inputs from them; like the int8 projections' operation it goes
in the one-token step compile only, so the prompt's and the verifies' forwards are unchanged.
"""

from __future__ import annotations

import openvino as ov

from ..graphs.decode import STEP_PARTS
from . import native_op

OP_TYPE = "DeciderDeltaNetStep"


def _parts(model: ov.Model) -> dict[str, dict[str, ov.Node]]:
    """Each layer's update: its variable's prefix → part → node, where every part is there."""
    found: dict[str, dict[str, ov.Node]] = {}
    for node in model.get_ordered_ops():
        prefix, _, part = node.get_friendly_name().rpartition("/one_token/")
        if prefix and part in STEP_PARTS:
            found.setdefault(prefix, {})[part] = node
    return {prefix: parts for prefix, parts in found.items() if len(parts) == len(STEP_PARTS)}


def replace_deltanet_steps(model: ov.Model) -> int:
    """Every layer's one-token update in `model` replaced by the native operation, in place; call only where
    native_op.unavailable() is None. Returns how many."""
    layers = _parts(model)
    for prefix, parts in layers.items():
        both, decay, delta = parts["both"], parts["decay"], parts["delta"]
        pair = both.input_value(0).get_node()  # Concat([q, k])
        q, k, state = pair.input_value(0), pair.input_value(1), both.input_value(1)
        v = delta.input_value(0).get_node().input_value(0)  # (v − e·kS)·Unsqueeze(beta)
        beta = delta.input_value(1).get_node().input_value(0)
        g = decay.input_value(0).get_node().input_value(0)  # Unsqueeze(Exp(g))
        step = native_op.create(OP_TYPE, [q, k, v, g, beta, state], {})
        step.set_friendly_name(prefix + "/native_deltanet")
        for output, old in zip(step.outputs(), (parts["out"], parts["state"])):
            for reader in list(old.output(0).get_target_inputs()):
                reader.replace_source_output(output)
    model.validate_nodes_and_infer_types()
    return len(layers)
