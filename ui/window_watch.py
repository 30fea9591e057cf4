"""The main window's watch mode: the Watch and Pause toggles, the watch hotkey, the setting, and the
ScreenWatch (ui/screen_watch.py) fed by the screen grab and deciding through the window.

An object the window owns (`window.watch`), given the window it works for as a WindowPort (ui/window_port.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QImage, QKeySequence, QShortcut

from .hotkey import GlobalHotkey
from .screen_capture import Capture, grab
from .screen_lock import LockWatch
from .screen_watch import ScreenWatch, blank_out

if TYPE_CHECKING:
    from .window_port import WindowPort
    from .ports import Settings

WATCH_HOTKEY = "Ctrl+Shift+W"
SOURCE = "watch"


class WindowWatch:
    """Starts and stops watching (button, hotkey, setting), pauses, and hands frames to the window."""

    def __init__(self, window: WindowPort, register_global: bool) -> None:
        self.window = w = window
        self.lock = LockWatch()
        self.screen = ScreenWatch(
            self.grab_frame, self.decide_frame, lambda: w.deciding or w.loading_path is not None,
            self.lock.screen_locked, w.settings.watch_interval_ms, w.settings.watch_threshold, w.qt_parent,
        )
        self.screen.status_changed.connect(w.overlay.set_watch_status)
        w.header.watch_button.toggled.connect(lambda on: w.update_settings(watch_enabled=on))
        w.header.pause_button.toggled.connect(self.set_paused)
        # a new question is decided on the next grab, whether or not the picture changed
        w.question.textChanged.connect(self.screen.forget)
        w.options.changed.connect(self.screen.forget)
        # a model (re)loaded: the picture on screen is decided by it, even if it did not change
        w.model_ready.connect(lambda _info: self.screen.forget())
        self.shortcut = QShortcut(QKeySequence(WATCH_HOTKEY), w.qt_parent)
        self.shortcut.setContext(Qt.ShortcutContext.ApplicationShortcut)
        self.shortcut.activated.connect(self.toggle)
        self.hotkey = GlobalHotkey(w.qt_parent)
        self.hotkey.triggered.connect(self.toggle)
        self.global_ok = self.hotkey.register(WATCH_HOTKEY) if register_global else False
        if w.settings.watch_enabled:
            self.apply(w.settings)

    def set_frame_source(self, grab_frame) -> None:
        """Grab frames from elsewhere (a test's fake source; a game's window capture)."""
        self.screen._grab = grab_frame

    # ----- what the screen watch is given -----
    def grab_frame(self) -> Capture:
        """The picked region (else the screen under the overlay), the overlay blanked out of it."""
        w = self.window
        capture = grab(w.screen_decisions.region, w.overlay.geometry().center())
        if capture.image is None or capture.area is None or not w.overlay.isVisible():
            return capture
        return Capture(blank_out(capture.image, capture.area, w.overlay.frameGeometry()), capture.message, capture.area)

    def decide_frame(self, image: QImage) -> bool:
        w = self.window
        w.image_slot.set_image(image, "watching the screen")
        return w.decide(SOURCE)

    # ----- switches -----
    def toggle(self) -> None:
        self.window.update_settings(watch_enabled=not self.window.settings.watch_enabled)

    def set_paused(self, paused: bool) -> None:
        w = self.window
        self.screen.set_paused(paused)
        if w.header.pause_button.isChecked() != paused:
            w.header.pause_button.setChecked(paused)
        w.show_message("Paused: watch mode grabs nothing" if paused else "Resumed", 4000)

    def apply(self, settings: Settings) -> None:
        """The watch settings as they are now: on/off, interval, threshold; the Watch button follows."""
        w = self.window
        self.screen.set_interval(settings.watch_interval_ms)
        self.screen.set_threshold(settings.watch_threshold)
        if settings.watch_enabled and not self.screen.watching:
            w.companion.set_overlay_visible(True)  # its state and the decisions show there
            self.screen.start()
        elif not settings.watch_enabled and self.screen.watching:
            self.screen.stop()
        button = w.header.watch_button
        if button.isChecked() != settings.watch_enabled:
            button.blockSignals(True)
            button.setChecked(settings.watch_enabled)
            button.blockSignals(False)

    def decision_ended(self, shown: bool) -> None:
        self.screen.decision_ended(shown)

    def close(self) -> None:
        self.screen.stop()
        self.hotkey.close()
