"""Watch mode: the companion re-decides by itself while a game runs.

Every `interval` ms the region (the one picked, else the screen under the overlay) is grabbed; a decision
starts only when the picture changed beyond the threshold since the frame last decided on
(engine/vision/frame_change.py: a 32×32 colour signature of a downscaled copy, mean absolute difference). At most one
decision is in flight: frames that change meanwhile are held, a newer one replacing an older one, and when the
decision ends the latest is decided. Nothing is grabbed while Decider is paused or the screen is locked
(ui/screen_lock.py says what is detected).

The overlay is blanked out of the grabbed picture (its own text, the decision's age, changes every second and
must not count as the game changing). An unchanged screen is never sent again; when the question changes the
next grab is decided, and a picture identical to the last one is the same pixels, so the engine reuses its
encoded features (engine/vision/encoder.py caches them by digest: usage "images_encoded" is 0).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, QRect, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QImage, QPainter

from decider.engine.vision.frame_change import DEFAULT_CHANGE_THRESHOLD, FrameGate, Verdict, signature

from .image_input import qimage_to_pixels
from .screen_capture import Capture

SIGNATURE_WIDTH = 128  # frames are shrunk to this width (Qt, fast) before their signature is taken
DEFAULT_INTERVAL_MS = 1000
AGE_TICK_MS = 1000


@dataclass
class WatchCounts:
    grabs: int = 0
    unchanged: int = 0
    decisions: int = 0
    held: int = 0
    skipped_paused: int = 0
    skipped_locked: int = 0


def blank_out(image: QImage, area: QRect, hidden: QRect | None) -> QImage:
    """The frame with `hidden` (global coordinates, e.g. the overlay) painted black where it lies in `area`."""
    if hidden is None or not area.intersects(hidden):
        return image
    covered = area.intersected(hidden).translated(-area.topLeft())
    scale_x, scale_y = image.width() / max(area.width(), 1), image.height() / max(area.height(), 1)
    masked = image.convertToFormat(QImage.Format.Format_RGB32)
    painter = QPainter(masked)
    left, top = math.floor(covered.x() * scale_x), math.floor(covered.y() * scale_y)
    right = math.ceil((covered.x() + covered.width()) * scale_x)  # a high-DPI grab has more pixels than points
    bottom = math.ceil((covered.y() + covered.height()) * scale_y)
    painter.fillRect(left, top, right - left, bottom - top, QColor(0, 0, 0))
    painter.end()
    return masked


def frame_signature(image: QImage):
    small = image.scaledToWidth(min(SIGNATURE_WIDTH, image.width()), Qt.TransformationMode.FastTransformation)
    return signature(qimage_to_pixels(small))


class ScreenWatch(QObject):
    """Grabs on a timer, decides on changed frames through `decide_frame`, tells the overlay its state."""

    status_changed = Signal(str)  # "watching · decided 3 s ago", "watching · paused", "" when off

    def __init__(self, grab_frame: Callable[[], Capture], decide_frame: Callable[[QImage], bool],
                 engine_busy: Callable[[], bool], screen_locked: Callable[[], bool | None],
                 interval_ms: int = DEFAULT_INTERVAL_MS, threshold: float = DEFAULT_CHANGE_THRESHOLD,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._grab, self._decide, self._busy, self._locked = grab_frame, decide_frame, engine_busy, screen_locked
        # (replaceable: WindowWatch.set_frame_source, set_lock_check)
        self.gate: FrameGate[QImage] = FrameGate(threshold)
        self.counts = WatchCounts()
        self.watching = False
        self.paused = False
        self.decided_at: float | None = None  # monotonic time the last watch decision's bars were shown
        self.problem = ""  # why the last grab gave no picture
        self._timer = QTimer(self)
        self._timer.setInterval(int(interval_ms))
        self._timer.timeout.connect(self.tick)
        self._age_timer = QTimer(self, interval=AGE_TICK_MS)
        self._age_timer.timeout.connect(self._announce)

    # ----- switches -----
    def start(self) -> None:
        if self.watching:
            return
        self.watching = True
        self.gate.forget()  # the first frame is decided whatever it shows
        self._timer.start()
        self._age_timer.start()
        self.tick()

    def stop(self) -> None:
        self.watching = False
        self._timer.stop()
        self._age_timer.stop()
        self.gate.forget()
        self._announce()

    def set_paused(self, paused: bool) -> None:
        self.paused = bool(paused)
        self._announce()

    def set_interval(self, interval_ms: int) -> None:
        self._timer.setInterval(int(interval_ms))

    def set_threshold(self, threshold: float) -> None:
        self.gate.threshold = float(threshold)

    def forget(self) -> None:
        """The question or options changed: the next grab is decided (the same picture: its features reused)."""
        self.gate.forget()

    # ----- the loop -----
    def tick(self) -> Verdict | None:
        """One grab (unless off, paused or locked); the verdict on it, None when nothing was grabbed."""
        if not self.watching:
            return None
        if self.paused:
            self.counts.skipped_paused += 1
            return None
        if self._locked():
            self.counts.skipped_locked += 1
            self._announce()
            return None
        capture = self._grab()
        self.counts.grabs += 1
        if capture.image is None:
            self.problem = capture.message
            self._announce()
            return None
        self.problem = ""
        verdict = self.gate.offer(frame_signature(capture.image), capture.image, self._busy() and not self.gate.in_flight)
        if verdict is Verdict.UNCHANGED:
            self.counts.unchanged += 1
        elif verdict is Verdict.HELD:
            self.counts.held += 1
        else:
            self._start(capture.image)
        return verdict

    def _start(self, image: QImage) -> None:
        self.counts.decisions += 1
        if not self._decide(image):  # refused (no model, a form error): nothing in flight; that error is shown
            self.gate.finished()

    def decision_ended(self, shown: bool) -> None:
        """Any decision ended (shown: its bars are on screen): a held frame is decided now, the latest only."""
        was_watch = self.gate.in_flight
        if was_watch and shown:
            self.decided_at = time.monotonic()
        frame = self.gate.finished() if was_watch else self.gate.take_held()
        if frame is not None and self.watching and not self.paused:
            self._start(frame)
        self._announce()

    # ----- what the overlay says -----
    def status_text(self) -> str:
        if not self.watching:
            return ""
        if self.paused:
            return "watching · paused"
        if self._locked():
            return "watching · screen locked"
        if self.problem:
            return "watching · no picture"
        if self.gate.in_flight:
            return "watching · deciding…"
        if self.decided_at is None:
            return "watching"
        return f"watching · decided {_age(time.monotonic() - self.decided_at)} ago"

    def _announce(self) -> None:
        self.status_changed.emit(self.status_text())


def _age(seconds: float) -> str:
    if seconds < 60:
        return f"{int(seconds)} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    return f"{int(seconds // 3600)} h"
