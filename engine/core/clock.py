"""A decision's wall-clock split into named parts (prefill, sample, reasoning…), shared by the local and remote engines."""

from __future__ import annotations

import time


class Clock:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._last = self._start = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = self.timings.get(name, 0.0) + (now - self._last)
        self._last = now

    def split(self, first: str, first_seconds: float, rest: str) -> None:
        """Book the time since the last lap as `first_seconds` of `first` and the remainder as `rest`."""
        now = time.perf_counter()
        elapsed = now - self._last
        first_seconds = min(first_seconds, elapsed)
        self.timings[first] = self.timings.get(first, 0.0) + first_seconds
        self.timings[rest] = self.timings.get(rest, 0.0) + elapsed - first_seconds
        self._last = now

    def total(self) -> dict[str, float]:
        self.timings["total_s"] = time.perf_counter() - self._start
        return self.timings
