"""The API's request classes without a server: fields against the one sampling schema, and errors that
name their field from a field attribute."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from decider.app.api.errors import ApiError, from_engine, from_validation
from decider.app.api.protocol import ChatCompletionRequest, CompletionRequest, DecideRequest, SamplingFields
from decider.app.requests import SAMPLING_FIELDS
from decider.engine.core.errors import SettingsError
from decider.engine.core.settings import RANGES, SamplingSettings

HELLO = [{"role": "user", "content": "hi"}]


def refusal(kind, body) -> ApiError:
    with pytest.raises(ValidationError) as info:
        kind.model_validate(body)
    return from_validation(info.value)


def test_sampling_fields_are_the_settings_schema():
    settings = {f.name for f in dataclasses.fields(SamplingSettings)} - {"penalty_window"}  # not a request field
    assert set(SamplingFields.model_fields) == set(SAMPLING_FIELDS) == settings
    for kind in (ChatCompletionRequest, CompletionRequest, DecideRequest):
        assert set(SamplingFields.model_fields) <= set(kind.model_fields)
    for name in (n for n in SAMPLING_FIELDS if n in RANGES):  # an integer setting takes 3.0 as 3 and refuses 3.5
        integer = RANGES[name][2]
        value = ChatCompletionRequest.model_validate({"messages": HELLO, name: 3.0})
        assert isinstance(getattr(value, name), int) is integer
        if integer:
            assert refusal(ChatCompletionRequest, {"messages": HELLO, name: 3.5}).param == name


def test_a_choice_setting_takes_its_choices_only():
    assert refusal(ChatCompletionRequest, {"messages": HELLO, "draft": 3.0}).param == "draft"
    with pytest.raises(SettingsError) as info:
        SamplingSettings().with_changes(draft="fastest")
    error = from_engine(info.value)
    assert (error.status, error.param, error.code) == (400, "draft", "invalid_value")


@pytest.mark.parametrize("name", sorted(n for n in SAMPLING_FIELDS if n in RANGES))
def test_a_range_error_names_its_field_from_the_settings_error(name):
    low, high, _ = RANGES[name]
    with pytest.raises(SettingsError) as info:
        SamplingSettings().with_changes(**{name: high * 2 + 1})
    assert info.value.field == name
    error = from_engine(info.value)
    assert (error.status, error.param, error.code) == (400, name, "invalid_value")


def test_an_error_message_that_starts_with_a_field_name_does_not_make_it_the_param():
    error = from_engine(SettingsError("temperature is mentioned first, but no field is at fault"))
    assert error.param is None


@pytest.mark.parametrize("kind, body", [
    (ChatCompletionRequest, {"messages": HELLO, "temprature": 0.5}),
    (CompletionRequest, {"prompt": "x", "max_token": 3}),
    (DecideRequest, {"question": "q", "options": ["a", "b"], "option": "c"}),
])
def test_unknown_fields_are_refused_by_name(kind, body):
    error = refusal(kind, body)
    unknown = (set(body) - set(kind.model_fields)).pop()
    assert (error.status, error.code, error.param) == (400, "unknown_parameter", unknown)


def test_nested_errors_name_their_location():
    error = refusal(ChatCompletionRequest, {"messages": [HELLO[0], {"role": "robot", "content": "x"}]})
    assert error.param == "messages[1].role" and error.message.startswith("messages[1].role must be")
    error = refusal(ChatCompletionRequest, {"messages": [{"role": "user", "content": "x", "tool_call_id": "7"}]})
    assert (error.param, error.code) == ("messages[0].tool_call_id", "unsupported_parameter")


def test_to_request_builds_the_engine_request():
    defaults = SamplingSettings()
    decision = DecideRequest.model_validate(
        {"question": "Which?", "options": ["a", "b"], "temperature": 0, "permute": True, "alternatives": 3.0}
    ).to_request(defaults)
    assert decision.options == ("a", "b") and decision.permute and decision.alternatives == 3
    assert decision.sampling == defaults.with_changes(temperature=0)


def test_sliced_counting_is_a_lower_bound_that_stops_early():
    from decider.app.api.limits import SLICE_CHARS, count_tokens_at_least
    from support.models import model_dir
    from decider.engine.model.tokenizer import ChatTokenizer

    tokenizer = ChatTokenizer(model_dir("qwen35-text") / "tokenizer.json")
    texts = ["The troll 🙂 blocks the bridge, " * 4000, "日本語のテキスト。" * 5000 + " end", "x" * (SLICE_CHARS * 2 + 7)]
    for text in texts:
        exact = len(tokenizer.encode_text(text))
        counted = count_tokens_at_least([text], tokenizer, 10**9)
        assert exact - 64 <= counted <= exact  # within the margin per slice, never above
    assert count_tokens_at_least([texts[0]] * 50, tokenizer, 1000) < 1000 + len(tokenizer.encode_text(texts[0][:SLICE_CHARS]))
