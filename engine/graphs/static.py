"""Load-time graph edits that turn a stateful optimum export into static-shape variants.

Devices that need static shapes (the NPU) cannot run the stateful export: its KV caches grow. Made
stateless, every state becomes an input/output pair the host keeps, and the model can be reshaped to a
fixed KV window. Three edits make that window exact:

- positions: the text exports derive RoPE positions from the KV cache's length (their `position_ids`
  input has no consumers), so over a fixed window every new key would be rotated as if it sat at the
  window's end. The positions feeding RoPE are replaced by the `position_ids` input.
- new entries only: each `present.N.key/value` output is the concatenation past|new; only the new
  part is returned, so a decode step does not write the whole window back.
- the last-position head (graph.slice_to_last_position) as in the dynamic runner.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import openvino as ov
import openvino.opset13 as ops
from openvino._offline_transformations import stateful_to_stateless_transformation

from ..core.errors import ModelError
from .logits import slice_to_last_position

KV_PREFIX = "past_key_values."
STATE_PREFIX = "cache_params.past."


@dataclass(frozen=True)
class CacheSpec:
    """One host-kept cache: the model input it feeds and the output that updates it."""

    input_name: str
    output_name: str
    shape: tuple[int, ...]  # static shape of the host buffer (KV: the whole window)
    dtype: np.dtype
    is_kv: bool  # KV: the output holds the new entries only; else the output replaces the buffer


def make_stateless(model: ov.Model) -> None:
    if not model.get_sinks():
        raise ModelError("the model has no state; export it with past (stateful)")
    stateful_to_stateless_transformation(model)


def _ancestors(node: ov.Node) -> set[int]:
    seen: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        key = current.get_instance_id()
        if key in seen:
            continue
        seen.add(key)
        stack.extend(current.input_value(i).get_node() for i in range(current.get_input_size()))
    return seen


_SHAPE_PATH = {"Gather", "ShapeOf", "Convert", "Squeeze", "Reshape", "Unsqueeze"}


def _starts_at_kv_length(node: ov.Node) -> bool:
    """Whether a Range starts at the past KV length: start = Gather(ShapeOf(past_key_values.N))."""
    current = node.input_value(0).get_node()
    for _ in range(6):
        if current.get_type_name() == "Parameter":
            return current.get_friendly_name().startswith(KV_PREFIX)
        if current.get_type_name() not in _SHAPE_PATH:
            return False
        current = current.input_value(0).get_node()
    return False


def feed_positions_to_rope(model: ov.Model) -> bool:
    """Make RoPE read `position_ids` where the export computes positions from the cache length.

    Returns False when the model's RoPE already consumes position_ids (the vision-language export).
    Only the path into RoPE changes: the causal mask keeps its cache positions, which are right for
    the window layout (past slots first, the new tokens after them).
    """
    positions = model.input("position_ids")
    if positions.get_target_inputs():
        return False
    rope = [op for op in model.get_ordered_ops() if op.get_type_name() in ("Sin", "Cos")]
    if not rope:
        raise ModelError("cannot find the rotary embedding (no Sin/Cos) to feed position_ids to")
    upstream: set[int] = set()
    for op in rope:
        upstream |= _ancestors(op)
    ranges = [
        op for op in model.get_ordered_ops()
        if op.get_type_name() == "Range" and op.get_instance_id() in upstream and _starts_at_kv_length(op)
    ]
    if len(ranges) != 1:
        raise ModelError(f"expected one cache-position Range feeding the rotary embedding, found {len(ranges)}")
    cache_positions = ranges[0]
    # position_ids is [batch, seq] with batch 1: flattened it is the [seq] the Range produced.
    flat = ops.reshape(positions, ops.constant(np.array([-1], dtype=np.int64)), special_zero=False)
    replacement = flat.output(0)
    if cache_positions.get_output_element_type(0) != positions.get_element_type():
        replacement = ops.convert(flat, cache_positions.get_output_element_type(0)).output(0)
    for target in list(cache_positions.output(0).get_target_inputs()):
        if target.get_node().get_instance_id() in upstream:
            target.replace_source_output(replacement)
    model.validate_nodes_and_infer_types()
    return True


def return_new_kv_only(model: ov.Model) -> None:
    """present.N.key/value = Concat(past, new) → new: the host writes the new entries into its window."""
    for output in model.outputs:
        name = output.get_any_name()
        if not (name.startswith("present.") and name.endswith((".key", ".value"))):
            continue
        concat = output.get_node().input_value(0).get_node()
        if concat.get_type_name() != "Concat" or concat.input_value(0).get_node().get_type_name() != "Parameter":
            raise ModelError(f"{name}: expected Concat(past, new) behind the output, found {concat.get_type_name()}")
        output.get_node().input(0).replace_source_output(concat.input_value(1))
    model.validate_nodes_and_infer_types()


def cache_specs(model: ov.Model, window: int) -> list[CacheSpec]:
    """The host caches, in the model's input order, each paired with the output that updates it."""
    outputs = {o.get_any_name() for o in model.outputs}
    specs = []
    for port in model.inputs:
        name = port.get_any_name()
        if name.startswith(KV_PREFIX):
            out = "present." + name[len(KV_PREFIX):]
            shape = port.get_partial_shape()
            dims = (1, shape[1].get_length(), window, shape[3].get_length())
            specs.append(CacheSpec(name, out, dims, _numpy_type(port), is_kv=True))
        elif name.startswith(STATE_PREFIX):
            out = "cache_params.present." + name[len(STATE_PREFIX):]
            shape = port.get_partial_shape()
            dims = (1, *(d.get_length() for d in list(shape)[1:]))
            specs.append(CacheSpec(name, out, dims, _numpy_type(port), is_kv=False))
        else:
            continue
        if specs[-1].output_name not in outputs:
            raise ModelError(f"{name}: no matching {specs[-1].output_name} output after the stateless transformation")
    if not any(s.is_kv for s in specs):
        raise ModelError("the stateless model has no KV cache inputs")
    return specs


def _numpy_type(port: ov.Output) -> np.dtype:
    return np.dtype(port.get_element_type().to_dtype())


def static_variant(template: ov.Model, specs: list[CacheSpec], layout: str, hidden: int | None, tokens: int, window: int) -> ov.Model:
    """A copy of the edited stateless model reshaped for `tokens` new tokens over a `window`-slot cache."""
    model = template.clone()
    shapes: dict[str, list[int]] = {"attention_mask": [1, window + tokens]}
    if layout == "text":
        shapes["input_ids"] = [1, tokens]
        shapes["position_ids"] = [1, tokens]
    else:
        assert hidden is not None, "a vision-language layout has a hidden size"
        shapes["inputs_embeds"] = [1, tokens, int(hidden)]
        shapes["position_ids"] = [4, 1, tokens]
    for spec in specs:
        shapes[spec.input_name] = list(spec.shape)
    present = {p.get_any_name() for p in model.inputs}
    model.reshape({name: ov.PartialShape(shape) for name, shape in shapes.items() if name in present})
    if tokens > 1:
        # A prefill chunk only advances the caches: the runner computes a segment's last token with the
        # one-token variant and takes the logits from there. NPUW (OpenVINO 2026.4.1) never writes the logits
        # output of a multi-token variant (the host read zeros, stale logits or NaN, whatever the buffer
        # held), so that output is removed rather than trusted; the head then costs nothing in these variants.
        model.remove_result(model.output("logits").get_node())
        model.validate_nodes_and_infer_types()
    return model


def prepare_stateless(model: ov.Model, layout: str) -> bool:
    """All edits in order; returns whether the positions edit was needed (text exports)."""
    make_stateless(model)
    edited = feed_positions_to_rope(model) if layout == "text" else False
    return_new_kv_only(model)
    slice_to_last_position(model)
    return edited
