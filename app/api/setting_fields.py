"""The API's sampling and decision fields, declared here so type checkers and editors see them.

engine/core/settings.py's SamplingSettings and DecisionSettings are the schema; these classes restate it field by
field (a pydantic class made at run time is invisible to mypy). `schema_drift()` compares the two, name, type,
default and range, and a test fails on any difference (tests/test_api_setting_fields.py), so a setting added
to the schema without its field here is named at once. Absent or null means the engine's default (for
sampling, the model's generation_config first); ranges are checked by the engine's dataclasses, once, so a
refusal names the setting as every other surface does.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import AfterValidator, Field

from decider.engine.core.errors import SettingsError
from decider.engine.core.settings import DECISION_SETTINGS, IMAGE_PIXELS_DEFAULT, SAMPLING_SETTINGS, SETTINGS, Setting

from .errors import field_error
from .fields import Boolean, EngineFloat, EngineInt, Strict, Text

_SCHEMA_KEY = "x-decider-setting"  # where a field keeps the declaration it restates (also shown in a JSON schema)


def declared(default: object, low: float | None = None, high: float | None = None, *, low_open: bool = False,
             choices: tuple[str, ...] = ()) -> Any:
    """A setting's field: absent by default (the engine's default applies); `default` and the range restate the
    schema's, for readers and for the drift test."""
    restated: dict[str, Any] = {"default": default, "low": low, "high": high, "low_open": low_open,
                                "choices": list(choices)}
    return Field(default=None, json_schema_extra={_SCHEMA_KEY: restated})


class SamplingFields(Strict):
    """Every sampling setting users set (engine.settings.SamplingSettings, `exposed`), in its order."""

    temperature: EngineFloat = declared(0.7, 0.0, 2.0)
    top_k: EngineInt = declared(20, 0, 1_000_000)
    top_p: EngineFloat = declared(0.8, 0.0, 1.0, low_open=True)
    min_p: EngineFloat = declared(0.0, 0.0, 1.0)
    repetition_penalty: EngineFloat = declared(1.0, 0.05, 10.0)
    frequency_penalty: EngineFloat = declared(1.0, -2.0, 2.0)
    presence_penalty: EngineFloat = declared(1.5, -2.0, 2.0)
    draft: Text = declared("none", choices=("none", "lookup", "auto", "mtp"))
    seed: EngineInt = declared(None, 0, 2**63 - 1)


class DecisionFields(SamplingFields):
    """Every decision setting (engine.settings.DecisionSettings), in its order, after the sampling ones."""

    think: Boolean = declared(False)
    reasoning_budget: EngineInt = declared(512, 1, 32768)
    permute: Boolean = declared(False)
    score_options: Boolean = declared(False)
    sample_choice: Boolean = declared(False)
    fast_reasoning: Boolean = declared(True)
    alternatives: EngineInt = declared(10, 0, 20)
    image_pixels: EngineInt = declared(IMAGE_PIXELS_DEFAULT, 256 * 256, 4096 * 4096)  # chosen by measurement


def _image_pixels(value: int | None) -> int | None:
    try:
        SETTINGS["image_pixels"].check(value)
    except SettingsError as exc:
        raise field_error("invalid_value", str(exc)) from None
    return value


# A chat request's pixel budget (/v1/decide's image_pixels, for chat completions and the chat form of /tokenize):
# the decision setting's range; absent means the model's own budget (an OpenAI client's pictures at full detail),
# not the capture default a screen decision uses.
ImagePixels = Annotated[EngineInt, AfterValidator(_image_pixels)]


def _kind(annotation: object) -> type:
    """The setting kind a field's annotation accepts (int | float | None reads as float: ints pass for floats)."""
    kinds = set(get_args(annotation)) if get_origin(annotation) in (Union, types.UnionType) else {annotation}
    kinds.discard(type(None))
    for kind in (float, bool, int, str):
        if kind in kinds:
            return kind
    raise TypeError(f"{annotation!r} is not a setting's type")


def _restated(setting: Setting) -> dict[str, object]:
    exposed = {"default": setting.default, "low": setting.low, "high": setting.high, "low_open": setting.low_open,
               "choices": list(setting.choices)}
    return {"kind": setting.kind, **exposed}


def _fields_of(cls: type[Strict], own_of: type[Strict] | None) -> dict[str, dict[str, object]]:
    inherited = set(own_of.model_fields) if own_of is not None else set()
    found: dict[str, dict[str, object]] = {}
    for name, info in cls.model_fields.items():
        if name in inherited:
            continue
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        restated: Any = extra.get(_SCHEMA_KEY) or {}
        found[name] = {"kind": _kind(info.annotation), **restated}
    return found


def schema_drift(sampling: tuple[Setting, ...] = SAMPLING_SETTINGS,
                 decision: tuple[Setting, ...] = DECISION_SETTINGS) -> list[str]:
    """Each way the declared fields differ from the schema (a missing or extra field, a type, default or range);
    empty when they agree."""
    differences = []
    for cls, base, settings in ((SamplingFields, None, sampling), (DecisionFields, SamplingFields, decision)):
        fields = _fields_of(cls, base)
        schema = {s.name: _restated(s) for s in settings if s.exposed}
        if list(fields) != list(schema):
            differences.append(f"{cls.__name__} declares {list(fields)}; the schema has {list(schema)} "
                               f"(app/api/setting_fields.py)")
        for name in fields.keys() & schema.keys():
            for part, value in schema[name].items():
                if fields[name].get(part) != value:
                    differences.append(f"{cls.__name__}.{name}: {part} {fields[name].get(part)!r}, the schema's {value!r}")
    return differences
