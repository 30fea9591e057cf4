"""Whether a runner's exact few-token infers use our int8 kernel, decided on the runner's own compiled model.

Off unless asked for (DECIDER_EXACT_KERNEL=auto or =kernel). Routing alone costs the plugin's path: a 0.8B int8 step
measured 129.9 ms on the exported graph and 144.6 ms on the routed one with every infer sent to the plugin (1 thread;
85.7 against 111.7 ms at 2), and the kernel's 139.4 ms did not beat the exported graph on that machine (an Intel
AMX CPU, BENCHMARKS.md fourth pass). Where it is asked for, `route(model, device, exact)` routes the int8
projections (projection_op) when the kernel can run: a CPU compile, exact arithmetic (the reduced compiles have
kernels of their own), llvmlite and VNNI present, int8 weights in the model. With `auto`, `adopt(...)` then times
one-token infers of the compiled model on a scratch request with the kernel and without (the routed graph's plugin
path, which carries the routing's cost: a lower bar than the exported graph), interleaved, and keeps the faster;
`kernel` adopts it without measuring. DECIDER_EXACT_KERNEL=plugin (or unset) never routes.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import openvino as ov

from . import vnni_jit
from .projection_op import KERNEL_TOKENS, route_int8_projections
from .row_split import RowSplit

MODES = ("auto", "kernel")  # DECIDER_EXACT_KERNEL values that route the projections
DESCRIPTION = "few-token int8 projections: VNNI kernel, 31-bit activations, int32 dot products"
_ROUNDS = 5


@dataclass(frozen=True)
class KernelPlan:
    routed: int  # MatMuls routed (0: the plugin's path only)
    reason: str  # why not routed, or "" when routed
    split: RowSplit = field(default_factory=RowSplit)  # the routed operations' threads (adopt sets them)


def route(model: ov.Model, device: str, exact: bool, twin_of: KernelPlan | None = None, lost_before: bool = False) -> KernelPlan:
    """Route `model` in place where the kernel can run. A twin (twin_of: its parent's plan) compiles the parent's
    model, routed already: exact, it shares the plan; reduced, it feeds the routed model 0 (the plugin's path).
    lost_before: the kernel measured slower on this model and machine (engine/kernels/verdicts.py): not routed."""
    if twin_of is not None:
        return twin_of if exact else KernelPlan(0, "reduced precision: the plugin's reduced kernels run")
    if not device.startswith("CPU"):
        return KernelPlan(0, f"{device}: the kernel runs on the CPU plugin only")
    if not exact:
        return KernelPlan(0, "reduced precision: the plugin's reduced kernels run")
    why = vnni_jit.unavailable()
    if why:
        return KernelPlan(0, why)
    if not asked_for():
        return KernelPlan(0, "off (DECIDER_EXACT_KERNEL=auto measures it on this machine, =kernel forces it): routing "
                             "costs the plugin's path more than the kernel saved where it was measured")
    if lost_before and _mode() != "kernel":
        return KernelPlan(0, "not adopted: measured slower than the plugin's path on this machine before")
    split = RowSplit()
    routed = route_int8_projections(model, vnni_jit.compiled(), split)
    return KernelPlan(routed, "" if routed else "no int8 projections in this model", split)


@dataclass(frozen=True)
class Adoption:
    tokens: int  # the KERNEL_TOKENS value to feed: MAX_TOKENS (the kernel) or 0 (the plugin)
    note: str  # one line: adopted or not, and why
    measured: bool = False  # timed now (a verdict worth keeping for later runs)


def without_cache_if_routed(properties: dict[str, object], model: ov.Model) -> dict[str, object]:
    """Python operations can be neither exported to the compiled-model cache nor imported from it."""
    if KERNEL_TOKENS in {p.get_any_name() for p in model.inputs}:
        return {k: v for k, v in properties.items() if k != "CACHE_DIR"}
    return properties


def adopt(plan: KernelPlan, compiled: ov.CompiledModel, step_feed: Callable[[int], dict[str, np.ndarray]],
          won_before: bool = False) -> Adoption:
    """MAX_TOKENS where the kernel won on this model, else 0, and why. won_before: it measured faster on this model
    and machine before (engine/kernels/verdicts.py): not timed again."""
    if not plan.routed:
        return Adoption(0, plan.reason)
    plan.split.set_threads(_threads(compiled))
    if _mode() == "kernel":
        return Adoption(vnni_jit.MAX_TOKENS, "adopted: DECIDER_EXACT_KERNEL=kernel")
    if won_before:
        return Adoption(vnni_jit.MAX_TOKENS, "adopted: measured faster than the plugin's path on this machine before")
    kernel_ms, plugin_ms = _paired_steps(compiled, step_feed)
    timing = f"a one-token infer {kernel_ms:.1f} ms with it, {plugin_ms:.1f} ms without"
    if kernel_ms < plugin_ms:
        return Adoption(vnni_jit.MAX_TOKENS, f"adopted: {timing}", measured=True)
    return Adoption(0, f"not adopted: {timing}", measured=True)


def asked_for() -> bool:
    return _mode() in MODES


def _mode() -> str:
    return os.environ.get("DECIDER_EXACT_KERNEL", "").strip().lower()


def _threads(compiled: ov.CompiledModel) -> int:
    """The threads the plugin runs this compile's infers on: the kernel's rows are shared among as many."""
    try:
        return max(1, int(compiled.get_property("INFERENCE_NUM_THREADS")) or (os.cpu_count() or 1))
    except (RuntimeError, TypeError, ValueError):
        return 1


def _paired_steps(compiled: ov.CompiledModel, step_feed: Callable[[int], dict[str, np.ndarray]]) -> tuple[float, float]:
    """Median one-token infer times with and without the kernel, interleaved, on a scratch request (its states are
    its own: the runner's conversation is untouched)."""
    request = compiled.create_infer_request()
    times: dict[int, list[float]] = {vnni_jit.MAX_TOKENS: [], 0: []}
    past = 0
    for round_ in range(_ROUNDS + 1):
        for limit in times:
            feed = {**step_feed(past), KERNEL_TOKENS: np.array([limit], dtype=np.int64)}
            started = time.perf_counter()
            request.infer(feed)
            past += 1
            if round_:  # the first round warms both paths up
                times[limit].append((time.perf_counter() - started) * 1e3)
    return statistics.median(times[vnni_jit.MAX_TOKENS]), statistics.median(times[0])
