"""Fast reasoning, exact answer: a think-mode decision draws its reasoning tokens from a faster,
reduced-precision compilation of the same model, and reads the answer position exactly.

The reasoning text only has to be good; the bars have to be exact. So the exact runner prefills the
prompt (its state then stays at the prompt while the twin reasons), hands a copy of that state and its
next-token logits to the twin, and the twin decodes the reasoning from there. The exact runner then
prefills exactly the reasoning tokens that were produced (+ the answer prefix) on top of its prompt
state — a prefill costs a fraction of a decode step per token — and the answer's logprobs equal an
exact prefill of the whole sequence (tests/test_fast_reasoning.py holds them to 1e-5).

The twin is compiled lazily, the first time a think-mode decision asks for it, from the exact runner's
ov.Model on the same Core (the plugin shares what it does not repack), and released when a think-mode
decision runs with the setting off. A twin exists only where it can be faster and the hand-off exact:
the dynamic path, on a GPU or on a CPU that reports bf16/f16 arithmetic (fast_properties says why an
AVX2-only CPU gets none). Elsewhere (such a CPU, the NPU's static f16 path, a runner already compiled in
fast mode) the runner reasons itself, and the result's precision says so.
"""

from __future__ import annotations

import json
import os
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..compile.probe import CompileRefused
from ..compile.devices import DeviceOptions
from ..core.errors import SettingsError
from ..compile.fast_tuning import cached, tuned
from ..compile.precision import as_ran, fully_connected_kernels, gpu_properties

if TYPE_CHECKING:  # openvino only for annotations
    from .base import RunnerBase

# Set to a JSON object of compile properties, it forces a twin with them (measuring a candidate, or a CPU
# whose int8 VNNI path the capability list does not show).
PROPERTIES_ENV = "DECIDER_FAST_REASONING_PROPERTIES"


def fast_properties(runner: RunnerBase) -> dict[str, object] | None:
    """The twin's compile properties on this runner's device, or None: no faster compilation here.

    Measured on a 2-core AVX2 CPU without VNNI/AMX/bf16 at the 0.8B int8 export (bench/w_think.py, BENCHMARKS.md
    "Think-mode decisions"): there int8 dynamic quantisation of activations stays off (logits bit-identical to
    exact) and a u8 or f16 KV cache changes a decode step by less than the noise, while the exact answer then has
    to prefill the reasoning again. So a CPU gets a twin only with bf16/f16 arithmetic or int8 dot products."""
    forced = os.environ.get(PROPERTIES_ENV, "").strip()
    if forced:
        try:
            properties = json.loads(forced)
        except ValueError:
            properties = None
        if not isinstance(properties, dict):
            raise SettingsError(f"{PROPERTIES_ENV} must be a JSON object of compile properties (got {forced!r})")
        return properties
    family = runner.device.split(".")[0]
    if family == "GPU":
        return gpu_properties(exact=False)
    if family != "CPU":
        return None
    tuning = tuned(runner)  # measured on this machine (engine/compile/fast_tuning.py), once per model, device and CPU
    return tuning.properties if tuning.reasoning_pays else None


_TWINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Reasoner:
    runner: RunnerBase  # draws the reasoning tokens: the exact runner itself, or its fast twin
    note: str = ""  # why the runner reasons itself although fast reasoning was asked for

    @property
    def precision(self) -> str:
        """What EngineInfo shows as the reasoning's precision: read back once the reasoning ran."""
        return precision_of(self.runner) + self.note

    def hands_over(self, exact: RunnerBase) -> bool:
        return self.runner is not exact


def precision_of(runner: RunnerBase) -> str:
    """The precision a runner computes in, as read back from its compiled model and, once it ran, from the kernels
    its FullyConnected layers ran (engine/compile/precision.py): int8 activations only where the plugin's probe saw them."""
    return as_ran(runner.precision, fully_connected_kernels(*getattr(runner, "compiles", ()))).label


def can_twin(runner: RunnerBase) -> bool:
    """Whether a fast twin can reason for this runner with an exact hand-off (see the module's doc)."""
    return (
        getattr(runner, "twin", None) is not None
        and runner.execution_path == "dynamic"
        and runner.caps.snapshots
        and runner.options.exact
    )


def reasoner_for(runner: RunnerBase, fast: bool) -> Reasoner:
    """Who draws a think-mode decision's reasoning: the fast twin (compiled now if need be) when `fast`,
    the runner can hand its state over and its device has a faster compilation; else the runner itself
    (and a twin kept so far is released)."""
    properties = fast_properties(runner) if fast and can_twin(runner) else None
    if properties is None:
        release(runner)
        tuning = cached(runner) if fast and can_twin(runner) and runner.device.startswith("CPU") else None
        why = f" (fast reasoning measured no faster here: {_verdict(tuning)})" if tuning is not None else ""
        return Reasoner(runner, why)
    twin = _TWINS.get(runner)
    if twin is None:
        options = DeviceOptions(device=runner.device, exact=False, cache_dir=runner.options.cache_dir,
                                runtime_cache_capacity=runner.options.runtime_cache_capacity)
        try:
            twin = getattr(runner, "twin")(options, properties)  # can_twin(runner) found it (the dynamic runner)
        except CompileRefused as exc:  # that compile killed a test process (engine/compile/probe.py)
            return Reasoner(runner, f" (fast reasoning off: {exc})")
        _TWINS[runner] = twin
    return Reasoner(twin)


def _verdict(tuning) -> str:
    winner = tuning.winner
    if winner is None:
        return f"no reduced compile beat the exact step of {tuning.exact_step_ms:.2f} ms"
    return (f"a twin step saves {tuning.exact_step_ms - winner.step_ms:.2f} ms, an exact prefill of the token costs "
            f"{tuning.exact_prefill_ms_per_token:.2f} ms")


def twin_of(runner: RunnerBase) -> RunnerBase | None:
    """The fast twin compiled for this runner so far (None: none, or released)."""
    return _TWINS.get(runner)


def release(runner: RunnerBase) -> None:
    """Drop the runner's fast twin (its compiled model and state) if it has one."""
    _TWINS.pop(runner, None)


def hand_over(exact: RunnerBase, twin: RunnerBase, prompt_ids, checkpoints) -> None:
    """Prefill the prompt exactly and give the twin a copy of that state and its logits. The exact
    runner's state stays at the prompt: the answer is prefilled on top of it."""
    logits = exact.prefill(prompt_ids, checkpoints)
    twin.clear_snapshots()  # one handed-over state at a time: the twin holds no memory for older prompts
    twin.adopt(prompt_ids, exact.export_state(), logits)
