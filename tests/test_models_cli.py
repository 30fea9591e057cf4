"""Model management: `decider pull` against a local hub, `models`, `doctor` and `convert`.

The hub is a stdlib HTTP server on 127.0.0.1 speaking the Hugging Face Hub's URL layout, as
huggingface_hub 1.x/2.x requests it:

* GET  /api/models/{repo}/revision/{rev}[?blobs=true]  → model info; `siblings` carry size, blobId and
  (for LFS files) lfs.sha256/size when blobs are asked for; 404 + X-Error-Code RepoNotFound /
  RevisionNotFound otherwise;
* GET  /api/models/{repo}/tree/{rev}[?recursive=…]     → the file listing (snapshot_download uses it);
* HEAD/GET /{repo}/resolve/{rev}/{file}                 → small files directly (ETag = git blob sha1),
  LFS files by 302 to http://localhost:PORT/cdn/{sha256} (another host, as the hub's CDN is) with
  X-Linked-Etag (sha256) and X-Linked-Size; X-Repo-Commit always;
* GET  /cdn/{sha256}                                    → the bytes, with Range support (206).

Faults are switched on per test: drop the connection mid-file once, serve wrong bytes for a file.
The repository served is tests/fixtures/models/qwen35-text (a 2.3 MB export) or the matching
checkpoint; a test that must not touch the network points HF_ENDPOINT at a closed port.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import json
import os
import re
import shutil
import socket
import struct
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
os.environ.setdefault("no_proxy", "127.0.0.1,localhost")

from decider.app import pull as pull_module  # noqa: E402
from decider.app import pull_transfer  # noqa: E402
from decider.app.cli import main  # noqa: E402
from decider.app.models import PARTIAL_DIR, PULL_MANIFEST, known_models, weight_precision  # noqa: E402
from decider.app.pull import PullError, pull  # noqa: E402
from support.models import FIXTURES, model_dir  # noqa: E402
from decider.engine.core.errors import Cancelled  # noqa: E402
from decider.engine.model.folder import MTP_IR, inspect_folder  # noqa: E402

EXPORT = model_dir("qwen35-text")
CHECKPOINT = FIXTURES / "checkpoints" / "qwen35-text"
REPO = "decider-test/qwen35-text-ov"
CKPT_REPO = "decider-test/qwen35-text"
LFS_SUFFIXES = (".bin", ".xml", ".safetensors")
BIG = "openvino_model.bin"
# For the MTP head a pull fetches by Range requests (app/pull_mtp.py): the export with a README naming its checkpoint,
# and checkpoints whose head is sharded, of another geometry, missing, damaged or unusable.
BASED = "decider-test/qwen35-text-ov-based"
SHARDED = "decider-test/qwen35-text-sharded"
WIDE = "decider-test/qwen35-wide"
NO_HEAD = "decider-test/qwen35-text-no-mtp"
BAD_HEADER = "decider-test/qwen35-text-bad-header"
UNUSABLE = "decider-test/qwen35-text-unusable-mtp"
README = f"""---
license: apache-2.0
base_model:
  - {CKPT_REPO}  # the checkpoint it was exported from
tags:
- openvino
---
# qwen35-text-ov
""".encode()
MTP_BIN = "openvino_mtp_model.bin"


# ----- the fixture hub ------------------------------------------------------------------------------------------


class FixtureRepo:
    def __init__(self, folder: Path, commit: str, extra: dict[str, bytes] | None = None, drop: tuple[str, ...] = ()):
        """The files of `folder` (less `drop`), plus or replaced by `extra`."""
        self.commit = commit
        self.files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.name not in drop}
        self.files.update(extra or {})

    def is_lfs(self, name: str) -> bool:
        return name.endswith(LFS_SUFFIXES)

    def blob_id(self, name: str) -> str:
        data = self.files[name]
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

    def sha256(self, name: str) -> str:
        return hashlib.sha256(self.files[name]).hexdigest()


def _safetensors(tensors: dict[str, np.ndarray]) -> bytes:
    from decider.engine.model.safetensors_file import write_tensors

    with tempfile.TemporaryDirectory() as folder:
        write_tensors(Path(folder) / "t.safetensors", tensors)
        return (Path(folder) / "t.safetensors").read_bytes()


def head_repos() -> dict[str, FixtureRepo]:
    """The repositories of the MTP head tests."""
    from decider.engine.model.safetensors_file import read_tensors

    mtp = read_tensors(CHECKPOINT / "mtp.safetensors")
    # Shard 2 holds the head after a 2.4 MB tensor of the main model, which the head's ranges must skip.
    extra = np.zeros(600_000, np.float32)
    shards = {"model-00001-of-00002.safetensors": (CHECKPOINT / "model.safetensors").read_bytes(),
              "model-00002-of-00002.safetensors": _safetensors({**mtp, "model.extra.weight": extra})}
    weight_map = {name: "model-00001-of-00002.safetensors" for name in read_tensors(CHECKPOINT / "model.safetensors")}
    weight_map.update({name: "model-00002-of-00002.safetensors" for name in [*mtp, "model.extra.weight"]})
    index = json.dumps({"metadata": {}, "weight_map": weight_map}).encode()
    wide = json.loads((CHECKPOINT / "config.json").read_text())
    wide["hidden_size"] = 128
    no_mtp = ("mtp.safetensors", "model.safetensors")
    unusable = {name: array for name, array in mtp.items() if "q_proj" not in name}
    return {
        BASED: FixtureRepo(EXPORT, "b" * 40, {"README.md": README}),
        SHARDED: FixtureRepo(CHECKPOINT, "d" * 40, {**shards, "model.safetensors.index.json": index}, no_mtp),
        WIDE: FixtureRepo(CHECKPOINT, "e" * 40, {"config.json": json.dumps(wide).encode()}),
        NO_HEAD: FixtureRepo(CHECKPOINT, "f" * 40, drop=("mtp.safetensors",)),
        BAD_HEADER: FixtureRepo(CHECKPOINT, "1" * 40, {"mtp.safetensors": struct.pack("<Q", 200 << 20) + b"{}"}),
        UNUSABLE: FixtureRepo(CHECKPOINT, "2" * 40, {"mtp.safetensors": _safetensors(unusable)}),
    }


class FixtureHub:
    def __init__(self):
        self.repos = {
            REPO: FixtureRepo(EXPORT, "a" * 40),
            CKPT_REPO: FixtureRepo(CHECKPOINT, "c" * 40),
            **head_repos(),
        }
        self.ignore_range = False  # answer every Range request with 200 and the whole file, as some servers do
        self.open_ended = False  # answer `bytes=A-B` with everything from A on (206), as this hub once did
        self.served: list[tuple[str, int, int]] = []  # (sha256 of the file, start, stop) of every file body sent
        self.drop_once: dict[str, int] = {}  # file name -> the byte where the connection is cut (once, by the body that holds it)
        self.corrupt: set[str] = set()  # file names served with one byte flipped
        self.pace = 0.0  # seconds to wait after each 64 KiB of a file body (a slow link)
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path+query, Range header)
        self.lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def handle(self):
                try:
                    super().handle()
                except ConnectionResetError:  # a client that read what it needed of a 200 and left
                    pass

            def do_HEAD(self):
                hub.handle(self, head=True)

            def do_GET(self):
                hub.handle(self, head=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.cdn = f"http://localhost:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    # --- routing ---
    def handle(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        parts = urlsplit(h.path)
        path, query = unquote(parts.path), parse_qs(parts.query)
        with self.lock:
            self.requests.append(("HEAD" if head else "GET", h.path, h.headers.get("Range")))
        m = re.match(r"^/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?$", path)
        if m:
            return self.model_info(h, m.group(1), m.group(2) or "main", query, head)
        m = re.match(r"^/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?$", path)
        if m:
            return self.tree(h, m.group(1), m.group(2), head)
        m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        if m:
            return self.resolve(h, m.group(1), m.group(2), m.group(3), head)
        m = re.match(r"^/cdn/([0-9a-f]{64})$", path)
        if m:
            for repo in self.repos.values():
                for name in repo.files:
                    if repo.is_lfs(name) and repo.sha256(name) == m.group(1):
                        return self.send_file(h, repo, name, head, {})
        return self.error(h, 404, "EntryNotFound", "Entry not found", head)

    def lookup(self, h, repo_id: str, revision: str, head: bool) -> FixtureRepo | None:
        repo = self.repos.get(repo_id)
        if repo is None:
            self.error(h, 404, "RepoNotFound", "Repository not found", head)
            return None
        if revision not in ("main", repo.commit):
            self.error(h, 404, "RevisionNotFound", f"Invalid rev id: {revision}", head)
            return None
        return repo

    def model_info(self, h, repo_id, revision, query, head):
        repo = self.lookup(h, repo_id, revision, head)
        if repo is None:
            return
        blobs = query.get("blobs", ["false"])[0].lower() == "true"
        siblings = []
        for name, data in repo.files.items():
            entry = {"rfilename": name}
            if blobs:
                entry.update(size=len(data), blobId=repo.blob_id(name))
                if repo.is_lfs(name):
                    entry["lfs"] = {"sha256": repo.sha256(name), "size": len(data), "pointerSize": 134}
            siblings.append(entry)
        owner = repo_id.split("/")[0]
        self.send_json(h, {
            "_id": "0" * 24, "id": repo_id, "modelId": repo_id, "author": owner, "sha": repo.commit,
            "lastModified": "2026-05-01T00:00:00.000Z", "createdAt": "2026-05-01T00:00:00.000Z",
            "private": False, "disabled": False, "gated": False, "downloads": 0, "likes": 0,
            "tags": ["openvino"], "library_name": "openvino", "siblings": siblings,
        }, head, {"X-Repo-Commit": repo.commit})

    def tree(self, h, repo_id, revision, head):
        repo = self.lookup(h, repo_id, revision, head)
        if repo is None:
            return
        items = []
        for name, data in repo.files.items():
            item = {"type": "file", "oid": repo.blob_id(name), "size": len(data), "path": name}
            if repo.is_lfs(name):
                item["lfs"] = {"oid": repo.sha256(name), "size": len(data), "pointerSize": 134}
            items.append(item)
        self.send_json(h, items, head, {"X-Repo-Commit": repo.commit})

    def resolve(self, h, repo_id, revision, name, head):
        repo = self.lookup(h, repo_id, revision, head)
        if repo is None:
            return
        if name not in repo.files:
            return self.error(h, 404, "EntryNotFound", f"{name} does not exist on \"{revision}\"", head)
        headers = {"X-Repo-Commit": repo.commit}
        if repo.is_lfs(name):
            sha = repo.sha256(name)
            h.send_response(302)
            h.send_header("Location", f"{self.cdn}/cdn/{sha}")  # another host, like the hub's LFS CDN
            h.send_header("X-Repo-Commit", repo.commit)
            h.send_header("X-Linked-Etag", f'"{sha}"')
            h.send_header("X-Linked-Size", str(len(repo.files[name])))
            h.send_header("ETag", f'"{sha}"')
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        headers["ETag"] = f'"{repo.blob_id(name)}"'
        return self.send_file(h, repo, name, head, headers)

    # --- responses ---
    def send_file(self, h, repo: FixtureRepo, name: str, head: bool, headers: dict) -> None:
        data = repo.files[name]
        if name in self.corrupt:
            middle = len(data) // 2
            data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:]
        start, stop = 0, len(data)
        match = re.match(r"bytes=(\d+)-(\d*)$", h.headers.get("Range") or "")
        if match and not self.ignore_range:
            start = int(match.group(1))
            stop = min(int(match.group(2)) + 1, len(data)) if match.group(2) else len(data)  # the end is inclusive
            stop = len(data) if self.open_ended else stop
            if start >= len(data) or stop <= start:
                h.send_response(416)
                h.send_header("Content-Range", f"bytes */{len(data)}")
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
            h.send_response(206)
            h.send_header("Content-Range", f"bytes {start}-{stop - 1}/{len(data)}")
        else:
            h.send_response(200)
        body = data[start:stop]
        if not head:
            with self.lock:
                self.served.append((repo.sha256(name), start, stop))
        for key, value in headers.items():
            h.send_header(key, value)
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if head:
            return
        with self.lock:  # a cut inside this body happens now; one further on waits for the request that reaches it
            cut = self.drop_once.get(name)
            if cut is not None and start <= cut < stop:
                del self.drop_once[name]
            else:
                cut = None
        if cut is not None:
            h.wfile.write(body[: max(0, cut - start)])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        try:
            if self.pace:
                for offset in range(0, len(body), 64 * 1024):
                    h.wfile.write(body[offset: offset + 64 * 1024])
                    h.wfile.flush()
                    time.sleep(self.pace)
                return
            h.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # a client that read what it needed of a 200 and left
            h.close_connection = True

    def send_json(self, h, payload, head: bool, headers: dict) -> None:
        body = json.dumps(payload).encode()
        h.send_response(200)
        for key, value in headers.items():
            h.send_header(key, value)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head:
            h.wfile.write(body)

    def error(self, h, status: int, code: str, message: str, head: bool) -> None:
        body = json.dumps({"error": message}).encode()
        h.send_response(status)
        h.send_header("X-Error-Code", code)
        h.send_header("X-Error-Message", message)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head:
            h.wfile.write(body)

    def gets(self, name_or_sha: str) -> list[tuple[str, str, str | None]]:
        return [r for r in self.requests if r[0] == "GET" and r[1].endswith(name_or_sha)]


@pytest.fixture(scope="module")
def hub_server():
    server = FixtureHub()
    yield server
    server.close()


@pytest.fixture
def hub(hub_server, monkeypatch, tmp_path):
    """The hub as HF_ENDPOINT, faults cleared, and fresh Decider data/config dirs for this test."""
    hub_server.drop_once.clear()
    hub_server.corrupt.clear()
    hub_server.requests.clear()
    hub_server.served.clear()
    hub_server.ignore_range = hub_server.open_ended = False
    monkeypatch.setenv("HF_ENDPOINT", hub_server.url)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("DECIDER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DECIDER_CONFIG_DIR", str(tmp_path / "config"))
    return hub_server


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def pulled(tmp_path: Path, repo: str = REPO) -> Path:
    return tmp_path / "data" / "models" / repo.replace("/", "--")


def same_files(folder: Path, source: Path) -> bool:
    return all((folder / p.name).read_bytes() == p.read_bytes() for p in source.iterdir() if p.is_file())


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----- pull -----------------------------------------------------------------------------------------------------


def test_pull_downloads_verifies_and_says_the_export_is_ready(hub, capsys, tmp_path):
    code, out, err = run(capsys, "pull", REPO)
    assert code == 0, err
    folder = pulled(tmp_path)
    assert same_files(folder, EXPORT)
    assert "✓ ready OpenVINO export: text (qwen3_5_text), weights fp32" in out
    assert "all verified" in out and f"decider ask --model {folder}" in out
    manifest = json.loads((folder / PULL_MANIFEST).read_text())
    assert manifest["complete"] and manifest["commit"] == "a" * 40 and len(manifest["files"]) == len(hub.repos[REPO].files)
    assert not (folder / PARTIAL_DIR).exists()
    # One info call with the hashes, files fetched at the resolved commit, LFS files through the CDN redirect.
    assert any(r[1].startswith(f"/api/models/{REPO}") and "blobs=" in r[1] for r in hub.requests)
    assert hub.gets(f"/resolve/{'a' * 40}/tokenizer.json")
    assert hub.gets(hub.repos[REPO].sha256(BIG))

    # A second pull finds everything in place and downloads nothing.
    hub.requests.clear()
    code, out, _ = run(capsys, "pull", REPO)
    assert code == 0 and "0 B downloaded" in out and "already there" in out
    assert not [r for r in hub.requests if "/resolve/" in r[1] or "/cdn/" in r[1]]


def test_pull_resumes_an_interrupted_transfer_in_the_next_pull(hub, tmp_path):
    hub.drop_once[BIG] = 700_000
    with pytest.raises(PullError, match=rf"{BIG}: connection to 127\.0\.0\.1:\d+ lost .*run the same pull again to resume"):
        pull(REPO, retries=0)
    folder = pulled(tmp_path)
    parts = list((folder / PARTIAL_DIR).glob(f"{BIG}.*.part"))
    assert len(parts) == 1
    kept = parts[0].stat().st_size
    assert 0 < kept <= 700_000
    assert not (folder / BIG).exists()

    seen = []
    result = pull(REPO, progress=lambda done, total: seen.append((done, total)))
    assert (folder / BIG).read_bytes() == (EXPORT / BIG).read_bytes()
    assert same_files(folder, EXPORT)
    assert result.resumed_bytes == kept
    ranges = [r[2] for r in hub.gets(hub.repos[REPO].sha256(BIG))]
    assert ranges == [None, f"bytes={kept}-"]  # the second pull asked only for the rest
    total = sum(len(d) for d in hub.repos[REPO].files.values())
    assert seen[-1] == (total, total) and all(a <= b for (a, _), (b, _) in zip(seen, seen[1:]))


def test_pull_retries_a_dropped_connection_within_one_call(hub, tmp_path):
    hub.drop_once[BIG] = 300_000
    result = pull(REPO, retry_wait=0.0)
    assert (pulled(tmp_path) / BIG).read_bytes() == (EXPORT / BIG).read_bytes()
    ranges = [r[2] for r in hub.gets(hub.repos[REPO].sha256(BIG))]
    assert ranges[0] is None and re.fullmatch(r"bytes=\d+-", ranges[1])
    assert result.entry is not None and result.entry.kind == "export"


def test_pull_detects_a_corrupt_lfs_file_by_its_sha256(hub, capsys, tmp_path):
    hub.corrupt.add(BIG)
    code, _, err = run(capsys, "pull", REPO)
    assert code == 1
    assert err.count("\n") == 1 and f"{BIG}: sha256 mismatch" in err and hub.repos[REPO].sha256(BIG) in err
    folder = pulled(tmp_path)
    assert not (folder / BIG).exists() and not list((folder / PARTIAL_DIR).glob("*.part"))


def test_pull_detects_a_corrupt_small_file_by_its_git_blob_id(hub, tmp_path):
    hub.corrupt.add("tokenizer.json")
    with pytest.raises(PullError, match=r"tokenizer\.json: git blob sha1 mismatch"):
        pull(REPO)


def test_pull_of_a_missing_repository(hub, capsys):
    code, _, err = run(capsys, "pull", "decider-test/no-such-model")
    assert code == 1
    assert err.startswith("decider: error: repository decider-test/no-such-model not found on http://127.0.0.1:")
    assert err.count("\n") == 1


def test_pull_of_a_missing_revision(hub, capsys):
    code, _, err = run(capsys, "pull", REPO, "--revision", "v9")
    assert code == 1 and "revision 'v9' not found in repository decider-test/qwen35-text-ov" in err


def test_pull_without_network_says_the_hub_cannot_be_reached(hub, capsys, monkeypatch):
    endpoint = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    code, _, err = run(capsys, "pull", REPO)
    assert code == 1 and err.startswith(f"decider: error: cannot reach the hub at {endpoint} (")
    assert err.count("\n") == 1


def test_offline_mode_uses_a_complete_copy_or_says_it_is_missing(hub, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = run(capsys, "pull", REPO)
    assert code == 1 and "offline mode (HF_HUB_OFFLINE=1) and decider-test/qwen35-text-ov is not downloaded yet" in err
    assert not hub.requests
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert run(capsys, "pull", REPO)[0] == 0
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.requests.clear()
    code, out, _ = run(capsys, "pull", REPO)
    assert code == 0 and out.startswith("offline: using the copy") and "ready OpenVINO export" in out
    assert not hub.requests


def test_cancel_keeps_what_arrived_for_the_next_pull(hub, tmp_path, monkeypatch):
    monkeypatch.setattr(pull_transfer, "CHUNK", 64 * 1024)
    state = {"bytes": 0}

    def progress(done, total):
        state["bytes"] = done

    with pytest.raises(Cancelled, match="run the same pull again to resume"):
        pull(REPO, progress=progress, cancel=lambda: state["bytes"] > 1_000_000)
    folder = pulled(tmp_path)
    assert list((folder / PARTIAL_DIR).glob("*.part"))
    result = pull(REPO)
    assert result.resumed_bytes > 0 and same_files(folder, EXPORT)


def test_disk_full_is_one_line_naming_the_file(hub, capsys, monkeypatch):
    def full(handle, chunk):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pull_transfer, "_append", full)
    code, _, err = run(capsys, "pull", REPO)
    assert code == 1 and "disk full while writing " in err and PARTIAL_DIR in err and err.count("\n") == 1


def test_not_enough_space_is_said_before_downloading(hub, capsys, monkeypatch):
    monkeypatch.setattr(pull_module, "_free_space", lambda path: 1000)
    code, _, err = run(capsys, "pull", REPO)
    assert code == 1 and "not enough disk space for decider-test/qwen35-text-ov" in err
    assert not [r for r in hub.requests if "/resolve/" in r[1] or "/cdn/" in r[1]]


def test_a_new_revision_replaces_changed_files_and_drops_removed_ones(hub, tmp_path):
    pull(REPO)
    folder = pulled(tmp_path)
    repo = hub.repos[REPO]
    saved = (repo.commit, dict(repo.files))
    try:
        repo.commit = "b" * 40
        del repo.files["generation_config.json"]
        repo.files["tokenizer_config.json"] = repo.files["tokenizer_config.json"].replace(b"{", b"{ ", 1)
        repo.files["NOTES.md"] = b"new in this revision\n"
        hub.requests.clear()
        result = pull(REPO)
        assert result.commit == "b" * 40 and result.reused_files == len(repo.files) - 2
        assert not (folder / "generation_config.json").exists()
        assert (folder / "NOTES.md").read_bytes() == b"new in this revision\n"
        assert (folder / "tokenizer_config.json").read_bytes() == repo.files["tokenizer_config.json"]
        assert not hub.gets(repo.sha256(BIG))  # unchanged weights are not fetched again
    finally:
        repo.commit, repo.files = saved


def test_pull_of_a_checkpoint_says_to_convert_it(hub, capsys, tmp_path):
    code, out, _ = run(capsys, "pull", CKPT_REPO)
    assert code == 0
    assert "Hugging Face checkpoint (qwen3_5_text)" in out
    assert f"decider convert {pulled(tmp_path, CKPT_REPO)}" in out


def test_bad_repo_id_is_a_usage_error(hub, capsys):
    code, _, err = run(capsys, "pull", "../etc")
    assert code == 2 and "is not a repository id" in err


def test_the_fixture_hub_speaks_huggingface_hub_s_protocol(hub, tmp_path):
    """The real client downloads the same repository from the fixture server, byte for byte."""
    from huggingface_hub import hf_hub_download, snapshot_download

    local = tmp_path / "snapshot"
    snapshot_download(REPO, local_dir=local, endpoint=hub.url)
    assert same_files(local, EXPORT)
    path = hf_hub_download(REPO, BIG, cache_dir=tmp_path / "cache", endpoint=hub.url)
    assert Path(path).read_bytes() == (EXPORT / BIG).read_bytes()
    assert any(r[0] == "HEAD" and "/resolve/" in r[1] for r in hub.requests)


# ----- the MTP head of a pulled export ---------------------------------------------------------------------------


def asked(hub, repo: str) -> list[tuple[str, str, str | None]]:
    """Every request about `repo`: its API, its files and its LFS files on the CDN."""
    files = hub.repos[repo]
    shas = {files.sha256(name) for name in files.files if files.is_lfs(name)}
    return [r for r in hub.requests
            if f"/{repo}/" in urlsplit(r[1]).path + "/" or urlsplit(r[1]).path.rsplit("/", 1)[-1] in shas]


def served(hub, data: bytes) -> list[tuple[int, int]]:
    """The byte ranges [start, stop) of every body of the file holding `data` that the hub sent."""
    sha = hashlib.sha256(data).hexdigest()
    return [(start, stop) for digest, start, stop in hub.served if digest == sha]


def header_end(data: bytes) -> int:
    return 8 + struct.unpack("<Q", data[:8])[0]


def assert_same_head(folder: Path, tmp_path: Path, run_both: bool = False) -> None:
    """The head in `folder` is the one `decider convert` builds from the fixture checkpoint: the same weights, and
    (run_both) the same output on a random input."""
    from decider.app.mtp_export import export_mtp

    reference = tmp_path / "reference-head"
    reference.mkdir(exist_ok=True)
    export_mtp(CHECKPOINT, reference)
    assert (folder / MTP_BIN).read_bytes() == (reference / MTP_BIN).read_bytes()
    if run_both:
        import openvino as ov

        core, rng = ov.Core(), np.random.default_rng(0)
        inputs = {"inputs_embeds": rng.standard_normal((1, 5, 64), dtype=np.float32),
                  "hidden_states": rng.standard_normal((1, 5, 64), dtype=np.float32),
                  "position_ids": np.arange(5, dtype=np.int64)[None]}
        outputs = [core.compile_model(core.read_model(path / MTP_IR), "CPU")(inputs)[0] for path in (folder, reference)]
        np.testing.assert_array_equal(outputs[0], outputs[1])


def no_head(folder: Path) -> bool:
    return not any((folder / name).exists() for name in (MTP_IR, MTP_BIN, ".decider-mtp.tmp"))


def warnings_in(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("!")]


def test_pull_of_an_export_fetches_only_the_head_of_the_checkpoint_its_readme_names(hub, capsys, tmp_path):
    code, out, err = run(capsys, "pull", BASED)
    assert code == 0, err
    folder = pulled(tmp_path, BASED)
    line = next(line for line in out.splitlines() if "MTP head" in line)
    assert re.fullmatch(rf"✓ MTP head: fetched [\d.]+ KB of {CKPT_REPO} \(commit c{{12}}\) → {MTP_IR} "
                        r"\(drafts for --draft mtp\)", line), line
    assert not warnings_in(out)
    assert_same_head(folder, tmp_path, run_both=True)
    assert inspect_folder(folder).mtp_ir == folder / MTP_IR
    assert not (folder / ".decider-mtp.tmp").exists()
    # model.safetensors: its header only (to learn that it holds no mtp.* tensor), never a byte of its data.
    ckpt = hub.repos[CKPT_REPO].files
    model, mtp = served(hub, ckpt["model.safetensors"]), served(hub, ckpt["mtp.safetensors"])
    assert model and all(stop <= header_end(ckpt["model.safetensors"]) for _, stop in model)
    assert sum(stop - start for start, stop in mtp) <= len(ckpt["mtp.safetensors"])
    assert all(r[2] is not None for r in hub.gets(hub.repos[CKPT_REPO].sha256("model.safetensors")))
    record = json.loads((folder / PULL_MANIFEST).read_text())["mtp_head"]
    moved = sum(stop - start for start, stop in model + mtp) + len(ckpt["config.json"])
    assert record == {"repo": CKPT_REPO, "commit": "c" * 40, "bytes": moved}

    # A second pull fetches nothing for the head and keeps its record.
    hub.requests.clear()
    code, out, _ = run(capsys, "pull", BASED)
    assert code == 0 and not asked(hub, CKPT_REPO)
    assert f"✓ MTP head: {MTP_IR} already there (from {CKPT_REPO}, commit {'c' * 12})" in out
    assert json.loads((folder / PULL_MANIFEST).read_text())["mtp_head"] == record


def test_mtp_from_names_the_checkpoint_of_an_export_whose_readme_does_not(hub, capsys, tmp_path):
    code, out, _ = run(capsys, "pull", REPO)
    assert code == 0 and "MTP" not in out and not asked(hub, CKPT_REPO)  # nothing names a checkpoint: nothing said
    code, out, _ = run(capsys, "pull", REPO, "--mtp-from", CKPT_REPO)
    assert code == 0 and "✓ MTP head: fetched " in out and not warnings_in(out)
    assert_same_head(pulled(tmp_path), tmp_path)


def test_no_mtp_and_offline_mode_ask_the_checkpoint_nothing(hub, capsys, tmp_path, monkeypatch):
    code, out, _ = run(capsys, "pull", BASED, "--no-mtp")
    folder = pulled(tmp_path, BASED)
    assert code == 0 and "MTP" not in out and not asked(hub, CKPT_REPO) and no_head(folder)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.requests.clear()
    code, out, _ = run(capsys, "pull", BASED)
    assert code == 0 and out.startswith("offline: using the copy") and not hub.requests and no_head(folder)
    assert warnings_in(out) == ["! MTP head not fetched: offline mode (HF_HUB_OFFLINE=1); "
                                "pull again online to fetch it"]


def test_mtp_flags_are_checked_before_anything_is_downloaded(hub, capsys):
    from decider.app.cli_parser import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["pull", REPO, "--mtp-from", CKPT_REPO, "--no-mtp"])
    code, _, err = run(capsys, "pull", REPO, "--mtp-from", "../etc")
    assert code == 2 and "'../etc' is not a repository id" in err and not hub.requests


def test_a_checkpoint_of_another_geometry_is_a_warning_and_writes_nothing(hub, capsys, tmp_path):
    code, out, _ = run(capsys, "pull", REPO, "--mtp-from", WIDE)
    assert code == 0 and "✓ ready OpenVINO export" in out
    assert warnings_in(out) == [
        f"! MTP head not fetched from {WIDE} (named by --mtp-from): {WIDE} does not match {REPO} "
        "(hidden_size 128 vs 64): not the checkpoint it was made from"]
    folder = pulled(tmp_path)
    assert no_head(folder) and "mtp_head" not in json.loads((folder / PULL_MANIFEST).read_text())
    wide = hub.repos[WIDE]
    assert not [r for r in asked(hub, WIDE) if r[1].endswith(tuple(wide.sha256(n) for n in wide.files))]


def test_a_connection_cut_during_the_head_fetch_is_asked_again(hub, capsys, tmp_path):
    mtp = hub.repos[CKPT_REPO].files["mtp.safetensors"]
    cut = header_end(mtp) + 10  # inside the head's tensors, not the header the first requests read
    hub.drop_once["mtp.safetensors"] = cut
    code, out, _ = run(capsys, "pull", BASED)
    assert code == 0 and "✓ MTP head: fetched " in out and not warnings_in(out)
    assert "mtp.safetensors" not in hub.drop_once  # the cut happened
    assert_same_head(pulled(tmp_path, BASED), tmp_path)
    holding = [(start, stop) for start, stop in served(hub, mtp) if start <= cut < stop]
    assert len(holding) == 2 and holding[0] == holding[1]  # the same range, asked again


def test_a_range_cut_short_with_no_tries_left_is_one_line(hub, tmp_path):
    from decider.app.pull import remote_files
    from decider.app.pull_ranges import RangeReader

    commit, files = remote_files(CKPT_REPO, None, hub.url)
    remote = next(f for f in files if f.name == "mtp.safetensors")
    hub.drop_once["mtp.safetensors"] = 100
    reader = RangeReader(CKPT_REPO, commit, hub.url, None, retries=0)
    with pytest.raises(PullError, match=rf"^mtp\.safetensors of {CKPT_REPO}: (connection to the hub lost|the server sent "
                                        r"\d+ bytes where 200 were expected)"):
        reader.read(remote, 50, 250)
    assert reader.read(remote, 50, 250) == hub.repos[CKPT_REPO].files["mtp.safetensors"][50:250]  # the cut was once


def test_a_server_that_ignores_range_still_yields_the_head_and_says_so(hub, capsys, tmp_path):
    hub.ignore_range = True
    code, out, _ = run(capsys, "pull", BASED)
    assert code == 0 and "✓ MTP head: fetched " in out
    assert_same_head(pulled(tmp_path, BASED), tmp_path)
    found = warnings_in(out)
    assert len(found) == 2 and all("the server ignored HTTP Range requests" in w for w in found)
    assert found[0].startswith(f"! model.safetensors of {CKPT_REPO}:") and "mtp.safetensors" in found[1]


def test_a_checkpoint_without_mtp_tensors_has_no_head_to_fetch(hub, capsys, tmp_path):
    code, out, _ = run(capsys, "pull", REPO, "--mtp-from", NO_HEAD)
    assert code == 0 and not warnings_in(out) and no_head(pulled(tmp_path))
    assert f"• no MTP head in {NO_HEAD} (no mtp.* tensors in its safetensors files)" in out.splitlines()


def test_a_sharded_checkpoint_is_read_only_in_the_shard_that_holds_the_head(hub, capsys, tmp_path):
    code, out, _ = run(capsys, "pull", REPO, "--mtp-from", SHARDED)
    assert code == 0 and "✓ MTP head: fetched " in out and not warnings_in(out)
    assert_same_head(pulled(tmp_path), tmp_path)
    files = hub.repos[SHARDED].files
    assert not served(hub, files["model-00001-of-00002.safetensors"])  # the index says the head is not there
    shard = files["model-00002-of-00002.safetensors"]
    ranges = served(hub, shard)
    extra = (header_end(shard), header_end(shard) + 2_400_000)  # the main model's tensor before the head's
    assert all(stop <= extra[0] or start >= extra[1] for start, stop in ranges)
    assert sum(stop - start for start, stop in ranges) == len(shard) - 2_400_000
    assert hub.gets(f"/resolve/{'d' * 40}/model.safetensors.index.json")


@pytest.mark.parametrize("repo, why", [
    (BAD_HEADER, f"mtp.safetensors of {BAD_HEADER}: not a safetensors file (header of {200 << 20} bytes)"),
    (UNUSABLE, "lacks"),
    ("decider-test/no-such-checkpoint", "repository decider-test/no-such-checkpoint not found on http://127.0.0.1:"),
])
def test_a_head_that_cannot_be_had_is_one_warning_and_the_pull_succeeds(hub, capsys, tmp_path, repo, why):
    code, out, _ = run(capsys, "pull", REPO, "--mtp-from", repo)
    assert code == 0 and "✓ ready OpenVINO export" in out and no_head(pulled(tmp_path))
    found = warnings_in(out)
    assert len(found) == 1 and found[0].startswith(f"! MTP head not fetched from {repo} (named by --mtp-from): ")
    assert why in found[0]


def test_a_range_answered_with_other_bytes_is_refused(hub, capsys, tmp_path):
    hub.open_ended = True
    code, out, _ = run(capsys, "pull", BASED)
    assert code == 0 and no_head(pulled(tmp_path, BASED))
    assert warnings_in(out) == [f"! MTP head not fetched: model.safetensors of {CKPT_REPO}: asked for bytes 0-7, "
                                f"the server sent 0-{len(hub.repos[CKPT_REPO].files['model.safetensors']) - 1}"]


def test_a_readme_naming_a_missing_checkpoint_is_one_warning(hub, capsys, tmp_path, monkeypatch):
    monkeypatch.delitem(hub.repos, CKPT_REPO)
    code, out, _ = run(capsys, "pull", BASED)
    assert code == 0 and no_head(pulled(tmp_path, BASED))
    assert warnings_in(out) == [f"! MTP head not fetched: repository {CKPT_REPO} not found on {hub.url} "
                                "(a private repository needs `hf auth login`)"]


def test_the_head_decider_added_is_kept_by_a_pull_of_a_new_revision(hub, capsys, tmp_path):
    assert run(capsys, "pull", BASED)[0] == 0
    folder = pulled(tmp_path, BASED)
    head = (folder / MTP_BIN).read_bytes()
    repo = hub.repos[BASED]
    saved = (repo.commit, dict(repo.files))
    try:
        repo.commit = "9" * 40
        del repo.files["generation_config.json"]
        hub.requests.clear()
        code, out, _ = run(capsys, "pull", BASED)
        assert code == 0 and not (folder / "generation_config.json").exists()  # a file the repository dropped goes
        assert (folder / MTP_BIN).read_bytes() == head and (folder / MTP_IR).is_file()  # the head stays
        assert not asked(hub, CKPT_REPO) and "already there" in out
        manifest = json.loads((folder / PULL_MANIFEST).read_text())
        assert manifest["commit"] == "9" * 40 and manifest["mtp_head"]["repo"] == CKPT_REPO
    finally:
        repo.commit, repo.files = saved


@pytest.mark.parametrize("readme, expected", [
    ("---\nbase_model: Qwen/Qwen3.5-0.8B\n---\n", "Qwen/Qwen3.5-0.8B"),
    ("---\nlicense: x\nbase_model: 'Qwen/Qwen3.5-0.8B'  # quoted\n---\n", "Qwen/Qwen3.5-0.8B"),
    ("---\nbase_model: [Qwen/A, Qwen/B]\n---\n", "Qwen/A"),
    ("---\nbase_model:\n- Qwen/A\n- Qwen/B\n---\n", "Qwen/A"),
    ("---\ntags: [x]\n---\nbase_model: Qwen/A\n", None),  # after the front matter
    ("base_model: Qwen/A\n", None),  # no front matter
    ("---\ncard:\n  base_model: Qwen/A\n---\n", None),  # not the top-level key
    ("---\nbase_model: ../../etc\n---\n", None),
    ("---\nbase_model:\n---\n", None),
    (None, None),
])
def test_base_model_is_read_from_the_readme_s_front_matter(tmp_path, readme, expected):
    from decider.app.pull_mtp import base_model

    if readme is not None:
        (tmp_path / "README.md").write_text(readme)
    assert base_model(tmp_path) == expected


def test_neighbouring_ranges_are_fetched_together():
    from decider.app.pull_mtp import spans

    assert spans([(30, 40), (0, 10), (10, 20), (5_000_000, 5_000_010)]) == [(0, 40), (5_000_000, 5_000_010)]
    assert spans([(0, 10), (10, 20), (30, 40)], gap=1) == [(0, 20), (30, 40)]
    assert spans([]) == []


# ----- models ---------------------------------------------------------------------------------------------------


def test_models_lists_pulled_and_recent_folders_and_flags_a_broken_one(hub, capsys, tmp_path):
    assert run(capsys, "pull", REPO)[0] == 0
    broken = tmp_path / "broken-export"
    shutil.copytree(EXPORT, broken)
    (broken / BIG).unlink()
    config = tmp_path / "config"
    config.mkdir()
    (config / "gui-settings.json").write_text(json.dumps({"last_model": str(broken), "recent_models": [str(broken), str(EXPORT)]}))
    code, out, _ = run(capsys, "models")
    assert code == 0
    assert f"✓ {REPO}  (downloaded)" in out
    # The format suits every device; one this machine lacks is marked as such (never a bare "GPU yes" without a GPU).
    from decider.app.models import devices_here

    seen = {d.split(".")[0] for d in devices_here()}

    def here(device: str) -> str:
        return "" if device in seen else " (none here)"

    assert f"text (qwen3_5_text) · weights fp32 · CPU yes{here('CPU')} · GPU yes{here('GPU')} · NPU works{here('NPU')}" in out
    assert f"OpenVINO sees: {', '.join(devices_here())}" in out
    assert "✗ broken-export  (last used, recent)" in out
    assert f"✗ {broken / BIG}: missing file" in out
    assert "✓ qwen35-text  (recent)" in out

    code, out, _ = run(capsys, "models", "--json")
    entries = {e["name"]: e for e in json.loads(out)}
    assert entries[REPO]["ok"] and entries[REPO]["repo_id"] == REPO and entries[REPO]["commit"] == "a" * 40
    assert entries[REPO]["devices"] == {"CPU": "yes", "GPU": "yes", "NPU": "works"}
    assert entries[REPO]["size_bytes"] >= sum(p.stat().st_size for p in EXPORT.iterdir())
    assert not entries["broken-export"]["ok"] and BIG in entries["broken-export"]["error"]


def test_models_tolerates_odd_settings_files(hub, tmp_path, monkeypatch):
    import decider.app.config

    monkeypatch.setattr(decider.app.config, "DEMO_MODEL_DIR", tmp_path / "no-demo-model")
    monkeypatch.setattr(decider.app.config, "SEEING_DEMO_MODEL_DIR", tmp_path / "no-demo-model")
    config = tmp_path / "config"
    config.mkdir()
    (config / "gui_settings.json").write_text(json.dumps({"recent_models": [{"path": str(EXPORT)}, 3, None], "last_model": 7}))
    (config / "gui-settings.json").write_text("{not json")
    entries = known_models()
    assert [e.sources for e in entries] == [["recent"]] and entries[0].ok


def test_models_labels_the_demo_model(hub, tmp_path, monkeypatch):
    import decider.app.config

    monkeypatch.setattr(decider.app.config, "DEMO_MODEL_DIR", EXPORT)
    monkeypatch.setattr(decider.app.config, "SEEING_DEMO_MODEL_DIR", tmp_path / "no-demo-model")
    entries = known_models()
    assert [(e.name, e.sources, e.kind) for e in entries] == [("qwen35-text", ["demo model"], "export")]


def test_models_lists_and_labels_the_seeing_demo_model(hub, tmp_path, monkeypatch):
    import decider.app.config
    from decider.app.config import SEEING_DEMO_MODEL_DIR, demo_label

    monkeypatch.setattr(decider.app.config, "DEMO_MODEL_DIR", tmp_path / "no-demo-model")
    entries = known_models()
    assert [(e.sources, e.kind, e.layout) for e in entries] == [(["seeing demo model"], "export", "vision-language")]
    assert demo_label(SEEING_DEMO_MODEL_DIR) == "seeing demo model" and demo_label(EXPORT) is None


def test_weight_precision_reads_nncf_s_record_and_falls_back_to_constants(tmp_path):
    const = '<layer id="{i}" name="w{i}" type="Const" version="opset1">\n\t<data element_type="{t}" shape="{s}" offset="0" size="{n}" />'
    body = "\n".join(const.format(i=i, t=t, s=s, n=n) for i, (t, s, n) in enumerate(
        [("i4", "128, 64", 4096), ("u8", "1856, 64", 118784), ("f16", "128, 1", 256), ("i64", "2", 16)]))
    record = ('<rt_info><nncf><weight_compression><group_size value="-1" /><mode value="int4_sym" />'
              '<ratio value="1.0" /><backup_mode value="int8_asym" /></weight_compression></nncf></rt_info>')
    xml = tmp_path / "m.xml"
    xml.write_text(f"<net>\n{body}\n{record}\n</net>")
    precision = weight_precision(xml)
    assert precision.label == "int4-sym channel-wise (+int8_asym)" and precision.npu_preferred
    xml.write_text(f"<net>\n{body}\n</net>")
    precision = weight_precision(xml)
    assert precision.source == "constants" and precision.label == "int4-sym channel-wise (+int8)" and precision.npu_preferred
    xml.write_text("<net>\n" + body.replace('"i4" shape="128, 64"', '"u4" shape="128, 2, 32"') + "\n</net>")
    assert weight_precision(xml).label == "int4-asym group-wise (+int8)" and not weight_precision(xml).npu_preferred
    assert weight_precision(EXPORT / "openvino_model.xml").label == "fp32"


# ----- doctor ---------------------------------------------------------------------------------------------------


def test_doctor_on_a_good_folder(capsys):
    code, out, _ = run(capsys, "doctor", str(EXPORT))
    assert code == 0, out
    assert out.startswith("✓ OpenVINO ") and "✓ CPU: " in out
    assert "✓ folder complete: text layout (openvino_model.xml), model_type qwen3_5_text" in out
    assert "vocabulary: tokenizer 1,736 ids, model 1,856 logits" in out
    assert "context length 32,768 tokens" in out
    assert "weights fp32" in out
    assert "on NPU: prompts up to 1024 tokens" in out
    assert "✗" not in out


def test_doctor_reports_the_npu_limit_asked_for(capsys):
    code, out, _ = run(capsys, "doctor", str(model_dir("qwen35-vl")), "--npu-max-prompt", "2048")
    assert code == 0 and "vision-language layout (openvino_language_model.xml, openvino_text_embeddings_model.xml)" in out
    assert "prompts up to 2048 tokens" in out


def test_doctor_on_a_broken_folder_names_the_file_and_the_fix(capsys, tmp_path):
    broken = tmp_path / "truncated"
    shutil.copytree(EXPORT, broken)
    with open(broken / BIG, "r+b") as handle:
        handle.truncate(1000)
    code, out, _ = run(capsys, "doctor", str(broken))
    assert code == 1
    line = next(line for line in out.splitlines() if line.startswith("✗"))
    assert f"{broken / BIG}: truncated" in line and "→ fix: " in line


def test_doctor_on_a_folder_without_tokenizer(capsys, tmp_path):
    broken = tmp_path / "no-tokenizer"
    shutil.copytree(EXPORT, broken)
    (broken / "tokenizer.json").unlink()
    code, out, _ = run(capsys, "doctor", str(broken))
    assert code == 1 and "tokenizer.json: missing file" in out and "→ fix: copy tokenizer.json" in out


def test_doctor_on_a_checkpoint_says_to_convert(capsys):
    code, out, _ = run(capsys, "doctor", str(CHECKPOINT))
    assert code == 1 and "is a Hugging Face checkpoint, not an OpenVINO export → fix: decider convert" in out


def test_doctor_json(capsys):
    code, out, _ = run(capsys, "doctor", "--json")
    body = json.loads(out)
    assert code == 0 and body["ok"] and body["checks"][0]["text"].startswith("OpenVINO ")


# ----- convert --------------------------------------------------------------------------------------------------


def test_convert_without_optimum_says_how_to_install_it(capsys, tmp_path, monkeypatch):
    from decider.app import convert as convert_module

    monkeypatch.setattr(convert_module, "optimum_available", lambda: False)
    code, _, err = run(capsys, "convert", str(CHECKPOINT), str(tmp_path / "out"))
    assert code == 1 and 'pip install "decider[convert]"' in err and err.count("\n") == 1


def test_convert_refuses_an_export_and_a_used_output_folder(capsys, tmp_path):
    code, _, err = run(capsys, "convert", str(EXPORT), str(tmp_path / "out"))
    assert code == 2 and "already an OpenVINO export" in err
    used = tmp_path / "used"
    used.mkdir()
    (used / "x").write_text("x")
    code, _, err = run(capsys, "convert", str(CHECKPOINT), str(used))
    assert code == 2 and "exists and is not empty" in err


def _optimum_importable() -> bool:
    try:
        return importlib.util.find_spec("optimum.intel") is not None
    except (ImportError, ValueError):
        return False


def with_exporter(test):
    """A test that runs optimum-intel's real exporter (decider[convert]): slow, and part of CI's extras step."""
    for mark in (pytest.mark.slow, pytest.mark.extra,
                 pytest.mark.skipif(not _optimum_importable(), reason="optimum-intel (decider[convert]) is not installed")):
        test = mark(test)
    return test


def _exported(capsys, folder, weights: str) -> str:
    """`decider convert` of the fixture checkpoint into `folder` with these weights; its standard output."""
    code, out, err = run(capsys, "convert", str(CHECKPOINT), str(folder), "--weights", weights)
    assert code == 0, err[-2000:]
    return out


@with_exporter
def test_convert_exports_int4_npu_and_runs_a_decision(capsys, tmp_path):
    out_dir = tmp_path / "qwen35-text-int4"
    out = _exported(capsys, out_dir, "int4-npu")
    assert "weights int4-sym channel-wise" in out and "NPU preferred" in out
    assert "test decision on CPU" in out and "chose " in out
    assert (out_dir / "tokenizer.json").is_file()
    assert run(capsys, "doctor", str(out_dir))[0] == 0


@with_exporter
def test_convert_exports_symmetric_int8_weights(capsys, tmp_path):
    out_dir = tmp_path / "qwen35-text-int8-sym"
    out = _exported(capsys, out_dir, "int8-sym")
    assert "int8-sym" in out and "chose " in out
    import openvino as ov

    types = {str(op.get_output_element_type(0)) for op in ov.Core().read_model(out_dir / "openvino_model.xml").get_ops()
             if op.get_type_name() == "Constant"}
    assert "<Type: 'int8_t'>" in types and "<Type: 'uint8_t'>" not in types  # signed weights, no zero points


def test_every_weight_format_is_offered_by_the_cli_and_the_convert_dialog():
    from decider.app.cli_parser import build_parser
    from decider.app.convert import WEIGHTS
    from decider.ui.convert_dialog import WEIGHT_CHOICES

    assert sorted(name for name, _ in WEIGHT_CHOICES) == sorted(WEIGHTS)
    for weights in WEIGHTS:
        assert build_parser().parse_args(["convert", "in", "out", "--weights", weights]).weights == weights
    with pytest.raises(SystemExit):
        build_parser().parse_args(["convert", "in", "out", "--weights", "int3"])


def test_doctor_states_the_draft_heads_arithmetic(capsys, tmp_path):
    from decider.engine.compile.precision import cpu_capabilities, fast_inference
    from support.mtp_reference import folder_with_mtp
    import openvino as ov

    folder = folder_with_mtp("qwen35-text", tmp_path / "qwen35-text")
    code, out, _ = run(capsys, "doctor", str(folder))
    assert code == 0, out
    hint = fast_inference(cpu_capabilities(ov.Core()))
    assert f"MTP draft head: {hint} arithmetic, every id (drafts only" in out  # 1,856 ids: fewer than the trimmed default
    code, out, _ = run(capsys, "doctor", str(EXPORT))
    assert "MTP draft head" not in out  # no head, no line
