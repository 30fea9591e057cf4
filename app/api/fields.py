"""Field types of the request classes: each checks its JSON value and words its own refusal.

A pydantic error type here is a row of `errors.ERROR_TABLE`; the field is the error's location.
Messages are the API's long-standing wording (clients and the golden replies depend on it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo

from .errors import field_error


def _integral(value: object) -> object:
    """5.0 → 5: JSON has one number type, and some clients send every number as a float."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _boolean(value: object, info: ValidationInfo) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise field_error("invalid_type", f"{info.field_name} must be a boolean (got {value!r:.40})")


def _string(show_value: bool) -> Callable[[object, ValidationInfo], str | None]:
    def check(value: object, info: ValidationInfo) -> str | None:
        if value is None or isinstance(value, str):
            return value
        got = f" (got {value!r:.40})" if show_value else ""
        raise field_error("invalid_type", f"{info.field_name} must be a string{got}")

    return check


def _int_in(low: int, high: int | None) -> Callable[[object, ValidationInfo], int | None]:
    def check(value: object, info: ValidationInfo) -> int | None:
        if value is None:
            return None
        value = _integral(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise field_error("invalid_type", f"{info.field_name} must be an integer (got {value!r:.40})")
        if value < low or (high is not None and value > high):
            span = f"in {low}..{high}" if high is not None else f"≥ {low}"
            raise field_error("invalid_value", f"{info.field_name} must be {span} (got {value})")
        return value

    return check


def _engine_number(integer: bool) -> Callable[[object, ValidationInfo], int | float | None]:
    """A number whose range the engine's own settings check (so the range is stated once, there)."""

    def check(value: object, info: ValidationInfo) -> int | float | None:
        if value is None:
            return None
        if integer:
            value = _integral(value)
        if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
            raise field_error("invalid_value", f"{info.field_name} must be {'an integer' if integer else 'a number'} (got {value!r})")
        return value

    return check


class Neutral:
    """The values a refused field may still carry (absent or null always): they ask for nothing the engine
    lacks. Says which they are, for docs/api.md's list of refused fields (app/api/refusals.py)."""

    def __init__(self, *values: object):
        self.values = values

    def __call__(self, value: object) -> bool:
        # 1 passes for 1, never True (a bool is no count)
        return value is None or any(value == v and isinstance(value, bool) == isinstance(v, bool) for v in self.values)

    @property
    def text(self) -> str:
        return ", ".join(["absent or null", *(f"`{json.dumps(v)}`" for v in self.values)])


def _refused(accepted: Neutral, why: str) -> Callable[[object, ValidationInfo], None]:
    """A known OpenAI field this server cannot honour: only its neutral values pass, and are dropped."""

    def check(value: object, info: ValidationInfo) -> None:
        if not accepted(value):
            raise field_error("unsupported_parameter", f"{info.field_name} is not supported: {why}")
        return None

    check.refusal = (accepted, why)  # type: ignore[attr-defined]  # read back by app/api/refusals.py
    return check


Boolean = Annotated[bool | None, BeforeValidator(_boolean)]
Text = Annotated[str | None, BeforeValidator(_string(show_value=True))]
Name = Annotated[str | None, BeforeValidator(_string(show_value=False))]  # model names and the like
EngineInt = Annotated[int | None, BeforeValidator(_engine_number(integer=True))]
EngineFloat = Annotated[int | float | None, BeforeValidator(_engine_number(integer=False))]
Ignored = Annotated[Any, Field(default=None, exclude=True)]  # OpenAI bookkeeping (user, store, …)
MAX_METADATA_KEYS = 16  # OpenAI's bound on metadata


def _metadata(value: object) -> None:
    """OpenAI's metadata: an object of up to 16 pairs, accepted and dropped (700k keys once passed whole)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise field_error("invalid_type", "metadata must be an object")
    if len(value) > MAX_METADATA_KEYS:
        raise field_error("invalid_value", f"metadata takes at most {MAX_METADATA_KEYS} keys (got {len(value):,})")
    return None


Metadata = Annotated[None, BeforeValidator(_metadata), Field(default=None, exclude=True)]


# Refused: a field a client may only leave neutral, dropped from the model's data; `refused(...)` says what passes.
Refused = Annotated[None, Field(default=None, exclude=True)]


# The metadata of a parametrised field, written `Annotated[int | None, int_in(1, 16)]` and
# `Annotated[Refused, refused(absent, "why")]`, so a type checker reads the field's type.
def int_in(low: int, high: int | None = None) -> BeforeValidator:
    return BeforeValidator(_int_in(low, high))


def refused(accepted: Neutral, why: str) -> BeforeValidator:
    return BeforeValidator(_refused(accepted, why))


one = Neutral(1)
absent = Neutral()


def empty(neutral: object) -> Neutral:
    return Neutral(neutral)


class Strict(BaseModel):
    """The base of every request class: unknown fields refused (a typo never passes silently), immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)
