"""The window with pictures: pasted, dropped and captured images decided on through the real engine (offscreen)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("pytestqt")

from PySide6.QtCore import QMimeData, QUrl  # noqa: E402
from PySide6.QtGui import QGuiApplication, QImage  # noqa: E402

from decider.app.images import load_image_file  # noqa: E402
from decider.app.preferences import GuiSettings  # noqa: E402
from support.models import FIXTURES, model_dir  # noqa: E402

VL = str(model_dir("qwen35-vl"))
SCREEN = FIXTURES / "images" / "screen_640x360.png"


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    from decider.app.gui import build_window, create_app

    monkeypatch.setenv("DECIDER_CONFIG_DIR", str(tmp_path / "config"))
    create_app()
    engine, win = build_window(GuiSettings(device="CPU"), register_global_hotkey=False, history=False)
    qtbot.addWidget(win)
    with qtbot.waitSignal(win.model_ready, timeout=60_000):
        win.load_model(VL)
    win.question.setPlainText("Which door is open?")
    win.options.set_options(["Left", "Right"])
    yield win
    win.close()
    engine.close()


def test_qimage_pixels_equal_the_decoded_file():
    from decider.ui.image_input import qimage_to_pixels

    assert np.array_equal(qimage_to_pixels(QImage(str(SCREEN))), load_image_file(SCREEN))


def test_a_pasted_image_goes_with_the_decision(qtbot, window):
    QGuiApplication.clipboard().setImage(QImage(str(SCREEN)))
    assert window.image_slot.paste()
    assert "640×360" in window.image_slot.caption.text()
    with qtbot.waitSignal(window.decision_shown, timeout=60_000) as blocker:
        assert window.decide()
    result = blocker.args[0]
    assert result.usage["image_tokens"] == 60
    assert np.array_equal(window.last_request.images[0], load_image_file(SCREEN))
    window.image_slot.clear()
    assert window.build_request().images == ()


def test_a_dropped_file_and_a_dropped_non_image(qtbot, window):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(FIXTURES / "README.md"))])
    assert not window.image_slot.drop(mime)
    assert "not an image" in window.image_slot.caption.text()
    mime.setUrls([QUrl.fromLocalFile(str(SCREEN))])
    assert window.image_slot.drop(mime)
    assert window.image_slot.pixels()[0].shape == (360, 640, 3)


def test_capture_hotkey_decides_on_the_screen_and_times_it(qtbot, window):
    flow = window.screen_decisions
    with qtbot.waitSignal(flow.latency_measured, timeout=60_000) as blocker:
        flow.capture_triggered.emit()
    assert blocker.args[0] > 0
    assert window.status_latency.text().startswith("capture → bars")
    assert window.controller.source == "capture" and window.last_result.usage["image_tokens"] > 0
    assert window.image_slot.image() is not None


def test_a_text_model_says_it_cannot_see(qtbot, window):
    with qtbot.waitSignal(window.model_ready, timeout=60_000):
        window.load_model(str(model_dir("qwen35-text")))
    QGuiApplication.clipboard().setImage(QImage(str(SCREEN)))
    window.image_slot.paste()
    with qtbot.waitSignal(window.decision_failed, timeout=30_000) as blocker:
        window.decide()
    assert "cannot see images" in blocker.args[0]
