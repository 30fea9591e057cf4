"""A damaged fast-compile measurement file (issue #38 item 6): a JSON list, fields of the wrong type, 100k-deep
nesting, a folder or a FIFO in its place is ignored with one notice, never a traceback, and the next
measurement replaces it (or, where it cannot, is used without being kept)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support.fast_pin import pinned_tuning
from support.models import model_dir
from decider.engine.compile.devices import DeviceOptions
from decider.engine.compile.fast_tuning import CACHE_NAME, _store, cached, tuning_key
from decider.engine.compile.precision import cpu_capabilities
from decider.engine.runners.runner import ModelRunner


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    return ModelRunner(model_dir("qwen35-text"), DeviceOptions(device="CPU", cache_dir=tmp_path_factory.mktemp("tuning")))


@pytest.fixture
def path(runner):
    path = runner.options.cache_dir / CACHE_NAME
    runner.notices.clear()
    yield path
    if path.is_dir():
        os.rmdir(path)
    else:
        path.unlink(missing_ok=True)


def good(runner) -> dict:
    tuning = pinned_tuning(runner.folder.path, None, cpu_capabilities(runner._core))
    return {tuning_key(runner): tuning.to_json()}


def wrong_fields(runner) -> list[dict]:
    entry = good(runner)[tuning_key(runner)]
    bad_measured = [dict(entry["measured"][0], properties="bf16")] + entry["measured"][1:]
    return [{tuning_key(runner): dict(entry, measured=bad_measured)},
            {tuning_key(runner): dict(entry, measured=[dict(m, properties=["f32"]) for m in entry["measured"]])},
            {tuning_key(runner): dict(entry, measured="all of them")},
            {tuning_key(runner): dict(entry, threads="two")},
            {tuning_key(runner): dict(entry, surprise=1)},
            {tuning_key(runner): [entry]}]


def test_a_good_file_is_read(runner, path):
    path.write_text(json.dumps(good(runner)))
    assert cached(runner) is not None and runner.notices == []


@pytest.mark.parametrize("content", ["[1, 2]", '"text"', "[" * 100_000 + "]" * 100_000, "{not json", "\xff\xfe"])
def test_a_file_that_is_not_an_object_of_measurements_is_ignored_with_one_notice(runner, path, content):
    path.write_bytes(content.encode("latin-1"))
    assert cached(runner) is None
    assert cached(runner) is None  # asked again: still one notice
    assert len(runner.notices) == 1 and str(path) in runner.notices[0] and "ignored" in runner.notices[0]


def test_entries_with_fields_of_the_wrong_type_are_ignored_with_one_notice(runner, path):
    for entries in wrong_fields(runner):
        runner.notices.clear()
        path.write_text(json.dumps(entries))
        assert cached(runner) is None, entries
        assert len(runner.notices) == 1 and "wrong fields" in runner.notices[0]


def test_a_folder_or_a_fifo_in_its_place_is_ignored_and_a_measurement_is_used_unkept(runner, path):
    path.mkdir()
    assert cached(runner) is None and len(runner.notices) == 1 and "a folder" in runner.notices[0]
    tuning = pinned_tuning(runner.folder.path, None, cpu_capabilities(runner._core))
    _store(runner, tuning)  # a folder cannot be replaced by a file: the measurement is not kept, nothing raised
    assert any("could not be kept" in notice for notice in runner.notices) and path.is_dir()
    os.rmdir(path)
    os.mkfifo(path)
    runner.notices.clear()
    assert cached(runner) is None and "not a regular file" in runner.notices[0]  # at once, not waiting for a writer
    path.unlink()


def test_a_damaged_file_is_replaced_by_the_next_measurement(runner, path):
    path.write_text("[1, 2]")
    tuning = pinned_tuning(runner.folder.path, None, cpu_capabilities(runner._core))
    _store(runner, tuning)
    runner.notices.clear()
    assert cached(runner) == tuning and runner.notices == []


def test_fast_mode_with_a_damaged_file_runs_with_one_notice(tmp_path):
    """`--fast` with a list in the measurement file: the runner loads, says so once, and decides."""
    compiled = tmp_path / "compiled"
    compiled.mkdir()
    (compiled / CACHE_NAME).write_text(json.dumps([{"properties": "bf16"}]))
    env = {**os.environ, "DECIDER_CACHE_DIR": str(tmp_path), "DECIDER_DATA_DIR": str(tmp_path / "data")}
    argv = [sys.executable, "-m", "decider.app.cli", "ask", "Which?", "--option", "A", "--option", "B", "--fast",
            "--model", str(model_dir("qwen35-text")), "--device", "CPU", "--json", "--no-history"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    notices = [line for line in done.stderr.splitlines() if CACHE_NAME in line]
    assert len(notices) == 1 and "ignored" in notices[0], done.stderr
    assert json.loads(done.stdout)["choice"]["text"] in ("A", "B")
