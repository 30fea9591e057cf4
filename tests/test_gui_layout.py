"""The window at every size it allows (issue 39 item 1): from its minimum 900×560 up to a large screen, settings
open and closed, with a model loaded and a decision shown, no widget is squeezed below its minimum, sticks out
of its parent or overlaps a sibling, and no label is cut without its text in a tooltip (tests/support/
layout_checks.py says how each is measured). Offscreen, on the real window, engine and fixture model; each size's
picture is saved under the test's tmp dir (DECIDER_LAYOUT_SHOTS=folder keeps them to look at).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("pytestqt")

from support.gui import FIXTURE, ask, dirs, load, make_window  # noqa: E402,F401 (pytest fixtures)
from support.layout_checks import layout_problems  # noqa: E402

from PySide6.QtWidgets import QApplication  # noqa: E402

from decider.app.preferences import GuiSettings  # noqa: E402

SIZES = [(900, 560), (1024, 700), (1280, 800), (1920, 1080)]
QUESTION = "Which road should the caravan take through the mountain pass tonight, with the storm coming?"
OPTIONS = ["the northern road past the old watchtower", "the southern road along the river", "wait for dawn"]


def settle(qtbot) -> None:
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(10)


def decided_window(qtbot, make_window, show_settings: bool):
    window = make_window(GuiSettings(device="CPU", show_settings=show_settings), register_global_hotkey=False,
                         history=False)
    window.show()
    qtbot.waitExposed(window)
    load(qtbot, window)
    ask(window, QUESTION, OPTIONS)
    with qtbot.waitSignal(window.decision_shown, timeout=60_000):
        assert window.decide()
    return window


def shot(window, tmp_path: Path, name: str) -> None:
    folder = Path(os.environ.get("DECIDER_LAYOUT_SHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    assert window.grab().save(str(folder / f"{name}.png"))


@pytest.mark.parametrize("show_settings", [False, True], ids=["settings-closed", "settings-open"])
def test_every_allowed_size_lays_out_without_clipping(qtbot, make_window, tmp_path, show_settings):
    window = decided_window(qtbot, make_window, show_settings)
    assert (window.minimumWidth(), window.minimumHeight()) == SIZES[0]  # the smallest size tested is the one allowed
    found = {}
    for width, height in SIZES:
        window.resize(width, height)
        settle(qtbot)
        assert (window.width(), window.height()) == (width, height)
        shot(window, tmp_path, f"{width}x{height}-{'settings' if show_settings else 'no-settings'}")
        problems = layout_problems(window)
        if problems:
            found[f"{width}×{height}"] = problems
        # what a user needs is on screen (possibly scrolled to): the form's Decide and the settings when open
        assert window.decide_button.isVisibleTo(window)
        assert window.settings_panel.isVisibleTo(window) == show_settings
    assert not found, "\n".join(f"{size}:\n  " + "\n  ".join(problems) for size, problems in found.items())


def test_a_narrow_window_opens_the_settings_as_a_drawer_that_a_decision_closes(qtbot, make_window):
    window = decided_window(qtbot, make_window, show_settings=False)
    window.resize(900, 600)
    settle(qtbot)
    assert window.tabs.isVisibleTo(window)
    window.settings_button.setChecked(True)
    settle(qtbot)
    # three columns do not fit at 900: the settings take the decision's place, the form stays
    assert window.columns.drawer and window.columns.covers_decision()
    assert window.settings_panel.isVisibleTo(window) and not window.tabs.isVisibleTo(window)
    assert window.ask_scroll.isVisibleTo(window)
    assert layout_problems(window) == []
    with qtbot.waitSignal(window.decision_shown, timeout=60_000):
        assert window.decide()
    settle(qtbot)
    assert not window.settings.show_settings and not window.settings_button.isChecked()
    assert window.tabs.isVisibleTo(window) and not window.settings_panel.isVisibleTo(window)
    # wide enough again: the settings are a column beside the decision
    window.resize(1280, 800)
    window.settings_button.setChecked(True)
    settle(qtbot)
    assert not window.columns.drawer
    assert window.settings_panel.isVisibleTo(window) and window.tabs.isVisibleTo(window)
    assert window.settings_panel.geometry().left() >= window.center_panel.geometry().right()


def test_a_short_window_scrolls_the_form_instead_of_squeezing_its_buttons(qtbot, make_window):
    window = decided_window(qtbot, make_window, show_settings=False)
    window.resize(900, 560)
    settle(qtbot)
    for button in (window.image_slot.paste_button, window.image_slot.capture_button, window.decide_button):
        assert button.height() >= button.minimumSizeHint().height(), button.text()
    bar = window.ask_scroll.verticalScrollBar()
    assert bar.maximum() > 0  # the form is taller than the column: it scrolls
    window.ask_scroll.ensureWidgetVisible(window.decide_button)
    settle(qtbot)
    top = window.decide_button.mapTo(window.ask_scroll.viewport(), window.decide_button.rect().topLeft()).y()
    assert 0 <= top and top + window.decide_button.height() <= window.ask_scroll.viewport().height()


def test_a_model_switch_clears_the_last_decisions_latency_and_tokens(qtbot, make_window):
    from decider.app.config import DEMO_MODEL_DIR

    window = decided_window(qtbot, make_window, show_settings=False)
    assert window.status_latency.text().startswith("latency ") and "prompt" in window.status_tokens.text()
    load(qtbot, window, str(DEMO_MODEL_DIR))
    assert window.status_latency.text() == "" and window.status_tokens.text() == ""
    assert window.status_model.text() == "demo model"


def test_loading_a_bundled_model_by_its_path_names_it_by_its_label(qtbot, make_window):
    """A second start opens the last model by its path (not flagged as the demo): it is still "demo model"."""
    from decider.app.config import DEMO_MODEL_DIR

    window = make_window(register_global_hotkey=False, history=False)
    with qtbot.waitSignal(window.model_ready, timeout=60_000):
        window.start(str(DEMO_MODEL_DIR), False)
        assert window.model_button.text() == "Loading demo model…"
    # a reload of the loaded model (a device change) keeps its name too
    with qtbot.waitSignal(window.model_ready, timeout=60_000):
        window.load_model(str(DEMO_MODEL_DIR))
        assert window.model_button.text() == "Loading demo model…"
    with qtbot.waitSignal(window.model_ready, timeout=60_000):
        window.load_model(FIXTURE)
        assert window.model_button.text() == f"Loading {Path(FIXTURE).name}…"


def test_a_narrow_status_bar_leaves_labels_out_whole_and_keeps_their_text_in_a_tooltip(qtbot, make_window):
    window = decided_window(qtbot, make_window, show_settings=False)
    status = window.status
    texts = {status.model: "seeing demo model", status.device: "CPU", status.engine: "exact logprobs (f32)",
             status.latency: "capture → bars 12,345 ms", status.tokens: "1,234 prompt · 1 answer tokens",
             status.hotkey: "Ctrl+Shift+D (in app only)"}
    for label, text in texts.items():
        label.setText(text)
    window.resize(900, 560)
    settle(qtbot)
    assert layout_problems(window) == []
    left_out = [label for label in texts if not label.isVisibleTo(window)]
    assert status.hotkey in left_out and status.model not in left_out and status.latency not in left_out
    assert status.model.toolTip().split("\n") == [texts[label] for label in texts if label in left_out]
    window.resize(1920, 1080)
    settle(qtbot)
    assert all(label.isVisibleTo(window) for label in texts) and status.model.toolTip() == ""
    assert layout_problems(window) == []
