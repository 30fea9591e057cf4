"""One file of `decider pull`: fetched with resume (Range requests), cancel and byte progress, verified
(sha256 for LFS files, git's blob sha1 for the others, size when neither is given), then moved into place.
Every failure is a PullError naming the file and what to do."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from decider.engine.core.errors import Cancelled, DeciderError

from .models import human_size

CHUNK = 1024 * 1024
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


def network_errors(session) -> tuple[type[BaseException], ...]:
    """The transport errors of the HTTP library huggingface_hub uses (httpx in 1.x, httpx2 in 2.x)."""
    module = sys.modules.get(type(session).__module__.split(".")[0])
    errors = tuple(getattr(module, name) for name in ("TransportError",) if module and hasattr(module, name))
    return errors or (OSError,)


def reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# ----- verification ---------------------------------------------------------------------------------------------


class _Digest:
    """sha256 of the content (LFS) or git's blob sha1 ("blob <size>\\0" + content)."""

    def __init__(self, remote: RemoteFile):
        self.remote = remote
        self._hash: hashlib._Hash | None
        self.expected: str | None
        if remote.sha256:
            self._hash, self.kind, self.expected = hashlib.sha256(), "sha256", remote.sha256.lower()
        elif remote.blob_id:
            self._hash, self.kind, self.expected = hashlib.sha1(), "git blob sha1", remote.blob_id.lower()
            self._hash.update(b"blob %d\0" % remote.size)
        else:
            self._hash, self.kind, self.expected = None, "size", None  # the size alone is checked

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


def verify_existing(path: Path, remote: RemoteFile) -> bool:
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


class Transfer:
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


def fetch(
    session, url: str, headers: dict[str, str], remote: RemoteFile, part: Path, target: Path, repo_id: str,
    transfer: Transfer, retries: int, retry_wait: float,
) -> None:
    """Download one file into `part` (resuming what is there), verify it, move it to `target`."""
    transport_errors = network_errors(session)
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
                    refuse_error_status(remote.name, repo_id, status)
                    if status == 206 and _range_start(response) != have:  # not the part asked for: start over
                        transfer.advance(-have)
                        part.unlink(missing_ok=True)
                        raise _ShortRead(0)
                    if status != 206 and have:  # the server ignored the Range request: the whole file comes again
                        transfer.advance(-have)
                        have = 0
                    _write_body(response, part, have, remote, transfer, repo_id)
            size = part.stat().st_size if part.exists() else 0
            if size < remote.size:  # the connection ended early without an error
                raise _ShortRead(size)
        except (transport_errors + (_ShortRead,)) as exc:
            attempts += 1
            if attempts > retries:
                got = part.stat().st_size if part.exists() else 0
                host = urlsplit(url).netloc
                why = "the connection ended early" if isinstance(exc, _ShortRead) else reason(exc)
                raise PullError(
                    f"{remote.name}: connection to {host} lost after {human_size(got)} of {human_size(remote.size)} "
                    f"({why}); run the same pull again to resume"
                ) from None
            time.sleep(retry_wait * attempts)
            continue
        break
    _verify_and_place(remote, part, target)


def refuse_error_status(where: str, repo_id: str, status: int) -> None:
    """A PullError for an HTTP error answer about `where` (a file, or a file's byte range: app/pull_ranges.py); 416,
    resumable, is the caller's."""
    if status == 404:
        raise PullError(f"{where}: not found in repository {repo_id} (HTTP 404)")
    if status in (401, 403):
        raise PullError(f"{where}: access denied by the hub (HTTP {status}); log in with `hf auth login`")
    if status >= 400:
        raise PullError(f"{where}: the hub answered HTTP {status}")


def _write_body(response, part: Path, have: int, remote: RemoteFile, transfer: Transfer, repo_id: str) -> None:
    """Append the response's bytes to `part` (which holds `have` bytes) as they arrive, so an interruption loses
    nothing; more bytes than the hub lists remove the file."""
    written = 0
    part.parent.mkdir(parents=True, exist_ok=True)
    try:
        with part.open("ab" if have else "wb") as handle:
            for chunk in response.iter_bytes():
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


def _verify_and_place(remote: RemoteFile, part: Path, target: Path) -> None:
    """Check the finished download against the hub's digest (a mismatch removes it), then move it into place."""
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
