"""Decision history (SQLite) and calibration measures."""

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from decider.app.cli import main
from decider.app.history import MIGRATIONS, SCHEMA_VERSION, HistoryStore
from decider.engine.decisions.calibration import evaluate, fit_temperature, letter_bias
from decider.engine.decisions.decide import DecisionRequest, DecisionResult, Alternative
from decider.engine.core.errors import SettingsError
from decider.engine.core.settings import SamplingSettings
from support.results import letters_result

ROOT = Path(__file__).resolve().parents[1]


def fake_result(logprobs, choice=None) -> DecisionResult:
    """A result for `request(len(logprobs))`, with reasoning and alternatives (every field the history keeps)."""
    return letters_result(logprobs, request(len(logprobs)), choice=choice, reasoning="because",
                          alternatives=[Alternative("A", 7, -0.5)])


def request(n=3, think=False):
    return DecisionRequest("Which?", tuple(f"opt{i}" for i in range(n)), system="sys", context="ctx", think=think,
                           sampling=SamplingSettings(temperature=0.3, seed=4))


def test_round_trip_of_every_field(tmp_path):
    store = HistoryStore(tmp_path / "h.sqlite3")
    result = fake_result([-0.5, -1.5, -3.0])
    decision_id = store.add(request(), result, model="m", device="CPU", source="gui")
    row = store.get(decision_id)
    assert row.question == "Which?" and row.options == ["opt0", "opt1", "opt2"]
    assert row.model == "m" and row.device == "CPU" and row.source == "gui" and row.think is False
    assert row.settings["temperature"] == 0.3 and row.settings["seed"] == 4
    assert row.settings["system"] == "sys" and row.settings["context"] == "ctx"
    assert row.result == json.loads(json.dumps(result.to_dict()))
    assert row.option_logprobs == [-0.5, -1.5, -3.0]
    assert row.choice_index == 0 and row.coverage == pytest.approx(result.coverage)
    assert row.right_index is None and row.labelled_at is None
    assert store.label(decision_id, "b").right_index == 1
    assert store.get(decision_id).labelled_at is not None
    assert store.label(decision_id, None).right_index is None
    with pytest.raises(SettingsError, match="label must be one of A, B, C"):
        store.label(decision_id, "D")
    with pytest.raises(SettingsError, match="no decision with id 999"):
        store.get(999)


def test_migration_from_the_first_schema_keeps_rows(tmp_path):
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO decisions (created_at, model, device, question, options_json, settings_json, result_json, choice_index, coverage)"
        " VALUES ('2026-01-01', 'old', 'NPU', 'Q', '[\"a\", \"b\"]', '{\"think\": true}', ?, 1, 0.9)",
        (json.dumps(fake_result([-2.0, -0.2]).to_dict()),),
    )
    conn.commit()
    conn.close()
    store = HistoryStore(path)
    assert store.schema_version() == SCHEMA_VERSION
    row = store.rows()[0]
    assert row.model == "old" and row.think is True and row.source == "unknown" and row.choice_index == 1
    store.add(request(2), fake_result([-1.0, -0.1]), model="new", device="CPU", source="cli")
    assert [r.model for r in store.rows()] == ["old", "new"]


def test_concurrent_writers_lose_nothing(tmp_path):
    store = HistoryStore(tmp_path / "h.sqlite3")
    ids, errors = [], []

    def writer(source):
        try:
            for _ in range(40):
                ids.append(store.add(request(), fake_result([-0.1, -2.0, -4.0]), model="m", device="CPU", source=source))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(f"t{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(set(ids)) == 240 and len(store.rows()) == 240


CHILD = """
import sys, numpy as np
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
from decider.app.history import HistoryStore
from test_history import fake_result, request
store = HistoryStore({path!r})
while True:
    i = store.add(request(), fake_result([-0.3, -1.3, -2.3]), model="m", device="CPU", source="child")
    print(i, flush=True)
"""


def test_kill_9_loses_no_committed_row(tmp_path):
    path = str(tmp_path / "h.sqlite3")
    code = CHILD.format(root=str(ROOT), tests=str(ROOT / "tests"), path=path)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    committed = []
    deadline = time.time() + 60
    while len(committed) < 150 and time.time() < deadline:
        line = child.stdout.readline()
        if line.strip():
            committed.append(int(line))
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert len(committed) >= 150
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored = {r[0] for r in conn.execute("SELECT id FROM decisions")}
    conn.close()
    assert set(committed) <= stored
    assert len(HistoryStore(path).rows()) == len(stored)


def test_measures_match_hand_computed_values():
    # two decisions, two options each
    lp = [[math.log(0.8), math.log(0.2)], [math.log(0.4), math.log(0.6)]]
    right = [0, 0]
    report = evaluate(lp, right, bins=10)
    assert report.accuracy == 0.5
    # Brier: (0.2² + 0.2²) and (0.6² + 0.6²), mean
    assert report.brier == pytest.approx(((0.04 + 0.04) + (0.36 + 0.36)) / 2)
    assert report.nll == pytest.approx(-(math.log(0.8) + math.log(0.4)) / 2)
    # ECE: bin (0.7,0.8] holds conf 0.8 acc 1; bin (0.5,0.6] conf 0.6 acc 0 → (0.2 + 0.6) / 2
    assert report.ece == pytest.approx((abs(1 - 0.8) + abs(0 - 0.6)) / 2)
    counts = [b.count for b in report.bins]
    assert counts[7] == 1 and counts[5] == 1 and sum(counts) == 2


def test_temperature_fit_recovers_a_known_temperature():
    rng = np.random.default_rng(0)
    true_t = 2.5
    logits = rng.normal(0, 3, size=(3000, 4))
    probs = np.exp(logits / true_t)
    probs /= probs.sum(axis=1, keepdims=True)
    right = [rng.choice(4, p=p) for p in probs]
    fitted = fit_temperature(logits, right)
    assert abs(fitted - true_t) / true_t < 0.1
    before = evaluate(logits, right).ece
    after = evaluate(logits, right, temperature=fitted).ece
    assert after < before / 2


def test_letter_bias_counts():
    rows = letter_bias([0, 0, 0, 1], [0, 1, 1, 1])
    assert rows[0]["chosen"] == 3 and rows[0]["right"] == 1 and rows[1]["chosen_rate"] == 0.25


def test_cli_label_export_and_calibrate(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DECIDER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DECIDER_CONFIG_DIR", str(tmp_path / "config"))
    from decider.app.history import default_store

    store = default_store()
    rng = np.random.default_rng(1)
    for _ in range(30):
        lp = np.log(rng.dirichlet([1, 1, 1]))
        i = store.add(request(), fake_result(lp.tolist()), model="m", device="CPU", source="test")
        store.label(i, int(rng.integers(0, 3)))
    assert main(["history", "label", str(i), "C"]) == 0
    assert "right answer C" in capsys.readouterr().out
    out_file = tmp_path / "h.csv"
    assert main(["history", "export", "--format", "csv", "--out", str(out_file)]) == 0
    lines = out_file.read_text().splitlines()
    assert len(lines) == 31 and lines[0].startswith("id,created_at,model")
    assert main(["history", "export", "--format", "jsonl"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 30
    assert main(["calibrate", "--fit", "--apply", "--bins", "5"]) == 0
    out = capsys.readouterr().out
    assert "30 labelled decisions" in out and "5 equal-width bins" in out and "held-out rows" in out
    from decider.app.calibration_history import saved_temperature

    assert saved_temperature("m", False) is not None
    assert main(["calibrate", "--bins", "1"]) == 2
