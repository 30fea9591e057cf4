"""Files that are not what the command line expects (issue #38 items 5 and 7): a read-only history (a normal
user's read-only file in a read-only folder) turns the history off with one line while `ask` and `serve` go on;
a FIFO named by --context, --image or --tool is refused at once, and a deeply nested --tool file is a one-line
error, never a traceback."""

from __future__ import annotations

import ctypes
import gc
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.models import model_dir
from test_history_damage import filled

FIXTURE = model_dir("qwen35-text")
ASK = ["ask", "Which?", "--option", "A", "--option", "B", "--model", str(FIXTURE), "--device", "CPU", "--json"]
PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 24, 1, 2


def as_normal_user() -> None:
    """In the child, before exec: root without the capabilities that let it write where permissions forbid
    (so a read-only file is read-only to it too, as to any user); for a normal user nothing to drop."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
            if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def environment(tmp_path: Path, data: Path) -> dict:
    return {**os.environ, "DECIDER_DATA_DIR": str(data), "DECIDER_CONFIG_DIR": str(tmp_path / "config"),
            "DECIDER_CACHE_DIR": str(tmp_path / "cache")}


def cli(tmp_path: Path, args: list[str], data: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "decider.app.cli", *args], env=environment(tmp_path, data or tmp_path / "data"),
                          capture_output=True, text=True, timeout=timeout, preexec_fn=as_normal_user)


@pytest.fixture
def read_only_history(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    history = data / "history.sqlite3"
    filled(history, rows=5)
    gc.collect()  # filled()'s connection closed: its -wal and -shm files gone
    before, names = history.read_bytes(), sorted(p.name for p in data.iterdir())
    history.chmod(0o444)
    data.chmod(0o555)
    yield data
    data.chmod(0o755)
    history.chmod(0o644)
    assert history.read_bytes() == before  # nothing moved aside, nothing lost
    assert sorted(p.name for p in data.iterdir()) == names


def history_off_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "history off" in line]


def test_ask_with_a_read_only_history_decides_and_says_why_in_one_line(tmp_path, read_only_history):
    done = cli(tmp_path, ASK, read_only_history)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["choice"]["text"] in ("A", "B")
    lines = history_off_lines(done.stderr)
    assert len(lines) == 1 and "read-only" in lines[0], done.stderr


def test_ask_with_a_history_folder_that_cannot_exist_decides(tmp_path):
    """A data folder under a regular file: no user (root neither) can create it."""
    (tmp_path / "file").write_text("x")
    done = cli(tmp_path, ASK, tmp_path / "file" / "data")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert len(history_off_lines(done.stderr)) == 1


def test_serve_with_a_read_only_history_starts_and_answers(tmp_path, read_only_history):
    argv = [sys.executable, "-m", "decider.app.cli", "serve", "--model", str(FIXTURE), "--device", "CPU", "--port", "0"]
    server = subprocess.Popen(argv, env=environment(tmp_path, read_only_history), stderr=subprocess.PIPE, text=True,
                              preexec_fn=as_normal_user)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = server.stderr.readline()
            if not line:
                break
            lines.append(line)
            if "Decider API on" in line:
                break
        assert any("Decider API on" in line for line in lines), "".join(lines)
        url = re.search(r"(http://\S+/v1)", "".join(lines)).group(1)
        import urllib.request

        request = urllib.request.Request(f"{url}/decide", method="POST", headers={"Content-Type": "application/json"},
                                         data=json.dumps({"question": "Which?", "options": ["A", "B"]}).encode())
        with urllib.request.urlopen(request, timeout=60) as reply:
            assert json.loads(reply.read())["choice"]["text"] in ("A", "B")
    finally:
        server.send_signal(signal.SIGINT)
        rest = server.communicate(timeout=30)[1]
    everything = "".join(lines) + rest
    assert "Traceback" not in everything and len(history_off_lines(everything)) == 1, everything


@pytest.mark.parametrize("flag", ["--context", "--image", "--tool"])
def test_a_fifo_is_refused_at_once(tmp_path, flag):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    args = ["ask", "Which?", "--tool", str(fifo)] if flag == "--tool" else [*ASK, flag, str(fifo)]
    started = time.monotonic()
    done = cli(tmp_path, [*args, "--no-history"], timeout=60)  # before: waited for a writer for ever
    assert time.monotonic() - started < 30
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "not a regular file" in done.stderr and str(fifo) in done.stderr, done.stderr


@pytest.mark.parametrize("depth", [200, 100_000])
def test_a_deeply_nested_tool_file_is_a_one_line_error(tmp_path, depth):
    tools = tmp_path / "tools.json"
    nested = "[" * depth + "]" * depth
    tools.write_text('[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "x": ' + nested + "}}}]")
    done = cli(tmp_path, ["ask", "Which?", "--tool", str(tools), "--model", str(FIXTURE), "--device", "CPU", "--no-history"])
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and "nested deeper than" in done.stderr and "--tool" in done.stderr, done.stderr
