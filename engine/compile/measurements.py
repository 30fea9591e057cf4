"""This machine's measurements that compile plans are built from, read once and kept: the CPU's capabilities and
the NPU testing aids (`read_host`), and the fast-tuning measurement per model, device, CPU and OpenVINO version
(`Tuning`, kept in fast-tuning.json beside the compiled-model cache; engine/compile/fast_tuning.py measures it).

Reading a measurement needs no runner: anything with the runner's `folder`, `device`, `options` and `notices` is a
`Subject` (runner_choice asks before a runner exists).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .devices import DeviceOptions, npuw_devices_override
from ..core.files import read_regular
from ..model.folder import ModelFolder
from .plan import Host
from .precision import cpu_capabilities, isa_summary, npuw_precision

CACHE_NAME = "fast-tuning.json"
# The winner of the screen must beat exact by MARGIN in the median of paired rounds (engine/compile/fast_tuning.py).
MARGIN = 0.97
# The reasoning a twin's compile is amortised over when deciding whether fast reasoning pays: one think-mode
# decision's worth (the twin is then kept, so later decisions only gain).
REASONING_TOKENS = 512

log = logging.getLogger("decider.fast_tuning")


@dataclass
class Subject:
    """What a measurement is of, before a runner exists: as a runner's attributes of the same names."""

    folder: ModelFolder
    device: str
    options: DeviceOptions
    notices: list[str] = field(default_factory=list)


_CAPABILITIES: dict[str, tuple[str, ...]] = {}


def read_host(core) -> Host:
    """The CPU's capabilities (read from the plugin once per process: they do not change), the threads an inference
    runs on with this Core, and the NPU testing aids."""
    if core is None:
        return Host(cpu_capabilities(None), npuw_devices_override(), npuw_precision())
    if "CPU" not in _CAPABILITIES:
        _CAPABILITIES["CPU"] = cpu_capabilities(core)
    return Host(_CAPABILITIES["CPU"], npuw_devices_override(), npuw_precision(), _cpu_threads(core))


def _cpu_threads(core) -> int:
    """The threads the CPU plugin runs one inference on with this Core (0 where it cannot say): the property where
    set (the benches, `--threads`), else every core the process may use, as the plugin does."""
    try:
        asked = int(core.get_property("CPU", "INFERENCE_NUM_THREADS") or 0)
    except (RuntimeError, TypeError, ValueError):
        return 0
    if asked:
        return asked
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


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
    # (engine/compile/probe.py): never compiled in this process.
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


def cache_file(runner) -> Path | None:
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
    path = cache_file(runner)
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
    path = cache_file(runner)
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

