"""Watch mode on a real (virtual) X screen: the real grabber reads a "game" window through the X server, an
unchanged game costs no decision, a changed one is decided with its new picture, and Pause stops the grabs.

Skipped where Xvfb is not installed (CI installs it). Runs in a subprocess so this process's offscreen Qt is
not disturbed; the window pictures are saved for a person to look at (DECIDER_LAYOUT_SHOTS=folder keeps them).
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from support.models import model_dir
from test_gui_xvfb import XVFB, png_size, run_under_xvfb

pytestmark = pytest.mark.skipif(XVFB is None, reason="xvfb-run is not installed")

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from PySide6.QtCore import QElapsedTimer, QRect, QTimer
    from PySide6.QtGui import QColor, QPalette
    from PySide6.QtWidgets import QApplication, QWidget
    from decider.app.gui import build_window, create_app
    from decider.app.preferences import GuiSettings
    from decider.ui.image_input import qimage_to_pixels

    model, shots = sys.argv[1], sys.argv[2]
    app = create_app()
    engine, window = build_window(GuiSettings(device="CPU", watch_interval_ms=150, show_settings=False),
                                  register_global_hotkey=False, history=False, record=False)
    window.setGeometry(0, 0, 900, 560)
    window.show()
    game = QWidget(None)  # the "game": a plain window whose colour the test changes
    game.setAutoFillBackground(True)
    game.setGeometry(960, 500, 320, 180)

    def paint(name):
        palette = game.palette()
        palette.setColor(QPalette.ColorRole.Window, QColor(name))
        game.setPalette(palette)
        game.update()

    paint("#2060e0")
    game.show()
    out = {"decided": [], "colours": []}
    window.decision_shown.connect(lambda result: out["decided"].append(result.usage.get("images_encoded")))

    def wait(ms):
        timer = QElapsedTimer(); timer.start()
        while timer.elapsed() < ms:
            app.processEvents()

    def until(check, ms=60_000):
        timer = QElapsedTimer(); timer.start()
        while not check() and timer.elapsed() < ms:
            app.processEvents()
        return check()

    def slot_colour():
        pixels = qimage_to_pixels(window.image_slot.image())
        return [int(v) for v in pixels.reshape(-1, 3).mean(axis=0)]

    with_model = []
    window.model_ready.connect(with_model.append)
    window.load_model(model)
    until(lambda: with_model)
    window.question.setPlainText("The game screen. Attack or retreat?")
    window.options.set_options(["Attack", "Retreat"])
    window.screen_decisions.region = QRect(game.geometry())  # as "Pick region…" keeps it
    window.header.watch_button.setChecked(True)
    until(lambda: len(out["decided"]) >= 1)
    out["colours"].append(slot_colour())
    wait(1500)  # ten grabs of an unchanged game
    watch = window.watch.screen
    out["after_unchanged"] = len(out["decided"])
    out["unchanged_grabs"] = watch.counts.unchanged
    paint("#e03020")
    until(lambda: len(out["decided"]) >= 2)
    out["colours"].append(slot_colour())
    out["status"] = window.overlay.watch_status.text()
    wait(300)  # the layout pass after the new bars and status text, as the event loop would run it
    window.grab().save(shots + "/watch-window.png")
    window.overlay.grab().save(shots + "/watch-overlay.png")
    window.header.pause_button.setChecked(True)
    grabs = watch.counts.grabs
    paint("#20c040")
    wait(1000)
    out["grabs_while_paused"] = watch.counts.grabs - grabs
    out["decided_while_paused"] = len(out["decided"]) - 2
    out["locked"] = window.watch.lock.screen_locked()
    print("RESULT " + json.dumps(out))
    window.close(); game.close(); engine.close()
    """
)


def test_watch_mode_grabs_the_real_screen_and_decides_only_on_change(tmp_path):
    shots = Path(os.environ.get("DECIDER_LAYOUT_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    done = run_under_xvfb([sys.executable, "-c", SCRIPT, str(model_dir("qwen35-vl")), str(shots)], tmp_path, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    out = json.loads(line[len("RESULT "):])
    assert out["decided"][:2] == [1, 1]  # each decision encoded its own (new) picture
    assert out["after_unchanged"] == 1 and out["unchanged_grabs"] >= 5  # grabbed again and again, decided once
    blue, red = out["colours"]
    assert blue[2] > 150 and blue[0] < 80  # the slot holds what the X server showed: the game's blue ...
    assert red[0] > 150 and red[2] < 80  # ... then its red
    assert out["status"].startswith("watching")
    assert out["grabs_while_paused"] == 0 and out["decided_while_paused"] == 0
    assert out["locked"] is None  # no session D-Bus under Xvfb: not known, so not "locked"
    assert png_size(shots / "watch-overlay.png")[0] == 360
