"""Whether a runner's one-token steps run our native int8 operation (native_op), decided on the runner's own model.

Exact CPU runners whose int8 projections are large enough to be bound by reading them (MIN_BYTES: below that a
step is a few hundred small calls, and the plugin's fused kernels win or lose by noise) compile the step graph twice —
the plugin's and the native one — and time one-token infers on both, interleaved on scratch requests (adoption's
paired_steps); the faster is kept, and the verdict with the fast-compile measurements (verdicts.py), so a later
process compiles only the one that won. DECIDER_EXACT_KERNEL=native adopts it without timing (tests, benches: on
any model), =plugin never. The operation runs the best instruction set this CPU has (native_op.isa(), or
DECIDER_NATIVE_ISA's), and a verdict is kept per instruction set and competitor (the plugin's widened
MatMuls or the integer pieces, whichever the plan runs).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

import numpy as np
import openvino as ov

from . import native_op
from . import adoption
from .native_deltanet import replace_deltanet_steps

MIN_BYTES = 64 << 20  # int8 projection weights: a 0.8B model has 754 MB, the test fixtures a few hundred KB


class _StepCompile(Protocol):
    compiled: ov.CompiledModel


S = TypeVar("S", bound=_StepCompile)  # the runner's step request (engine/runners/step_request.StepRequest)


@dataclass(frozen=True)
class NativeSteps(Generic[S]):
    steps: S | None  # the one-token step compile kept (native or the plugin's), None if neither compiled
    native: bool  # whether it runs our operation
    note: str  # one line: adopted or not, and why
    measured: bool = False  # timed now: a verdict worth keeping
    isa: str = ""  # the instruction set it runs with (native_op.ISAS), where native


def _mode() -> str:
    return os.environ.get("DECIDER_EXACT_KERNEL", "").strip().lower()


def forced() -> bool:
    return _mode() == "native"


def reason_not(model: ov.Model, device: str, exact: bool) -> str | None:
    """Why the native operation is not tried on this runner, or None. model: the graph it would be built from."""
    why = runner_reason(device, exact)
    if why:
        return why
    size = int8_bytes(model, native_op.isa())
    if not size:
        return "no int8 projections to run (not an int8 export, or the plugin's integer pieces run them)"
    if size < MIN_BYTES and not forced():
        return f"its int8 projections ({size / 2**20:.1f} MiB) are too small for the native kernel to pay (from {MIN_BYTES >> 20} MiB)"
    return None


def runner_reason(device: str, exact: bool) -> str | None:
    """Why not, from the runner's device, precision and this process alone (no graph needed), or None."""
    if not device.startswith("CPU"):
        return f"{device}: the native kernel runs on the CPU plugin only"
    if not exact:
        return "reduced precision: the plugin's reduced kernels run"
    if _mode() == "plugin":
        return "turned off by DECIDER_EXACT_KERNEL=plugin"
    why = native_op.unavailable()
    if why:
        return why
    try:
        native_op.isa()
    except ValueError as exc:
        return str(exc)
    return None


def int8_bytes(model: ov.Model, isa: str = "avx2") -> int:
    return sum(w.weights.nbytes for _, w in native_op.int8_matmuls(model, isa))


def native_step_graph(graph: ov.Model, isa: str) -> np.ndarray | None:
    """Every native operation put in `graph` (a one-token step graph), in place: the int8 projections on `isa`, each
    DeltaNet layer's state update and conv shift. Returns the projections' packed weights (the compiled graph's
    constants share them: keep them as long as it lives), or None where the graph has no int8 projection (then
    nothing is replaced). Call only where native_op.unavailable() is None."""
    weights = native_op.replace_int8_matmuls(graph, isa)[1]
    if weights is not None:
        replace_deltanet_steps(graph)  # one read of each state, not two
    return weights


def adopt(source: ov.Model, device: str, exact: bool, plain: Callable[[], S | None],
          native: Callable[[str], S | None], step_feed: Callable[[int], dict[str, np.ndarray]],
          known: Callable[[str], bool | None], keep: Callable[[str, bool], None]) -> NativeSteps[S]:
    """The runner's one-token steps: the plugin's where the native operation is not tried (and why), else `choose`'s,
    a verdict measured now kept. source: the graph ours is built from; native compiles it with the operation on an
    instruction set; known/keep read and write the verdicts (verdicts.py) for this model, machine and instruction set."""
    why = reason_not(source, device, exact)
    if why:
        return NativeSteps(plain(), False, why)
    isa = native_op.isa()
    chosen = choose(plain, lambda: native(isa), step_feed, known(isa))
    if chosen.measured:
        keep(isa, chosen.native)
    return replace(chosen, isa=isa if chosen.native else "")


def choose(plain: Callable[[], S | None], native: Callable[[], S | None], step_feed: Callable[[int], dict[str, np.ndarray]],
           known: bool | None) -> NativeSteps[S]:
    """The step compile to keep. plain/native compile the plugin's and the native step graph; known: the verdict
    kept from an earlier process (None: never measured)."""
    if forced() or known is True:
        steps = native()
        why = "DECIDER_EXACT_KERNEL=native" if forced() else "measured faster than the plugin's steps on this machine before"
        if steps is not None:
            return NativeSteps(steps, True, f"adopted: {why}")
        return NativeSteps(plain(), False, "not adopted: the native step graph did not compile here")
    if known is False:
        return NativeSteps(plain(), False, "not adopted: measured slower than the plugin's steps on this machine before")
    ours, theirs = native(), plain()
    if ours is None or theirs is None:
        return NativeSteps(theirs, False, "not adopted: the native step graph did not compile here")
    native_ms, plugin_ms = adoption.paired_steps(ours.compiled, step_feed, theirs.compiled)
    timing = f"a one-token step {native_ms:.1f} ms with it, {plugin_ms:.1f} ms with the plugin's"
    if native_ms < plugin_ms:
        return NativeSteps(ours, True, f"adopted: {timing}", measured=True)
    return NativeSteps(theirs, False, f"not adopted: {timing}", measured=True)
