"""A damaged history file (issue #25): each kind of damage is moved aside with a one-line notice, a fresh
history starts, and `ask`, `history` and the API keep working."""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

import pytest

from decider.app.cli import main
from decider.app.history import HistoryStore
from test_history import fake_result, request

DEMO = Path(__file__).resolve().parents[1] / "resources" / "demo-model"


def filled(path: Path, rows: int = 40) -> None:
    store = HistoryStore(path)
    for _ in range(rows):
        store.add(request(), fake_result([-0.5, -1.5, -3.0]), model="m", device="CPU", source="cli")
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 + 100])


def random_over(start: float, length: int | None = None):
    def damage(path: Path) -> None:
        data = bytearray(path.read_bytes())
        at = int(len(data) * start)
        n = length or len(data) - at
        data[at:at + n] = random.Random(7).randbytes(n)
        path.write_bytes(bytes(data))
    return damage


def text_file(path: Path) -> None:
    path.write_text("these are my notes, not a database\n" * 20)


def directory(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "inside").write_text("x")


def dropped_table(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE decisions")


def bad_json_row(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE decisions SET result_json = '{not json' WHERE id = 3")


DAMAGE = {
    "truncated": truncated,
    "random header": random_over(0.0, 100),
    "random middle page": random_over(0.5, 4096),
    "random all": random_over(0.0),
    "text file": text_file,
    "directory": directory,
    "dropped table": dropped_table,
    "bad JSON row": bad_json_row,
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damage_is_moved_aside_and_a_fresh_history_works(tmp_path, kind, caplog):
    path = tmp_path / "history.sqlite3"
    filled(path)
    DAMAGE[kind](path)
    store = HistoryStore(path)
    assert store.notice and "moved to" in store.notice and "\n" not in store.notice
    asides = sorted(tmp_path.glob("history.sqlite3.damaged-*"), key=lambda p: len(p.name))
    assert asides and str(asides[0]) in store.notice
    assert store.rows() == []
    decision_id = store.add(request(), fake_result([-0.1, -2.0, -3.0]), model="m", device="CPU", source="cli")
    assert store.get(decision_id).question == "Which?"
    assert HistoryStore(path).notice is None  # the fresh file is sound


@pytest.mark.parametrize("kind", ["random middle page", "dropped table", "directory"])
def test_history_commands_and_ask_say_what_happened_and_keep_working(tmp_path, monkeypatch, capsys, kind):
    monkeypatch.setenv("DECIDER_DATA_DIR", str(tmp_path))
    path = tmp_path / "history.sqlite3"
    filled(path)
    DAMAGE[kind](path)
    assert main(["history", "list"]) == 0
    err = capsys.readouterr().err
    assert "damaged" in err and ".damaged-" in err and "Traceback" not in err
    assert main(["ask", "--model", str(DEMO), "Which?", "--option", "a", "--option", "b", "--json"]) == 0
    assert main(["history", "export", "--format", "jsonl"]) == 0
    assert '"question": "Which?"' in capsys.readouterr().out


def test_a_history_that_fails_while_saving_never_fails_the_answer(tmp_path):
    from decider.app.service import EngineService
    from decider.engine.decisions.decide import DecisionRequest
    from decider.engine.compile.devices import DeviceOptions

    store = HistoryStore(tmp_path / "history.sqlite3")
    service = EngineService(DEMO, DeviceOptions(device="CPU"), store)
    dropped_table(store.path)
    result = service.decide(DecisionRequest("Which?", ("a", "b")))
    assert result.history_id is None and result.options
