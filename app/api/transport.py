"""HTTP plumbing around the routes: the guard in front of every request, bodies, JSON and event-stream
responses, and noticing a client that went away."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from decider.engine.core.errors import Cancelled

from .errors import ApiError, dumps
from .limits import check_body, refuse_bracket_floods, refuse_key_floods
from .policy import Policy, check_content_type, header
from .state import ApiState

log = logging.getLogger("decider.api")


def json_response(status: int, payload: object, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps(payload), status_code=status, headers=headers, media_type="application/json")


def error_response(error: ApiError, *, close: bool = False) -> Response:
    headers = dict(error.headers)
    if error.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if close:  # the body was not read: the connection cannot carry another request
        headers["Connection"] = "close"
    return json_response(error.status, error.body(), headers)


DRAIN_LIMIT = 64 * 1024 * 1024
DRAIN_SECONDS = 2.0


async def early_response(error: ApiError, request: Request, body_read: bool) -> Response:
    """The answer to a request refused before its body was read. The body is read and dropped first
    (briefly): closing a socket with unread data resets it, and the client would see the reset, not
    the answer. A client that waits for '100 Continue' never sends it; an oversized one may not stop."""
    if error.status == 408:  # the body stalled: nothing more to wait for
        return error_response(error, close=True)
    close = error.status == 413
    if not body_read and _has_body(request.scope):
        drained = False
        if request.headers.get("expect", "").lower() != "100-continue":
            drained = await _drain(request)
        close = close or not drained
    return error_response(error, close=close)


async def _drain(request: Request) -> bool:
    received = 0
    try:
        with anyio.fail_after(DRAIN_SECONDS):
            async for chunk in request.stream():
                received += len(chunk)
                if received > DRAIN_LIMIT:
                    return False
    except (TimeoutError, ClientDisconnect):
        return False
    return True


def original_path(request: Request) -> str:
    return request.scope.get("state", {}).get("path", request.url.path)


class Guard:
    """Runs before routing: the access policy (Host, Origin and CORS preflight, API key, JSON bodies)
    and the path without its optional /v1 prefix or trailing slash."""

    def __init__(self, app: ASGIApp, policy: Policy):
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"].rstrip("/") or "/"
        route = path[3:] if path == "/v1" or path.startswith("/v1/") else path
        scope = {**scope, "path": route or "/", "state": {**scope.get("state", {}), "path": path}}
        origin = None
        try:
            self.policy.check_host(scope)
            origin = self.policy.check_origin(scope)
            if origin is not None:
                send = _with_headers(send, self.policy.cors_headers(origin))
            if self.policy.is_preflight(scope):
                response = Response(status_code=204, headers=self.policy.preflight_headers(origin))
                return await response(scope, receive, send)
            self.policy.check_auth(scope)
        except ApiError as error:
            response = await early_response(error, Request(scope, receive), body_read=False)
            return await response(scope, receive, send)
        await self.app(scope, receive, send)


def _with_headers(send: Send, headers: dict[str, str]) -> Send:
    extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]

    async def sending(message) -> None:
        if message["type"] == "http.response.start":
            present = {name for name, _ in message.get("headers", [])}
            message = {**message, "headers": [*message.get("headers", []), *(h for h in extra if h[0] not in present)]}
        await send(message)

    return sending


def _has_body(scope: Scope) -> bool:
    length = header(scope, b"content-length")
    return header(scope, b"transfer-encoding") is not None or (length is not None and length.strip() != b"0")


async def read_json(request: Request, max_body: int, timeout: float) -> dict:
    """The body as a JSON object; its size is checked against the limit before it is read, and it
    must arrive within `timeout` seconds."""
    if request.headers.get("transfer-encoding"):
        raise ApiError("length_required", "send the body with a Content-Length (chunked request bodies are not accepted)")
    raw = request.headers.get("content-length")
    if raw is None:
        raise ApiError("length_required", "a POST needs a Content-Length and a JSON body")
    length = int(raw)  # the HTTP parser has checked it is digits
    if length > max_body:
        raise ApiError("request_too_large", f"request body of {length} bytes is over the limit of {max_body} bytes")
    check_content_type(request.scope)  # before anything is read or done: no "simple" cross-site POST
    try:
        with anyio.fail_after(timeout):
            data = await request.body()
    except TimeoutError:
        raise ApiError("request_timeout", f"the body did not arrive within {timeout:g} s") from None
    if len(data) <= PARSE_ON_LOOP_BYTES:
        return _parse_json(data)
    refuse_bracket_floods(data)
    # megabytes of JSON take a while: off the loop (json.loads itself holds the GIL, the rest of the walk does not)
    return await anyio.to_thread.run_sync(_parse_large_json, data)


PARSE_ON_LOOP_BYTES = 64 * 1024  # smaller bodies parse in well under a millisecond


def _parse_large_json(data: bytes) -> dict:
    refuse_key_floods(data)  # a scan, but past MAX_JSON_KEYS keys not a parse
    return _parse_json(data)


def _parse_json(data: bytes) -> dict:
    try:
        body = json.loads(data)
    except (ValueError, RecursionError) as exc:  # includes bad UTF-8
        raise ApiError("invalid_json", f"the body is not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(body, dict):
        raise ApiError("invalid_json", "the body must be a JSON object")
    check_body(body)
    return body


class Client:
    """Whether the peer is still there, for the event loop (`gone_event`) and engine threads (`gone`).

    Once the body is read, the next ASGI message for this request is the disconnect, so a task that
    waits for it notices a client that left while queued or while its generation runs.
    """

    def __init__(self, receive: Receive, state: ApiState):
        self._receive = receive
        self._state = state
        self.gone_event = asyncio.Event()
        self._task: asyncio.Task | None = None

    @property
    def gone(self) -> bool:
        return self.gone_event.is_set()

    def should_stop(self) -> bool:
        """For the engine thread: stop generating (the client left or the server stops)."""
        return self.gone or self._state.stopping

    def watch(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._wait())

    async def _wait(self) -> None:
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.gone_event.set()
                return

    def stop_watching(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None


class EventStream(Response):
    """Server-sent events from an async iterator of payloads, then `data: [DONE]`.

    `events` yields dicts (or their JSON, encoded already); an ApiError raised after the headers went out becomes an error event that
    ends the stream (as OpenAI does). `finish` runs whatever happens (it releases the engine).
    """

    media_type = "text/event-stream"

    def __init__(self, events: AsyncIterator[dict] | AsyncIterator[bytes], client: Client, finish: Callable[[], Awaitable[None]],
                 on_error: Callable[[BaseException], ApiError | None]):
        # no Content-Length: the length is unknown, so the body goes out chunked
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]
        self._events = events
        self._client = client
        self._finish = finish
        self._on_error = on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        try:
            async for payload in self._events:
                await self._send(send, b"data: " + (payload if isinstance(payload, bytes) else dumps(payload)) + b"\n\n")
                if self._client.gone:  # the server drops writes to a closed peer: stop generating
                    raise Cancelled("the client left during the stream")
            await self._send(send, b"data: [DONE]\n\n")
        except BaseException as exc:
            error = self._on_error(exc)
            if error is not None and not self._client.gone:
                await self._send(send, b"data: " + dumps(error.body()) + b"\n\n")
            if not isinstance(exc, Exception):
                raise
        finally:
            self._client.stop_watching()
            await self._finish()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    @staticmethod
    async def _send(send: Send, data: bytes) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": True})
