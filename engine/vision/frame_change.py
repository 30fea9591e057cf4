"""Has the game's picture changed enough to decide again? A cheap perceptual difference, and the gate that keeps
watch mode to at most one decision in flight with the latest frame winning.

The signature of a frame is its colour averaged over a 32×32 grid of blocks (one pass over a downscaled copy,
far below a decision's cost); two frames differ by the mean absolute difference of their signatures, 0 (the
same) to 1 (black against white). Sensor noise, a blinking cursor or a clock's digits move
it by well under 0.01; a new scene, a menu opening or a unit moving across a quarter of the screen by more.

Used by the GUI's watch mode (ui/screen_watch.py, frames grabbed from the screen) and the API's pushed frames
(app/api/frames.py): numpy only, no Qt.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

import numpy as np

from ..core.errors import SettingsError

SIGNATURE_SIDE = 32
DEFAULT_CHANGE_THRESHOLD = 0.02  # mean |Δ colour| over the signature, as a fraction of full scale
CHANGE_THRESHOLD_RANGE = (0.0, 1.0)

Frame = TypeVar("Frame")  # what the caller decides on (a QImage, a pixel array, a request): the gate only holds it


def check_threshold(value: object) -> float:
    low, high = CHANGE_THRESHOLD_RANGE
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= float(value) <= high:
        raise SettingsError(f"the change threshold must be a number in [{low}, {high}] (got {value!r})", field="threshold")
    return float(value)


def signature(pixels: np.ndarray) -> np.ndarray:
    """[32, 32, 3] float32 in [0, 1]: the frame's colour averaged over a grid of blocks (any size ≥ 1×1, gray,
    RGB or RGBA). Colour, not brightness alone: a red light turning green at the same brightness is a change."""
    if not isinstance(pixels, np.ndarray) or pixels.ndim not in (2, 3) or 0 in pixels.shape[:2]:
        raise SettingsError("a frame must be a non-empty [height, width(, channels)] pixel array")
    values = pixels.astype(np.float32)
    if values.ndim == 2:
        values = values[:, :, None]
    colour = np.repeat(values[:, :, :1], 3, axis=2) if values.shape[2] < 3 else values[:, :, :3]
    height, width = colour.shape[:2]
    row_starts = np.arange(SIGNATURE_SIDE) * height // SIGNATURE_SIDE
    col_starts = np.arange(SIGNATURE_SIDE) * width // SIGNATURE_SIDE
    # block sums (reduceat: one pass over the frame); a frame smaller than the grid repeats its nearest row/column
    sums = np.add.reduceat(np.add.reduceat(colour, row_starts, axis=0), col_starts, axis=1)
    row_counts = np.maximum(np.diff(np.append(row_starts, height)), 1)
    col_counts = np.maximum(np.diff(np.append(col_starts, width)), 1)
    means = sums / (row_counts[:, None] * col_counts[None, :])[:, :, None]
    return (means / 255.0).astype(np.float32)


def difference(first: np.ndarray, second: np.ndarray) -> float:
    """Mean absolute difference of two signatures: 0 the same picture, 1 black against white."""
    return float(np.mean(np.abs(first - second)))


class Verdict(Enum):
    UNCHANGED = "unchanged"  # within the threshold of the frame last decided on: no decision
    DECIDE = "decide"  # changed, and nothing in flight: decide on it now
    HELD = "held"  # changed while a decision runs: kept (replacing any earlier held frame) for when it ends


@dataclass
class _Held(Generic[Frame]):
    signature: np.ndarray
    frame: Frame


class FrameGate(Generic[Frame]):
    """Which frames get a decision: a frame within `threshold` of the one last decided on gets none; a changed
    frame is decided at once when nothing is in flight, else held, and a newer held frame replaces an older one
    (no queue: when the running decision ends only the latest frame is decided)."""

    def __init__(self, threshold: float = DEFAULT_CHANGE_THRESHOLD) -> None:
        self.threshold = check_threshold(threshold)
        self.decided: np.ndarray | None = None  # the signature of the frame the last decision started on
        self.in_flight = False
        self._held: _Held[Frame] | None = None
        self.last_difference: float | None = None

    def offer(self, frame_signature: np.ndarray, frame: Frame, engine_busy: bool = False) -> Verdict:
        """Another frame: UNCHANGED, DECIDE (now in flight) or HELD. `engine_busy`: something else runs."""
        if self.decided is not None:
            self.last_difference = difference(self.decided, frame_signature)
            if self.last_difference <= self.threshold:
                self._held = None  # back to what was decided on: a held change is moot
                return Verdict.UNCHANGED
        if self.in_flight or engine_busy:
            self._held = _Held(frame_signature, frame)
            return Verdict.HELD
        self._start(frame_signature)
        return Verdict.DECIDE

    def _start(self, frame_signature: np.ndarray) -> None:
        self.in_flight = True
        self.decided = frame_signature

    def finished(self) -> Frame | None:
        """The decision in flight ended (decided, failed or cancelled): the held frame to decide on now, if any
        (it is then in flight)."""
        self.in_flight = False
        return self.take_held()

    def take_held(self) -> Frame | None:
        """The engine is free (another decision ended): the held frame to decide on now, if any."""
        held, self._held = self._held, None
        if held is None or self.in_flight:
            self._held = held
            return None
        self._start(held.signature)
        return held.frame

    def has_held(self) -> bool:
        return self._held is not None

    def forget(self) -> None:
        """The question changed (or watching restarted): the next frame is decided whatever it shows."""
        self.decided = None
        self._held = None
