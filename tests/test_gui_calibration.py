"""The Calibration and History tabs and the reliability chart, on a real history database."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pytestqt")

from support.gui import GREEDY, ask, dirs, load, make_window  # noqa: E402,F401 (pytest fixtures)

from PySide6.QtCore import Qt  # noqa: E402

from decider.app.gui_ports import calibration  # noqa: E402
from decider.app.preferences import GuiSettings  # noqa: E402
from decider.engine.decisions.decide import DecisionRequest  # noqa: E402
from support.results import letters_result  # noqa: E402


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
        decision_id = store.add(request, letters_result(logprobs, request), model=model, device="CPU", source="test")
        store.label(decision_id, right)
        ids.append(decision_id)
    return ids


def is_color(actual, expected, tolerance: int = 6) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(actual.getRgb()[:3], expected.getRgb()[:3]))


def test_reliability_chart_renders_offscreen(qtbot, dirs):
    from decider.app.gui import create_app
    from decider.engine.decisions.calibration import evaluate
    from decider.ui.reliability_chart import ReliabilityChart
    from decider.ui.theme import color

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
    from decider.app.gui import create_app
    from decider.app.history import HistoryStore
    from decider.ui.history_tab import HistoryView

    create_app()
    store = HistoryStore(tmp_path / "history.sqlite3")
    requests = [DecisionRequest(f"q{i}?", ("Left", "Right", "Stay"), sampling=GREEDY) for i in range(3)]
    ids = [store.add(request, letters_result([-0.2, -2.0 - i, -3.0], request), model="m", device="CPU", source="test")
           for i, request in enumerate(requests)]
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
    from decider.app.calibration_history import calibrated_probabilities, saved_temperature
    from decider.app.history import default_store
    from decider.ui.bars import percent_text

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
    from decider.app.gui import create_app
    from decider.app.history import HistoryStore
    from decider.ui.calibration_tab import CalibrationView

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
