"""One table from error type to OpenAI's error object, and the conversions into it.

Every refusal the API answers is an `ApiError`. Validation failures come from the request classes in
`protocol.py` as pydantic errors whose *type* is a row of `ERROR_TABLE` and whose field is the error's
location (or, for a nested field reported under its parent, the `param` in its context); engine
`SettingsError`s name their field in their `field` attribute. No field is ever guessed from the text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from decider.engine.core.errors import ContextLimitError, SettingsError


@dataclass(frozen=True)
class ErrorKind:
    status: int
    type: str  # OpenAI's error type
    code: str | None


ERROR_TABLE: dict[str, ErrorKind] = {
    # request content
    "invalid_json": ErrorKind(400, "invalid_request_error", "invalid_json"),
    "invalid_type": ErrorKind(400, "invalid_request_error", "invalid_type"),
    "invalid_value": ErrorKind(400, "invalid_request_error", "invalid_value"),
    "unknown_parameter": ErrorKind(400, "invalid_request_error", "unknown_parameter"),
    "unsupported_parameter": ErrorKind(400, "invalid_request_error", "unsupported_parameter"),
    "context_length_exceeded": ErrorKind(400, "invalid_request_error", "context_length_exceeded"),
    "model_not_found": ErrorKind(404, "invalid_request_error", "model_not_found"),
    # transport
    "bad_request": ErrorKind(400, "invalid_request_error", "bad_request"),
    "invalid_api_key": ErrorKind(401, "invalid_request_error", "invalid_api_key"),
    "forbidden": ErrorKind(403, "invalid_request_error", "forbidden"),
    "not_found": ErrorKind(404, "invalid_request_error", "not_found"),
    "method_not_allowed": ErrorKind(405, "invalid_request_error", "method_not_allowed"),
    "request_timeout": ErrorKind(408, "invalid_request_error", "request_timeout"),
    "length_required": ErrorKind(411, "invalid_request_error", "length_required"),
    "request_too_large": ErrorKind(413, "invalid_request_error", "request_too_large"),
    "unsupported_media_type": ErrorKind(415, "invalid_request_error", "unsupported_media_type"),
    "queue_full": ErrorKind(429, "rate_limit_error", "queue_full"),
    # server
    "internal_error": ErrorKind(500, "server_error", "internal_error"),
    "server_busy": ErrorKind(503, "server_error", "server_busy"),
    "shutting_down": ErrorKind(503, "server_error", "shutting_down"),
}


class ApiError(Exception):
    """An error answered with OpenAI's error object; `kind` is a row of ERROR_TABLE."""

    def __init__(self, kind: str, message: str, *, param: str | None = None, headers: Mapping[str, str] | None = None):
        super().__init__(message)
        row = ERROR_TABLE[kind]
        self.kind = kind
        self.status = row.status
        self.type = row.type
        self.code = row.code
        self.message = message
        self.param = param
        self.headers = dict(headers or {})

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class QueueFull(ApiError):
    def __init__(self, size: int):
        super().__init__(
            "queue_full", f"the engine queue is full ({size} requests waiting); retry later", headers={"Retry-After": "1"}
        )


def field_error(kind: str, message: str, param: str | None = None) -> PydanticCustomError:
    """Raised inside a request class's validator: becomes ApiError(kind, message, param) (param: the
    field's location when not given)."""
    assert kind in ERROR_TABLE, kind
    return PydanticCustomError(kind, "{message}", {"message": message, "param": param})


def located_error(kind: str, tail: str, sub: str | None = None) -> PydanticCustomError:
    """A refusal worded after the field's location, which a nested validator does not know:
    'messages[2].role' + tail. `sub` names a key below the location (an unsupported nested field)."""
    assert kind in ERROR_TABLE, kind
    return PydanticCustomError(kind, "{tail}", {"tail": tail, "sub": sub})


def _location(loc: tuple) -> str | None:
    if not loc:
        return None
    text = str(loc[0])
    for part in loc[1:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def from_validation(exc: ValidationError) -> ApiError:
    """The error to answer for a request class's failed validation: an unknown field first (a typo
    explains the rest), then the first error in field order."""
    errors = exc.errors(include_url=False)
    unknown = sorted(_location(e["loc"]) or "" for e in errors if e["type"] == "extra_forbidden")
    if unknown:
        return ApiError("unknown_parameter", f"unrecognized request argument supplied: {unknown[0]}", param=unknown[0])
    error = errors[0]
    context = error.get("ctx") or {}
    param = context.get("param") or _location(error["loc"])
    if "tail" in context:
        param = f"{param}.{context['sub']}" if context.get("sub") else param
        return ApiError(error["type"], f"{param}{context['tail']}", param=param)
    if error["type"] in ERROR_TABLE:
        return ApiError(error["type"], error["msg"], param=param)
    if error["type"] == "missing":
        return ApiError("invalid_type", f"{param} is required", param=param)
    # a pydantic check that no validator of ours words (should not happen: every field has one)
    return ApiError("invalid_value", f"{param}: {error['msg']}", param=param)


def from_engine(exc: SettingsError | ContextLimitError) -> ApiError:
    if isinstance(exc, ContextLimitError):
        return ApiError("context_length_exceeded", str(exc))
    return ApiError("invalid_value", str(exc), param=exc.field)


def dumps(payload: object) -> bytes:
    """JSON as sent: UTF-8, no NaN; a lone surrogate (which UTF-8 cannot carry) escapes everything."""
    try:
        return json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(payload, ensure_ascii=True, allow_nan=False).encode("ascii")
