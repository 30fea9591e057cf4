"""A prompt cache that trusts nothing on disk (issue #38 items 2 and 9): every damaged entry — empty, a folder,
a symlink to a FIFO, torn, foreign, without or failing its checksum, states of another shape or dtype, NaNs —
is a miss with one log line and goes, the next decision computes (and keeps) it again with the cold result;
housekeeping removes what a killed writer left and shrinks a folder over a lowered cap."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from decider.engine.compile.devices import DeviceOptions
from decider.engine.runners.prompt_cache import STALE_TEMPORARY_SECONDS, PromptCache
from decider.engine.runners.prompt_entry import checksum
from decider.engine.runners.runner import ModelRunner
from support.models import model_dir

IDS = [(i * 37) % 1500 + 20 for i in range(96)]
CUT = 64  # the shared prefix kept on disk


@pytest.fixture(scope="module")
def runner():
    return ModelRunner(model_dir("qwen35-text"), DeviceOptions(device="CPU"))


@pytest.fixture(scope="module")
def cold(runner) -> np.ndarray:
    runner.use_prompt_cache(None)
    runner.clear_snapshots()
    runner.reset()
    return runner.prefill(IDS, (CUT,)).copy()


@pytest.fixture
def cache(runner, tmp_path, cold) -> PromptCache:
    cache = PromptCache(tmp_path / "prompts")
    runner.use_prompt_cache(cache)
    fresh(runner)
    assert cache.writes == 1
    yield cache
    runner.use_prompt_cache(None)


def fresh(runner) -> np.ndarray:
    """A prefill as a new process makes it: nothing in memory."""
    runner.clear_snapshots()
    runner.reset()
    return runner.prefill(IDS, (CUT,))


def entry(cache: PromptCache) -> Path:
    (path,) = [p for p in cache.folder.iterdir() if not p.name.startswith(".")]
    return path


def rewritten(path: Path, change) -> None:
    """The entry's arrays changed by `change(arrays)`, written back with a checksum that matches them."""
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    change(arrays)
    names = [str(n) for n in arrays["names"]]
    states = [arrays[f"s{i}"] for i in range(len(names))]
    arrays["checksum"] = np.frombuffer(checksum(arrays["ids"], names, states, arrays["logits"]), dtype=np.uint8)
    path.unlink()
    with open(path, "wb") as out:
        np.savez(out, **arrays)


def kv_name(arrays: dict) -> str:
    return next(f"s{i}" for i, n in enumerate(arrays["names"]) if ".key." in str(n))


def nan_state(arrays):
    arrays["s0"] = arrays["s0"].copy()
    arrays["s0"].flat[0] = np.nan


def float16(arrays):
    for name in [k for k in arrays if k.startswith("s")]:
        arrays[name] = arrays[name].astype(np.float16)


def short_kv(arrays):
    name = kv_name(arrays)
    arrays[name] = arrays[name][:, :, :-1].copy()


def flipped_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x55  # inside a state array: the zip still opens
    path.write_bytes(bytes(data))


def folder(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "inside").write_text("x")


def fifo_link(path: Path) -> None:
    fifo = path.parent.parent / "pipe"
    os.mkfifo(fifo)
    path.unlink()
    path.symlink_to(fifo)


def without_checksum(path: Path) -> None:
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files if name != "checksum"}
    with open(path, "wb") as out:
        np.savez(out, **arrays)


DAMAGE = {
    "empty": lambda p: p.write_bytes(b""),
    "torn": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "a folder": folder,
    "a symlink to a FIFO": fifo_link,
    "a flipped byte": flipped_byte,
    "no checksum (an older entry)": without_checksum,
    "NaN states": lambda p: rewritten(p, nan_state),
    "float16 states": lambda p: rewritten(p, float16),
    "a shorter KV state": lambda p: rewritten(p, short_kv),
    "other ids": lambda p: rewritten(p, lambda a: a.update(ids=a["ids"][::-1].copy())),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_entry_is_a_miss_with_one_line_and_is_computed_again(runner, cache, cold, caplog, damage):
    assert np.array_equal(fresh(runner), cold) and runner.stats.last_prefill_from_disk == CUT  # the good entry is used
    DAMAGE[damage](entry(cache))
    caplog.clear()
    result: list = []
    worker = threading.Thread(target=lambda: result.append(fresh(runner)))
    with caplog.at_level(logging.WARNING, logger="decider.prompt_cache"):
        worker.start()
        worker.join(60)
    assert not worker.is_alive(), "the prefill hung on the entry"
    assert result and np.array_equal(result[0], cold) and runner.stats.last_prefill_from_disk == 0
    lines = [r.getMessage() for r in caplog.records if r.name == "decider.prompt_cache"]
    assert len(lines) == 1 and "removed" in lines[0], lines
    assert entry(cache).is_file() and not entry(cache).is_symlink()  # written again, good
    assert np.array_equal(fresh(runner), cold) and runner.stats.last_prefill_from_disk == CUT


def test_a_file_where_the_folder_should_be_is_a_miss_then_moved_aside(runner, tmp_path, cold, caplog):
    (tmp_path / "prompts").write_text("my notes")
    cache = PromptCache(tmp_path / "prompts")
    runner.use_prompt_cache(cache)
    with caplog.at_level(logging.WARNING, logger="decider.prompt_cache"):
        assert np.array_equal(fresh(runner), cold)
    assert (tmp_path / "prompts").is_dir() and cache.writes == 1
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("prompts.not-a-folder")]
    assert len(aside) == 1 and aside[0].read_text() == "my notes"  # nothing lost
    assert np.array_equal(fresh(runner), cold) and runner.stats.last_prefill_from_disk == CUT
    runner.use_prompt_cache(None)


def test_eviction_meeting_a_folder_or_a_fifo_removes_them_and_goes_on(tmp_path, caplog):
    cache = PromptCache(tmp_path, max_bytes=1_000_000)
    (tmp_path / "odd.npz").mkdir()
    os.mkfifo(tmp_path / "pipe.npz")
    state = {"kv": np.arange(100_000, dtype=np.float32)}
    with caplog.at_level(logging.WARNING, logger="decider.prompt_cache"):
        for i in range(3):
            assert cache.store(f"k{i}", [i], state, np.zeros(8))
    assert not (tmp_path / "odd.npz").exists() and not (tmp_path / "pipe.npz").exists()
    assert sum("odd.npz" in r.getMessage() for r in caplog.records) == 1
    assert cache.size() <= 1_000_000


def test_a_killed_writers_temporary_file_is_removed_once_old(tmp_path):
    cache = PromptCache(tmp_path)
    old, recent = tmp_path / ".tmp-killed.npz", tmp_path / ".tmp-writing.npz"
    for path in (old, recent):
        path.write_bytes(b"\0" * 1000)
    then = time.time() - STALE_TEMPORARY_SECONDS - 60
    os.utime(old, (then, then))
    assert cache.load("k", [1]) is None  # the first use in a process tidies
    assert not old.exists() and recent.exists()  # another process may be writing this one


def test_a_lowered_cap_shrinks_a_folder_already_over_it(tmp_path):
    big = PromptCache(tmp_path, max_bytes=10_000_000)
    state = {"kv": np.arange(100_000, dtype=np.float32)}  # 400 kB a piece
    for i in range(5):
        assert big.store(f"k{i}", [i], state, np.zeros(8))
        os.utime(tmp_path / f"k{i}.npz", (1000 + i, 1000 + i))
    assert big.size() > 1_500_000
    small = PromptCache(tmp_path, max_bytes=1_000_000)
    assert small.load("k4", [4]) is not None  # a hit, and nothing written: still shrunk
    assert small.size() <= 1_000_000 and small.has("k4") and not small.has("k0")
