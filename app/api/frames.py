"""`POST /v1/decide/frame`: watch mode for a game that pushes its frames.

The request is /v1/decide's with exactly one image (the frame), a `watch` name (one game's stream of frames;
several games keep theirs apart) and an optional `threshold`. A frame within the threshold of the frame last
decided on in that watch, with the same question, options and settings, costs no decision: the previous
decision comes back marked `"unchanged": true`. A changed frame is decided; at most one decision runs per watch:
a frame arriving meanwhile waits, and when a newer frame arrives behind it, it is not decided at all: its
request is answered with the newer frame's decision, marked `"superseded": true` (the latest frame wins, no
queue of stale frames). The change measure is engine/vision/frame_change.py's, the window's watch mode's.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated

import numpy as np
from pydantic import BeforeValidator, Field

from decider.engine.vision.frame_change import DEFAULT_CHANGE_THRESHOLD, check_threshold, difference
from decider.engine.core.errors import SettingsError
from decider.engine.decisions.types import DecisionRequest, DecisionResult

from .errors import ApiError, field_error
from .protocol import DecideRequest

MAX_WATCHES = 64  # watches kept (least recently used forgotten first)
MAX_WATCH_NAME = 64


def _watch_name(value: object) -> object:
    if value is None:
        return "default"
    if not isinstance(value, str) or not 0 < len(value) <= MAX_WATCH_NAME:
        raise field_error("invalid_value", f"watch must be a name of 1 to {MAX_WATCH_NAME} characters")
    return value


def _threshold(value: object) -> object:
    if value is None:
        return DEFAULT_CHANGE_THRESHOLD
    try:
        return check_threshold(value)
    except SettingsError as exc:
        raise field_error("invalid_value", str(exc)) from None


class FrameRequest(DecideRequest):
    """/v1/decide's fields, one image (the frame), the watch it belongs to and the change that re-decides."""

    watch: Annotated[str, BeforeValidator(_watch_name), Field(default="default", validate_default=True)]
    threshold: Annotated[float, BeforeValidator(_threshold), Field(default=DEFAULT_CHANGE_THRESHOLD, validate_default=True)]

    def frame(self) -> np.ndarray:
        if len(self.images) != 1:
            raise ApiError("invalid_value", f"images must hold exactly one frame (got {len(self.images)})", param="images")
        return self.images[0]


@dataclass
class FrameDecision:
    ticket: int  # the frame's number in its watch
    request: DecisionRequest  # compared without its images (DecisionRequest leaves them out of ==)
    signature: np.ndarray
    result: DecisionResult
    decided_at: float  # time.time()


@dataclass
class FrameWatch:
    """One game's frames: the last decision, whether one runs, the newest frame's number."""

    condition: asyncio.Condition = field(default_factory=asyncio.Condition)
    latest: int = 0
    busy: bool = False
    last: FrameDecision | None = None
    failed: tuple[int, str] | None = None  # the newest frame whose decision failed, and why


class FrameWatches:
    """The watches by name (lives on the server's event loop)."""

    def __init__(self) -> None:
        self._watches: OrderedDict[str, FrameWatch] = OrderedDict()

    def get(self, name: str) -> FrameWatch:
        watch = self._watches.pop(name, None) or FrameWatch()
        self._watches[name] = watch
        while len(self._watches) > MAX_WATCHES:
            self._watches.popitem(last=False)
        return watch


def frame_reply(decision: FrameDecision, *, unchanged: bool, superseded: bool, change: float | None) -> dict:
    return {**decision.result.to_dict(), "frame": {
        "unchanged": unchanged, "superseded": superseded, "difference": change,
        "decided_at": decision.decided_at, "age_s": max(0.0, time.time() - decision.decided_at),
    }}


async def decide_frame(watch: FrameWatch, request: DecisionRequest, frame_signature: np.ndarray, threshold: float,
                       decide: Callable[[], Awaitable[DecisionResult]]) -> dict:
    """The answer for one pushed frame: the last decision when unchanged, else a new one (see the module's doc)."""
    async with watch.condition:
        last = watch.last
        change = None if last is None else difference(last.signature, frame_signature)
        if last is not None and change is not None and last.request == request and change <= threshold:
            return frame_reply(last, unchanged=True, superseded=False, change=change)
        watch.latest += 1
        ticket = watch.latest
        while True:
            if watch.last is not None and watch.last.ticket > ticket:
                return frame_reply(watch.last, unchanged=False, superseded=True, change=change)
            if watch.failed is not None and watch.failed[0] > ticket:
                raise ApiError("server_busy", f"a newer frame replaced this one and its decision failed: {watch.failed[1]}")
            if not watch.busy and ticket == watch.latest:
                watch.busy = True
                break
            await watch.condition.wait()
    decided: FrameDecision | None = None
    try:
        result = await decide()
        decided = FrameDecision(ticket, request, frame_signature, result, time.time())
        return frame_reply(decided, unchanged=False, superseded=False, change=change)
    except BaseException as exc:
        watch.failed = (ticket, str(exc) or type(exc).__name__)
        raise
    finally:
        async with watch.condition:
            watch.busy = False
            if decided is not None:
                watch.last = decided
            watch.condition.notify_all()
