"""`decider pull`: download a model repository from the Hugging Face Hub into the data dir.

huggingface_hub gives the repository's file list (with the hub's sha256 of every LFS file and the git
blob id of every other file), the endpoint (`HF_ENDPOINT`), offline mode (`HF_HUB_OFFLINE`), the
auth headers and the HTTP session. The bytes are fetched here, file by file, because Decider needs
three things huggingface_hub 1.x/2.x downloads do not give together:

* resume across runs: an unfinished file stays in `<dest>/.decider-partial/` and the next pull asks
  for the rest with a Range request (huggingface_hub retries within one call, but deletes its
  temporary file when a call fails or is interrupted);
* a byte-level progress callback and a cancel hook for the GUI;
* verification: sha256 for LFS files, the git blob sha1 for the others (size when neither is given).

Every failure is one line naming the repository or the file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from decider.engine.core.errors import SettingsError
from decider.engine.model.folder import MTP_IR

from .models import PARTIAL_DIR, PULL_MANIFEST, ModelEntry, describe, human_size, models_root, read_manifest, repo_folder_name
from .pull_transfer import Progress, PullError, RemoteFile, Transfer, fetch, network_errors, reason, verify_existing

LOCK_FILE = ".decider-pull.lock"  # one writer per folder: folder_lock
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


@dataclass
class PullResult:
    repo_id: str
    revision: str | None
    commit: str | None
    path: Path
    files: int
    downloaded_bytes: int = 0  # fetched by this run
    resumed_bytes: int = 0  # taken from unfinished downloads of an earlier run
    reused_files: int = 0  # already present and verified
    offline: bool = False
    entry: ModelEntry | None = field(default=None, repr=False)


# ----- environment ----------------------------------------------------------------------------------------------


def _truthy(value: str | None) -> bool:
    return (value or "").strip().upper() in ("1", "ON", "YES", "TRUE")


def offline_mode() -> bool:
    from huggingface_hub import constants

    return _truthy(os.environ.get("HF_HUB_OFFLINE")) or constants.is_offline_mode()


def hub_endpoint(endpoint: str | None = None) -> str:
    from huggingface_hub import constants

    return (endpoint or os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def check_repo_id(repo_id: str) -> str:
    repo_id = repo_id.strip()
    if not REPO_ID.match(repo_id) or ".." in repo_id:
        raise SettingsError(f"{repo_id!r} is not a repository id (expected owner/name, e.g. OpenVINO/some-model)")
    return repo_id


def _safe_relative(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or not path.parts or any(part in ("", ".", "..") for part in path.parts):
        raise PullError(f"the repository lists an unsafe file name {name!r}; refusing to write it")
    return path


# ----- the file list --------------------------------------------------------------------------------------------


def remote_files(repo_id: str, revision: str | None, endpoint: str, token: str | bool | None = None) -> tuple[str, list[RemoteFile]]:
    """(commit sha, files) of a revision, with the hub's hashes; errors become one-line PullErrors."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.utils import get_session

    api = HfApi(endpoint=endpoint, library_name="decider")
    try:
        info = api.model_info(repo_id, revision=revision, files_metadata=True, token=token)
    except GatedRepoError:
        raise PullError(f"repository {repo_id} is gated: accept its terms on {endpoint}/{repo_id} and log in (`hf auth login`)") from None
    except RevisionNotFoundError:
        raise PullError(f"revision {revision!r} not found in repository {repo_id}") from None
    except RepositoryNotFoundError:
        raise PullError(f"repository {repo_id} not found on {endpoint} (a private repository needs `hf auth login`)") from None
    except OfflineModeIsEnabled:
        raise PullError(f"offline mode (HF_HUB_OFFLINE=1): cannot ask the hub about {repo_id}") from None
    except HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status == 404:
            raise PullError(f"repository {repo_id} not found on {endpoint}") from None
        raise PullError(f"the hub at {endpoint} answered HTTP {status} for {repo_id}") from None
    except network_errors(get_session()) as exc:
        raise PullError(f"cannot reach the hub at {endpoint} ({reason(exc)})") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise PullError(f"the hub at {endpoint} sent an unexpected answer for {repo_id} ({exc})") from None
    files = []
    for sibling in info.siblings or []:
        lfs = getattr(sibling, "lfs", None)
        size = lfs.size if lfs is not None else sibling.size
        if size is None:
            raise PullError(f"the hub at {endpoint} did not report the size of {sibling.rfilename} in {repo_id}")
        files.append(RemoteFile(
            name=sibling.rfilename,
            size=int(size),
            sha256=lfs.sha256 if lfs is not None else None,
            blob_id=None if lfs is not None else sibling.blob_id,
        ))
    if not files:
        raise PullError(f"repository {repo_id} has no files")
    if info.sha is None:
        raise PullError(f"the hub at {endpoint} did not name the commit of {repo_id}")
    return info.sha, files


# ----- the repository -------------------------------------------------------------------------------------------


def write_manifest(dest: Path, data: dict) -> None:
    tmp = dest / (PULL_MANIFEST + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, dest / PULL_MANIFEST)


def _offline_copy(repo_id: str, revision: str | None, dest: Path) -> PullResult:
    manifest = read_manifest(dest) if dest.is_dir() else None
    fits = (
        manifest is not None and manifest.get("complete") and manifest.get("repo_id") == repo_id
        and revision in (None, manifest.get("revision"), manifest.get("commit"))
    )
    if fits and manifest is not None:
        files = manifest.get("files") or {}
        missing = [n for n, f in files.items() if not (dest / n).is_file() or (dest / n).stat().st_size != f.get("size")]
        if not missing:
            return PullResult(repo_id, manifest.get("revision"), manifest.get("commit"), dest, len(files), offline=True)
    what = repo_id if revision is None else f"{repo_id} at {revision}"
    raise PullError(f"offline mode (HF_HUB_OFFLINE=1) and {what} is not downloaded yet; unset HF_HUB_OFFLINE to download it")


def _free_space(path: Path) -> int:
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def pull(
    repo_id: str,
    revision: str | None = None,
    dest_root: str | Path | None = None,
    progress: Progress | None = None,
    cancel: Callable[[], bool] | None = None,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    retries: int = 3,
    retry_wait: float = 1.0,
) -> PullResult:
    """Download (or finish downloading) repo_id into dest_root/<owner>--<name> and verify every file.

    progress(done_bytes, total_bytes) is called as bytes arrive; cancel() is polled between chunks
    and makes the pull raise Cancelled (what arrived is kept for the next pull).
    """
    repo_id = check_repo_id(repo_id)
    dest = Path(dest_root or models_root()).expanduser() / repo_folder_name(repo_id)
    if offline_mode():
        result = _offline_copy(repo_id, revision, dest)
        result.entry = describe(dest, ["downloaded"])
        return result
    base = hub_endpoint(endpoint)
    commit, files = remote_files(repo_id, revision, base, token)

    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PullError(f"cannot create {dest}: {exc.strerror or exc}") from None
    with folder_lock(dest, f"another pull of {repo_id} is writing {dest}; wait for it to finish"):
        return _pull_locked(repo_id, revision, dest, base, commit, files, progress, cancel, token, retries, retry_wait)


@contextmanager
def folder_lock(dest: Path, busy: str) -> Iterator[None]:
    """One writer per model folder (a pull, a head fetch: app/pull_mtp.py); PullError(busy) if another holds it."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(dest / LOCK_FILE))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise PullError(busy) from None
    try:
        yield
    finally:
        lock.release()  # the (empty) lock file stays: unlinking it would let two pulls lock different files


def _pull_locked(repo_id, revision, dest, base, commit, files, progress, cancel, token, retries, retry_wait) -> PullResult:
    from huggingface_hub import __version__ as hub_version
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session

    old = read_manifest(dest) or {}
    old_files: dict = old["files"] if old.get("repo_id") == repo_id and isinstance(old.get("files"), dict) else {}
    partial_root = dest / PARTIAL_DIR
    # Files an earlier revision had and this one has not; remembered until a pull completes and removes them.
    names = {f.name for f in files}
    stale = sorted((set(old_files) | set(old.get("stale") or [])) - names) if old.get("repo_id") == repo_id else []
    manifest = {
        "repo_id": repo_id, "revision": revision, "commit": commit, "endpoint": base, "complete": False, "files": {},
        "stale": stale,
    }
    if old.get("repo_id") == repo_id and isinstance(old.get("mtp_head"), dict) and MTP_IR not in names:
        manifest["mtp_head"] = old["mtp_head"]  # the head Decider added (app/pull_mtp.py): not a repo file, not stale
    # Which files are already there (verified earlier, or verifiable now)?
    todo: list[RemoteFile] = []
    present = 0
    for remote in sorted(files, key=lambda f: (f.size, f.name)):
        target = dest / _safe_relative(remote.name)
        record = old_files.get(remote.name) or {}
        try:
            stat = target.stat()
        except OSError:
            stat = None
        known = (
            stat is not None and record.get("key") == remote.key and record.get("size") == remote.size
            and record.get("mtime_ns") == stat.st_mtime_ns and stat.st_size == remote.size
        )
        if known or (stat is not None and verify_existing(target, remote)):
            manifest["files"][remote.name] = {"size": remote.size, "key": remote.key, "mtime_ns": target.stat().st_mtime_ns}
            present += remote.size
        else:
            todo.append(remote)
    total = sum(f.size for f in files)
    partial = {f.name: _part_path(partial_root, f).stat().st_size for f in todo if _part_path(partial_root, f).is_file()}
    needed = sum(f.size - min(partial.get(f.name, 0), f.size) for f in todo)
    free = _free_space(dest)
    if needed > free:
        raise PullError(
            f"not enough disk space for {repo_id}: {human_size(needed)} still to download, "
            f"{human_size(free)} free at {dest}"
        )
    transfer = Transfer(total, present, progress, cancel)
    if progress is not None:
        progress(present, total)
    session = get_session()
    headers = build_hf_headers(token=token, library_name="decider")
    write_manifest(dest, manifest)
    for remote in todo:
        transfer.check_cancel(repo_id)
        target = dest / _safe_relative(remote.name)
        url = hf_hub_url(repo_id, remote.name, revision=commit, endpoint=base)
        fetch(session, url, headers, remote, _part_path(partial_root, remote), target, repo_id, transfer,
               retries, retry_wait)
        manifest["files"][remote.name] = {"size": remote.size, "key": remote.key, "mtime_ns": target.stat().st_mtime_ns}
        write_manifest(dest, manifest)
    for name in stale:  # only files Decider itself downloaded earlier
        try:
            (dest / _safe_relative(name)).unlink()
        except (OSError, PullError):
            pass
    manifest.pop("stale")
    shutil.rmtree(partial_root, ignore_errors=True)
    manifest["complete"] = True
    manifest["completed_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    manifest["huggingface_hub"] = hub_version
    write_manifest(dest, manifest)
    result = PullResult(repo_id, revision, commit, dest, len(files), transfer.downloaded, transfer.resumed,
                        len(files) - len(todo))
    result.entry = describe(dest, ["downloaded"])
    return result


def _part_path(partial_root: Path, remote: RemoteFile) -> Path:
    flat = remote.name.replace("/", "__")
    return partial_root / f"{flat}.{remote.key[-16:]}.part"


# ----- text -----------------------------------------------------------------------------------------------------


def summary(result: PullResult) -> tuple[bool, str]:
    """(usable?, what to print) after a pull: a ready export, a checkpoint to convert, or unusable."""
    entry = result.entry or describe(result.path)
    where = f"{result.repo_id} → {result.path}"
    if result.offline:
        head = f"offline: using the copy of {where} (commit {(result.commit or '?')[:12]})"
    else:
        moved = human_size(result.downloaded_bytes)
        head = f"pulled {where} (commit {(result.commit or '?')[:12]}; {result.files} files, {moved} downloaded"
        if result.resumed_bytes:
            head += f", {human_size(result.resumed_bytes)} resumed"
        if result.reused_files:
            head += f", {result.reused_files} already there"
        head += "; all verified)"
    if entry.kind == "export":
        weights = entry.precision.label if entry.precision else "unknown weights"
        return True, (
            f"{head}\n✓ ready OpenVINO export: {entry.layout} ({entry.model_type}), weights {weights}, "
            f"NPU {entry.devices.get('NPU')}\n  use it: decider ask --model {result.path} \"…\" --option … --option …"
        )
    if entry.kind == "checkpoint":
        return True, (
            f"{head}\n• Hugging Face checkpoint ({entry.model_type}), not an OpenVINO export yet\n"
            f"  convert it: decider convert {result.path} {result.path}-ov --weights int4-npu"
        )
    return False, f"{head}\n✗ not usable by Decider: {entry.error}"
