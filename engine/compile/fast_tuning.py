"""The fast compile chosen by measurement on this machine, not by a table of CPU flags.

Which reduced-precision compile decodes fastest depends on the CPU (AVX2 only, AVX-512 with VNNI and bf16, AMX),
the model's weight format and OpenVINO's kernels: measured on an AVX-512/bf16 EPYC, a bf16 twin with int8
activations ran u8 weights through bf16 brgemm kernels and was only 0.89x the exact step, while the exact answer
then had to prefill the reasoning again; int8 activations in groups of 32 ran slower than in groups of 128. So
each candidate below is compiled, its decode steps timed after a short prompt, its drift from the exact runner
measured in nats, and the kernels it really runs read back from its runtime model. The fastest (with the number
of threads it ran best at) is kept per model, device, CPU and OpenVINO version in the cache folder, and reported;
where none beats the exact compile, --fast compiles exact.
Fast reasoning is then worth it only when a twin step saves more than an exact prefill of that token costs
(`Tuning.reasoning_pays`); otherwise the runner reasons itself.

Every candidate states its precision explicitly (engine/compile/precision.py): no plugin default is ever measured. `tune`
measures the exact runner it is given and builds only that runner's twins: --fast's first use measures before its
runner exists (engine/runners/choice.measured_plan), and the compile plan applies the choice (engine/compile/planner.py). The
measurement's record and file are engine/compile/measurements.py's.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import numpy as np

from .probe import CompileRefused, probe_all
from .devices import DeviceOptions
from .measurements import (  # noqa: F401  (the measurement's record and file, named here as before)
    CACHE_NAME, MARGIN, REASONING_TOKENS, Measured, Tuning, cache_file, _IN_PROCESS, _store, cached, key_for, read_host,
    tuning_key,
)
from .planner import plan_compile
from .precision import as_ran, fully_connected_kernels, isa_summary, ran_kernels

STEPS = 8  # decode steps timed per candidate (after one untimed warm-up step)
# The winner of the screen is then timed against the exact runner in alternating rounds: a host's speed drifts
# more between two measurements minutes apart than some candidates differ (seen on a cloud EPYC: ±20 % round to
# round), so it is chosen only if it beats exact by MARGIN in the median of the per-round ratios.
CONFIRM_ROUNDS = 5
PROMPT = 48  # prompt tokens before the timed steps


def candidates(capabilities: tuple[str, ...]) -> dict[str, dict[str, object]]:
    """The reduced-precision compiles worth timing on a CPU with these capabilities, each spelled out."""
    out: dict[str, dict[str, object]] = {}
    for capability, hint in (("BF16", "bf16"), ("FP16", "f16")):
        if capability in capabilities:
            out[f"{hint}, u8 KV, int8 activations"] = {"INFERENCE_PRECISION_HINT": hint, "KV_CACHE_PRECISION": "u8",
                                                       "DYNAMIC_QUANTIZATION_GROUP_SIZE": "32"}
            out[f"{hint}, f32 KV"] = {"INFERENCE_PRECISION_HINT": hint, "KV_CACHE_PRECISION": "f32",
                                      "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}
    out["f32, u8 KV, int8 activations"] = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "u8",
                                           "DYNAMIC_QUANTIZATION_GROUP_SIZE": "32"}
    # Larger activation groups mean fewer int32→f32 rescales inside the int8 kernel: on an AVX-512/VNNI EPYC, groups
    # of 32 ran 1.01-1.09x the exact step, groups of 128 0.93x (bench/w_projections.py, 0.8B int8, 1 thread). 128
    # still divides a grouped int4 export's weight groups, which the plugin requires of it.
    out["f32, u8 KV, int8 activations (groups of 128)"] = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "u8",
                                                           "DYNAMIC_QUANTIZATION_GROUP_SIZE": "128"}
    return out



KERNEL_LAYERS = ("FullyConnected", "GatedDeltaNet", "ScaledDotProductAttention")


def kernels(*compiled) -> list[str]:
    """The kernels the step's heavy layers really ran ('FullyConnected brgemm_avx512_bf16'…), read from the runtime
    models after inference (a layer that has not run reads 'undef…': left out)."""
    return sorted(f"{layer} {primitive}" for layer, primitive in ran_kernels(*compiled) if layer in KERNEL_LAYERS)


def _steps(runner, prompt: list[int], tokens: list[int], clock: Callable[[], float]) -> tuple[list[float], list[np.ndarray]]:
    """Prefill the prompt, then step through `tokens` (teacher-forced): each step's seconds and logits."""
    runner.reset()
    runner.prefill(prompt)
    runner.step(tokens[0])  # warm-up: the first step's shapes compile
    times, logits = [], []
    for token in tokens[1:]:
        started = clock()
        logits.append(runner.step(token))
        times.append(clock() - started)
    return times, logits


def _logsoftmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max()
    return shifted - np.log(np.exp(shifted).sum())


Timings = Callable[[str, list[float]], list[float]]  # (what was timed, seconds measured) -> seconds to use


def _as_measured(name: str, seconds: list[float]) -> list[float]:
    return seconds


def _paired_ratio(runner, twin, name: str, prompt: list[int], tokens: list[int], timings: Timings,
                  clock: Callable[[], float]) -> float:
    """The twin's step over the exact runner's, median of CONFIRM_ROUNDS rounds that alternate which goes first."""
    ratios = []
    for round_ in range(CONFIRM_ROUNDS):
        step = {}
        for label, measured in ((("exact", runner), (name, twin)) if round_ % 2 == 0 else ((name, twin), ("exact", runner))):
            step[label] = statistics.median(timings(label, _steps(measured, prompt, tokens, clock)[0]))
        ratios.append(step[name] / step["exact"])
    return statistics.median(ratios)


def _as_compiled(runner, extra: dict[str, object]) -> dict[str, object]:
    """The properties a twin with these extra properties compiles with (what the compile probe keys on): its plan's."""
    options = DeviceOptions(device=runner.device, exact=False)
    return plan_compile(options, read_host(getattr(runner, "_core", None)), path="dynamic", overrides=extra).language.properties


def _twin_or_skip(runner, name: str, properties: dict[str, object], skipped: dict[str, str]):
    """The runner's twin compiled with these properties, or None (and why, in `skipped`) where that compile
    killed a test process (engine/compile/probe.py)."""
    try:
        return runner.twin(DeviceOptions(device=runner.device, exact=False), properties)
    except CompileRefused as exc:
        skipped[name] = str(exc)
        return None


def tune(runner, timings: Timings = _as_measured, steps: int = STEPS, threads: tuple[int, ...] | None = None,
         store: bool = True) -> Tuning:
    """Measure every candidate against the exact runner and keep the fastest. `timings` sees each measurement
    by name ("exact", "exact prefill", a candidate's name, "NAME @ N threads"): real compiles and steps always run,
    a test may only replace the seconds, to choose which candidate wins."""
    clock = time.perf_counter
    vocab = runner.vocab_size
    rng = np.random.default_rng(0)
    prompt = [int(t) for t in rng.integers(0, vocab, PROMPT)]
    tokens = [int(t) for t in rng.integers(0, vocab, steps + 1)]
    exact_times, exact_logits = _steps(runner, prompt, tokens, clock)
    exact_times = timings("exact", exact_times)
    runner.reset()
    started = clock()
    runner.prefill(prompt + tokens)
    prefill_per_token = timings("exact prefill", [clock() - started])[0] / len(prompt + tokens)
    runner.reset()
    measured: list[Measured] = []
    skipped: dict[str, str] = {}
    screen = candidates(read_host(getattr(runner, "_core", None)).capabilities)
    probe_all(runner, [_as_compiled(runner, properties) for properties in screen.values()])  # one child for all
    for name, properties in screen.items():
        started = clock()
        twin = _twin_or_skip(runner, name, properties, skipped)
        if twin is None:
            continue
        compile_s = timings(f"{name} compile", [clock() - started])[0]
        times, logits = _steps(twin, prompt, tokens, clock)
        times = timings(name, times)
        drift = max(float(np.max(np.abs(_logsoftmax(a) - _logsoftmax(b)))) for a, b in zip(logits, exact_logits))
        precision = as_ran(twin.precision, fully_connected_kernels(*twin.compiles)).label
        measured.append(Measured(name, properties, statistics.median(times) * 1000, drift, precision,
                                 kernels(*twin.compiles), compile_s * 1000))
        del twin
    exact_ms = statistics.median(exact_times) * 1000
    best = min(measured, key=lambda m: m.step_ms) if measured else None
    chosen = best.name if best is not None and best.step_ms < exact_ms else None
    best_threads: int | None = None
    by_threads: dict[int, float] = {}
    by_thread_text: dict[str, float] = {}
    paired: float | None = None
    if best is not None and chosen is not None:
        # 1 and 2 threads (as the bench rows compare with llama.cpp) and all of them, beside the plugin's default
        counts = threads if threads is not None else tuple(sorted({1, min(2, os.cpu_count() or 1), os.cpu_count() or 1}))
        default_ms = best.step_ms
        probe_all(runner, [_as_compiled(runner, {**best.properties, "INFERENCE_NUM_THREADS": count}) for count in counts])
        for count in counts:
            twin = _twin_or_skip(runner, f"{best.name} @ {count} threads", {**best.properties, "INFERENCE_NUM_THREADS": count}, skipped)
            if twin is None:
                continue
            by_threads[count] = statistics.median(timings(f"{best.name} @ {count} threads", _steps(twin, prompt, tokens, clock)[0])) * 1000
            del twin
        fastest = min(by_threads, key=lambda count: by_threads[count], default=0)
        if fastest and by_threads[fastest] < best.step_ms:
            best_threads, best.step_ms = fastest, by_threads[fastest]
        by_thread_text = {"default": default_ms, **{str(count): ms for count, ms in by_threads.items()}}
        threads_property = {"INFERENCE_NUM_THREADS": best_threads} if best_threads else {}
        twin = runner.twin(DeviceOptions(device=runner.device, exact=False), {**best.properties, **threads_property})
        paired = _paired_ratio(runner, twin, best.name, prompt, tokens, timings, clock)
        del twin
        if paired >= MARGIN:
            chosen, best_threads = None, None
    tuning = Tuning(tuning_key(runner), isa_summary(), exact_ms, prefill_per_token * 1000, best_threads, chosen, measured,
                    by_thread_text, paired, skipped)
    if store:
        _store(runner, tuning)
        if cache_file(runner) is None:
            _IN_PROCESS[tuning.key] = tuning
    return tuning


def tuned(runner) -> Tuning:
    """This machine's measurement for the runner's model: from the cache, else measured now (and kept)."""
    found = cached(runner)
    return found if found is not None else tune(runner)

