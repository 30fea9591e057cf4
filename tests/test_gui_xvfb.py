"""End-to-end under a real (virtual) X server: the --screenshot run and the X11 global hotkey.

Skipped where Xvfb is not installed (CI installs it: see .ci/run). Each case runs in a subprocess so
this process's offscreen Qt is not disturbed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support.models import model_dir

ROOT = Path(__file__).resolve().parent.parent
XVFB = shutil.which("xvfb-run")
pytestmark = pytest.mark.skipif(XVFB is None, reason="xvfb-run is not installed")


def run_under_xvfb(args: list[str], tmp_path: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
    env["DECIDER_CONFIG_DIR"] = str(tmp_path / "config")
    return subprocess.run(
        [XVFB, "-a", "-s", "-screen 0 1280x800x24", *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=timeout,
    )


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_screenshot_run_saves_window_and_overlay(tmp_path):
    main, overlay = tmp_path / "main.png", tmp_path / "overlay.png"
    done = run_under_xvfb(
        [sys.executable, "-m", "decider.app.cli", "gui", "--model", str(model_dir("qwen35-text")), "--question", "Which way?",
         "--option", "Left", "--option", "Right", "--screenshot", str(main), "--overlay-screenshot", str(overlay)],
        tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    width, height = png_size(main)
    assert (width, height) == (1240, 780)
    width, height = png_size(overlay)
    assert width == 360 and 100 < height < 300
    assert not (tmp_path / "config" / "gui-settings.json").exists()  # a screenshot run leaves settings alone


def test_x11_global_hotkey_fires_on_a_real_key_press(tmp_path):
    script = textwrap.dedent(
        """
        import ctypes, sys
        from PySide6.QtCore import QTimer
        from PySide6.QtWidgets import QApplication
        from decider.ui.hotkey import GlobalHotkey

        app = QApplication(sys.argv)
        assert app.platformName() == "xcb", app.platformName()
        first, second = GlobalHotkey(), GlobalHotkey()
        assert first.register("Ctrl+Shift+F9"), first.message
        assert not second.register("Ctrl+Shift+F9")
        assert "already uses" in second.message, second.message
        fired = []
        first.triggered.connect(lambda: fired.append(1))

        x = ctypes.CDLL("libX11.so.6")
        xtest = ctypes.CDLL("libXtst.so.6")
        x.XOpenDisplay.restype = ctypes.c_void_p
        x.XOpenDisplay.argtypes = [ctypes.c_char_p]
        x.XStringToKeysym.restype = ctypes.c_ulong
        x.XStringToKeysym.argtypes = [ctypes.c_char_p]
        x.XKeysymToKeycode.restype = ctypes.c_ubyte
        x.XKeysymToKeycode.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
        x.XFlush.argtypes = [ctypes.c_void_p]
        xtest.XTestFakeKeyEvent.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_ulong]
        display = x.XOpenDisplay(None)
        keys = [x.XKeysymToKeycode(display, x.XStringToKeysym(n)) for n in (b"Control_L", b"Shift_L", b"F9")]

        def press():
            for code in keys:
                xtest.XTestFakeKeyEvent(display, code, 1, 0)
            for code in reversed(keys):
                xtest.XTestFakeKeyEvent(display, code, 0, 0)
            x.XFlush(display)

        QTimer.singleShot(200, press)
        QTimer.singleShot(1500, app.quit)
        app.exec()
        first.close(); second.close()
        print("fired", len(fired))
        sys.exit(0 if fired == [1] else 1)
        """
    )
    if not any(Path(p, "libXtst.so.6").exists() for p in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")):
        pytest.skip("libXtst (to fake a key press) is not installed")
    done = run_under_xvfb([sys.executable, "-c", script], tmp_path, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fired 1" in done.stdout
