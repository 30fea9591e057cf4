"""A prompt cache on disk: the exact state after a shared prefix (system message + context), kept across
processes, so the next `decider ask --context rules.txt …` prefills only its question.

What is kept is what an in-memory snapshot holds (runner_base): host copies of every state the runner
exposes (KV caches and DeltaNet conv/recurrent states) and the next-token logits, for runners whose
`caps.snapshots` is True (the dynamic export on CPU/GPU, the static path). Restoring it and computing
the rest is the same arithmetic as a cold prefill split at the same checkpoint, so results are
bit-identical. The NPUW_LLM pipeline exposes no state and never uses the cache; neither is a prefix
holding an image kept (its features would have to be keyed too).

An entry is keyed by a sha256 of the runner's identity (the model folder's files with their sizes and
modification times, the device and execution path, every compile option, the OpenVINO version) and
the exact token ids, so a changed model file, device, precision or prompt never meets a stale state;
the ids are stored in the entry as well and compared on load. Entries are uncompressed .npz files
(numpy only; loaded with allow_pickle=False), written to a temporary file and renamed into place, and
the folder is held under a byte cap by evicting the least recently used (mtime, touched on every hit).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .precision import isa_summary

DEFAULT_MAX_BYTES = 256 * 1024 * 1024  # ~40 contexts of 1,000 tokens at 0.8B; a few MB each
SUFFIX = ".npz"


@dataclass(frozen=True)
class CachedPrefix:
    states: dict[str, np.ndarray]
    logits: np.ndarray


def runner_identity(runner: Any) -> str:
    """Everything besides the token ids that decides what state a prefill leaves: a stable JSON string."""
    import openvino as ov

    folder = Path(runner.folder.path)
    files = sorted(
        (str(p.relative_to(folder)), st.st_size, st.st_mtime_ns)
        for p in folder.rglob("*") if p.is_file() for st in [p.stat()]
    )
    options = {k: str(v) for k, v in asdict(runner.options).items() if k != "cache_dir"}
    # The arithmetic the compiled model really runs (read back) and the CPU's ISA: the same options compile to
    # other kernels on another CPU, and a state from one must not seed the other.
    precision = getattr(getattr(runner, "precision", None), "label", None)
    return json.dumps({
        "folder": str(folder.resolve()), "files": files, "device": runner.device,
        "execution_path": runner.execution_path, "options": options, "openvino": ov.get_version(),
        "precision": precision, "cpu": isa_summary(),
    }, sort_keys=True)


class PromptCache:
    """A folder of prefix states, bounded by `max_bytes`. Reading or writing never raises for a bad entry:
    a cache that cannot be used is a cache miss."""

    def __init__(self, folder: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.folder = Path(folder)
        self.max_bytes = max_bytes
        self.hits = 0
        self.writes = 0

    @staticmethod
    def key(identity: str, ids: Sequence[int]) -> str:
        digest = hashlib.sha256(identity.encode())
        digest.update(np.asarray(ids, dtype=np.int64).tobytes())
        return digest.hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}{SUFFIX}"

    def has(self, key: str) -> bool:
        return self._path(key).is_file()

    def load(self, key: str, ids: Sequence[int]) -> CachedPrefix | None:
        path = self._path(key)
        try:
            with np.load(path, allow_pickle=False) as data:
                if not np.array_equal(data["ids"], np.asarray(ids, dtype=np.int64)):
                    return None
                names = [str(n) for n in data["names"]]
                states = {name: data[f"s{i}"] for i, name in enumerate(names)}
                logits = data["logits"]
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            path.unlink(missing_ok=True)  # torn or foreign: drop it, compute again
            return None
        try:
            os.utime(path)  # least recently used goes first
        except OSError:
            pass
        self.hits += 1
        return CachedPrefix(states, logits)

    def store(self, key: str, ids: Sequence[int], states: dict[str, np.ndarray], logits: np.ndarray) -> bool:
        """Write an entry atomically, then evict down to the cap; False when it was not kept (too big, disk error)."""
        arrays = {f"s{i}": np.ascontiguousarray(value) for i, value in enumerate(states.values())}
        size = sum(a.nbytes for a in arrays.values()) + logits.nbytes
        if size > self.max_bytes:
            return False
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=SUFFIX)
            try:
                with os.fdopen(handle, "wb") as out:
                    np.savez(out, ids=np.asarray(ids, dtype=np.int64), names=np.array(list(states), dtype=str),
                             logits=np.asarray(logits), **arrays)  # type: ignore[arg-type]  # the stub reads **arrays as allow_pickle
                os.replace(tmp, self._path(key))
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError:
            return False
        self.writes += 1
        self.evict()
        return True

    def entries(self) -> list[tuple[Path, int, float]]:
        """(path, bytes, last use) of every entry, oldest use first."""
        found = []
        for path in self.folder.glob(f"*{SUFFIX}"):
            if path.name.startswith(".tmp-"):
                continue
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            found.append((path, st.st_size, st.st_mtime))
        return sorted(found, key=lambda entry: entry[2])

    def size(self) -> int:
        return sum(size for _, size, _ in self.entries())

    def evict(self) -> None:
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        for path, size, _ in entries:
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
