"""The HTTP connection: uvicorn's h11 protocol with the limits a desktop server needs.

- At most `max_connections` open connections; one more is answered 503 and closed at once, so a
  flood of idle sockets (slowloris) cannot pile up.
- The request line and headers must arrive within `header_timeout` seconds of the connection (or of
  the previous response): a client that trickles them is closed. (uvicorn's keep-alive timer is reset
  by every byte, so alone it does not stop a trickle.)
- A request with both Transfer-Encoding and Content-Length is answered 400 and the connection closed.
- Malformed HTTP gets OpenAI's error object, not uvicorn's plain text, and a debug log line, not a
  warning: a client's mistake is not the console's business.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from uvicorn.protocols.http.h11_impl import H11Protocol

from .errors import ApiError, dumps

log = logging.getLogger("decider.api")


def _raw_response(error: ApiError) -> bytes:
    body = dumps(error.body())
    head = (f"HTTP/1.1 {error.status} {'Service Unavailable' if error.status == 503 else 'Bad Request'}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode("ascii") + body


def _ambiguous_length(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    names = {name for name, _ in headers}
    return b"transfer-encoding" in names and b"content-length" in names


class Limits:
    def __init__(self, max_connections: int, header_timeout: float):
        self.max_connections = max_connections
        self.header_timeout = header_timeout


def protocol_class(limits: Limits) -> type[H11Protocol]:
    """An H11Protocol subclass bound to these limits (uvicorn builds one protocol per connection)."""

    class Protocol(_LimitedProtocol):
        pass

    Protocol.limits = limits
    return Protocol


class _LimitedProtocol(H11Protocol):
    limits: Limits

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        if len(self.connections) > self.limits.max_connections:
            log.debug("refused a connection from %s: %d open", self.client, len(self.connections) - 1)
            transport.write(_raw_response(ApiError("server_busy", "too many open connections; retry later")))
            transport.close()
            return
        self._arm_header_timer()

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.limits.header_timeout, self._header_timeout)

    def _cancel_header_timer(self) -> None:
        timer = getattr(self, "_header_timer", None)
        if timer is not None:
            timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self.cycle is None or self.cycle.response_complete:  # still no (next) request
            log.debug("closed %s: no complete request headers within %.0f s", self.client, self.limits.header_timeout)
            self.transport.close()

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle and self.cycle is not None:  # a request's headers arrived
            self._cancel_header_timer()
            if _ambiguous_length(self.cycle.scope["headers"]):
                # RFC 9112 §6.1: the framing is ambiguous (request smuggling behind a proxy), so the
                # connection closes after the answer; the app never sees the request or the bytes after.
                self.cycle.disconnected = True
                self.cycle.message_event.set()
                self.send_400_response("both Transfer-Encoding and Content-Length")

    def eof_received(self) -> bool | None:  # type: ignore[override]  # asyncio.Protocol's contract; uvicorn's says None
        """The client closed its sending side. It counts as gone (so a queued or running request is
        cancelled, as for a full close: the two look the same here); in the middle of a body, it is
        told why before the connection closes."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and cycle.more_body:
            self.send_400_response("the request body ended early")
        return None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_header_timer()  # a kept-alive connection: its next request's headers are timed too

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        if exc is not None and (self.cycle is None or self.cycle.response_complete):  # else the request logs it
            log.debug("connection from %s lost: %s", self.client, exc)
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        log.debug("malformed HTTP from %s: %s", self.client, msg)
        detail = msg if msg != "Invalid HTTP request received." else "request line, headers or Content-Length"
        error = ApiError("bad_request", f"malformed HTTP request ({detail})")
        self.transport.write(_raw_response(error))
        self.transport.close()


class _QuietInvalidRequests(logging.Filter):
    """uvicorn warns about every malformed request; here that is a client's mistake: debug."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Invalid HTTP request received"):
            log.debug("uvicorn: %s", record.getMessage())
            return False
        return True


def quiet_uvicorn() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietInvalidRequests) for f in logger.filters):
        logger.addFilter(_QuietInvalidRequests())
