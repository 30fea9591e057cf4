"""`decider pull` of an OpenVINO export without an MTP head: fetch only the head's tensors from the checkpoint the
export was made from and build the head as `decider convert` does (app/mtp_export.py).

optimum-intel's export drops the `mtp.*` tensors, and the checkpoint is GBs where the head is MBs. So each safetensors
file of the checkpoint is read by HTTP Range requests: its 8-byte header length, its JSON header, then only the byte
ranges of the `mtp.*` tensors (close neighbours in one request). The checkpoint is `--mtp-from`, else the export's
README `base_model:`. A head that cannot be had never fails the pull: the export is complete without it.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from decider.engine.core.errors import DeciderError, ModelError
from decider.engine.model.folder import MTP_IR
from decider.engine.model.safetensors_file import decode, header_length, parse_header

from .models import describe, human_size, read_manifest
from .mtp_export import PREFIX, export_mtp_tensors
from .pull import REPO_ID, PullResult, check_repo_id, folder_lock, hub_endpoint, offline_mode, write_manifest
from .pull import remote_files
from .pull_ranges import RangeReader
from .pull_transfer import PullError, RemoteFile, reason

GAP = 1 << 20  # ranges closer than this come in one request: a few wasted bytes cost less than a round trip
GEOMETRY = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size", "num_hidden_layers")
INDEX = "model.safetensors.index.json"


@dataclass
class MtpFetch:
    """What became of the head: status "fetched", "present", "none" (the checkpoint has no head), "failed" or
    "skipped" (nothing to say); `line` is what to print after the mark, `warnings` one line each."""

    status: str
    line: str = ""
    repo: str | None = None
    commit: str | None = None
    nbytes: int = 0  # what came from the checkpoint, headers and JSON files included
    path: Path | None = None
    warnings: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        mark = {"fetched": "✓", "present": "✓", "failed": "!"}.get(self.status, "•")
        return ([f"{mark} {self.line}"] if self.line else []) + [f"! {w}" for w in self.warnings]


def base_model(folder: Path) -> str | None:
    """The README.md front matter's `base_model:` (a string, or the first item of a list) when it is a repository id.
    A few lines of parsing instead of a YAML dependency: only this one top-level key is wanted."""
    try:
        with (folder / "README.md").open(encoding="utf-8", errors="replace") as handle:
            lines = handle.read(65536).splitlines()
    except OSError:
        return None
    if not lines or lines[0].strip() != "---":
        return None
    for i, line in enumerate(lines[1:], 1):
        if line.strip() in ("---", "..."):
            return None
        key, colon, value = line.partition(":")
        if not colon or key != "base_model":  # top level only: no indentation before the key
            continue
        value = value.split(" #")[0].strip()
        if value.startswith("["):
            value = value.strip("[]").split(",")[0]
        elif not value and i + 1 < len(lines) and lines[i + 1].strip().startswith("-"):
            value = lines[i + 1].strip()[1:].split(" #")[0]
        value = value.strip().strip("'\"").strip()
        return value if REPO_ID.match(value) and ".." not in value else None
    return None


def spans(ranges: list[tuple[int, int]], gap: int = GAP) -> list[tuple[int, int]]:
    """Byte ranges [begin, end), sorted, neighbours less than `gap` apart merged into one."""
    merged: list[list[int]] = []
    for begin, end in sorted(ranges):
        if merged and begin - merged[-1][1] < gap:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([begin, end])
    return [(begin, end) for begin, end in merged]


def _shards(reader: RangeReader, listed: dict[str, RemoteFile]) -> list[RemoteFile]:
    """The safetensors files that may hold `mtp.*` tensors: the shards the index maps them to, plus any file the index
    does not name (a head kept in a file of its own, which `decider convert` reads too); without an index, every one."""
    files = [f for name, f in sorted(listed.items()) if name.endswith(".safetensors") and "/" not in name]
    if INDEX not in listed:
        return files
    weight_map = reader.json(listed[INDEX]).get("weight_map")
    if not isinstance(weight_map, dict):
        raise PullError(f"{INDEX} of {reader.repo} has no weight_map")
    wanted = {str(shard) for name, shard in weight_map.items() if name.startswith(PREFIX)}
    if missing := sorted(wanted - set(listed)):
        raise PullError(f"{INDEX} of {reader.repo} names {missing[0]}, which the repository does not have")
    indexed = {str(shard) for shard in weight_map.values()}
    return [f for f in files if f.name in wanted or f.name not in indexed]


def _shard_tensors(reader: RangeReader, remote: RemoteFile) -> dict[str, np.ndarray]:
    """The `mtp.*` tensors of one remote safetensors file: its header, then their byte ranges only."""
    where = f"{remote.name} of {reader.repo}"
    try:
        length = header_length(reader.read(remote, 0, 8) if remote.size >= 8 else b"", where)
        if 8 + length > remote.size:
            raise PullError(f"{where}: damaged safetensors header (longer than the file)")
        header = parse_header(reader.read(remote, 8, 8 + length), where)
    except ModelError as exc:
        raise PullError(str(exc)) from None
    entries: dict[str, tuple[int, int, str, list[int]]] = {}
    for name, entry in header.items():
        if not name.startswith(PREFIX):
            continue
        try:
            begin, end = (8 + length + int(offset) for offset in entry["data_offsets"])
            entries[name] = (begin, end, str(entry["dtype"]), [int(d) for d in entry["shape"]])
        except (KeyError, TypeError, ValueError):
            raise PullError(f"{where}: damaged safetensors header (tensor {name})") from None
        if not 8 + length <= begin <= end <= remote.size:
            raise PullError(f"{where}: tensor {name} runs past the end of the file")
    gap = remote.size if remote.name in reader.ignored else GAP  # Range ignored: one pass over the file
    out: dict[str, np.ndarray] = {}
    for first, last in spans([(b, e) for b, e, _, _ in entries.values()], gap):
        data = reader.read(remote, first, last)
        for name, (begin, end, dtype, shape) in entries.items():
            if first <= begin and end <= last:
                try:
                    out[name] = decode(data[begin - first:end - first], dtype, shape, name)
                except ValueError:  # the byte count does not fit the shape
                    raise PullError(f"{where}: tensor {name} does not match its shape {shape}") from None
    return out


def _text(config: dict) -> dict:
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def _check_geometry(config: dict, dest: Path, export_repo: str, repo: str) -> None:
    """A head drafts for one model's hidden states and vocabulary: another model's is refused before any tensor."""
    try:
        export = json.loads((dest / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # describe() found an export; there is just nothing to compare against
    mine, theirs = _text(export) if isinstance(export, dict) else {}, _text(config)
    diffs = [f"{key} {theirs[key]} vs {mine[key]}" for key in GEOMETRY if key in mine and key in theirs
             and theirs[key] != mine[key]]
    if diffs:
        raise PullError(f"{repo} does not match {export_repo} ({', '.join(diffs)}): "
                        "not the checkpoint it was made from")


def _build(dest: Path, tensors: dict[str, np.ndarray], config: dict) -> Path:
    """The head into a temporary folder, then moved in (.bin first): an interruption never leaves a half head."""
    tmp = dest / ".decider-mtp.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        built = export_mtp_tensors(tensors, config, tmp)
        os.replace(built.with_suffix(".bin"), (dest / MTP_IR).with_suffix(".bin"))
        os.replace(built, dest / MTP_IR)
    except OSError as exc:
        raise PullError(f"cannot write the MTP head into {dest}: {exc.strerror or exc}") from None
    except (RuntimeError, ValueError, KeyError) as exc:  # OpenVINO's or numpy's word on tensors of unexpected shapes
        raise ModelError(f"the checkpoint's MTP head cannot be built ({reason(exc)})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest / MTP_IR


def _fetch(dest: Path, export_repo: str, repo: str, token: str | bool | None, base: str) -> MtpFetch:
    commit, files = remote_files(repo, None, base, token)
    listed = {f.name: f for f in files}
    reader = RangeReader(repo, commit, base, token)
    if "config.json" not in listed:
        raise PullError(f"{repo} has no config.json: not a Hugging Face checkpoint")
    config = reader.json(listed["config.json"])
    _check_geometry(config, dest, export_repo, repo)
    tensors: dict[str, np.ndarray] = {}
    for remote in _shards(reader, listed):
        tensors.update(_shard_tensors(reader, remote))
    if not tensors:
        layers = _text(config).get("mtp_num_hidden_layers")
        if isinstance(layers, int) and layers >= 1:
            why = f"its config.json declares {layers} MTP layer(s), its safetensors files hold no mtp.* tensors"
        else:
            why = "no mtp.* tensors in its safetensors files"
        return MtpFetch("none", f"no MTP head in {repo} ({why})", repo, commit, reader.received)
    path = _build(dest, tensors, config)
    manifest = read_manifest(dest)
    if manifest is not None:  # where the head came from, kept by later pulls (app/pull.py)
        manifest["mtp_head"] = {"repo": repo, "commit": commit, "bytes": reader.received}
        write_manifest(dest, manifest)
    warnings = [f"{name} of {repo}: the server ignored HTTP Range requests and sent the whole file "
                f"({human_size(size)}) each time; {human_size(read)} read for the {human_size(wanted)} needed"
                for name, (read, wanted, size) in reader.ignored.items()]
    line = (f"MTP head: fetched {human_size(reader.received)} of {repo} (commit {commit[:12]}) → {MTP_IR} "
            "(drafts for --draft mtp)")
    return MtpFetch("fetched", line, repo, commit, reader.received, path, warnings)


def fetch_mtp_head(result: PullResult, source: str | None = None, token: str | bool | None = None,
                   endpoint: str | None = None) -> MtpFetch:
    """Give a pulled export that has no MTP head the head of its checkpoint: `source`, else its README's base_model.
    Never raises a DeciderError: a head that cannot be had is status "failed" with the reason."""
    dest = result.path
    entry = result.entry or describe(dest)
    if entry.kind != "export":
        return MtpFetch("skipped")
    if (dest / MTP_IR).is_file() and (dest / MTP_IR).with_suffix(".bin").is_file():
        record = (read_manifest(dest) or {}).get("mtp_head")
        if not isinstance(record, dict):  # the export brought its own
            return MtpFetch("present", path=dest / MTP_IR)
        line = f"MTP head: {MTP_IR} already there (from {record.get('repo')}, commit {str(record.get('commit'))[:12]})"
        return MtpFetch("present", line, record.get("repo"), record.get("commit"), path=dest / MTP_IR)
    repo = source or base_model(dest)
    if repo is None or repo == result.repo_id:
        return MtpFetch("skipped")
    lead = "MTP head not fetched" + (f" from {repo} (named by --mtp-from)" if source else "")
    if result.offline or offline_mode():
        return MtpFetch("failed", f"{lead}: offline mode (HF_HUB_OFFLINE=1); pull again online to fetch it", repo)
    try:
        with folder_lock(dest, f"another pull is writing {dest}"):
            return _fetch(dest, result.repo_id, check_repo_id(repo), token, hub_endpoint(endpoint))
    except DeciderError as exc:  # PullError (a busy folder too); ModelError: a head the builder cannot use; SettingsError: a bad id
        return MtpFetch("failed", f"{lead}: {exc}", repo)
