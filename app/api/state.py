"""What the routes share: the service, the limits, the engine queue, the hooks and the counters."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from decider.engine.model.chat_template import Message
from decider.engine.decisions.types import DecisionRequest, DecisionResult
from decider.engine.core.errors import Cancelled, SettingsError
from decider.engine.generation.generate import Completion

from .errors import QueueFull

if TYPE_CHECKING:
    from decider.app.service import EngineService

    from .frames import FrameWatches


def _frame_watches() -> FrameWatches:
    from .frames import FrameWatches  # frames imports protocol, which the state does not need otherwise

    return FrameWatches()

DEFAULT_MAX_BODY = 8 * 1024 * 1024  # a whole 262k-token context as text is ~1 MB; JSON escaping adds some
DEFAULT_MAX_QUEUE = 64  # requests waiting for the engine, besides the one it is running
DEFAULT_TIMEOUT = 30.0  # seconds an idle keep-alive connection is kept
DEFAULT_HEADER_TIMEOUT = 10.0  # seconds for a request line and its headers to arrive
DEFAULT_BODY_TIMEOUT = 30.0  # seconds for a body (up to the 8 MiB limit) to arrive
DEFAULT_MAX_CONNECTIONS = 128  # open connections at once (streams, queued requests, idle keep-alives)


@dataclass(frozen=True)
class ApiDecision:
    """A decision made through the API, with the request it answers (the overlay shows both)."""

    request: DecisionRequest
    result: DecisionResult


DecisionHook = Callable[[ApiDecision], None]
ChatHook = Callable[[list[Message], Completion], None]


class EngineQueue:
    """A FIFO of requests in front of the single engine: one runs, at most `max_waiting` wait.

    Lives on the server's event loop (no locks): a waiter holds an event that is set when its turn
    comes, and the engine passes straight from one request to the next in arrival order.
    """

    def __init__(self, max_waiting: int):
        if not isinstance(max_waiting, int) or isinstance(max_waiting, bool) or max_waiting < 0:
            raise SettingsError(f"max_queue must be an integer ≥ 0 (got {max_waiting!r})")
        self.max_waiting = max_waiting
        self._waiting: deque[asyncio.Event] = deque()
        self._busy = False
        self._closed = False

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def busy(self) -> bool:
        return self._busy

    @asynccontextmanager
    async def slot(self, gone: asyncio.Event | None = None) -> AsyncIterator[None]:
        """Wait for the engine in arrival order; QueueFull when too many wait, Cancelled when `gone`
        is set (the client left) or the queue closes while waiting."""
        if self._closed:
            raise Cancelled("the server is shutting down")
        if not self._busy and not self._waiting:
            self._busy = True
        else:
            if len(self._waiting) >= self.max_waiting:
                raise QueueFull(self.max_waiting)
            turn = asyncio.Event()
            self._waiting.append(turn)
            try:
                await _first_of(turn, gone)
                if not turn.is_set() or self._closed:
                    raise Cancelled("the client left while queued")
            except BaseException:
                if turn.is_set():
                    self._release()  # the turn came as the client left: hand it on
                else:
                    self._waiting.remove(turn)
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        if self._waiting:
            self._waiting.popleft().set()  # the engine stays busy: it passes to the next in line
        else:
            self._busy = False

    def close(self) -> None:
        """Wake every waiter with Cancelled (the server is stopping)."""
        self._closed = True
        for turn in self._waiting:
            turn.set()


async def _first_of(turn: asyncio.Event, gone: asyncio.Event | None) -> None:
    waits = [asyncio.ensure_future(turn.wait())]
    if gone is not None:
        waits.append(asyncio.ensure_future(gone.wait()))
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waits:
            task.cancel()


@dataclass
class ApiState:
    """One server's configuration and running state, read by the routes on the event loop."""

    service: EngineService  # a local model (the API generates text)
    api_key: str | None
    max_body: int
    queue: EngineQueue
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    on_decision: DecisionHook | None = None
    on_chat_completion: ChatHook | None = None
    created: int = field(default_factory=lambda: int(time.time()))
    stopping: bool = False
    stats: dict[str, int] = field(default_factory=lambda: {"cancelled": 0, "errors": 0, "rejected": 0})
    frames: FrameWatches = field(default_factory=lambda: _frame_watches())  # /v1/decide/frame's watches

    _token_chars: int | None = None

    def count(self, name: str) -> None:
        self.stats[name] += 1

    @property
    def token_chars(self) -> int:
        """The most characters one token of the model's vocabulary covers (computed once)."""
        if self._token_chars is None:
            from .limits import longest_token_chars

            self._token_chars = longest_token_chars(self.service.runner.tokenizer)
        return self._token_chars
