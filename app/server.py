"""The local OpenAI-compatible HTTP API: /v1/models, /v1/chat/completions, /v1/completions, /v1/decide.

Stack: the standard library's ThreadingHTTPServer (HTTP/1.1, keep-alive, chunked server-sent events).
It starts in milliseconds, adds no dependency, and a thread per connection is the right shape for a
server in front of ONE engine: connections are cheap and concurrent, engine work is not. Every request
that needs the engine takes a ticket in a bounded FIFO queue (full: 429) and runs in its own handler
thread when its turn comes, so a streamed response writes straight from the generation loop and a
slow reader slows only its own generation.

Safety: loopback by default, a non-loopback bind needs an API key, bodies are bounded (413), a
client that goes away (while queued or mid-generation) cancels its work, bad input is always a 4xx
with OpenAI's error object, and an engine failure is a 500 after which the server keeps serving.

Hooks for the desktop app (called from handler threads, after the response is written; marshal to
the GUI thread yourself): on_decision(result) after each /v1/decide, on_chat_completion(messages,
completion) after each chat completion.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import select
import socket
import socketserver
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from engine.chat_template import Message
from engine.decide import DecisionRequest, DecisionResult
from engine.errors import Cancelled, ContextLimitError, DeciderError, SettingsError
from engine.generate import MAX_TOP_LOGPROBS, Completion
from engine.openai_format import (
    chat_chunk,
    chat_completion,
    chat_delta,
    chat_usage_chunk,
    completion_chunk,
    completion_usage_chunk,
    text_completion,
)

from .requests import SAMPLING_FIELDS, sampling_from

log = logging.getLogger("decider.api")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_MAX_BODY = 8 * 1024 * 1024  # a whole 262k-token context as text is ~1 MB; JSON escaping adds some
DEFAULT_MAX_QUEUE = 64  # requests waiting for the engine, besides the one it is running
DEFAULT_TIMEOUT = 30.0  # seconds a socket read/write may stall
MODEL_ALIAS = "decider"  # always accepted as the model name, whatever model is loaded
MAX_COMPLETION_LOGPROBS = 5
COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions


# ----- errors -----


class ApiError(Exception):
    """An error answered with OpenAI's error object."""

    def __init__(
        self, status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
        code: str | None = None, headers: Mapping[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class QueueFull(ApiError):
    def __init__(self, size: int):
        super().__init__(
            429, f"the engine queue is full ({size} requests waiting); retry later",
            type="rate_limit_error", code="queue_full", headers={"Retry-After": "1"},
        )


def _invalid(message: str, param: str | None = None, code: str | None = "invalid_value") -> ApiError:
    return ApiError(400, message, param=param, code=code)


def _from_engine_error(exc: Exception, fields: frozenset[str] = frozenset()) -> ApiError:
    """SettingsError → 400 (param guessed from the message's first word), ContextLimitError → 400."""
    if isinstance(exc, ContextLimitError):
        return ApiError(400, str(exc), code="context_length_exceeded")
    message = str(exc)
    first = message.split(" ", 1)[0].lstrip("-").replace("-", "_")
    return ApiError(400, message, param=first if first in fields else None, code="invalid_value")


# ----- binding rules -----


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback for info in infos)


def check_bind(host: str, api_key: str | None) -> None:
    """Refuse to listen beyond this machine without a key: anyone on the network could drive the model."""
    if not is_loopback(host) and not api_key:
        raise SettingsError(
            f"refusing to listen on {host or 'all interfaces'} without an API key: pass --api-key KEY "
            "(or set DECIDER_API_KEY), or listen on 127.0.0.1"
        )


# ----- the engine queue -----


class EngineQueue:
    """A FIFO of requests in front of the single engine: one runs, at most `max_waiting` wait."""

    def __init__(self, max_waiting: int):
        if not isinstance(max_waiting, int) or max_waiting < 0:
            raise SettingsError(f"max_queue must be an integer ≥ 0 (got {max_waiting!r})")
        self.max_waiting = max_waiting
        self._cond = threading.Condition()
        self._waiting: deque[object] = deque()
        self._busy = False

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def busy(self) -> bool:
        return self._busy

    @contextmanager
    def slot(self, abandoned: Callable[[], bool]) -> Iterator[None]:
        """Wait for the engine in arrival order; QueueFull when too many wait, Cancelled if abandoned()."""
        ticket = object()
        with self._cond:
            if (self._busy or self._waiting) and len(self._waiting) >= self.max_waiting:
                raise QueueFull(self.max_waiting)
            self._waiting.append(ticket)
            try:
                while self._busy or self._waiting[0] is not ticket:
                    self._cond.wait(0.2)
                    if abandoned():
                        raise Cancelled("the client left while queued")
            except BaseException:
                self._waiting.remove(ticket)
                self._cond.notify_all()
                raise
            self._waiting.popleft()
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()


# ----- request parsing (JSON body → engine request); sampling fields go through app.requests -----

COMMON_IGNORED = frozenset({"user", "metadata", "store", "service_tier"})

CHAT_FIELDS = frozenset({
    "model", "messages", "max_tokens", "max_completion_tokens", "stop", "stream", "stream_options",
    "logprobs", "top_logprobs", "think", "enable_thinking", "chat_template_kwargs", "n", "guided_choice",
    "tools", "tool_choice", "functions", "function_call", "parallel_tool_calls", "response_format",
    "logit_bias", "modalities", "audio", "prediction", "reasoning_effort", "web_search_options",
}) | frozenset(SAMPLING_FIELDS) | COMMON_IGNORED

COMPLETION_FIELDS = frozenset({
    "model", "prompt", "max_tokens", "stop", "stream", "stream_options", "logprobs", "echo", "n",
    "best_of", "suffix", "logit_bias",
}) | frozenset(SAMPLING_FIELDS) | COMMON_IGNORED

DECIDE_FIELDS = frozenset({
    "model", "question", "options", "system", "context", "think", "reasoning_budget", "permute",
    "score_options", "alternatives",
}) | frozenset(SAMPLING_FIELDS)


def _refuse_if(body: Mapping, name: str, accepted: Callable[[object], bool], why: str) -> None:
    if name in body and not accepted(body[name]):
        raise _invalid(f"{name} is not supported: {why}", name, "unsupported_parameter")


def _refuse_unsupported(body: Mapping) -> None:
    """Known OpenAI fields that this server cannot honour are refused, never silently ignored."""
    _refuse_if(body, "n", lambda v: v is None or (v == 1 and not isinstance(v, bool)), "one choice per request (n=1)")
    _refuse_if(body, "best_of", lambda v: v is None or (v == 1 and not isinstance(v, bool)), "only best_of=1")
    _refuse_if(body, "echo", lambda v: v is None or v is False, "the prompt is never echoed (echo=false)")
    _refuse_if(body, "suffix", lambda v: v is None or v == "", "no insertion (suffix)")
    _refuse_if(body, "logit_bias", lambda v: v is None or v == {}, "no logit_bias")
    _refuse_if(body, "tools", lambda v: v is None or v == [], "no tool calling")
    _refuse_if(body, "functions", lambda v: v is None or v == [], "no function calling")
    _refuse_if(body, "tool_choice", lambda v: v is None or v == "none", "no tool calling")
    _refuse_if(body, "function_call", lambda v: v is None or v == "none", "no function calling")
    _refuse_if(body, "parallel_tool_calls", lambda v: v is None or isinstance(v, bool), "no tool calling")
    _refuse_if(
        body, "response_format", lambda v: v is None or v == {"type": "text"}, "text output only (no JSON mode)"
    )
    _refuse_if(body, "modalities", lambda v: v is None or v == ["text"], "text output only")
    _refuse_if(body, "audio", lambda v: v is None, "text output only")
    _refuse_if(body, "prediction", lambda v: v is None, "no predicted outputs")
    _refuse_if(body, "web_search_options", lambda v: v is None, "no web search")
    _refuse_if(body, "reasoning_effort", lambda v: v is None, "use think (or enable_thinking) to turn reasoning on")


def _check_fields(body: Mapping, known: frozenset[str]) -> None:
    unknown = sorted(k for k in body if k not in known)
    if unknown:
        raise _invalid(f"unrecognized request argument supplied: {unknown[0]}", unknown[0], "unknown_parameter")


def _opt_bool(body: Mapping, name: str, default: bool | None) -> bool | None:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _invalid(f"{name} must be a boolean (got {value!r:.40})", name, "invalid_type")
    return value


def _opt_int(body: Mapping, name: str, low: int, high: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"{name} must be an integer (got {value!r:.40})", name, "invalid_type")
    if value < low or (high is not None and value > high):
        span = f"in {low}..{high}" if high is not None else f"≥ {low}"
        raise _invalid(f"{name} must be {span} (got {value})", name)
    return value


def _opt_str(body: Mapping, name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise _invalid(f"{name} must be a string (got {value!r:.40})", name, "invalid_type")
    return value


def _stop(body: Mapping) -> tuple[str, ...]:
    value = body.get("stop")
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise _invalid("stop must be a string or a list of up to 4 strings", "stop", "invalid_type")
    if len(value) > 4 or any(not s for s in value):
        raise _invalid("stop takes up to 4 non-empty strings", "stop")
    return tuple(value)


def _include_usage(body: Mapping) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise _invalid("stream_options must be an object", "stream_options", "invalid_type")
    unknown = sorted(set(options) - {"include_usage", "include_obfuscation"})
    if unknown:
        raise _invalid(f"stream_options.{unknown[0]} is not supported", "stream_options", "unknown_parameter")
    return bool(_opt_bool(options, "include_usage", False))


def _max_tokens(body: Mapping) -> int | None:
    a = _opt_int(body, "max_tokens", 1)
    b = _opt_int(body, "max_completion_tokens", 1)
    if a is not None and b is not None and a != b:
        raise _invalid("give max_tokens or max_completion_tokens, not both", "max_completion_tokens")
    return b if b is not None else a


def _message_text(content: object, index: int) -> str:
    param = f"messages[{index}].content"
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise _invalid(f"{param}: only text parts ({{\"type\": \"text\", \"text\": ...}}) are supported", param)
            texts.append(part["text"])
        return "".join(texts)
    raise _invalid(f"{param} must be a string or a list of text parts", param, "invalid_type")


def _messages(value: object) -> list[Message]:
    if not isinstance(value, list) or not value:
        raise _invalid("messages must be a non-empty list", "messages", "invalid_type" if not isinstance(value, list) else "invalid_value")
    messages = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise _invalid(f"messages[{i}] must be an object", f"messages[{i}]", "invalid_type")
        unknown = sorted(set(item) - {"role", "content", "name"})
        if unknown:
            raise _invalid(f"messages[{i}].{unknown[0]} is not supported", f"messages[{i}].{unknown[0]}", "unsupported_parameter")
        role = item.get("role")
        if role == "developer":
            role = "system"  # OpenAI's newer name for the system message
        if role not in ("system", "user", "assistant"):
            raise _invalid(
                f"messages[{i}].role must be system, developer, user or assistant (got {role!r:.40})",
                f"messages[{i}].role",
            )
        if "name" in item and not isinstance(item["name"], str):
            raise _invalid(f"messages[{i}].name must be a string", f"messages[{i}].name", "invalid_type")
        messages.append(Message(role, _message_text(item.get("content"), i)))
    return messages


def _guided_choice(body: Mapping, tokenizer, think: bool) -> tuple[int, ...] | None:
    value = body.get("guided_choice")
    if value is None:
        return None
    if not isinstance(value, list) or not 2 <= len(value) <= 64 or not all(isinstance(v, str) and v for v in value):
        raise _invalid("guided_choice must be a list of 2 to 64 non-empty strings", "guided_choice")
    if think:
        raise _invalid("guided_choice constrains the first answer token: turn thinking off", "guided_choice")
    ids = []
    for choice in value:
        encoded = tokenizer.encode_text(choice)
        if len(encoded) != 1:
            raise _invalid(f"guided_choice {choice!r} is {len(encoded)} tokens; each choice must be one token",
                           "guided_choice", "unsupported_parameter")
        ids.append(encoded[0])
    if len(set(ids)) != len(ids):
        raise _invalid("guided_choice has duplicate choices", "guided_choice")
    return tuple(ids)


def _think(body: Mapping) -> bool:
    """Qwen's switch, under any of the names clients use for it; they must agree."""
    given: dict[str, bool] = {}
    for name in ("think", "enable_thinking"):
        value = _opt_bool(body, name, None)
        if value is not None:
            given[name] = value
    kwargs = body.get("chat_template_kwargs")
    if kwargs is not None:
        if not isinstance(kwargs, dict):
            raise _invalid("chat_template_kwargs must be an object", "chat_template_kwargs", "invalid_type")
        unknown = sorted(set(kwargs) - {"enable_thinking"})
        if unknown:
            raise _invalid(f"chat_template_kwargs.{unknown[0]} is not supported (only enable_thinking)", "chat_template_kwargs")
        value = _opt_bool(kwargs, "enable_thinking", None)
        if value is not None:
            given["chat_template_kwargs.enable_thinking"] = value
    if len(set(given.values())) > 1:
        raise _invalid(f"{' and '.join(given)} disagree", "think")
    return next(iter(given.values()), False)


def _prompt(body: Mapping) -> str:
    value = body.get("prompt")
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        value = value[0]
    if isinstance(value, list):
        raise _invalid("prompt must be one string (no batches, no token arrays)", "prompt", "unsupported_parameter")
    if not isinstance(value, str):
        raise _invalid("prompt must be a string", "prompt", "invalid_type")
    return value


def decision_from_json(body: Mapping, defaults) -> DecisionRequest:
    """#3's decision request JSON → DecisionRequest (validation beyond types is the dataclass's)."""
    options = body.get("options")
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise _invalid("options must be a list of 2 to 10 strings", "options", "invalid_type")
    if not isinstance(body.get("question"), str):
        raise _invalid("question must be a string", "question", "invalid_type")
    kwargs: dict = {"question": body["question"], "options": tuple(options)}
    for name in ("system", "context"):
        kwargs[name] = _opt_str(body, name)
    for name in ("think", "permute", "score_options"):
        value = _opt_bool(body, name, None)
        if value is not None:
            kwargs[name] = value
    for name in ("reasoning_budget", "alternatives"):  # type and range: the dataclass's check
        value = body.get(name)
        if value is not None:
            kwargs[name] = int(value) if isinstance(value, float) and value.is_integer() else value
    kwargs["sampling"] = sampling_from(body, defaults)
    return DecisionRequest(**kwargs)


# ----- the HTTP server -----


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = os.name != "nt"  # on Windows SO_REUSEADDR would let two servers share a port
    request_queue_size = 128  # listen backlog: bursts of connections while handlers are busy

    def __init__(self, address, app: "ApiServer"):
        self.app = app
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse DNS lookup that can take seconds.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def process_request(self, request, client_address) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "Decider"
    sys_version = ""
    disable_nagle_algorithm = True  # stream chunks leave at once
    server: _HttpServer

    def setup(self) -> None:
        self.timeout = self.server.app.timeout
        super().setup()
        self._sse = False  # headers of an event stream are out: errors go into the stream
        self._body_read = True
        self._gone = False

    # --- plumbing ---
    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args) -> None:
        log.info("%s %s", self.address_string(), format % args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # http.server's own errors (bad request line, huge headers, unknown method) as JSON, never 5xx.
        if code == 501:
            code, message = 405, f"method {self.command!r} not allowed"
        elif code >= 500:
            code = 400
        self.close_connection = True
        self._send_json(code, ApiError(code, message or explain or "bad request", code="bad_request").body(), {"Connection": "close"})

    def _send_json(self, status: int, payload: dict, headers: Mapping[str, str] | None = None) -> None:
        data = _dumps(payload)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_api_error(self, error: ApiError) -> None:
        headers = dict(error.headers)
        if self.close_connection:
            headers["Connection"] = "close"
        if error.status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        self._send_json(error.status, error.body(), headers)

    def _client_gone(self) -> bool:
        """The peer closed its end (checked without reading: a pipelined next request stays put)."""
        if self._gone:
            return True
        sock = self.connection
        try:
            if hasattr(select, "poll"):
                poller = select.poll()
                poller.register(sock, select.POLLIN | select.POLLPRI)
                events = poller.poll(0)
                if not events:
                    return False
                if events[0][1] & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                    self._gone = True
                    return True
            else:
                readable, _, _ = select.select([sock], [], [], 0)
                if not readable:
                    return False
            self._gone = sock.recv(1, socket.MSG_PEEK) == b""
        except (ConnectionError, OSError):
            self._gone = True
        except ValueError:
            return False
        return self._gone

    def _should_stop(self) -> bool:
        return self.server.app.stopping or self._client_gone()

    def _linger_close(self) -> None:
        """Close after an early answer without reading the body: drain a little so the peer sees the
        answer instead of a connection reset."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(0.5)
            deadline = time.monotonic() + 2.0
            drained = 0
            while time.monotonic() < deadline and drained < 64 * 1024 * 1024:
                chunk = self.connection.recv(65536)
                if not chunk:
                    break
                drained += len(chunk)
        except OSError:
            pass

    # --- methods ---
    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def _method_not_allowed(self) -> None:
        self._handle(self.command)

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _method_not_allowed

    def handle_expect_100(self) -> bool:
        # Refuse an oversized or unauthorised body before the client sends it.
        try:
            self._check_auth()
            length = self._content_length()
        except ApiError as error:
            self.close_connection = True
            self._send_api_error(error)
            return False
        if length is not None and length > self.server.app.max_body:
            self.close_connection = True
            self._send_api_error(self._too_large(length))
            return False
        return super().handle_expect_100()

    # --- request handling ---
    def _handle(self, method: str) -> None:
        app = self.server.app
        path = urlsplit(self.path).path.rstrip("/") or "/"
        route = path[3:] if path == "/v1" or path.startswith("/v1/") else path
        # A request without a body has nothing left to read; one with a body is read by _read_json.
        self._body_read = self.headers.get("Content-Length", "0").strip() == "0" and not self.headers.get("Transfer-Encoding")
        try:
            try:
                self._check_auth()
                endpoint, allowed = self._route(method, route)
                if endpoint is None:
                    if allowed:
                        raise ApiError(405, f"method {method} not allowed on {path} (use {', '.join(allowed)})",
                                       code="method_not_allowed", headers={"Allow": ", ".join(allowed)})
                    raise ApiError(404, f"invalid URL ({method} {path})", code="not_found")
                if method == "POST":
                    endpoint(self._read_json())
                else:
                    endpoint(None)
            except (SettingsError, ContextLimitError) as exc:
                raise _from_engine_error(exc, CHAT_FIELDS | COMPLETION_FIELDS | DECIDE_FIELDS) from None
        except ApiError as error:
            if error.status >= 500:
                app._count("errors")
            elif error.status == 429:
                app._count("rejected")
            if not self._body_read:
                self.close_connection = True
            if self._sse:
                self._stream_error(error)
            else:
                self._send_api_error(error)
            if not self._body_read:
                self._linger_close()
        except Cancelled:
            app._count("cancelled")
            self.close_connection = True
            if app.stopping and not self._gone:
                error = ApiError(503, "the server is shutting down", type="server_error", code="shutting_down")
                try:
                    self._stream_error(error) if self._sse else self._send_api_error(error)
                except OSError:
                    pass
        except (ConnectionError, TimeoutError, socket.timeout):
            # The client went away (or stalled) mid-response: its generation already stopped.
            app._count("cancelled")
            self.close_connection = True
        except Exception as exc:  # an engine failure: answer 500 and keep serving
            log.exception("internal error on %s %s", method, path)
            app._count("errors")
            self.close_connection = True
            error = ApiError(500, f"internal error: {type(exc).__name__}: {exc}", type="server_error", code="internal_error")
            try:
                self._stream_error(error) if self._sse else self._send_api_error(error)
            except OSError:
                pass

    def _route(self, method: str, route: str) -> tuple[Callable | None, list[str]]:
        posts = {"/chat/completions": self._chat, "/completions": self._completions, "/decide": self._decide}
        if route in posts:
            return (posts[route] if method == "POST" else None), ["POST"]
        if route == "/models":
            return (self._models if method in ("GET", "HEAD") else None), ["GET"]
        if route.startswith("/models/") and route.count("/") == 2:
            name = route.split("/", 2)[2]
            return ((lambda _: self._model(name)) if method in ("GET", "HEAD") else None), ["GET"]
        return None, []

    def _check_auth(self) -> None:
        key = self.server.app.api_key
        if not key:
            return
        header = self.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        if not header:
            raise ApiError(401, "missing API key: send the header 'Authorization: Bearer KEY'", code="invalid_api_key")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), key.encode()):
            raise ApiError(401, "incorrect API key provided", code="invalid_api_key")

    def _content_length(self) -> int | None:
        if self.headers.get("Transfer-Encoding"):
            raise ApiError(411, "send the body with a Content-Length (chunked request bodies are not accepted)", code="length_required")
        raw = self.headers.get("Content-Length")
        if raw is None:
            return None
        if not raw.strip().isdigit():
            raise ApiError(400, f"invalid Content-Length {raw!r:.40}", code="bad_request")
        return int(raw)

    def _too_large(self, length: int) -> ApiError:
        limit = self.server.app.max_body
        return ApiError(413, f"request body of {length} bytes is over the limit of {limit} bytes", code="request_too_large")

    def _read_json(self) -> dict:
        length = self._content_length()
        if length is None:
            raise ApiError(411, "a POST needs a Content-Length and a JSON body", code="length_required")
        if length > self.server.app.max_body:
            raise self._too_large(length)
        data = self.rfile.read(length)
        if len(data) < length:
            raise ConnectionError("the body ended early")
        self._body_read = True
        try:
            body = json.loads(data)
        except (ValueError, RecursionError) as exc:  # includes bad UTF-8
            raise ApiError(400, f"the body is not valid JSON: {str(exc)[:200]}", code="invalid_json") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object", code="invalid_json")
        return body

    def _check_model(self, body: Mapping) -> None:
        service = self.server.app.service
        model = body.get("model")
        if model is None:
            return
        if not isinstance(model, str):
            raise _invalid("model must be a string", "model", "invalid_type")
        if model not in (service.model_name, MODEL_ALIAS):
            raise ApiError(
                404, f"the model {model!r:.80} does not exist: this server runs {service.model_name!r} (alias {MODEL_ALIAS!r})",
                param="model", code="model_not_found",
            )

    # --- endpoints ---
    def _model_entry(self, name: str) -> dict:
        app = self.server.app
        return {
            "id": name, "object": "model", "created": app.created, "owned_by": "decider",
            "context_length": app.service.runner.context_length,
        }

    def _models(self, _body) -> None:
        self._send_json(200, {"object": "list", "data": [self._model_entry(self.server.app.service.model_name)]})

    def _model(self, name: str) -> None:
        self._check_model({"model": name})
        self._send_json(200, self._model_entry(name))

    def _chat(self, body: dict) -> None:
        app = self.server.app
        service = app.service
        _check_fields(body, CHAT_FIELDS)
        _refuse_unsupported(body)
        self._check_model(body)
        messages = _messages(body.get("messages"))
        think = _think(body)
        stream = _opt_bool(body, "stream", False)
        include_usage = _include_usage(body)
        logprobs = _opt_bool(body, "logprobs", False)
        top = _opt_int(body, "top_logprobs", 0, MAX_TOP_LOGPROBS)
        if top is not None and not logprobs:
            raise _invalid("top_logprobs needs logprobs: true", "top_logprobs")
        max_tokens = _max_tokens(body)
        stop = _stop(body)
        sampling = sampling_from(body, service.defaults)
        request = service.chat_request(messages, think, sampling, max_tokens or 1, (top or 0) if logprobs else None, stop)
        service.runner.check_prompt(request.prompt_ids)
        choices = _guided_choice(body, service.runner.tokenizer, think)
        if choices is not None:  # vLLM's extension: answer with one of these (single-token) strings
            request = replace(request, allowed=choices, max_tokens=1)
        elif max_tokens is None:  # as OpenAI: bounded only by the context
            request = replace(request, max_tokens=service.runner.context_length - len(request.prompt_ids))
        request_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        model = service.model_name
        with app.queue.slot(self._client_gone):
            if not stream:
                completion = service.run(request, self._should_stop)
                self._send_json(200, chat_completion(completion, model, request_id))
            else:
                created = int(time.time())

                def step(delta):
                    if delta is None:  # the first chunk names the role
                        yield chat_chunk(request_id, model, created, {"role": "assistant", "content": ""}, with_usage=include_usage)
                    elif delta.reasoning or delta.content or delta.logprobs:
                        yield chat_chunk(
                            request_id, model, created, chat_delta(delta),
                            logprobs=delta.logprobs if logprobs else None, with_usage=include_usage,
                        )

                def end(completion):
                    yield chat_chunk(request_id, model, created, {}, finish_reason=completion.finish_reason, with_usage=include_usage)
                    if include_usage:
                        yield chat_usage_chunk(request_id, model, created, completion)

                completion = self._stream(service.stream(request, self._should_stop), step, end)
        app._notify(app.on_chat_completion, messages, completion)

    def _completions(self, body: dict) -> None:
        app = self.server.app
        service = app.service
        _check_fields(body, COMPLETION_FIELDS)
        _refuse_unsupported(body)
        self._check_model(body)
        prompt = _prompt(body)
        stream = _opt_bool(body, "stream", False)
        include_usage = _include_usage(body)
        value = body.get("logprobs")
        if isinstance(value, bool):
            raise _invalid("logprobs must be an integer in 0..5 (the number of alternatives)", "logprobs", "invalid_type")
        logprobs = _opt_int(body, "logprobs", 0, MAX_COMPLETION_LOGPROBS)
        max_tokens = _opt_int(body, "max_tokens", 1)
        stop = _stop(body)
        sampling = sampling_from(body, service.defaults)
        request = service.completion_request(
            prompt, sampling, max_tokens or COMPLETIONS_DEFAULT_MAX_TOKENS, logprobs, stop
        )
        service.runner.check_prompt(request.prompt_ids)
        request_id = f"cmpl-{uuid.uuid4().hex[:24]}"
        model = service.model_name
        with app.queue.slot(self._client_gone):
            if not stream:
                completion = service.run(request, self._should_stop)
                self._send_json(200, text_completion(completion, model, len(prompt), request_id))
                return
            created = int(time.time())

            def step(delta):
                if delta is not None and (delta.content or delta.logprobs):
                    yield completion_chunk(
                        request_id, model, created, delta.content, logprobs=delta.logprobs if logprobs is not None else None,
                        prompt_chars=len(prompt), with_usage=include_usage,
                    )

            def end(completion):
                yield completion_chunk(
                    request_id, model, created, "", prompt_chars=len(prompt), finish_reason=completion.finish_reason,
                    with_usage=include_usage,
                )
                if include_usage:
                    yield completion_usage_chunk(request_id, model, created, completion)

            self._stream(service.stream(request, self._should_stop), step, end)

    def _decide(self, body: dict) -> None:
        app = self.server.app
        service = app.service
        _check_fields(body, DECIDE_FIELDS)
        self._check_model(body)
        request = decision_from_json(body, service.defaults)
        with app.queue.slot(self._client_gone):
            result = service.decide(request, self._should_stop, source="api")
            self._send_json(200, result.to_dict())
        app._notify(app.on_decision, result)

    # --- server-sent events ---
    def _stream(self, steps, step_chunks, end_chunks) -> Completion:
        """Send one event per chunk of each step, then the closing chunks and [DONE]."""
        completion = None
        with closing(self._events(steps)) as events:
            for delta, completion in events:
                for chunk in step_chunks(delta):
                    self._event(chunk)
        for chunk in end_chunks(completion):
            self._event(chunk)
        self._end_stream()
        return completion

    def _events(self, steps):
        """Run the generator; headers go out only once the first step succeeded (so a failing prefill
        is still a plain HTTP error). Yields None first (the moment for a role chunk), then the steps."""
        try:
            first = next(steps)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("X-Accel-Buffering", "no")
            self.end_headers()
            self._sse = True
            yield None, first[1]
            yield first
            yield from steps
        except (ConnectionError, TimeoutError, socket.timeout):
            self._gone = True
            raise
        finally:
            steps.close()  # releases the engine lock at once, even when the client left

    def _write_chunk(self, data: bytes) -> None:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        except OSError:
            self._gone = True
            raise ConnectionError("the client closed the stream") from None

    def _event(self, payload: dict) -> None:
        self._write_chunk(b"data: " + _dumps(payload) + b"\n\n")

    def _end_stream(self) -> None:
        self._write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _stream_error(self, error: ApiError) -> None:
        # Headers (200) are out: the error becomes an event, then the stream ends (as OpenAI does).
        self.close_connection = True
        try:
            self._event(error.body())
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass


def _dumps(payload: dict) -> bytes:
    try:
        return json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escape everything
        return json.dumps(payload, ensure_ascii=True, allow_nan=False).encode("ascii")


class ApiServer:
    """The HTTP API around an EngineService; start() runs it on a background thread."""

    def __init__(
        self,
        service,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        api_key: str | None = None,
        *,
        max_queue: int = DEFAULT_MAX_QUEUE,
        max_body: int = DEFAULT_MAX_BODY,
        timeout: float = DEFAULT_TIMEOUT,
        on_decision: Callable[[DecisionResult], None] | None = None,
        on_chat_completion: Callable[[list[Message], Completion], None] | None = None,
    ):
        host = host.strip("[]")  # "[::1]" as written in a URL
        check_bind(host, api_key)
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise SettingsError(f"port must be in 0..65535 (got {port!r})")
        if not isinstance(max_body, int) or max_body < 1:
            raise SettingsError(f"max_body must be a positive integer (got {max_body!r})")
        self.service = service
        self.host = host
        self.requested_port = port
        self.api_key = api_key or None
        self.max_body = max_body
        self.timeout = timeout
        self.queue = EngineQueue(max_queue)
        self.on_decision = on_decision
        self.on_chat_completion = on_chat_completion
        self.created = int(time.time())
        self.stopping = False
        self.stats = {"cancelled": 0, "errors": 0, "rejected": 0}
        self._stats_lock = threading.Lock()
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int | None:
        return self._httpd.server_address[1] if self._httpd else None

    @property
    def url(self) -> str | None:
        if self._httpd is None:
            return None
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> int:
        """Bind and serve on a background thread; returns the bound port (port 0: the OS picks)."""
        if self._httpd is not None:
            raise SettingsError("the API server is already running")
        self.stopping = False
        self._httpd = _HttpServer((self.host, self.requested_port), self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="decider-api", daemon=True
        )
        self._thread.start()
        log.info("Decider API on %s, model %r (alias %r)", self.url, self.service.model_name, MODEL_ALIAS)
        return self.port

    def stop(self) -> None:
        """Stop accepting, cancel running generations and close open connections."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self.stopping = True
        httpd.shutdown()
        httpd.server_close()
        with httpd.connections_lock:
            connections = list(httpd.connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._thread = None

    def _count(self, name: str) -> None:
        with self._stats_lock:
            self.stats[name] += 1

    def _notify(self, hook: Callable | None, *args) -> None:
        if hook is None:
            return
        try:
            hook(*args)
        except Exception:
            log.exception("API hook %r failed", hook)


def serve_main(args) -> int:
    """`decider serve`: load the model, serve until Ctrl+C."""
    from .cli import _service

    api_key = args.api_key or os.environ.get("DECIDER_API_KEY") or None
    check_bind(args.host, api_key)  # before the (slow) model load
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    service = _service(args, history=True)
    server = ApiServer(service, host=args.host, port=args.port, api_key=api_key)
    try:
        server.start()
    except OSError as exc:
        raise DeciderError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    log.info("Ctrl+C stops the server%s", "" if server.api_key else "; no API key: loopback clients only")
    try:
        while server.running:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
