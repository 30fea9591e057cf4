"""A reduced-precision CPU compile is tried once in a child process before this process risks it.

OpenVINO's CPU plugin can kill the process that compiles: on an AMX CPU a bf16 compile of a gated MLP on one
thread dies of SIGFPE (engine/graphs/mlp_fusion_guard.py avoids that one). A crash is no exception a caller can catch, and
the GUI must never die from an engine error. So the first time a model is compiled with reduced-precision
properties on a CPU (a --fast runner, a fast-tuning candidate, a fast-reasoning twin), a child process
(`python -m decider.engine.runners.probe_child`) compiles it the same way, and the verdict is kept beside the
fast-tuning measurement (one per model files, device, CPU flags, OpenVINO version, usable CPUs and properties). A
configuration that killed the child is never compiled here: `refusal` says why, and the runner falls back to the
exact compile (--fast) or refuses to build the twin (tuning skips the candidate; the runner reasons itself).

Only a death by a fault signal is held against a configuration. A compile error is the in-process compile's own
to report (a DeviceError); a child killed otherwise (SIGKILL: the OOM killer) or out of time decides nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ..core.errors import DeviceError
from .precision import CPU_EXACT

CACHE_NAME = "compile-probes.json"
CHILD_ENV = "DECIDER_COMPILE_PROBE_CHILD"  # set in the child: it compiles, it does not probe again
TIMEOUT_S = 600.0  # a 0.8B compile takes 10-30 s; a child that takes longer is stopped and decides nothing
FAULTS = {signal.SIGFPE, signal.SIGSEGV, signal.SIGILL, signal.SIGBUS, signal.SIGABRT}
# Properties that do not change what is compiled: left out of the key, so every cache folder shares one verdict.
_UNKEYED = ("CACHE_DIR",)

Verdict = dict[str, str]  # {"outcome": "ok" | "failed" | "crashed", "detail": why}
# Every verdict this process found or read: where there is no cache folder (the engine used as a library), and for a
# tuning's twins, which compile without the cache folder their parent probed for them with.
_IN_PROCESS: dict[str, Verdict] = {}


def needs_probe(device: str, properties: dict[str, object]) -> bool:
    """A CPU compile that is not the exact one (in this process; a probe's child never probes again)."""
    if os.environ.get(CHILD_ENV) or device.split(".")[0] != "CPU":
        return False
    return any(str(properties.get(name, "")) != str(value) for name, value in CPU_EXACT.items())


def probe_key(folder: Path | str, device: str, properties: dict[str, object]) -> str:
    from .measurements import key_for  # model files, device, CPU flags, OpenVINO version

    keyed = {k: str(v) for k, v in sorted(properties.items()) if k not in _UNKEYED}
    return json.dumps({"model": key_for(folder, device), "usable_cpus": _usable_cpus(), "properties": keyed}, sort_keys=True)


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _cache_file(runner) -> Path | None:
    from .measurements import cache_file as tuning_cache

    found = tuning_cache(runner)
    return found.with_name(CACHE_NAME) if found is not None else None


def _read(path: Path | None) -> dict[str, Verdict]:
    try:
        entries = json.loads(path.read_text(encoding="utf-8")) if path is not None else {}
        return entries if isinstance(entries, dict) else {}
    except (OSError, ValueError):
        return {}  # an unreadable cache is a cache miss


def _load(path: Path | None) -> dict[str, Verdict]:
    return {**_read(path), **_IN_PROCESS}


def _store(path: Path | None, found: dict[str, Verdict]) -> None:
    _IN_PROCESS.update(found)
    if path is None:
        return
    entries = {**_read(path), **found}
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(entries, indent=1), encoding="utf-8")
    temporary.replace(path)


def child_command() -> list[str]:
    # The child builds a runner, so it lives with the runners (engine/runners/probe_child.py): the compile layer
    # never imports the runner.
    return [sys.executable, "-m", f"{__package__.rpartition('.')[0]}.runners.probe_child"]


def _child_environment() -> dict[str, str]:
    """The parent's environment, with the package this module came from importable (a test links a checkout)."""
    package_root = str(Path(__file__).parents[len(__package__.split("."))])
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, CHILD_ENV: "1"}


def run_child(folder: str, device: str, sets: Sequence[dict[str, object]], command: Sequence[str] | None = None,
              timeout: float = TIMEOUT_S) -> list[Verdict | None]:
    """Compile each property set in turn in child processes: a verdict per set (None: undecided). A child that
    dies of a fault convicts the set it was compiling, and the sets after it get a fresh child."""
    verdicts: list[Verdict | None] = [None] * len(sets)
    start = 0
    while start < len(sets):
        request = json.dumps({"folder": folder, "device": device, "properties": [dict(s) for s in sets[start:]]})
        try:
            done = subprocess.run(list(command or child_command()), input=request, capture_output=True, text=True,
                                  timeout=timeout, env=_child_environment())
        except (subprocess.TimeoutExpired, OSError):
            return verdicts
        reported = _read_report(done.stdout, verdicts, start)
        if done.returncode >= 0 or -done.returncode not in FAULTS or start + reported >= len(sets):
            return verdicts
        name = signal.Signals(-done.returncode).name
        verdicts[start + reported] = {"outcome": "crashed", "detail": f"the compile killed its process ({name})"}
        start += reported + 1
    return verdicts


def _read_report(stdout: str, verdicts: list[Verdict | None], start: int) -> int:
    """Fill in the verdicts the child reported (one JSON line per set, in order); how many it reported."""
    count = 0
    for line in stdout.splitlines():
        try:
            verdict = json.loads(line)
        except ValueError:
            continue  # something else the plugin printed
        if isinstance(verdict, dict) and verdict.get("outcome") in ("ok", "failed"):
            verdicts[start + count] = {"outcome": str(verdict["outcome"]), "detail": str(verdict.get("detail", ""))}
            count += 1
    return count


def probe_all(runner, sets: Sequence[dict[str, object]]) -> list[Verdict | None]:
    """The verdicts for compiling the runner's model with each property set: cached, else probed in one child."""
    path = _cache_file(runner)
    known = _load(path)
    keys = [probe_key(runner.folder.path, runner.device, s) for s in sets]
    missing = [i for i, (key, s) in enumerate(zip(keys, sets)) if key not in known and needs_probe(runner.device, s)]
    if missing:
        found = run_child(str(runner.folder.path), runner.device, [sets[i] for i in missing])
        _store(path, {keys[i]: verdict for i, verdict in zip(missing, found) if verdict is not None})
        known = {**known, **{keys[i]: verdict for i, verdict in zip(missing, found) if verdict is not None}}
    return [known.get(key) for key in keys]


def refusal(runner, properties: dict[str, object]) -> str:
    """Why the runner must not compile its model with these properties in this process ("" : it may)."""
    if not needs_probe(runner.device, properties):
        return ""
    verdict = probe_all(runner, [properties])[0]
    if verdict is None or verdict["outcome"] != "crashed":
        return ""
    hint = properties.get("INFERENCE_PRECISION_HINT", "?")
    return f"a {hint} compile of this model on this CPU ({_threads(properties)}) {verdict['detail']} in a test process"


class CompileRefused(DeviceError):
    """A twin's compile that killed a test process: not attempted here."""


def checked(runner, properties: dict[str, object], twin: bool, on_core: dict[str, object] | None = None) -> dict[str, object]:
    """The properties the runner may compile with: these, unless they killed a test process. Then a twin (a
    tuning candidate, a fast-reasoning twin) is refused (CompileRefused), and a --fast runner compiles exact
    and says why in its notices. on_core: a thread count set on the Core, which the probe's child compiles with too."""
    why = refusal(runner, {**(on_core or {}), **properties})
    if not why:
        return properties
    if twin:
        raise CompileRefused(f"not compiled: {why}")
    runner.notices.append(f"--fast compiles exact (f32) here: {why}")
    return runner.plan.fallback.properties


def safe_compile(runner, model, properties: dict[str, object], twin: bool):
    """Compile the runner's model on its Core with these properties, unless they killed a test process (then as
    `checked` says), with OpenVINO's known crash avoided (engine/graphs/mlp_fusion_guard.py). The compiled model and the
    properties it was compiled with."""
    from ..graphs.mlp_fusion_guard import unfused_mlp_if_one_thread

    on_core = _core_threads(runner._core, runner.device)  # what the compile runs on unless it asks otherwise
    properties = checked(runner, properties, twin, on_core)
    with unfused_mlp_if_one_thread(model, runner.device, {**on_core, **properties}):
        return runner._core.compile_model(model, runner.device, properties), properties


def _core_threads(core, device: str) -> dict[str, object]:
    """The thread count set on the Core for the CPU (the benches set it there), if any: a compile that does not
    ask for its own runs on it, so the probe's child and the guard must see it too."""
    try:
        count = int(core.get_property("CPU", "INFERENCE_NUM_THREADS")) if device.startswith("CPU") else 0
    except (RuntimeError, TypeError, ValueError):
        count = 0
    return {"INFERENCE_NUM_THREADS": count} if count else {}


def _threads(properties: dict[str, object]) -> str:
    count = properties.get("INFERENCE_NUM_THREADS")
    return f"{count} thread{'s' if str(count) != '1' else ''}" if count else "the plugin's default threads"
