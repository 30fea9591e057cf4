"""Keeps OpenVINO's CPU plugin from fusing a gated MLP into a kernel that divides by zero on one thread.

On a CPU with AMX (measured on a Sapphire Rapids Xeon, OpenVINO 2026.4.1), a compile with bf16 inference fuses
each `down(silu(gate(x)) * up(x))` with float weights into one LLMMLP node (the plugin's MLPFusion pass). That
node's down projection splits its output columns among threads / 2 workers (LinearKsplit2::setup in
src/plugins/intel_cpu/src/nodes/llm_mlp.cpp: `num_blk_N / (threads / 2)`): run on one thread, that is an integer
division by zero, and the process dies of SIGFPE while compiling — at any size (the fixtures' 64x128 and the
0.8B's 1024x3584 alike), with f32 or f16 weights; two or more threads, f32 or f16 inference, or int8 weights
(not fused) compile fine.

The fusion matches a Swish with no beta input only. `Swish(x, beta=1)` computes the same function and is left as
it is, so during a compile that will run on one thread the MLP's Swish gets an explicit beta of 1: the plugin
then runs three FullyConnected layers instead of the fused kernel. The model is put back after the compile (the
plugin has copied it by then), so other compiles of it still get the fused kernel where it works.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import openvino as ov
from openvino import opset13 as ops

REDUCED = ("bf16", "f16")  # the inference precisions the plugin fuses the MLP under (f16: CPUs with AMX-FP16)


def runs_on_one_thread(properties: dict[str, object]) -> bool:
    """Whether a CPU compile with these properties runs on a single thread: asked for, or all the process may use."""
    asked = int(str(properties.get("INFERENCE_NUM_THREADS", 0)) or 0)
    if asked:
        return asked == 1
    try:
        return len(os.sched_getaffinity(0)) == 1
    except AttributeError:  # no sched_getaffinity (macOS, Windows)
        return (os.cpu_count() or 1) == 1


def fusion_divides_by_zero(device: str, properties: dict[str, object]) -> bool:
    return (device.split(".")[0] == "CPU" and str(properties.get("INFERENCE_PRECISION_HINT", "")).lower() in REDUCED
            and runs_on_one_thread(properties))


def _consumers(node: ov.Node, type_name: str) -> list[ov.Node]:
    return [target.get_node() for target in node.output(0).get_target_inputs() if target.get_node().get_type_name() == type_name]


def _gating_swishes(model: ov.Model) -> list[ov.Node]:
    """The beta-less Swish nodes of gated MLPs: multiplied by the up projection, the product projected down."""
    return [node for node in model.get_ordered_ops()
            if node.get_type_name() == "Swish" and len(node.inputs()) == 1
            and any(_consumers(product, "MatMul") for product in _consumers(node, "Multiply"))]


@contextmanager
def unfused_mlp_if_one_thread(model: ov.Model, device: str, properties: dict[str, object]) -> Iterator[int]:
    """While compiling `model` with these properties: where the fused MLP kernel would divide by zero, its Swish
    nodes carry an explicit beta of 1 (same values, no fusion). Yields how many were changed."""
    if not fusion_divides_by_zero(device, properties):
        yield 0
        return
    swaps = []
    for swish in _gating_swishes(model):
        explicit = ops.swish(swish.input_value(0), ops.constant(np.float32(1.0)))
        explicit.set_friendly_name(swish.get_friendly_name())
        swish.output(0).replace(explicit.output(0))
        swaps.append((swish, explicit))
    try:
        yield len(swaps)
    finally:
        for swish, explicit in swaps:
            explicit.output(0).replace(swish.output(0))
