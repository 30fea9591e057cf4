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

import errno
import hashlib
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from decider.engine.errors import Cancelled, DeciderError, SettingsError

from .models import PARTIAL_DIR, PULL_MANIFEST, ModelEntry, describe, human_size, models_root, read_manifest, repo_folder_name

CHUNK = 1024 * 1024
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
Progress = Callable[[int, int], None]


class PullError(DeciderError):
    """A download that failed; the message names the repository or the file and what to do."""


@dataclass(frozen=True)
class RemoteFile:
    name: str  # path inside the repository, "/"-separated
    size: int
    sha256: str | None = None  # LFS files: the hub's sha256 of the content
    blob_id: str | None = None  # other files: git blob sha1

    @property
    def key(self) -> str:
        return self.sha256 or self.blob_id or f"size-{self.size}"


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


def _network_errors(session) -> tuple[type[BaseException], ...]:
    """The transport errors of the HTTP library huggingface_hub uses (httpx in 1.x, httpx2 in 2.x)."""
    module = sys.modules.get(type(session).__module__.split(".")[0])
    errors = tuple(getattr(module, name) for name in ("TransportError",) if module and hasattr(module, name))
    return errors or (OSError,)


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
    except _network_errors(get_session()) as exc:
        raise PullError(f"cannot reach the hub at {endpoint} ({_reason(exc)})") from None
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
    return info.sha, files


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# ----- verification ---------------------------------------------------------------------------------------------


class _Digest:
    """sha256 of the content (LFS) or git's blob sha1 ("blob <size>\\0" + content)."""

    def __init__(self, remote: RemoteFile):
        self.remote = remote
        if remote.sha256:
            self._hash, self.kind, self.expected = hashlib.sha256(), "sha256", remote.sha256.lower()
        elif remote.blob_id:
            self._hash, self.kind, self.expected = hashlib.sha1(), "git blob sha1", remote.blob_id.lower()
            self._hash.update(b"blob %d\0" % remote.size)
        else:
            self._hash, self.kind, self.expected = None, "size", None

    def update(self, data: bytes) -> None:
        if self._hash is not None:
            self._hash.update(data)

    def update_from_file(self, path: Path) -> None:
        if self._hash is None:
            return
        with path.open("rb") as handle:
            while block := handle.read(CHUNK):
                self._hash.update(block)

    def check(self) -> str | None:
        """None when the content matches, else the actual digest."""
        if self._hash is None:
            return None
        actual = self._hash.hexdigest()
        return None if actual == self.expected else actual


def _verify_existing(path: Path, remote: RemoteFile) -> bool:
    try:
        if path.stat().st_size != remote.size:
            return False
    except OSError:
        return False
    digest = _Digest(remote)
    digest.update_from_file(path)
    return digest.check() is None


def _append(handle, chunk: bytes) -> None:
    handle.write(chunk)


# ----- one file -------------------------------------------------------------------------------------------------


class _Transfer:
    def __init__(self, total: int, done: int, progress: Progress | None, cancel: Callable[[], bool] | None):
        self.total, self.done = total, done
        self.progress, self.cancel = progress, cancel
        self.downloaded = 0
        self.resumed = 0

    def advance(self, n: int) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(self.done, self.total)

    def check_cancel(self, repo_id: str) -> None:
        if self.cancel is not None and self.cancel():
            raise Cancelled(f"download of {repo_id} cancelled; run the same pull again to resume")


def _fetch(
    session, url: str, headers: dict[str, str], remote: RemoteFile, part: Path, target: Path, repo_id: str,
    transfer: _Transfer, retries: int, retry_wait: float,
) -> None:
    """Download one file into `part` (resuming what is there), verify it, move it to `target`."""
    network_errors = _network_errors(session)
    attempts = 0
    have = part.stat().st_size if part.exists() else 0
    if have > remote.size:
        part.unlink()
        have = 0
    transfer.resumed += have
    transfer.advance(have)
    while True:
        # Every byte in `part` has been counted in transfer.done; undo that when the bytes are dropped.
        have = part.stat().st_size if part.exists() else 0
        request_headers = dict(headers)
        if have:
            request_headers["Range"] = f"bytes={have}-"
        written = 0
        try:
            if have < remote.size:
                with session.stream("GET", url, headers=request_headers, timeout=30.0) as response:
                    status = response.status_code
                    if status == 416:  # the partial file does not fit what the server has: start over
                        transfer.advance(-have)
                        part.unlink(missing_ok=True)
                        attempts += 1
                        if attempts > retries:
                            raise PullError(f"{remote.name}: the server refuses to resume it; run the pull again")
                        continue
                    if status == 404:
                        raise PullError(f"{remote.name}: not found in repository {repo_id} (HTTP 404)")
                    if status in (401, 403):
                        raise PullError(f"{remote.name}: access denied by the hub (HTTP {status}); log in with `hf auth login`")
                    if status >= 400:
                        raise PullError(f"{remote.name}: the hub answered HTTP {status}")
                    if status == 206 and _range_start(response) != have:  # not the part asked for: start over
                        transfer.advance(-have)
                        part.unlink(missing_ok=True)
                        raise _ShortRead(0)
                    if status != 206 and have:  # the server ignored the Range request: the whole file comes again
                        transfer.advance(-have)
                        have = 0
                    part.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        with part.open("ab" if have else "wb") as handle:
                            for chunk in response.iter_bytes():  # as it arrives: an interruption loses nothing
                                transfer.check_cancel(repo_id)
                                if not chunk:
                                    continue
                                if have + written + len(chunk) > remote.size:
                                    raise _Overflow()
                                _append(handle, chunk)
                                written += len(chunk)
                                transfer.downloaded += len(chunk)
                                transfer.advance(len(chunk))
                    except _Overflow:
                        transfer.advance(-(have + written))
                        part.unlink(missing_ok=True)
                        raise PullError(
                            f"{remote.name}: the server sent more than the {remote.size} bytes the hub lists; "
                            "the corrupt file was removed, run the pull again"
                        ) from None
                    except OSError as exc:
                        if exc.errno == errno.ENOSPC:
                            raise PullError(f"disk full while writing {part}; free some space and run the pull again") from None
                        raise PullError(f"cannot write {part}: {exc.strerror or exc}") from None
            size = part.stat().st_size if part.exists() else 0
            if size < remote.size:  # the connection ended early without an error
                raise _ShortRead(size)
        except (network_errors + (_ShortRead,)) as exc:
            attempts += 1
            if attempts > retries:
                got = part.stat().st_size if part.exists() else 0
                host = urlsplit(url).netloc
                why = "the connection ended early" if isinstance(exc, _ShortRead) else _reason(exc)
                raise PullError(
                    f"{remote.name}: connection to {host} lost after {human_size(got)} of {human_size(remote.size)} "
                    f"({why}); run the same pull again to resume"
                ) from None
            time.sleep(retry_wait * attempts)
            continue
        break
    digest = _Digest(remote)
    digest.update_from_file(part)
    actual = digest.check()
    if actual is not None:
        part.unlink(missing_ok=True)
        raise PullError(
            f"{remote.name}: {digest.kind} mismatch (the hub lists {digest.expected}, the download has {actual}); "
            "the corrupt file was removed, run the pull again"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(part, target)


class _ShortRead(Exception):
    pass


class _Overflow(Exception):
    pass


def _range_start(response) -> int | None:
    match = re.match(r"bytes (\d+)-", response.headers.get("Content-Range", ""))
    return int(match.group(1)) if match else None


# ----- the repository -------------------------------------------------------------------------------------------


def _write_manifest(dest: Path, data: dict) -> None:
    tmp = dest / (PULL_MANIFEST + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, dest / PULL_MANIFEST)


def _offline_copy(repo_id: str, revision: str | None, dest: Path) -> PullResult:
    manifest = read_manifest(dest) if dest.is_dir() else None
    fits = (
        manifest is not None and manifest.get("complete") and manifest.get("repo_id") == repo_id
        and revision in (None, manifest.get("revision"), manifest.get("commit"))
    )
    if fits:
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

    from filelock import FileLock, Timeout

    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PullError(f"cannot create {dest}: {exc.strerror or exc}") from None
    lock = FileLock(str(dest / ".decider-pull.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise PullError(f"another pull of {repo_id} is writing {dest}; wait for it to finish") from None
    try:
        return _pull_locked(repo_id, revision, dest, base, commit, files, progress, cancel, token, retries, retry_wait)
    finally:
        lock.release()  # the (empty) lock file stays: unlinking it would let two pulls lock different files


def _pull_locked(repo_id, revision, dest, base, commit, files, progress, cancel, token, retries, retry_wait) -> PullResult:
    from huggingface_hub import __version__ as hub_version
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session

    old = read_manifest(dest) or {}
    old_files = old.get("files") if old.get("repo_id") == repo_id and isinstance(old.get("files"), dict) else {}
    partial_root = dest / PARTIAL_DIR
    # Files an earlier revision had and this one has not; remembered until a pull completes and removes them.
    names = {f.name for f in files}
    stale = sorted((set(old_files) | set(old.get("stale") or [])) - names) if old.get("repo_id") == repo_id else []
    manifest = {
        "repo_id": repo_id, "revision": revision, "commit": commit, "endpoint": base, "complete": False, "files": {},
        "stale": stale,
    }
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
        if known or (stat is not None and _verify_existing(target, remote)):
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
    transfer = _Transfer(total, present, progress, cancel)
    if progress is not None:
        progress(present, total)
    session = get_session()
    headers = build_hf_headers(token=token, library_name="decider")
    _write_manifest(dest, manifest)
    for remote in todo:
        transfer.check_cancel(repo_id)
        target = dest / _safe_relative(remote.name)
        url = hf_hub_url(repo_id, remote.name, revision=commit, endpoint=base)
        _fetch(session, url, headers, remote, _part_path(partial_root, remote), target, repo_id, transfer,
               retries, retry_wait)
        manifest["files"][remote.name] = {"size": remote.size, "key": remote.key, "mtime_ns": target.stat().st_mtime_ns}
        _write_manifest(dest, manifest)
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
    _write_manifest(dest, manifest)
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
