"""The command line with hostile input: one-line errors with exit code 2 (usage) or 1 (failure), never a traceback."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.results import letters_result
from test_history import fake_result, request

from decider.app.history import HistoryStore

ROOT = Path(__file__).resolve().parents[1]


def run_cli(args: list, tmp_path: Path, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "DECIDER_DATA_DIR": str(tmp_path / "data"), "DECIDER_CONFIG_DIR": str(tmp_path / "config")}
    return subprocess.run([sys.executable, "-m", "decider.app.cli", *args], env=env, cwd=ROOT, capture_output=True, timeout=120,
                          **kwargs)


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int, *needles: bytes) -> None:
    assert proc.returncode == code, proc.stderr
    assert b"Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(b"decider: error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0]


def test_question_that_is_not_utf8_is_refused_by_name(tmp_path):
    proc = run_cli([b"ask", b"\xff?", b"--option", b"A", b"--option", b"B"], tmp_path)
    assert_one_line_error(proc, 2, b"question", b"UTF-8")


def test_option_that_is_not_utf8_is_refused_by_name(tmp_path):
    proc = run_cli([b"ask", b"Which?", b"--option", b"\xfe", b"--option", b"B"], tmp_path)
    assert_one_line_error(proc, 2, b"--option", b"UTF-8")


def test_context_file_that_is_not_utf8(tmp_path):
    rules = tmp_path / "rules.txt"
    rules.write_bytes(b"caf\xe9 rules\n")
    proc = run_cli(["ask", "Which?", "--option", "A", "--option", "B", "--context", str(rules)], tmp_path)
    assert_one_line_error(proc, 2, b"--context", b"not UTF-8")


def test_export_to_a_missing_folder(tmp_path):
    proc = run_cli(["history", "export", "--out", "/nonexistent/x.csv"], tmp_path)
    assert_one_line_error(proc, 1, b"/nonexistent/x.csv", b"No such file")


def test_history_list_into_a_closed_pipe(tmp_path):
    store = HistoryStore(tmp_path / "data" / "history.sqlite3")
    for _ in range(3000):
        store.add(request(), fake_result([-0.5, -1.5, -3.0]), model="m", device="CPU", source="test")
    env = {**os.environ, "DECIDER_DATA_DIR": str(tmp_path / "data"), "DECIDER_CONFIG_DIR": str(tmp_path / "config")}
    # What `decider history list | head -1` does: read one line, then close the pipe.
    proc = subprocess.Popen([sys.executable, "-m", "decider.app.cli", "history", "list"], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 0
    assert b"chose A" in first
    assert stderr == b""


def test_csv_export_neutralises_formulas(tmp_path):
    store = HistoryStore(tmp_path / "h.sqlite3")
    hostile = request()
    hostile = type(hostile)('=HYPERLINK("http://evil.example","x")', ("+1", "@SUM(A1)", "-2", "plain"),
                            system=hostile.system, think=False, sampling=hostile.sampling)
    result = letters_result(np.log([0.1, 0.2, 0.3, 0.4]).tolist(), hostile)
    store.add(hostile, result, model="=m", device="\tCPU", source="\rapi")
    rows = list(csv.reader(io.StringIO(store.export_csv())))
    header, row = rows[0], rows[1]
    cells = dict(zip(header, row))
    assert cells["question"] == "'" + hostile.question
    assert (cells["model"], cells["device"], cells["source"]) == ("'=m", "'\tCPU", "'\rapi")
    assert [cells[f"option_{x}"] for x in "ABCD"] == ["'+1", "'@SUM(A1)", "'-2", "plain"]
    # Numbers stay numbers (a negative logprob is data, not a formula) and JSONL keeps the text verbatim.
    assert float(cells["logprob_A"]) < 0
    assert '"=HYPERLINK' in store.export_jsonl().replace('\\"', '"')


def test_serve_refuses_an_allowed_origin_that_is_no_origin(tmp_path):
    proc = run_cli(["serve", "--port", "0", "--allow-origin", "localhost:3000"], tmp_path)
    assert_one_line_error(proc, 2, b"allowed origin 'localhost:3000' must start with http:// or https://")
