"""Whether a runner's exact few-token infers use our int8 kernel, decided on the runner's own compiled model.

Off unless asked for (DECIDER_EXACT_KERNEL=auto or =kernel). Routing alone costs the plugin's path: a 0.8B int8 step
measured 129.9 ms on the exported graph and 144.6 ms on the routed one with every infer sent to the plugin (1 thread;
85.7 against 111.7 ms at 2), and the kernel's 139.4 ms did not beat the exported graph on that machine (an Intel
AMX CPU, BENCHMARKS.md fourth pass). Where it is asked for, `route(model, device, exact)` routes the int8
projections (projection_op) when the kernel can run: a CPU compile, exact arithmetic (the reduced compiles have
kernels of their own), llvmlite and VNNI or AVX2 present, int8 weights in the model. With `auto`, `adopt(...)` then times
one-token infers with the kernel and without — on the runner's one-token step compile where its plan has one (what it
runs without the kernel), else on the routed graph's plugin path (which carries the routing's cost: a lower bar) —
interleaved on scratch requests, and keeps the faster;
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

from . import kernel_jit
from .projection_op import KERNEL_TOKENS, route_int8_projections
from .row_split import RowSplit

MODES = ("auto", "kernel")  # DECIDER_EXACT_KERNEL values that route the projections
_ROUNDS = 5


@dataclass(frozen=True)
class KernelPlan:
    routed: int  # MatMuls routed (0: the plugin's path only)
    reason: str  # why not routed, or "" when routed
    description: str = ""  # the kernel's label where routed (its instruction set and the activations' bits)
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
    why = kernel_jit.unavailable()
    if why:
        return KernelPlan(0, why)
    if not asked_for():
        return KernelPlan(0, "off (DECIDER_EXACT_KERNEL=auto measures it on this machine, =kernel forces it): routing "
                             "costs the plugin's path more than the kernel saved where it was measured")
    if lost_before and _mode() != "kernel":
        return KernelPlan(0, "not adopted: measured slower than the plugin's path on this machine before")
    split = RowSplit()
    kernels = kernel_jit.compiled()
    routed = route_int8_projections(model, kernels, split)
    return KernelPlan(routed, "" if routed else "no int8 projections in this model", description=kernels.isa.description,
                      split=split)


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
          won_before: bool = False, plain: Callable[[], ov.CompiledModel | None] = lambda: None) -> Adoption:
    """MAX_TOKENS where the kernel won on this model, else 0, and why. won_before: it measured faster on this model
    and machine before (engine/kernels/verdicts.py): not timed again. plain: called only to measure, the compile the
    runner steps on without the kernel (its one-token steps' own), or None: the routed compile with the kernel off."""
    if not plan.routed:
        return Adoption(0, plan.reason)
    plan.split.set_threads(_threads(compiled))
    if _mode() == "kernel":
        return Adoption(kernel_jit.MAX_TOKENS, "adopted: DECIDER_EXACT_KERNEL=kernel")
    if won_before:
        return Adoption(kernel_jit.MAX_TOKENS, "adopted: measured faster than the plugin's path on this machine before")
    without = plain()
    kernel_ms, plugin_ms = paired_steps(compiled, step_feed, without)
    timing = (f"a one-token infer {kernel_ms:.1f} ms with it, {plugin_ms:.1f} ms without "
              f"({'the one-token steps' if without is not None else 'the same graph'})")
    if kernel_ms < plugin_ms:
        return Adoption(kernel_jit.MAX_TOKENS, f"adopted: {timing}", measured=True)
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


def paired_steps(compiled: ov.CompiledModel, step_feed: Callable[[int], dict[str, np.ndarray]],
                  without: ov.CompiledModel | None = None) -> tuple[float, float]:
    """Median one-token infer times with the kernel (on `compiled`) and without (on `without`, else on `compiled`
    with the kernel off), interleaved, on scratch requests (their states are their own: the runner's conversation is
    untouched). Each request steps from position 0 on: both see the same lengths of context."""
    requests = {kernel_jit.MAX_TOKENS: compiled.create_infer_request(), 0: (without or compiled).create_infer_request()}
    inputs = {limit: {port.get_any_name() for port in request.model_inputs} for limit, request in requests.items()}
    times: dict[int, list[float]] = {limit: [] for limit in requests}
    for round_ in range(_ROUNDS + 1):
        for limit, request in requests.items():
            names = inputs[limit]
            feed = {**step_feed(round_), KERNEL_TOKENS: np.array([limit], dtype=np.int64)}
            started = time.perf_counter()
            request.infer({name: value for name, value in feed.items() if name in names})
            if round_:  # the first round warms both paths up
                times[limit].append((time.perf_counter() - started) * 1e3)
    return statistics.median(times[kernel_jit.MAX_TOKENS]), statistics.median(times[0])
