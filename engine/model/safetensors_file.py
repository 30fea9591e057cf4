"""A minimal safetensors reader and writer: an 8-byte little-endian header length, a JSON header naming each
tensor's dtype, shape and byte range, then the raw little-endian bytes. No pickles, no torch.

Used to keep a Qwen3.5 checkpoint's `mtp.*` tensors, which transformers and optimum-intel drop on load
(engine/graphs/mtp_graph.py builds the draft head from them). bf16 is widened to float32 exactly (its bits are the
high half of a float32's).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from ..core.errors import ModelError

_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
           "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}
_MAX_HEADER = 100 << 20  # the format's own limit on the JSON header


def header_length(raw: bytes, name: str) -> int:
    """The JSON header's length from a file's first 8 bytes. Public so that a reader of a remote file (by HTTP Range
    requests) checks it the same way: the limit keeps a damaged or hostile length from asking for gigabytes."""
    if len(raw) != 8:
        raise ModelError(f"{name}: not a safetensors file (shorter than its header length)")
    (length,) = struct.unpack("<Q", raw)
    if length > _MAX_HEADER:
        raise ModelError(f"{name}: not a safetensors file (header of {length} bytes)")
    return length


def parse_header(raw: bytes, name: str) -> dict[str, dict]:
    """The tensors' entries by name from the header's JSON bytes (metadata dropped)."""
    try:
        header = json.loads(raw)
    except ValueError:
        raise ModelError(f"{name}: damaged safetensors header") from None
    if not isinstance(header, dict):
        raise ModelError(f"{name}: damaged safetensors header")
    header.pop("__metadata__", None)
    return header


def read_header(path: Path) -> tuple[dict[str, dict], int]:
    """(the tensors' entries by name, where the data starts)."""
    with open(path, "rb") as f:
        length = header_length(f.read(8), path.name)
        raw = f.read(length)
    return parse_header(raw, path.name), 8 + length


def decode(raw: bytes, dtype: str, shape: list[int], name: str) -> np.ndarray:
    """One tensor's little-endian bytes as an array (bf16 widened to float32 exactly)."""
    if dtype == "BF16":
        wide = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return wide.view(np.float32).reshape(shape)
    if dtype not in _DTYPES:
        raise ModelError(f"tensor {name}: dtype {dtype} is not supported")
    return np.frombuffer(raw, dtype=np.dtype(_DTYPES[dtype]).newbyteorder("<")).reshape(shape).copy()


def read_tensors(path: Path, names: Iterable[str] | None = None, prefix: str = "") -> dict[str, np.ndarray]:
    """The named tensors (or every one starting with `prefix`) of one safetensors file."""
    header, start = read_header(path)
    wanted = [n for n in header if n.startswith(prefix)] if names is None else list(names)
    out: dict[str, np.ndarray] = {}
    with open(path, "rb") as f:
        for name in wanted:
            entry = header.get(name)
            if entry is None:
                raise ModelError(f"{path.name} has no tensor {name!r}")
            begin, end = entry["data_offsets"]
            f.seek(start + begin)
            raw = f.read(end - begin)
            if len(raw) != end - begin:
                raise ModelError(f"{path.name}: tensor {name} runs past the end of the file")
            out[name] = decode(raw, entry["dtype"], entry["shape"], name)
    return out


def checkpoint_tensors(folder: Path, prefix: str) -> dict[str, np.ndarray]:
    """Every tensor starting with `prefix` across a checkpoint folder's safetensors files (single file, shards, or
    extra files beside them)."""
    found: dict[str, np.ndarray] = {}
    for path in sorted(Path(folder).glob("*.safetensors")):
        found.update(read_tensors(path, prefix=prefix))
    return found


def write_tensors(path: Path, tensors: Mapping[str, np.ndarray]) -> None:
    """Write tensors as safetensors (names sorted, data 8-byte aligned as the reference writer does)."""
    header: dict[str, dict] = {}
    offset = 0
    arrays = {}
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        little = array.astype(array.dtype.newbyteorder("<"), copy=False)
        arrays[name] = little
        header[name] = {"dtype": _NAMES[np.dtype(array.dtype)], "shape": list(array.shape),
                        "data_offsets": [offset, offset + little.nbytes]}
        offset += little.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name in sorted(arrays):
            f.write(arrays[name].tobytes())
