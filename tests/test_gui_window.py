"""The main window against the real engine on the fixture model, offscreen: deciding, models, cancel,
responsiveness, engine errors, the options editor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("pytestqt")

from support.gui import FIXTURE, ask, direct_service, dirs, gui_dirs, load, make_window  # noqa: E402,F401 (pytest fixtures)

from PySide6.QtCore import QElapsedTimer, Qt, QTimer  # noqa: E402
from PySide6.QtGui import QGuiApplication  # noqa: E402

from decider.app.preferences import GuiSettings, load_settings  # noqa: E402


def test_decide_click_shows_the_engines_probabilities(qtbot, make_window, direct_service):
    window = make_window(GuiSettings(device="CPU", temperature=0.0))
    info = load(qtbot, window)
    assert info.name == "qwen35-text" and info.device == "CPU"
    assert window.model_button.text().endswith("qwen35-text   ·   CPU")
    ask(window, "The bridge is guarded. What should the party do?", ["Sneak past", "Fight", "Go around"])
    with qtbot.waitSignal(window.decision_shown, timeout=30_000) as blocker:
        qtbot.mouseClick(window.decide_button, Qt.LeftButton)
    result = blocker.args[0]

    expected = direct_service.decide(window.last_request)
    shown = window.result_view.bars.values()
    assert shown == pytest.approx([o.probability for o in expected.options], rel=1e-6, abs=1e-9)
    assert shown == pytest.approx([o.probability for o in result.options], abs=0)
    assert [b.text for b in window.result_view.bars.bars] == ["Sneak past", "Fight", "Go around"]
    chosen = [b.chosen for b in window.result_view.bars.bars]
    assert chosen.index(True) == result.choice_index == expected.choice_index  # greedy: same draw
    from decider.ui.bars import percent_text

    assert [b.percent_text() for b in window.result_view.bars.bars] == [percent_text(o.probability) for o in expected.options]
    assert window.result_view.choice_text.text() == expected.options[expected.choice_index].text
    assert "Coverage" in window.result_view.coverage.text()
    # status bar: model, device, latency, token counts
    assert window.status_model.text() == "qwen35-text"
    assert window.status_device.text() == "CPU"
    assert window.status_latency.text().endswith("ms")
    assert f"{result.usage['prompt_tokens']} prompt" in window.status_tokens.text()
    # the inspector shows the same distribution and the alternatives outside the options
    table = window.inspector.options_table
    assert table.rowCount() == 3
    assert [table.item(r, 3).text() for r in range(3)] == [percent_text(o.probability) for o in expected.options]
    assert window.inspector.alts_table.rowCount() > 0


def test_ctrl_enter_decides_and_permute_shows_debiased_bars(qtbot, make_window, direct_service):
    window = make_window(GuiSettings(device="CPU", temperature=0.0, permute=True))
    load(qtbot, window)
    ask(window, "Pick one", ["Red", "Green"])
    window.show()
    qtbot.waitExposed(window)
    window.activateWindow()
    window.question.setFocus()
    qtbot.waitUntil(lambda: QGuiApplication.focusWindow() is not None, timeout=5000)
    with qtbot.waitSignal(window.decision_shown, timeout=30_000) as blocker:
        qtbot.keyClick(window.question, Qt.Key_Return, Qt.ControlModifier)
    result = blocker.args[0]
    expected = direct_service.decide(window.last_request)
    assert window.result_view.bars.values() == pytest.approx([o.debiased_probability for o in expected.options], rel=1e-6)
    assert all(b.raw is not None for b in window.result_view.bars.bars)
    assert not window.inspector.options_table.isColumnHidden(4)
    assert result.options[0].debiased_probability is not None


def test_invalid_request_is_explained_not_sent(qtbot, make_window):
    window = make_window()
    load(qtbot, window)
    ask(window, "Only one?", ["Alone"])
    assert window.decide() is False
    assert "only one option" in window.result_view.error_box.text()
    ask(window, "Twice", ["Same", "same"])
    assert window.decide() is False
    assert "duplicate option" in window.result_view.error_box.text()


def test_the_window_reopens_where_it_was_closed(qtbot, make_window):
    window = make_window()
    window.show()
    area = QGuiApplication.primaryScreen().availableGeometry()
    window.setGeometry(area.x() + 30, area.y() + 40, 1000, 640)
    window.close()  # closing remembers and saves at once
    saved, _ = load_settings()
    assert saved.window_geometry[2:] == (1000, 640) and saved.window_maximized is False
    again = make_window(saved)
    assert (again.width(), again.height()) == (1000, 640)
    assert (again.x(), again.y()) == saved.window_geometry[:2]
    # a geometry on a monitor that is gone is ignored: the default size, not an invisible window
    elsewhere = make_window(saved.with_changes(window_geometry=(area.right() + 5000, 0, 1000, 640)))
    assert (elsewhere.width(), elsewhere.height()) == (1240, 780)
    with pytest.raises(Exception, match="window_geometry must be"):
        saved.with_changes(window_geometry=(0, 0, 0, 640))


def test_bad_model_folder_shows_the_error_and_the_app_keeps_working(qtbot, make_window, tmp_path):
    window = make_window()
    with qtbot.waitSignal(window.model_error, timeout=30_000) as blocker:
        window.load_model(str(tmp_path / "missing"))
    assert "not a folder" in blocker.args[0]
    assert window.result_view.currentWidget() is window.result_view.no_model_page
    assert "not a folder" in window.result_view.no_model_error.text()
    assert not window.decide_button.isEnabled()

    bad = tmp_path / "llama"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with qtbot.waitSignal(window.model_error, timeout=30_000) as blocker:
        window.load_model(str(bad))
    assert "unknown model_type 'llama'" in blocker.args[0]

    load(qtbot, window)  # the app still works
    ask(window, "Still alive?", ["Yes", "No"])
    with qtbot.waitSignal(window.decision_shown, timeout=30_000):
        window.decide()
    # a bad folder after a good one keeps the loaded model
    with qtbot.waitSignal(window.model_error, timeout=30_000):
        window.load_model(str(bad))
    assert window.model_info.name == "qwen35-text"
    assert "unknown model_type" in window.result_view.error_box.text()
    assert window.decide_button.isEnabled()


def test_first_run_model_choice(gui_dirs, tmp_path, monkeypatch):
    import decider.app.gui as gui

    monkeypatch.setattr(gui, "demo_model_dir", lambda: None)
    assert gui.initial_model(None, GuiSettings()) == (None, False)
    assert gui.initial_model(None, GuiSettings(last_model=FIXTURE)) == (FIXTURE, False)
    assert gui.initial_model(None, GuiSettings(last_model=str(tmp_path / "gone"))) == (None, False)
    demo = tmp_path / "demo-model"
    monkeypatch.setattr(gui, "demo_model_dir", lambda: demo)
    assert gui.initial_model(None, GuiSettings()) == (str(demo), True)
    assert gui.initial_model("/x/y", GuiSettings(last_model=FIXTURE)) == ("/x/y", False)


def test_empty_state_then_demo_label(qtbot, make_window):
    window = make_window()
    assert window.result_view.currentWidget() is window.result_view.no_model_page
    assert window.result_view.choose_button.isVisibleTo(window)  # shown with the empty state, whether or not the window is on screen
    with qtbot.waitSignal(window.model_ready, timeout=60_000) as blocker:
        window.load_model(FIXTURE, is_demo=True)
    assert blocker.args[0].name == "demo model"
    assert window.status_model.text() == "demo model"
    # a bundled demo is remembered like any folder (issue 27): the window reopens on it
    assert window.settings.recent_models == (os.path.abspath(FIXTURE),) and window.settings.last_model == os.path.abspath(FIXTURE)
    # the bundled folder chosen by its path (--model, the picker) is labelled the same way
    from decider.app.config import DEMO_MODEL_DIR

    with qtbot.waitSignal(window.model_ready, timeout=60_000) as blocker:
        window.load_model(str(DEMO_MODEL_DIR))
    assert blocker.args[0].name == "demo model" and blocker.args[0].is_demo
    assert window.settings.recent_models[0] == str(DEMO_MODEL_DIR) and window.settings.last_model == str(DEMO_MODEL_DIR)


def test_cancel_stops_a_long_think_generation(qtbot, make_window):
    settings = GuiSettings(device="CPU", think=True, reasoning_budget=32768, max_tokens=32768, seed=3)
    window = make_window(settings)
    load(qtbot, window)
    ask(window, "Think about it for a long time", ["Now", "Later"])
    # worker signals come from the engine thread: collect them (list.append is thread-safe) and poll
    progress: list[int] = []
    cancelled: list[bool] = []
    window.worker.progress.connect(lambda done, total: progress.append(done))
    window.worker.cancelled.connect(lambda: cancelled.append(True))
    assert window.decide()
    qtbot.waitUntil(lambda: bool(progress), timeout=30_000)
    assert not window.cancel_button.isHidden() and window.decide_button.isHidden()
    started = time.perf_counter()
    qtbot.mouseClick(window.cancel_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: bool(cancelled) and not window.deciding, timeout=10_000)
    assert time.perf_counter() - started < 5
    assert not window.deciding
    assert not window.decide_button.isHidden() and window.cancel_button.isHidden()
    assert window.result_view.error_box.text().startswith("Cancelled")
    assert max(progress) < 32768
    # and the engine is free again
    window.settings_panel.set_value("think", False)
    with qtbot.waitSignal(window.decision_shown, timeout=30_000):
        assert window.decide()


def _heartbeat_during_decision(qtbot, window, run_ms: float = 700) -> tuple[float, int, float]:
    """(milliseconds measured, decisions started, largest gap between 10 ms ticks) while think decisions run.

    The decision thinks with a budget far beyond run_ms and is cancelled once the stretch has run that
    long. How soon a sampled reasoning closes depends on the CPU (its precision picks the draws) and
    on its speed, so a decision that ends early is followed at once by the next: the stretch measured
    is run_ms of deciding on a fast, a slow or a busy machine alike, and the hand-over between two
    decisions (the result shown, the next one queued) is measured too.
    """
    ticks: list[float] = []
    clock = QElapsedTimer()
    clock.start()
    heartbeat = QTimer()
    heartbeat.setTimerType(Qt.PreciseTimer)
    heartbeat.setInterval(10)
    heartbeat.timeout.connect(lambda: ticks.append(clock.nsecsElapsed() / 1e6))
    heartbeat.start()
    qtbot.wait(50)
    started = clock.nsecsElapsed() / 1e6
    finished: list[str] = []
    window.worker.cancelled.connect(lambda: finished.append("cancelled"))
    window.decision_shown.connect(lambda result: finished.append("decided"))

    def elapsed() -> float:
        return clock.nsecsElapsed() / 1e6 - started

    decisions = 0
    while elapsed() < run_ms:
        finished.clear()
        qtbot.waitUntil(lambda: not window.deciding, timeout=30_000)
        assert window.decide()
        decisions += 1
        qtbot.waitUntil(lambda: bool(finished) or elapsed() >= run_ms, timeout=60_000)
    running = elapsed()
    if not finished:
        window.cancel()
        qtbot.waitUntil(lambda: bool(finished), timeout=30_000)
    ended = clock.nsecsElapsed() / 1e6
    qtbot.wait(30)
    heartbeat.stop()
    during = [t for t in ticks if started <= t <= ended + 15]
    gaps = [b - a for a, b in zip(during, during[1:])]
    return running, decisions, max(gaps)


@pytest.mark.parametrize("budget", [32768, 4], ids=["one-long-decision", "decisions-back-to-back"])
def test_event_loop_heartbeat_during_a_decision(qtbot, make_window, budget):
    settings = GuiSettings(device="CPU", think=True, reasoning_budget=budget, seed=3)
    window = make_window(settings)
    load(qtbot, window)
    ask(window, "A decision that thinks for a while", ["Left", "Right", "Straight"])
    measured = []
    for attempt in range(2):  # a busy shared machine can stall any process once; a design flaw stalls both
        duration, decisions, gap = _heartbeat_during_decision(qtbot, window)
        measured.append(gap)
        print(f"\nheartbeat: {decisions} decision(s) ran {duration:.0f} ms, max gap between 10 ms ticks {gap:.1f} ms")
        assert duration >= 500
        assert budget > 32 or decisions > 1  # four reasoning tokens cannot last 700 ms: the hand-over is measured
        if gap < 50:
            break
    assert min(measured) < 50, f"the event loop stalled {measured} ms"


def test_device_change_reloads_and_device_errors_are_plain(qtbot, make_window):
    window = make_window(GuiSettings(device="AUTO"))
    info = load(qtbot, window)
    assert info.device == "CPU"  # AUTO on a machine with only a CPU
    with qtbot.waitSignal(window.model_error, timeout=60_000) as blocker:
        window.settings_panel.fields["device"].setCurrentText("NPU")
    assert "device NPU is not available; OpenVINO sees: CPU" in blocker.args[0]
    assert window.model_info is info and window.decide_button.isEnabled()  # the CPU model stays
    with qtbot.waitSignal(window.model_ready, timeout=60_000) as blocker:
        window.settings_panel.fields["device"].setCurrentText("CPU")
    assert blocker.args[0].device == "CPU" and window.status_device.text() == "CPU"


def test_engine_exception_becomes_a_message(qtbot, make_window):
    window = make_window()
    load(qtbot, window)

    def broken(*args, **kwargs):
        raise RuntimeError("simulated engine bug")

    window.worker.service.decide = broken
    ask(window, "Will it crash?", ["No", "Yes"])
    with qtbot.waitSignal(window.decision_failed, timeout=10_000) as blocker:
        window.decide()
    assert "simulated engine bug" in blocker.args[0]
    assert "simulated engine bug" in window.result_view.error_box.text()
    assert not window.deciding and window.decide_button.isEnabled()


def test_options_editor_paste_reorder_remove(qtbot, gui_dirs):
    from decider.ui.options_editor import OptionsEditor

    editor = OptionsEditor()
    qtbot.addWidget(editor)
    QGuiApplication.clipboard().setText("A. first\nB. second\n- third")
    editor.rows[0].line.setFocus()
    qtbot.keyClick(editor.rows[0].line, Qt.Key_V, Qt.ControlModifier)
    assert editor.options() == ["first", "second", "third"]
    editor.move_row(editor.rows[2], -1)
    assert editor.options() == ["first", "third", "second"]
    editor.remove_row(editor.rows[0])
    assert editor.options() == ["third", "second"]
    editor.remove_row(editor.rows[0])  # never fewer than two rows: the text is cleared instead
    assert len(editor.rows) == 2 and editor.options() == ["second"]
    editor.set_options([f"o{i}" for i in range(12)])
    assert len(editor.options()) == 10 and not editor.add_button.isEnabled()


def test_no_display_is_a_plain_error_not_a_qt_abort():
    from decider.app.gui import display_problem

    problem = display_problem({}, "linux")
    assert problem and "no display" in problem and "xvfb-run decider" in problem and "decider ask" in problem
    assert display_problem({"DISPLAY": ":0"}, "linux") is None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is None
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None  # tests, screenshots
    assert display_problem({}, "win32") is None and display_problem({}, "darwin") is None
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    done = subprocess.run([sys.executable, "-m", "decider.app.cli", "gui"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no display" in done.stderr


def test_a_device_fallback_is_shown_in_the_status_bar(qtbot, make_window, monkeypatch):
    """AUTO on a laptop whose NPU cannot compile the model: the window loads on the CPU and says why."""
    import decider.app.service
    from decider.engine.runners.choice import open_runner
    from test_devices import _NpuCompileFails

    monkeypatch.setattr(decider.app.service, "open_runner", lambda path, options: open_runner(path, options, _NpuCompileFails()))
    window = make_window(GuiSettings(device="AUTO"))
    info = load(qtbot, window)
    assert info.device == "CPU" and len(info.notices) == 1
    assert "NPU could not run the model" in info.notices[0]
    assert window.status_device.text().startswith("CPU") and "⚠" in window.status_device.text()
    assert "forced compile failure" in window.status_device.toolTip()
    assert "NPU could not run the model" in window.status.current_message()
