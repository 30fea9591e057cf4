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

Nothing in the folder is trusted (engine/runners/prompt_entry.py): an entry that is not a regular file, is empty or
oversized, fails its checksum, or holds states of another name, dtype or shape than the runner's, or that are
not finite, is a miss with one log line and is removed. Housekeeping, once per process and after each write,
removes what a killed writer left (temporary files older than STALE_TEMPORARY_SECONDS) and shrinks the folder
to the cap, also a cap lowered since the folder filled.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Protocol

import numpy as np

from ..compile.devices import DeviceOptions
from ..compile.precision import Precision, isa_summary
from ..model.folder import ModelFolder
from .prompt_entry import BadEntry, CachedPrefix, StateLayout, checksum, read_entry

__all__ = ["CachedPrefix", "PromptCache", "runner_identity"]

DEFAULT_MAX_BYTES = 256 * 1024 * 1024  # ~40 contexts of 1,000 tokens at 0.8B; a few MB each
SUFFIX = ".npz"
TEMPORARY_PREFIX = ".tmp-"
STALE_TEMPORARY_SECONDS = 3600  # a write takes seconds: a temporary file an hour old was left by a killed writer

log = logging.getLogger("decider.prompt_cache")


class IdentifiedRunner(Protocol):
    """What of a runner decides its states (RunnerBase has it; a Protocol, so the cache does not import the runner
    that holds it)."""

    folder: ModelFolder
    options: DeviceOptions
    precision: Precision
    device: str
    execution_path: str


def runner_identity(runner: IdentifiedRunner) -> str:
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
    precision = runner.precision.label
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
        self._tidied = False  # housekeeping done in this process
        self._said_unusable = False

    @staticmethod
    def key(identity: str, ids: Sequence[int]) -> str:
        digest = hashlib.sha256(identity.encode())
        digest.update(np.asarray(ids, dtype=np.int64).tobytes())
        return digest.hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}{SUFFIX}"

    def has(self, key: str) -> bool:
        return self._path(key).is_file()

    def load(self, key: str, ids: Sequence[int], layout: StateLayout | None = None) -> CachedPrefix | None:
        """The entry for these ids, checked against `layout` (the runner's states at this length); None: a miss."""
        if not self._tidied:
            self.evict()
        path = self._path(key)
        try:
            entry = read_entry(path, ids, layout, self.max_bytes)
        except FileNotFoundError:
            return None
        except NotADirectoryError:  # the folder itself is a file
            self._unusable()
            return None
        except BadEntry as exc:
            self._discard(path, str(exc))
            return None
        try:
            os.utime(path)  # least recently used goes first
        except OSError:
            pass
        self.hits += 1
        return entry

    def store(self, key: str, ids: Sequence[int], states: dict[str, np.ndarray], logits: np.ndarray) -> bool:
        """Write an entry atomically, then evict down to the cap; False when it was not kept (too big, disk error)."""
        arrays = {f"s{i}": np.ascontiguousarray(value) for i, value in enumerate(states.values())}
        size = sum(a.nbytes for a in arrays.values()) + logits.nbytes
        if size > self.max_bytes:
            return False
        ids_array, names, logits = np.asarray(ids, dtype=np.int64), np.array(list(states), dtype=str), np.asarray(logits)
        digest = checksum(ids_array, list(states), list(arrays.values()), logits)
        try:
            self._make_folder()
            handle, tmp = tempfile.mkstemp(dir=self.folder, prefix=TEMPORARY_PREFIX, suffix=SUFFIX)
            try:
                with os.fdopen(handle, "wb") as out:
                    np.savez(out, ids=ids_array, names=names, logits=logits, checksum=np.frombuffer(digest, dtype=np.uint8),
                             **arrays)  # type: ignore[arg-type]  # the stub reads **arrays as allow_pickle
                os.replace(tmp, self._path(key))
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError:
            return False
        self.writes += 1
        self.evict()
        return True

    def _make_folder(self) -> None:
        """The folder, made; a file in its place is moved aside (once) so the cache works again."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            aside = self.folder.with_name(f"{self.folder.name}.not-a-folder-{int(time.time())}")
            os.replace(self.folder, aside)
            log.warning("prompt cache: %s was not a folder; moved to %s", self.folder, aside)
            self.folder.mkdir()

    def _unusable(self) -> None:
        if not self._said_unusable:
            self._said_unusable = True
            log.warning("prompt cache: %s is not a folder; no context is reused until a state is written", self.folder)

    def _discard(self, path: Path, why: str) -> None:
        """A bad entry: one log line, and it goes (a folder in its place too), so it is computed again."""
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("prompt cache: %s %s; computed again (it could not be removed: %s)", path.name, why, exc.strerror)
            return
        log.warning("prompt cache: %s %s; removed, computed again", path.name, why)

    def entries(self) -> list[tuple[Path, int, float]]:
        """(path, bytes, last use) of every entry that is a regular file, oldest use first; anything else named
        like an entry is discarded, and a temporary file older than STALE_TEMPORARY_SECONDS removed."""
        found = []
        now = time.time()
        try:
            paths = list(self.folder.iterdir())
        except OSError:  # no folder yet, or a file in its place
            return []
        for path in paths:
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if path.name.startswith(TEMPORARY_PREFIX):
                if stat.S_ISREG(st.st_mode) and now - st.st_mtime > STALE_TEMPORARY_SECONDS:
                    path.unlink(missing_ok=True)  # a killed writer's: nobody will rename it into place
                continue
            if not path.name.endswith(SUFFIX):
                continue
            if not stat.S_ISREG(st.st_mode):
                self._discard(path, "is not a regular file")
                continue
            found.append((path, st.st_size, st.st_mtime))
        return sorted(found, key=lambda entry: entry[2])

    def size(self) -> int:
        return sum(size for _, size, _ in self.entries())

    def evict(self) -> None:
        """Down to the cap, least recently used first (after a write, and once per process: a lowered cap)."""
        self._tidied = True
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        for path, size, _ in entries:
            if total <= self.max_bytes:
                break
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                log.warning("prompt cache: %s could not be evicted (%s)", path.name, exc.strerror)
            total -= size
