"""What the kernel's adoption measured on this machine, kept beside the fast-compile measurements (exact-kernel.json),
so a later process compiles the model it will run: where the kernel lost, the plugin's graph as it was, without the
routing's extra nodes and a Python call per projection group that gets no rows; where it won, no second timing.

Keyed by the model's files, the device, the CPU's ISA, OpenVINO's version (engine/compile/fast_tuning.key_for) and the
threads the plugin runs. A file that cannot be read is a miss; one that cannot be written leaves the verdict in
memory for this process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..compile.measurements import cache_file as tuning_cache_file, key_for
from ..core.files import read_regular

CACHE_NAME = "exact-kernel.json"
_MAX_BYTES = 1 << 20
_IN_PROCESS: dict[str, bool] = {}


def verdict_key(folder: Path | str, device: str, threads: int) -> str:
    return f"{key_for(folder, device)}/threads={threads}"


def _path(runner) -> Path | None:
    found = tuning_cache_file(runner)
    return found.with_name(CACHE_NAME) if found is not None else None


def _entries(path: Path | None) -> dict[str, bool]:
    if path is None:
        return {}
    try:
        entries = json.loads(read_regular(path, _MAX_BYTES).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}  # absent, not a file, not JSON: a miss
    return {k: v for k, v in entries.items() if isinstance(v, bool)} if isinstance(entries, dict) else {}


def known(runner, key: str) -> bool | None:
    """True: the kernel won here before; False: it lost; None: not measured."""
    return _IN_PROCESS.get(key, _entries(_path(runner)).get(key))


def keep(runner, key: str, adopted: bool) -> None:
    _IN_PROCESS[key] = adopted
    path = _path(runner)
    if path is None:
        return
    temporary = path.with_name(f"{CACHE_NAME}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps({**_entries(path), key: adopted}, indent=1), encoding="utf-8")
        temporary.replace(path)
    except OSError:
        temporary.unlink(missing_ok=True)  # a read-only cache: kept in memory for this process
