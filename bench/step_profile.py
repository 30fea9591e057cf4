"""Where one decode step's time goes, node by node, from OpenVINO's counters read the one way they are right.

The CPU plugin's PERF_COUNT counters are each node's mean over every infer the compiled model ran, whichever
request ran it (OpenVINO 2026.4.1: a fresh request's first step after another request's prefill reads 224 ms of
nodes in a 7.7 ms wall step on a fixture). Read after a prefill, every step carries a share of it, and nodes that
ran in the prefill but not in the steps keep their prefill mean. So the steps are profiled on a compiled model of
their own that never prefilled: the prompt runs on a second compile of the same model (no counters), its states are
copied over, and from then on every infer of the profiled compile is a decode step. A node's time per step is the
growth of its total (mean × infers) between the end of the warm-up steps and the last step, over the steps between.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

from .common import summary

KINDS = {
    "MatMul": "matmul (weights)", "Gather": "embedding/gather",
    "GatedDeltaNet": "deltanet", "ReadValue": "state read/assign", "Assign": "state read/assign",
    "ReadValueWithSubgraph": "state read/assign", "ScaledDotProductAttention": "attention",
    "ScaledDotProductAttentionWithKVCache": "attention", "Convert": "conversion", "Reorder": "conversion",
}


def kind_of(node_type: str) -> str:
    """The kind of a profiled node type (FullyConnected comes as FullyConnectedCompressed and others)."""
    if node_type.startswith("FullyConnected"):
        return "matmul (weights)"
    return KINDS.get(node_type, "other")


def _totals(request, infers: int) -> dict[tuple[str, str, str], float]:
    """Each executed node's total milliseconds over the request's `infers` infers, by (name, type, exec type)."""
    return {(info.node_name, info.node_type, info.exec_type): info.real_time.total_seconds() * 1e3 * infers
            for info in request.profiling_info if info.status.name == "EXECUTED"}


RUNTIME = ("INFERENCE_PRECISION_HINT", "KV_CACHE_PRECISION", "DYNAMIC_QUANTIZATION_GROUP_SIZE", "INFERENCE_NUM_THREADS",
           "NUM_STREAMS", "PERFORMANCE_HINT", "SCHEDULING_CORE_TYPE", "ENABLE_HYPER_THREADING", "ENABLE_CPU_PINNING")


def profile_steps(model, device: str, properties: dict, prefill: dict, step: Callable[[int], dict], steps: int,
                  warm: int = 4, top: int = 25) -> dict:
    """Profile `steps` one-token infers of `model` compiled with `properties` after `prefill`: `step(i)` is the i-th
    step's feed. The first `warm` steps build kernels for the one-token shapes and are left out."""
    import openvino as ov

    if steps <= warm:
        raise ValueError(f"profile at least {warm + 1} steps (the first {warm} warm up)")
    core = ov.Core()
    prompt = core.compile_model(model, device, properties).create_infer_request()
    prompt.infer(prefill)
    compiled = core.compile_model(model, device, {**properties, "PERF_COUNT": "YES"})
    request = compiled.create_infer_request()
    states = {state.name: state.state.data for state in prompt.query_state()}
    for state in request.query_state():
        state.state = ov.Tensor(states[state.name].copy())
    del prompt
    wall, warmed = [], {}
    for i in range(steps):
        started = time.perf_counter()
        request.infer(step(i))
        wall.append((time.perf_counter() - started) * 1e3)
        if i == warm - 1:
            warmed = _totals(request, warm)
    # max(0, …): a node of a few µs can read a growth of -1e-18 (the counters are means × infers, in floats)
    per_node = {key: max(0.0, total - warmed.get(key, 0.0)) / (steps - warm) for key, total in _totals(request, steps).items()}
    by_type: dict[str, float] = defaultdict(float)
    by_kernel: dict[str, float] = defaultdict(float)
    by_kind: dict[str, float] = defaultdict(float)
    for (_, node_type, exec_type), ms in per_node.items():
        by_type[node_type] += ms
        by_kernel[f"{node_type} ({exec_type})"] += ms
        by_kind[kind_of(node_type)] += ms
    ranked = sorted(per_node.items(), key=lambda kv: -kv[1])

    def ordered(table: dict[str, float]) -> dict[str, float]:
        return dict(sorted(table.items(), key=lambda kv: -kv[1]))

    return {
        "runtime": {name: str(compiled.get_property(name)) for name in RUNTIME},
        "step_wall_ms": summary(wall[warm:]),
        "step_nodes_ms": float(sum(per_node.values())),
        "executed_nodes": sum(1 for ms in per_node.values() if ms > 0.0),
        "by_kind_ms": ordered(by_kind),
        "by_type_ms": ordered(by_type),
        "by_kernel_ms": ordered(by_kernel),
        "top_nodes": [{"name": name, "type": node_type, "exec": exec_type, "ms": float(ms)}
                      for (name, node_type, exec_type), ms in ranked[:top]],
    }
