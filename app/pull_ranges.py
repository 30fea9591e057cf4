"""Byte ranges of a hub repository's files at one commit, for `decider pull` of an MTP head (app/pull_mtp.py).

Every read asks for exactly [start, end) and gets exactly that or a one-line PullError. A server that ignores Range and
answers 200 with the whole file still works: its body is read only as far as needed, and the reader remembers the waste
so the caller can say so.
"""

from __future__ import annotations

import json
import time

from .models import human_size
from .pull_transfer import PullError, RemoteFile, network_errors, reason, refuse_error_status

SMALL = 64 << 20  # config.json and the shard index are read whole; anything bigger is not one


class _Cut(Exception):
    """A range that did not arrive whole because the connection was lost or ended early: worth asking again."""


class RangeReader:
    """GETs of one checkpoint's files at one commit through huggingface_hub's session (its auth headers, endpoint and
    redirects to the LFS CDN), counting every byte that arrives."""

    def __init__(self, repo: str, commit: str, base: str, token: str | bool | None, retries: int = 3,
                 retry_wait: float = 1.0):
        from huggingface_hub.utils import build_hf_headers, get_session

        self.repo, self.commit, self.base = repo, commit, base
        self.retries, self.retry_wait = retries, retry_wait  # a cut connection: the same range asked again, as a pull does
        self.session = get_session()
        # identity: a compressed body would make the byte counts below meaningless
        self.headers = {**build_hf_headers(token=token, library_name="decider"), "Accept-Encoding": "identity"}
        self.received = 0
        self.ignored: dict[str, list[int]] = {}  # file -> [bytes read, bytes wanted, size] where Range was ignored

    def read(self, remote: RemoteFile, start: int, end: int) -> bytes:
        """Bytes [start, end) of a file, exactly. A server that ignores Range sends the file from its start: that body
        is read only as far as `end`, and the waste is remembered for a warning. A connection lost or cut short is
        tried again `retries` times (the bytes it brought still counted as received)."""
        if end <= start:  # an empty tensor: `bytes=A-(A-1)` is no range at all
            return b""
        for attempt in range(self.retries + 1):
            try:
                return self._read_once(remote, start, end)
            except _Cut as cut:
                if attempt == self.retries:
                    raise PullError(str(cut)) from None
                time.sleep(self.retry_wait * (attempt + 1))
        raise AssertionError("unreachable")

    def _read_once(self, remote: RemoteFile, start: int, end: int) -> bytes:
        from huggingface_hub import hf_hub_url

        whole = (start, end) == (0, remote.size)
        headers = self.headers if whole else {**self.headers, "Range": f"bytes={start}-{end - 1}"}
        url = hf_hub_url(self.repo, remote.name, revision=self.commit, endpoint=self.base)
        where = f"{remote.name} of {self.repo}"
        try:
            with self.session.stream("GET", url, headers=headers, timeout=30.0) as response:
                status = response.status_code
                refuse_error_status(where, self.repo, status)
                if status == 206:
                    got = response.headers.get("Content-Range", "").partition(" ")[2].partition("/")[0]
                    if got != f"{start}-{end - 1}":
                        raise PullError(f"{where}: asked for bytes {start}-{end - 1}, the server sent {got or '?'}")
                    return self._body(response, 0, end - start, True, where)
                if status != 200:
                    raise PullError(f"{where}: the hub answered HTTP {status}")
                before = self.received
                data = self._body(response, start, end, whole, where)
                if not whole:
                    counts = self.ignored.setdefault(remote.name, [0, 0, remote.size])
                    counts[0], counts[1] = counts[0] + self.received - before, counts[1] + end - start
                return data
        except network_errors(self.session) as exc:
            raise _Cut(f"{where}: connection to the hub lost ({reason(exc)})") from None

    def _body(self, response, skip: int, end: int, exact: bool, where: str) -> bytes:
        """Body bytes [skip, end), reading no further than `end` unless `exact` (the body must then end there)."""
        got, pos = bytearray(), 0
        for chunk in response.iter_bytes():
            self.received += len(chunk)
            got += chunk[max(skip - pos, 0):max(end - pos, 0)]
            pos += len(chunk)
            if pos > end or (pos == end and not exact):  # an exact body must end here: one byte more is wrong
                break
        if pos < end:  # the connection ended early without an error
            raise _Cut(f"{where}: the server sent {pos} bytes where {end} were expected")
        if exact and pos != end:
            raise PullError(f"{where}: the server sent {pos} bytes where {end} were expected")
        return bytes(got)

    def json(self, remote: RemoteFile) -> dict:
        """A small JSON file of the checkpoint (config.json, the shard index), whole."""
        if remote.size > SMALL:
            raise PullError(f"{remote.name} of {self.repo} is {human_size(remote.size)}: not a JSON file Decider reads")
        try:
            data = json.loads(self.read(remote, 0, remote.size))
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise PullError(f"{remote.name} of {self.repo} is not a JSON object")
        return data
