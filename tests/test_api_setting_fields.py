"""The API's declared setting fields (app/api/setting_fields.py) agree with the schema (engine/core/settings.py):
same names in the same order, same types, defaults and ranges; and the check notices each kind of drift."""

from dataclasses import replace

import pytest

from decider.app.api.setting_fields import DecisionFields, SamplingFields, schema_drift
from decider.engine.core.settings import DECISION_SETTINGS, SAMPLING_NAMES, SAMPLING_SETTINGS, Setting


def test_the_declared_fields_are_the_schemas():
    assert schema_drift() == []
    assert list(SamplingFields.model_fields) == list(SAMPLING_NAMES)
    assert list(DecisionFields.model_fields) == list(SAMPLING_NAMES) + [s.name for s in DECISION_SETTINGS]


def _changed(settings: tuple[Setting, ...], name: str, **changes: object) -> tuple[Setting, ...]:
    return tuple(replace(s, **changes) if s.name == name else s for s in settings)


@pytest.mark.parametrize("name, changes, words", [
    ("reasoning_budget", {"default": 256}, "reasoning_budget: default 512, the schema's 256"),
    ("alternatives", {"high": 30}, "alternatives: high 20, the schema's 30"),
    ("image_pixels", {"low": 1}, "image_pixels: low 65536, the schema's 1"),
    ("think", {"kind": int}, "think: kind <class 'bool'>, the schema's <class 'int'>"),
])
def test_a_decision_field_that_drifts_is_named(name, changes, words):
    assert words in "\n".join(schema_drift(decision=_changed(DECISION_SETTINGS, name, **changes)))


@pytest.mark.parametrize("name, changes, words", [
    ("top_p", {"low_open": False}, "top_p: low_open True, the schema's False"),
    ("draft", {"choices": ("none", "lookup")}, "draft: choices"),
    ("temperature", {"kind": int}, "temperature: kind"),
])
def test_a_sampling_field_that_drifts_is_named(name, changes, words):
    assert words in "\n".join(schema_drift(sampling=_changed(SAMPLING_SETTINGS, name, **changes)))


def test_a_setting_missing_or_extra_is_named():
    extra = Setting("hedge", bool, False, "Hedge", "say so when unsure")
    drift = schema_drift(decision=DECISION_SETTINGS + (extra,))
    assert any("DecisionFields declares" in d and "'hedge'" in d for d in drift)
    drift = schema_drift(sampling=tuple(s for s in SAMPLING_SETTINGS if s.name != "seed"))
    assert any("SamplingFields declares" in d and "'seed'" in d for d in drift)
    hidden = _changed(SAMPLING_SETTINGS, "min_p", exposed=False)  # an engine-internal knob has no field
    assert any("SamplingFields declares" in d for d in schema_drift(sampling=hidden))
