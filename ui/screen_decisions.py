"""Deciding from the screen: the capture hotkey, the region picked once, and capture-to-bars latency.

The capture hotkey (global where the platform allows, else while Decider has focus) hides the overlay,
grabs the region the user picked (or the screen the overlay is on), puts the screenshot in the window's
image slot and runs the window's current question and options on it. The status bar then shows the
time from the key press to the bars being drawn — the latency a player feels.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QRect, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QApplication, QWidget

from .hotkey import GlobalHotkey
from .image_input import ImageSlot
from .overlay import CompanionOverlay
from .screen_capture import RegionPicker, grab

CAPTURE_HOTKEY = "Ctrl+Shift+S"
SOURCE = "capture"


class ScreenDecisions(QObject):
    capture_triggered = Signal()  # the hotkey, the in-app shortcut, the slot's button, or a test
    latency_measured = Signal(float)  # seconds from the capture to the bars on screen

    def __init__(self, window: QWidget, slot: ImageSlot, overlay: CompanionOverlay, decide: Callable[[str], bool], register_global: bool = True,
                 sequence: str = CAPTURE_HOTKEY) -> None:
        super().__init__(window)
        self.window, self.slot, self.overlay, self._decide = window, slot, overlay, decide
        self.region: QRect | None = None  # picked once per session; None = the whole screen under the overlay
        self._started: float | None = None
        self.last_latency: float | None = None
        self.shortcut = QShortcut(QKeySequence(sequence), window)
        self.shortcut.setContext(Qt.ShortcutContext.ApplicationShortcut)
        self.shortcut.activated.connect(self.capture_triggered.emit)
        self.hotkey = GlobalHotkey(self)
        self.hotkey.triggered.connect(self.capture_triggered.emit)
        self.global_ok = self.hotkey.register(sequence) if register_global else False
        self.capture_triggered.connect(self.capture_and_decide)
        slot.capture_requested.connect(self.capture_triggered.emit)
        slot.region_requested.connect(self.pick_region)
        self._picker: RegionPicker | None = None

    def pick_region(self) -> None:
        self._picker = RegionPicker()
        self._picker.picked.connect(self._set_region)
        self._picker.start()

    def _set_region(self, rect: QRect) -> None:
        self.region = rect
        self.slot.show_note(f"Capture region {rect.width()}×{rect.height()} at ({rect.x()}, {rect.y()}).")

    def capture_and_decide(self) -> bool:
        started = time.perf_counter()
        overlay_shown = self.overlay.isVisible()
        if overlay_shown:  # the overlay sits on the game: keep it out of its own screenshot
            self.overlay.hide()
            QApplication.processEvents()
        try:
            capture = grab(self.region, self.overlay.geometry().center())
        finally:
            if overlay_shown:
                self.overlay.show()
        if capture.image is None:
            self.slot.show_note(capture.message)
            self.overlay.show()
            self.overlay.show_error(capture.message, "· capture")
            return False
        self.slot.set_image(capture.image, "captured")
        self._started = started
        if not self._decide(SOURCE):
            self._started = None
            return False
        return True

    def decision_shown(self) -> float | None:
        """Called once the window has drawn a decision's bars: the capture-to-bars latency, if one was pending."""
        if self._started is None:
            return None
        self.last_latency, self._started = time.perf_counter() - self._started, None
        self.latency_measured.emit(self.last_latency)
        return self.last_latency

    def decision_ended(self) -> None:
        """A capture decision failed or was cancelled: nothing to time."""
        self._started = None
