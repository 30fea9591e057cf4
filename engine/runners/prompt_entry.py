"""One prompt-cache entry read from disk, trusting nothing in it.

The file may be anything by the time it is read: empty, torn, a folder, a symlink to a FIFO, another program's
zip, or an entry whose arrays were rewritten (float16 states, NaNs, other shapes). Before a state is restored
into the runner, every one of these is a `BadEntry`: the path is opened without following a symlink or
waiting on a FIFO, it must be a regular file of plausible size, a stored (uncompressed) zip of .npy members read
without pickles, whose checksum (sha256 over the ids, the names, and each array's dtype, shape and bytes) matches,
whose ids are the prompt's, and whose states have exactly the runner's names, dtypes and shapes for this
length and are finite, as are the next-token logits (float64, one row).
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.files import NotARegularFile, open_regular

# name → (dtype, shape) of each state the runner holds after a prefix of a given length
StateLayout = Mapping[str, tuple[np.dtype, tuple[int, ...]]]
ENTRY_OVERHEAD = 1 << 20  # bytes beyond the arrays' own: zip and .npy headers, the names, the ids


@dataclass(frozen=True)
class CachedPrefix:
    states: dict[str, np.ndarray]
    logits: np.ndarray


class BadEntry(Exception):
    """The entry cannot be used; str() says why, as the end of a sentence naming the file."""


def checksum(ids: np.ndarray, names: Sequence[str], states: Sequence[np.ndarray], logits: np.ndarray) -> bytes:
    digest = hashlib.sha256()
    for part in (ids, *states, logits):
        digest.update(f"{part.dtype.str}{part.shape}".encode())
        digest.update(np.ascontiguousarray(part).tobytes())
    digest.update("\0".join(names).encode())
    return digest.digest()


def read_entry(path: Path, ids: Sequence[int], layout: StateLayout | None, max_bytes: int) -> CachedPrefix:
    """The checked entry. FileNotFoundError (no entry), NotADirectoryError (the folder is a file) or BadEntry."""
    try:
        handle = open_regular(path, follow_symlinks=False)
    except IsADirectoryError:
        raise BadEntry("is a folder") from None
    except NotARegularFile as exc:
        raise BadEntry(f"is {exc.strerror}") from None
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError as exc:
        raise BadEntry(f"cannot be read ({exc.strerror})") from None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            raise BadEntry("is empty")
        if size > max_bytes + ENTRY_OVERHEAD:
            raise BadEntry(f"is {size:,} bytes, more than the cache holds")
        arrays = _arrays(handle, size)
    return _checked(arrays, ids, layout)


def _arrays(handle, size: int) -> dict[str, np.ndarray]:
    try:
        with zipfile.ZipFile(handle) as archive:
            members = archive.infolist()
            if any(m.compress_type != zipfile.ZIP_STORED for m in members) or sum(m.file_size for m in members) > size:
                raise BadEntry("is not an entry (compressed members)")
            arrays = {}
            for member in members:
                with archive.open(member) as stream:
                    arrays[member.filename.removesuffix(".npy")] = np.lib.format.read_array(stream, allow_pickle=False)
            return arrays
    except BadEntry:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        raise BadEntry(f"is torn or not an entry ({type(exc).__name__})") from None


def _checked(arrays: dict[str, np.ndarray], ids: Sequence[int], layout: StateLayout | None) -> CachedPrefix:
    try:
        stored_ids, names_array, logits, digest = arrays["ids"], arrays["names"], arrays["logits"], arrays["checksum"]
        names = [str(name) for name in names_array.tolist()] if names_array.ndim == 1 else []
        states = {name: arrays[f"s{i}"] for i, name in enumerate(names)}
    except KeyError as exc:
        raise BadEntry(f"lacks {exc.args[0]!r} (an older or foreign entry)") from None
    if checksum(stored_ids, names, list(states.values()), logits) != digest.tobytes():
        raise BadEntry("fails its checksum")
    if stored_ids.dtype != np.int64 or not np.array_equal(stored_ids, np.asarray(ids, dtype=np.int64)):
        raise BadEntry("holds other token ids")
    if layout is not None:
        _check_layout(states, layout)
    if logits.dtype != np.float64 or logits.ndim != 1:
        raise BadEntry(f"holds logits of {logits.dtype} {logits.shape}, not one float64 row")
    for name, array in (*states.items(), ("logits", logits)):
        if not np.issubdtype(array.dtype, np.number) or not np.isfinite(array).all():
            raise BadEntry(f"holds non-finite values in {name}")
    return CachedPrefix(states, logits)


def _check_layout(states: dict[str, np.ndarray], layout: StateLayout) -> None:
    if set(states) != set(layout):
        raise BadEntry("holds other states than this runner's")
    for name, (dtype, shape) in layout.items():
        array = states[name]
        if array.dtype != dtype or array.shape != tuple(shape):
            raise BadEntry(f"holds {name} as {array.dtype} {array.shape}, where the runner holds {np.dtype(dtype)} {tuple(shape)}")
