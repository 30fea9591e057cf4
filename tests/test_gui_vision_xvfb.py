"""Under a real (virtual) X server: the capture hotkey grabs the screen with a 'game' on it and decides on it.

Skipped where Xvfb or libXtst is missing (CI installs them: see .ci/run). Runs in a subprocess so this
process's offscreen Qt is not disturbed.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from support.models import FIXTURES, model_dir
from test_gui_xvfb import XVFB, png_size, run_under_xvfb

pytestmark = pytest.mark.skipif(XVFB is None, reason="xvfb-run is not installed")

SCRIPT = textwrap.dedent(
    """
    import ctypes, sys
    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QPixmap
    from PySide6.QtWidgets import QLabel
    from decider.app.gui import build_window, create_app
    from decider.app.preferences import GuiSettings

    model, game_png, overlay_png, window_png = sys.argv[1:5]
    app = create_app()
    assert app.platformName() == "xcb", app.platformName()
    engine, window = build_window(GuiSettings(device="CPU", overlay_enabled=True), save=None, history=False)
    game = QLabel()  # the "game": a picture filling part of the screen
    game.setPixmap(QPixmap(game_png).scaled(960, 540))
    game.move(0, 0)
    game.show()
    window.move(300, 200)
    window.show()
    out = {}

    def ready(_info):
        window.question.setPlainText("The game screen. Attack, defend or retreat?")
        window.options.set_options(["Attack", "Defend", "Retreat"])
        QTimer.singleShot(300, press)

    def press():
        x = ctypes.CDLL("libX11.so.6"); xtest = ctypes.CDLL("libXtst.so.6")
        x.XOpenDisplay.restype = ctypes.c_void_p; x.XOpenDisplay.argtypes = [ctypes.c_char_p]
        x.XStringToKeysym.restype = ctypes.c_ulong; x.XStringToKeysym.argtypes = [ctypes.c_char_p]
        x.XKeysymToKeycode.restype = ctypes.c_ubyte; x.XKeysymToKeycode.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
        x.XFlush.argtypes = [ctypes.c_void_p]
        xtest.XTestFakeKeyEvent.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_ulong]
        display = x.XOpenDisplay(None)
        keys = [x.XKeysymToKeycode(display, x.XStringToKeysym(n)) for n in (b"Control_L", b"Shift_L", b"s")]
        for code in keys: xtest.XTestFakeKeyEvent(display, code, 1, 0)
        for code in reversed(keys): xtest.XTestFakeKeyEvent(display, code, 0, 0)
        x.XFlush(display)

    def shown(result):
        out["result"] = result
        QTimer.singleShot(300, finish)

    def finish():
        window.overlay.grab().save(overlay_png)
        window.grab().save(window_png)
        app.quit()

    window.model_ready.connect(ready)
    window.decision_shown.connect(shown)
    window.decision_failed.connect(lambda m: (print("failed", m), app.quit()))
    window.load_model(model)
    QTimer.singleShot(90_000, app.quit)
    app.exec()
    result = out.get("result")
    flow = window.screen_decisions
    print("global", flow.global_ok, flow.hotkey.message)
    print("source", window.controller.source)
    print("image", window.image_slot.image().width(), window.image_slot.image().height())
    print("image_tokens", result.usage.get("image_tokens") if result else None)
    print("latency_ms", round(flow.last_latency * 1000) if flow.last_latency else None)
    print("status", window.status_latency.text())
    window.close(); engine.close()
    sys.exit(0 if result is not None and window.controller.source == "capture" else 1)
    """
)


def test_capture_hotkey_decides_on_a_real_screenshot(tmp_path):
    if not any(Path(p, "libXtst.so.6").exists() for p in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")):
        pytest.skip("libXtst (to fake a key press) is not installed")
    overlay, main = tmp_path / "overlay.png", tmp_path / "window.png"
    done = run_under_xvfb([sys.executable, "-c", SCRIPT, str(model_dir("qwen35-vl")), str(FIXTURES / "images" / "screen_640x360.png"),
                           str(overlay), str(main)], tmp_path, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert lines["global"].startswith("True")  # the X11 global hotkey, not the in-app shortcut
    assert lines["image"] == "1280 800"  # the whole virtual screen
    assert int(lines["image_tokens"]) > 0 and int(lines["latency_ms"]) > 0
    assert lines["status"].startswith("capture → bars")
    assert png_size(overlay)[0] == 360
