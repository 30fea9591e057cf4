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

Every candidate states its precision explicitly (engine/precision.py): no plugin default is ever measured.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from .devices import DeviceOptions
from .compile_probe import CompileRefused, probe_all
from .files import read_regular
from .precision import as_ran, cpu_capabilities, fully_connected_kernels, isa_summary

STEPS = 8  # decode steps timed per candidate (after one untimed warm-up step)
# The winner of the screen is then timed against the exact runner in alternating rounds: a host's speed drifts
# more between two measurements minutes apart than some candidates differ (seen on a cloud EPYC: ±20 % round to
# round), so it is chosen only if it beats exact by MARGIN in the median of the per-round ratios.
CONFIRM_ROUNDS = 5
MARGIN = 0.97
PROMPT = 48  # prompt tokens before the timed steps
CACHE_NAME = "fast-tuning.json"
# The reasoning a twin's compile is amortised over when deciding whether fast reasoning pays: one think-mode
# decision's worth (the twin is then kept, so later decisions only gain).
REASONING_TOKENS = 512

log = logging.getLogger("decider.fast_tuning")


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


@dataclass
class Measured:
    name: str
    properties: dict[str, object]
    step_ms: float  # median decode step
    drift_nats: float  # max |Δ logprob| of the drawn tokens' distributions vs exact, over the timed steps
    precision: str  # read back from the compiled model, int8 activations only where the probe saw them run
    kernels: list[str] = field(default_factory=list)  # the heavy layers' primitive types the runtime model reports
    compile_ms: float = 0.0  # the twin's compile (paid once per runner, before its first reasoning)


@dataclass
class Tuning:
    key: str
    cpu: str
    exact_step_ms: float
    exact_prefill_ms_per_token: float
    threads: int | None  # INFERENCE_NUM_THREADS the winner ran best at (None: the plugin's choice)
    chosen: str | None  # None: no candidate beat the exact step (--fast then compiles exact)
    measured: list[Measured]
    # The winner's median step by INFERENCE_NUM_THREADS: "default" (the plugin's choice), "1", "2"…
    thread_ms: dict[str, float] = field(default_factory=dict)
    # The screen's winner against exact, median of CONFIRM_ROUNDS alternating rounds' ratios (None: nothing to confirm)
    paired_ratio: float | None = None
    # Candidates (or "NAME @ N threads") not measured because their compile killed a test process, and why
    # (engine/compile_probe.py): never compiled in this process.
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def winner(self) -> Measured | None:
        return next((m for m in self.measured if m.name == self.chosen), None)

    @property
    def properties(self) -> dict[str, object] | None:
        winner = self.winner
        if winner is None:
            return None
        return {**winner.properties, **({"INFERENCE_NUM_THREADS": self.threads} if self.threads else {})}

    @property
    def reasoning_pays(self) -> bool:
        """A fast twin's reasoning beats exact reasoning end to end: over REASONING_TOKENS tokens its steps save
        more than the exact prefill of those tokens (the answer's exact read) plus the twin's compile cost."""
        return self.reasoning_gain_ms > 0

    @property
    def reasoning_gain_ms(self) -> float:
        """What fast reasoning saves over exact reasoning for REASONING_TOKENS tokens (negative: it loses)."""
        winner = self.winner
        if winner is None:
            return float("-inf")
        saved = (self.exact_step_ms - winner.step_ms - self.exact_prefill_ms_per_token) * REASONING_TOKENS
        return saved - winner.compile_ms

    def summary(self) -> str:
        rows = [f"{m.name}: {m.step_ms:.2f} ms/step ({m.precision}; drift {m.drift_nats:.2g} nats"
                + (f"; kernels {', '.join(m.kernels)}" if m.kernels else "") + ")" for m in self.measured]
        verdict = (f"chosen: {self.chosen}" + (f" at {self.threads} threads" if self.threads else " at the plugin's default threads")
                   if self.chosen else "chosen: none (no reduced compile beat the exact step: --fast compiles exact)")
        if self.paired_ratio is not None:
            verdict += f"; paired against exact: {self.paired_ratio:.2f}x (needs < {MARGIN:.2f}x)"
        if self.thread_ms:
            verdict += " (" + ", ".join(f"{count} threads {ms:.2f} ms" for count, ms in self.thread_ms.items()) + ")"
        gain = f"{self.reasoning_gain_ms / 1000:+.2f} s per {REASONING_TOKENS} reasoning tokens" if self.winner else ""
        pays = (f"fast reasoning pays ({gain})" if self.reasoning_pays
                else "fast reasoning does not pay: think mode reasons exactly" + (f" ({gain})" if gain else ""))
        skipped = "".join(f"; skipped {name}: {why}" for name, why in self.skipped.items())
        return (f"CPU {self.cpu}; exact {self.exact_step_ms:.2f} ms/step, exact prefill {self.exact_prefill_ms_per_token:.2f} "
                f"ms/token; " + "; ".join(rows) + f"{skipped}; {verdict}; {pays}")

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Tuning:
        return cls(**{**data, "measured": [Measured(**m) for m in data["measured"]]})


def tuning_key(runner) -> str:
    """The key of the runner's measurement (see key_for)."""
    return key_for(runner.folder.path, runner.device)


def key_for(folder: Path | str, device: str) -> str:
    """What a measurement holds for: the model's files, the device, the CPU's ISA and OpenVINO's version. Apart
    from tuning_key so a key can be named without compiling a runner (the tests pin their fixtures' choice)."""
    import openvino as ov

    folder = Path(folder)
    files = sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in folder.glob("*.bin"))
    text = json.dumps({"folder": str(folder.resolve()), "files": files, "device": device, "cpu": isa_summary(),
                       "openvino": ov.get_version()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _cache_file(runner) -> Path | None:
    """Beside the compiled-model cache: the runner's, else the app's ($DECIDER_CACHE_DIR/compiled, where
    app/config.compiled_cache_dir puts it), so every process on this machine — the window, `decider ask`, `decider
    serve` — reads one measurement and makes the same choice. None: the engine used as a library, kept in memory."""
    folder = runner.options.cache_dir or (Path(os.environ["DECIDER_CACHE_DIR"]) / "compiled" if os.environ.get("DECIDER_CACHE_DIR") else None)
    return Path(folder) / CACHE_NAME if folder else None


# Measurements for runners with no cache folder (the engine used as a library): kept for this process, so a
# think-mode decision does not measure again each time.
_IN_PROCESS: dict[str, Tuning] = {}


MAX_CACHE_BYTES = 4 * 2**20  # a measurement is ~2 KB; the file holds one per model, device and CPU


def cached(runner) -> Tuning | None:
    path = _cache_file(runner)
    if path is None:
        return _IN_PROCESS.get(tuning_key(runner))
    data = _read_entries(runner, path).get(tuning_key(runner))
    if data is None:
        return None
    tuning = _tuning_from(data)
    if tuning is None:
        _notice(runner, f"the fast-compile measurement in {path} is not one (wrong fields); ignored: --fast measures again")
    return tuning


def _read_entries(runner, path: Path) -> dict:
    """The file's measurements by key; a file that is not an object of them is ignored with a one-line notice
    (a cache that cannot be read is a cache miss, and the next measurement replaces it)."""
    try:
        data = read_regular(path, MAX_CACHE_BYTES)
        if len(data) > MAX_CACHE_BYTES:
            raise ValueError(f"larger than {MAX_CACHE_BYTES // 2**20} MiB")
        entries = json.loads(data.decode("utf-8"))
        if not isinstance(entries, dict):
            raise ValueError(f"a JSON {type(entries).__name__}, not an object")
    except FileNotFoundError:
        return {}
    except RecursionError:
        problem = "nested too deeply"
    except (OSError, ValueError) as exc:  # not a file, unreadable, not UTF-8, not JSON
        problem = exc.strerror if isinstance(exc, OSError) and exc.strerror else (str(exc).splitlines() or [type(exc).__name__])[0][:120]
    else:
        return entries
    _notice(runner, f"the fast-compile measurements {path} cannot be used ({problem}); ignored: --fast measures again")
    return {}


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _tuning_from(data: object) -> Tuning | None:
    """A stored measurement with every field of the right type, else None."""
    try:
        tuning = Tuning.from_json(data)  # type: ignore[arg-type]
    except (TypeError, KeyError, AttributeError, ValueError):
        return None
    measured_ok = isinstance(tuning.measured, list) and all(
        isinstance(m.name, str) and isinstance(m.properties, dict) and isinstance(m.precision, str)
        and all(isinstance(k, str) and (isinstance(v, (str, bool)) or _number(v)) for k, v in m.properties.items())
        and _number(m.step_ms) and _number(m.drift_nats) and _number(m.compile_ms)
        and isinstance(m.kernels, list) and all(isinstance(k, str) for k in m.kernels)
        for m in tuning.measured)
    fields_ok = (isinstance(tuning.key, str) and isinstance(tuning.cpu, str) and _number(tuning.exact_step_ms)
                 and _number(tuning.exact_prefill_ms_per_token) and (tuning.chosen is None or isinstance(tuning.chosen, str))
                 and (tuning.threads is None or (_number(tuning.threads) and isinstance(tuning.threads, int) and tuning.threads > 0))
                 and isinstance(tuning.thread_ms, dict) and all(isinstance(k, str) and _number(v) for k, v in tuning.thread_ms.items())
                 and (tuning.paired_ratio is None or _number(tuning.paired_ratio)))
    return tuning if measured_ok and fields_ok else None


def _notice(runner, text: str) -> None:
    """One line for the user: on the runner's notices (the CLI prints them, once), else logged."""
    notices = getattr(runner, "notices", None)
    if isinstance(notices, list):
        if text not in notices:
            notices.append(text)
    else:
        log.warning("%s", text)


def _store(runner, tuning: Tuning) -> None:
    path = _cache_file(runner)
    if path is None:
        return
    entries = {key: value for key, value in _read_entries(runner, path).items() if _tuning_from(value) is not None}
    entries[tuning.key] = tuning.to_json()
    temporary = path.with_suffix(".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(entries, indent=1), encoding="utf-8")
        temporary.replace(path)
    except OSError as exc:  # a folder in its place, a read-only cache: measured, used, not kept
        if temporary.is_file():
            temporary.unlink()
        _notice(runner, f"the fast-compile measurement could not be kept in {path} ({exc.strerror or exc})")


KERNEL_LAYERS = ("FullyConnected", "GatedDeltaNet", "ScaledDotProductAttention")


def kernels(compiled) -> list[str]:
    """The kernels the step's heavy layers really ran ('FullyConnected brgemm_avx512_bf16'…), read from the runtime
    model after inference (before it, primitive types read 'undef')."""
    try:
        model = compiled.get_runtime_model()
    except (AttributeError, RuntimeError):
        return []
    found = set()
    for node in model.get_ordered_ops():
        info = node.get_rt_info()
        try:
            layer, primitive = info["layerType"].astype(str), info["primitiveType"].astype(str)
        except (KeyError, RuntimeError, AttributeError):
            continue
        if layer in KERNEL_LAYERS:
            found.add(f"{layer} {primitive}")
    return sorted(found)


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
    """The properties a twin with these extra properties compiles with (what the compile probe keys on)."""
    from .devices import compile_properties

    options = DeviceOptions(device=runner.device, exact=False)
    return {**compile_properties(runner.device, options, cpu_capabilities(getattr(runner, "_core", None))), **extra}


def _twin_or_skip(runner, name: str, properties: dict[str, object], skipped: dict[str, str]):
    """The runner's twin compiled with these properties, or None (and why, in `skipped`) where that compile
    killed a test process (engine/compile_probe.py)."""
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
    screen = candidates(cpu_capabilities(getattr(runner, "_core", None)))
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
        precision = as_ran(twin.precision, fully_connected_kernels(twin.compiled)).label
        measured.append(Measured(name, properties, statistics.median(times) * 1000, drift, precision,
                                 kernels(twin.compiled), compile_s * 1000))
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
        if _cache_file(runner) is None:
            _IN_PROCESS[tuning.key] = tuning
    return tuning


def tune_on_first_use(runner) -> Tuning | None:
    """--fast's first use on a model: measure now, against an exact compile of the same model on the same Core (the
    runner being built is the fast one), and keep the result. Only where there is a cache folder to keep it in;
    a compile or step that fails leaves the stated default compile (None)."""
    from .errors import DeciderError
    from .runner import ModelRunner  # here: the runner imports this module

    if _cache_file(runner) is None:
        return None
    try:
        return tune(ModelRunner(runner.folder, replace(runner.options, exact=True), runner._core))
    except (DeciderError, RuntimeError):
        return None


def tuned(runner) -> Tuning:
    """This machine's measurement for the runner's model: from the cache, else measured now (and kept)."""
    found = cached(runner)
    return found if found is not None else tune(runner)

