"""The desktop app's calibration/history tabs (#8), remote engine (#10) and model management (#9),
offscreen (pytest-qt), against the fixture model, a fake OpenAI-compatible server and a local hub."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app.settings_store import GuiSettings, load_settings, save_settings, settings_path  # noqa: E402
from engine.decide import LABELS, DecisionRequest, DecisionResult, OptionResult  # noqa: E402
from engine.settings import SamplingSettings  # noqa: E402

from app.gui_ports import calibration, model_tools  # noqa: E402
from conftest import model_dir  # noqa: E402

FIXTURE = str(model_dir("qwen35-text"))
ROOT = Path(__file__).resolve().parent.parent
GREEDY = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0)


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    """Fresh config and data dirs per test: settings, saved temperatures and the history database."""
    monkeypatch.setenv("DECIDER_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("DECIDER_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


@pytest.fixture
def make_window(qtbot, dirs):
    from app.gui import build_window, create_app

    create_app()
    made = []

    def make(settings: GuiSettings | None = None, **kwargs):
        settings = settings or GuiSettings(device="CPU")
        engine, window = build_window(settings, **kwargs)
        qtbot.addWidget(window)
        made.append((engine, window))
        return window

    yield make
    for engine, window in made:
        window.close()
        engine.close()


def load(qtbot, window, path: str = FIXTURE):
    with qtbot.waitSignal(window.model_ready, timeout=60_000) as blocker:
        window.load_model(path)
    return blocker.args[0]


def ask(window, question: str, options: list[str]) -> None:
    window.question.setPlainText(question)
    window.options.set_options(options)


def synthetic_result(logprobs: list[float]) -> DecisionResult:
    top = max(logprobs)
    weights = [math.exp(v - top) for v in logprobs]
    total = sum(weights)
    options = [OptionResult(LABELS[i], f"option {i}", v, w / total) for i, (v, w) in enumerate(zip(logprobs, weights))]
    return DecisionResult(
        choice_index=max(range(len(logprobs)), key=logprobs.__getitem__), options=options,
        coverage=sum(math.exp(v) for v in logprobs), mode="letters", reasoning=None, alternatives=[],
        timings={"total_s": 0.01}, usage={"prompt_tokens": 10, "prefill_tokens": 10, "reused_tokens": 0, "completion_tokens": 1},
    )


def seed_history(store, model: str, count: int, think: bool = False, seed: int = 5) -> list[int]:
    """Over-confident labelled decisions: the model says ~95% and is right about 60% of the time."""
    import random

    rng = random.Random(seed)
    ids = []
    for i in range(count):
        n = rng.choice([2, 3, 4])
        logprobs = [-6.0 - rng.random() * 2 for _ in range(n)]
        chosen = rng.randrange(n)
        logprobs[chosen] = -0.05 - rng.random() * 0.2
        right = chosen if rng.random() < 0.6 else (chosen + 1) % n
        request = DecisionRequest(f"question {i}?", tuple(f"option {j}" for j in range(n)), think=think, sampling=GREEDY)
        decision_id = store.add(request, synthetic_result(logprobs), model=model, device="CPU", source="test")
        store.label(decision_id, right)
        ids.append(decision_id)
    return ids


def is_color(actual, expected, tolerance: int = 6) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(actual.getRgb()[:3], expected.getRgb()[:3]))


# ---------------------------------------------------------------- calibration and history (#8)


def test_reliability_chart_renders_offscreen(qtbot, dirs):
    from app.gui import create_app
    from engine.calibration import evaluate
    from ui.reliability_chart import ReliabilityChart
    from ui.theme import color

    create_app()
    logprobs = [[-0.1, -2.5], [-0.7, -0.7], [-0.3, -1.4], [-0.05, -3.2], [-0.9, -0.5], [-0.2, -1.7]] * 3
    right = [0, 1, 1, 0, 1, 0] * 3
    report = evaluate(logprobs, right, bins=10)
    chart = ReliabilityChart()
    qtbot.addWidget(chart)
    chart.resize(560, 340)
    chart.set_report(report, "test")
    image = chart.grab().toImage()
    assert not image.isNull() and (image.width(), image.height()) == (560, 340)

    filled = [i for i, b in enumerate(report.bins) if b.count]
    rects = dict(chart.bar_rects())
    assert sorted(rects) == filled  # one bar per non-empty bin, none for empty ones
    plot = chart.plot_rect()
    for index, rect in rects.items():
        b = report.bins[index]
        assert rect.height() == pytest.approx(b.accuracy * plot.height(), abs=0.01)
        assert plot.left() + b.low * plot.width() <= rect.left() < rect.right() <= plot.left() + b.high * plot.width()
        if rect.height() > 8:  # the bar is painted in the accent colour
            pixel = image.pixelColor(int(rect.center().x()), int(rect.bottom() - 3))
            assert is_color(pixel, color("accent")), (index, pixel.name())
    # an empty bin has no bar: its column is the card's background just above the axis
    empty = next(i for i, b in enumerate(report.bins) if not b.count)
    x = plot.left() + (report.bins[empty].low + 0.05) * plot.width()
    assert not is_color(image.pixelColor(int(x), int(plot.bottom() - 4)), color("accent"))
    # counts are written under every bin
    assert [i for i, _ in chart.count_rects()] == list(range(10))
    # the empty state paints too
    chart.set_report(None)
    assert not chart.grab().toImage().isNull()


def test_history_view_labels_decisions_and_exports(qtbot, dirs, tmp_path):
    from app.gui import create_app
    from app.history import HistoryStore
    from ui.history_tab import HistoryView

    create_app()
    store = HistoryStore(tmp_path / "history.sqlite3")
    ids = [store.add(DecisionRequest(f"q{i}?", ("Left", "Right", "Stay"), sampling=GREEDY),
                     synthetic_result([-0.2, -2.0 - i, -3.0]), model="m", device="CPU", source="test") for i in range(3)]
    view = HistoryView(lambda: store)
    qtbot.addWidget(view)
    view.refresh()
    assert view.table.rowCount() == 3
    assert view.table.item(0, 1).text() == "q2?"  # newest first
    assert view.table.item(0, 2).text() == "A. Left"
    assert view.table.item(0, 3).text().endswith("%")
    labelled = []
    view.labelled.connect(lambda d, r: labelled.append((d, r)))
    combo = view.combos[ids[1]]
    assert combo.currentData() is None and combo.count() == 4
    combo.setCurrentIndex(3)  # "C. Stay"
    assert store.get(ids[1]).right_index == 2
    assert labelled == [(ids[1], 2)]
    assert "1 marked" in view.count_label.text()
    combo.setCurrentIndex(0)  # unmarked again
    assert store.get(ids[1]).right_index is None
    assert view.set_right(ids[0], 1) and view.combos[ids[0]].currentIndex() == 2

    csv_path, jsonl_path = tmp_path / "out.csv", tmp_path / "out.jsonl"
    assert view.export("csv", str(csv_path)) == str(csv_path)
    assert csv_path.read_bytes().decode("utf-8") == store.export_csv()  # CSV keeps its \r\n
    assert view.export("jsonl", str(jsonl_path)) == str(jsonl_path)
    lines = jsonl_path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["right_index"] == 1
    assert "Exported 3 decisions" in view.message.text()


def test_fit_and_apply_show_a_calibrated_value_next_to_the_raw_one(qtbot, make_window):
    from app.calibrate import calibrated_probabilities, saved_temperature
    from app.history import default_store
    from ui.bars import percent_text

    seed_history(default_store(), "qwen35-text", 30)
    window = make_window(GuiSettings(device="CPU", temperature=0.0))
    load(qtbot, window)
    window.show()
    window.show_tab("calibration")
    cal = window.calibration_view
    cal.refresh()
    assert cal.selection() == ("qwen35-text", False)
    assert cal.figures["count"].text() == "30"
    assert cal.figures["ece"].text() == f"{cal.report.ece:.4f}" and cal.figure_hints["ece"].text() == "10 bins"
    assert cal.chart.bar_rects() and not cal.chart.grab().toImage().isNull()
    assert cal.bias_table.rowCount() >= 2
    cal.bins.setValue(5)
    assert len(cal.report.bins) == 5 and cal.figure_hints["ece"].text() == "5 bins"
    assert not cal.apply_box.isEnabled()  # nothing fitted or applied yet

    qtbot.mouseClick(cal.fit_button, Qt.LeftButton)
    fit = cal.fit_result
    assert fit is not None and fit.temperature > 1  # over-confident rows: T softens them
    assert f"T = {fit.temperature:.3f}" in cal.fit_label.text()
    assert f"ECE {fit.before.ece:.4f} → {fit.after.ece:.4f}" in cal.fit_label.text()
    assert f"checked on {fit.held_out} held out" in cal.fit_label.text()
    assert cal.apply_box.isEnabled()
    cal.apply_box.setChecked(True)
    assert saved_temperature("qwen35-text", False) == pytest.approx(fit.temperature)
    assert "Applied: T =" in cal.applied_label.text()

    window.show_tab("decision")
    ask(window, "Which road?", ["North", "South", "East"])
    with qtbot.waitSignal(window.decision_shown, timeout=30_000) as blocker:
        window.decide()
    result = blocker.args[0]
    view = window.result_view
    expected = calibrated_probabilities([o.logprob for o in result.options], fit.temperature)
    raw = result.options[result.choice_index].probability
    assert view.choice_percent.text() == percent_text(raw)  # the raw value stays
    assert view.choice_calibrated.isVisible()
    assert view.choice_calibrated.text() == f"{percent_text(expected[result.choice_index])} calibrated"
    assert "calibrated" in view.choice_meta.text()
    assert [b.calibrated for b in view.bars.bars] == pytest.approx(expected)
    assert all("calibrated" in b.side_text() for b in view.bars.bars)
    assert view.bars.values() == pytest.approx([o.probability for o in result.options])
    # the overlay beside a game shows the same pair
    window.set_overlay_visible(True)
    overlay = window.overlay
    with qtbot.waitSignal(window.decision_shown, timeout=30_000) as blocker:
        window.decide()
    result = blocker.args[0]
    expected = calibrated_probabilities([o.logprob for o in result.options], fit.temperature)
    chosen = result.options[result.choice_index]
    assert overlay.choice_percent.text() == f"{percent_text(chosen.probability)} · {percent_text(expected[result.choice_index])} cal."
    assert [b.calibrated for b in overlay.bars.bars] == pytest.approx(expected)

    # turning it off re-renders the shown result with raw values only, in the window and the overlay
    window.show_tab("calibration")
    cal.apply_box.setChecked(False)
    assert saved_temperature("qwen35-text", False) is None
    assert not view.choice_calibrated.isVisible() and "calibrated" not in view.choice_meta.text()
    assert all(b.calibrated is None for b in view.bars.bars)
    assert overlay.choice_percent.text() == percent_text(chosen.probability)
    assert all(b.calibrated is None for b in overlay.bars.bars)
    # the decision was recorded; the other think mode has no labelled rows
    window.show_tab("history")
    assert window.history_view.table.rowCount() == 32
    window.show_tab("calibration")
    cal.think_box.setCurrentIndex(1)
    assert cal.report is None and cal.figures["count"].text() == "—" and not cal.fit_button.isEnabled()


def test_fit_needs_enough_labelled_decisions(qtbot, dirs, tmp_path):
    from app.gui import create_app
    from app.history import HistoryStore
    from ui.calibration_tab import CalibrationView

    create_app()
    store = HistoryStore(tmp_path / "h.sqlite3")
    seed_history(store, "m", 6)
    view = CalibrationView(lambda: store, calibration())
    qtbot.addWidget(view)
    view.refresh()
    assert view.figures["count"].text() == "6"
    assert view.fit_temperature() is False
    assert "need at least" in view.fit_label.text()
    empty = CalibrationView(None, calibration())
    qtbot.addWidget(empty)
    empty.refresh()
    assert "history is off" in empty.message.text()


# ---------------------------------------------------------------- remote engine (#10)


def chat_answer(token: str, alternatives: dict[str, float]) -> dict:
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": token}, "finish_reason": "length",
                     "logprobs": {"content": [{"token": token, "logprob": alternatives.get(token, -9.0),
                                               "top_logprobs": [{"token": t, "logprob": v} for t, v in alternatives.items()]}]}}],
        "usage": {"prompt_tokens": 42, "completion_tokens": 1},
    }


class FakeServer:
    """A loopback OpenAI-compatible server whose answers the test switches: ok, unauthorized, slow, broken."""

    ALTERNATIVES = {"A": -0.4, "B": -1.3, **{f"w{i}": -3.0 - i * 0.1 for i in range(18)}}  # no "C": below the top 20

    def __init__(self):
        self.mode = "ok"
        self.delay = 1.5
        self.requests = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body=None, raw=None):
                data = raw if raw is not None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass

            def _fault(self) -> bool:
                if server.mode == "401":
                    self._send(401, {"error": {"message": "invalid API key", "type": "auth"}})
                    return True
                if server.mode == "500":
                    self._send(500, {"error": {"message": "model crashed"}})
                    return True
                return False

            def do_GET(self):
                if not self._fault():
                    self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}, {"id": "other"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if self._fault():
                    return
                if server.mode == "slow":
                    time.sleep(server.delay)
                if server.mode == "malformed":
                    self._send(200, raw=b"<html>not json</html>")
                    return
                self._send(200, chat_answer("A", FakeServer.ALTERNATIVES))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake_server():
    server = FakeServer()
    yield server
    server.close()


def test_remote_engine_bars_upper_bound_errors_and_recovery(qtbot, make_window, fake_server):
    settings = GuiSettings(temperature=0.0, engine="remote", remote_url=fake_server.url, remote_timeout=5.0)
    window = make_window(settings)
    panel = window.settings_panel
    assert panel.remote_box.isVisibleTo(panel) and not panel.local_box.isVisibleTo(panel)
    with qtbot.waitSignal(window.model_ready, timeout=10_000) as blocker:
        window.start(None)
    info = blocker.args[0]
    assert info.remote and info.name == "fake-model" and info.model_key == "fake-model"
    assert window.status_engine.text() == "server top-20 logprobs"
    assert window.model_button.text().endswith("fake-model   ·   remote")

    ask(window, "Which?", ["Attack", "Defend", "Hide"])
    with qtbot.waitSignal(window.decision_shown, timeout=10_000) as blocker:
        window.decide()
    result = blocker.args[0]
    assert result.engine["kind"] == "remote"
    view = window.result_view
    bars = view.bars.bars
    assert [b.bound for b in bars] == [None, None, "upper"]
    assert bars[2].percent_text().startswith("< ") and not bars[0].percent_text().startswith("<")
    assert view.bound_note.isVisibleTo(view) and "C was below the server's top-20" in view.bound_note.text()
    assert "server top-20 logprobs" in view.engine_note.text() and fake_server.url.removesuffix("/v1") in view.engine_note.text()
    assert "at most" in bars[2].toolTip()
    assert view.bars.values() == pytest.approx([o.probability for o in result.options])
    assert fake_server.requests[-1]["top_logprobs"] == 20
    table = window.inspector.options_table
    assert table.item(2, 1).text().startswith("≤ ") and table.item(2, 3).text().startswith("< ")
    assert "the server listed" in window.inspector.alts_note.text()
    # the inspector and the history know the remote model
    window.history_view.refresh()
    assert window.history_view.rows[0].model == "fake-model" and window.history_view.rows[0].device == "remote"

    # Test connection runs off the UI thread and reports models and logprobs
    qtbot.mouseClick(panel.test_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: "returns logprobs" in panel.connection_status.text(), timeout=10_000)
    assert "fake-model" in panel.connection_status.text() and panel.test_button.isEnabled()
    assert [panel.remote_model.itemText(i) for i in range(panel.remote_model.count())] == ["fake-model", "other"]

    # 401: a plain message, the window keeps working
    fake_server.mode = "401"
    with qtbot.waitSignal(window.decision_failed, timeout=10_000) as blocker:
        window.decide()
    assert "401 unauthorized" in blocker.args[0] and "check the API key" in blocker.args[0]
    assert "401" in view.error_box.text() and view.error_box.isVisibleTo(view)
    assert window.decide_button.isEnabled()
    qtbot.mouseClick(panel.test_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: panel.connection_status.text().startswith("✗"), timeout=10_000)
    assert "401 unauthorized" in panel.connection_status.text()

    for mode, words in (("500", "HTTP 500: model crashed"), ("malformed", "did not answer JSON")):
        fake_server.mode = mode
        with qtbot.waitSignal(window.decision_failed, timeout=10_000) as blocker:
            window.decide()
        assert words in blocker.args[0]

    # a timeout set in the panel reconnects, then a slow answer is a message, not a hang
    fake_server.mode = "ok"
    with qtbot.waitSignal(window.model_ready, timeout=10_000):
        assert panel.set_value("remote_timeout", 0.5)
    assert window.settings.remote_timeout == 0.5
    fake_server.mode = "slow"
    started = time.monotonic()
    with qtbot.waitSignal(window.decision_failed, timeout=10_000) as blocker:
        window.decide()
    assert "no answer within 0.5 s" in blocker.args[0] and time.monotonic() - started < 5

    fake_server.mode = "ok"
    with qtbot.waitSignal(window.decision_shown, timeout=10_000):
        window.decide()
    assert window.result_view.bars.bars[2].bound == "upper"


def test_remote_connection_failure_and_switching_back_to_local(qtbot, make_window, fake_server):
    fake_server.mode = "401"
    window = make_window(GuiSettings(device="CPU", temperature=0.0, engine="remote", remote_url=fake_server.url))
    with qtbot.waitSignal(window.model_error, timeout=10_000) as blocker:
        window.start(FIXTURE)
    assert "401 unauthorized" in blocker.args[0]
    assert window.result_view.currentWidget() is window.result_view.no_model_page
    assert "401" in window.settings_panel.connection_status.text()
    assert not window.decide_button.isEnabled()
    # a server that does not serve the named model says so
    fake_server.mode = "ok"
    with qtbot.waitSignal(window.model_error, timeout=10_000) as blocker:
        window.settings_panel.set_value("remote_model", "missing-model")
    assert "does not serve 'missing-model'" in blocker.args[0]
    # a bad URL is refused before anything is sent
    assert window.settings_panel.set_value("remote_url", "ftp://x") is False
    assert "http://" in window.settings_panel.errors["remote_url"].text()
    # back to the local engine: the model picker's folder (the engine setting follows)
    info = load(qtbot, window)
    assert window.settings.engine == "local" and not info.remote
    assert window.status_engine.text() == "exact full-vocabulary logprobs"
    assert window.settings_panel.local_box.isVisibleTo(window.settings_panel)
    ask(window, "Pick", ["Red", "Blue"])
    with qtbot.waitSignal(window.decision_shown, timeout=30_000) as blocker:
        window.decide()
    assert "Computed locally on CPU · exact full-vocabulary logprobs" == window.result_view.engine_note.text()
    assert not window.result_view.bound_note.isVisibleTo(window.result_view)


def test_remote_settings_round_trip_and_validation(dirs):
    settings = GuiSettings().with_changes(
        engine="remote", remote_url="http://gpu:8000/v1", remote_api_key="k", remote_model="qwen",
        remote_timeout=12.5, remote_constraint="vllm",
    )
    save_settings(settings)
    loaded, warnings = load_settings()
    assert warnings == [] and loaded == settings
    config = loaded.remote_config()
    assert (config.base_url, config.api_key, config.model, config.timeout, config.constraint) == (
        "http://gpu:8000", "k", "qwen", 12.5, "vllm")
    settings_path().write_text(json.dumps({"engine": "cloud", "remote_url": "gpu:8000", "remote_timeout": 0,
                                           "remote_constraint": "grammar"}))
    loaded, warnings = load_settings()
    assert loaded.engine == "local" and loaded.remote_url == "" and loaded.remote_timeout == 60.0
    assert len(warnings) == 4
    from engine.errors import SettingsError

    with pytest.raises(SettingsError, match="enter the server's URL"):
        GuiSettings(engine="remote").remote_config()


# ---------------------------------------------------------------- model management (#9)


def test_doctor_on_a_broken_folder_shows_the_problem_lines(qtbot, dirs, tmp_path):
    from app.gui import create_app
    from ui.model_tasks import DoctorDialog

    create_app()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "qwen3_5_text", "vocab_size": 100}))
    dialog = DoctorDialog(model_tools(), str(broken))
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: not dialog.running and dialog.summary.isVisibleTo(dialog), timeout=30_000)
    lines = dialog.line_texts()
    assert any(line.startswith("✓  OpenVINO") for line in lines)
    problems = [line for line in lines if line.startswith("✗")]
    assert problems and "→ fix:" in problems[0]
    assert "problem" in dialog.summary.text() and not dialog.load_button.isVisibleTo(dialog)

    good = DoctorDialog(model_tools(), FIXTURE)
    qtbot.addWidget(good)
    qtbot.waitUntil(lambda: not good.running and good.summary.isVisibleTo(good), timeout=30_000)
    assert any("folder complete" in line for line in good.line_texts())
    assert good.load_button.isVisibleTo(good)
    qtbot.mouseClick(good.load_button, Qt.LeftButton)
    assert good.chosen == FIXTURE


def test_convert_dialog_shows_the_install_command_without_optimum(qtbot, dirs, tmp_path):
    from app.convert import INSTALL_HINT
    from app.gui import create_app
    from app.model_jobs import convert_task
    from ui.model_tasks import ConvertDialog

    create_app()
    dialog = ConvertDialog(model_tools(), hf_dir=str(tmp_path / "ckpt"), optimum=False)
    qtbot.addWidget(dialog)
    assert dialog.missing.isVisibleTo(dialog) and dialog.pip_command.text() == INSTALL_HINT
    assert "pip install" in dialog.pip_command.text()
    assert not dialog.convert_button.isEnabled() and dialog.start() is False
    assert dialog.out_dir.text() == str(tmp_path / "ckpt") + "-ov"
    # the job itself refuses a folder that is not a checkpoint, in plain words, off the UI thread
    (tmp_path / "ckpt").mkdir()
    task = convert_task(tmp_path / "ckpt", tmp_path / "out")
    with qtbot.waitSignal(task.failed, timeout=10_000) as blocker:
        task.start()
    assert "config.json: missing file" in blocker.args[0]


@pytest.mark.skipif(os.name != "posix", reason="process-group check uses POSIX signals")
def test_convert_runs_in_a_child_process_and_cancel_ends_its_whole_tree(qtbot, dirs, tmp_path, monkeypatch):
    import app.convert as convert_module
    from app.gui import create_app
    from ui.model_tasks import ConvertDialog

    create_app()
    monkeypatch.setattr(convert_module, "optimum_available", lambda: True)
    monkeypatch.setattr(convert_module, "check_checkpoint", lambda path: {"model_type": "qwen3_5_text"})
    out = tmp_path / "export"
    pids = tmp_path / "pids"
    # A stand-in for `decider convert`: it starts a grandchild (as optimum's exporter is), writes into the
    # output folder and prints progress, then would run for a minute.
    child = (
        "import os, subprocess, sys, time\n"
        f"os.makedirs({str(out)!r}, exist_ok=True); open(os.path.join({str(out)!r}, 'part.bin'), 'w').write('x')\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{g.pid}}')\n"
        "print('Exporting 1/3', flush=True); print('Exporting 2/3', flush=True)\n"
        "time.sleep(60)\n"
    )
    import app.model_jobs as worker_module

    real = worker_module.convert_task
    monkeypatch.setattr(worker_module, "convert_task",
                        lambda hf, o, w: real(hf, o, w, command=[sys.executable, "-c", child]))
    dialog = ConvertDialog(model_tools(), hf_dir=str(tmp_path / "ckpt"), optimum=True)
    qtbot.addWidget(dialog)
    dialog.out_dir.setText(str(out))
    assert dialog.start()
    qtbot.waitUntil(lambda: "Exporting 2/3" in dialog.log.toPlainText(), timeout=20_000)
    assert dialog.progress.isVisibleTo(dialog) and dialog.cancel_button.isVisibleTo(dialog)
    parent_pid, grandchild_pid = map(int, pids.read_text().split())
    qtbot.mouseClick(dialog.cancel_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: not dialog.running, timeout=20_000)
    assert "Cancelled" in dialog.status.text()
    assert not out.exists()  # the unfinished export is gone

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie not yet reaped by its (dead) parent counts as gone
            return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
        except OSError:
            return True

    qtbot.waitUntil(lambda: gone(parent_pid) and gone(grandchild_pid), timeout=10_000)


def test_download_dialog_pulls_from_a_local_hub_with_progress(qtbot, dirs, tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    from test_models_cli import EXPORT, REPO, FixtureHub

    from app.gui import create_app
    from ui.model_tasks import DownloadDialog

    create_app()
    hub = FixtureHub()
    try:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        dialog = DownloadDialog(model_tools(), dest_root=str(tmp_path / "models"))
        qtbot.addWidget(dialog)
        assert not dialog.download_button.isEnabled()
        dialog.repo.setText("not a repo id!")
        assert dialog.start() is False and "not a repository id" in dialog.status.text()
        dialog.repo.setText(REPO)
        seen = []
        dialog.progress.valueChanged.connect(seen.append)
        assert dialog.start()
        qtbot.waitUntil(lambda: not dialog.running, timeout=30_000)
        assert dialog.outcome is not None and dialog.outcome.usable, dialog.status.text()
        folder = Path(dialog.outcome.path)
        assert folder == tmp_path / "models" / REPO.replace("/", "--")
        assert all((folder / p.name).read_bytes() == p.read_bytes() for p in EXPORT.iterdir() if p.is_file())
        assert dialog.progress.value() == 1000 and any(0 < v < 1000 for v in seen)
        assert "ready OpenVINO export" in dialog.status.text()
        qtbot.mouseClick(dialog.load_button, Qt.LeftButton)
        assert dialog.chosen == str(folder)

        # Cancel: stops the job, says the next download resumes (a slow link, so the click lands mid-transfer)
        hub.pace = 0.05
        cancelled = DownloadDialog(model_tools(), dest_root=str(tmp_path / "other"))
        qtbot.addWidget(cancelled)
        cancelled.repo.setText(REPO)
        assert cancelled.start()
        assert cancelled.cancel_button.isVisibleTo(cancelled)
        qtbot.mouseClick(cancelled.cancel_button, Qt.LeftButton)
        qtbot.waitUntil(lambda: not cancelled.running, timeout=30_000)
        assert "Cancelled" in cancelled.status.text() and "resume" in cancelled.status.text()
        assert not cancelled.load_button.isVisibleTo(cancelled) and cancelled.download_button.isEnabled()
        hub.pace = 0.0

        again = DownloadDialog(model_tools(), dest_root=str(tmp_path / "models"))
        qtbot.addWidget(again)
        again.repo.setText("decider-test/missing")
        again.start()
        qtbot.waitUntil(lambda: not again.running, timeout=30_000)
        assert "Download failed" in again.status.text() and "not found" in again.status.text()
    finally:
        hub.close()


def test_model_picker_offers_the_model_tools_and_downloaded_models(qtbot, dirs, tmp_path):
    from app.models import PULL_MANIFEST, models_root
    from ui.model_picker import ModelPickerDialog

    downloaded = models_root() / "owner--model"
    downloaded.mkdir(parents=True)
    (downloaded / PULL_MANIFEST).write_text("{}")
    dialog = ModelPickerDialog(model_tools(), [FIXTURE])
    qtbot.addWidget(dialog)
    assert [dialog.list.item(i).data(Qt.UserRole) for i in range(dialog.list.count())] == [FIXTURE, str(downloaded)]
    assert "downloaded" in dialog.list.item(1).text()
    for button in (dialog.download_button, dialog.convert_button, dialog.doctor_button):
        assert button.isEnabled()
    assert dialog.selected_path() == FIXTURE


def test_new_ui_modules_never_import_openvino():
    code = (
        "import sys; import ui.calibration_tab, ui.history_tab, ui.reliability_chart, ui.model_tasks, ui.result_view, ui.settings_panel, ui.model_picker, "
        "ui.main_window, app.engine_thread, app.task_runner, app.model_jobs, app.gui; "
        "bad = [m for m in sys.modules if m == 'openvino' or m.startswith('openvino.') or m == 'engine.runner']; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen"}, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_display_is_a_plain_error_not_a_qt_abort():
    from app.gui import display_problem

    problem = display_problem({}, "linux")
    assert problem and "no display" in problem and "xvfb-run decider" in problem and "decider ask" in problem
    assert display_problem({"DISPLAY": ":0"}, "linux") is None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is None
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None  # tests, screenshots
    assert display_problem({}, "win32") is None and display_problem({}, "darwin") is None
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    done = subprocess.run([sys.executable, "-m", "app.cli", "gui"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no display" in done.stderr
