"""Structured output masks: whatever the model wants, the drawn text is valid JSON of the schema."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from decider.engine.core.errors import SettingsError
from decider.engine.constrained.structured import GrammarMask, GrammarTokenizer, ResponseFormat
from decider.engine.model.tokenizer import ChatTokenizer

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT / "resources" / "demo-model" / "tokenizer.json"

ACTION = {
    "type": "json_schema",
    "json_schema": {
        "name": "action",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"action": {"enum": ["attack", "defend", "retreat"]}, "urgent": {"type": "boolean"},
                           "n": {"type": "integer"}},
            "required": ["action", "urgent", "n"],
            "additionalProperties": False,
        },
    },
}


def draw_until_done(fmt: ResponseFormat, seed: int, max_tokens: int = 400) -> tuple[str, bool]:
    """Random logits each step (a model that wants anything), the mask applied, the argmax kept."""
    chat = ChatTokenizer(TOKENIZER)
    end = chat.im_end
    mask = GrammarMask(fmt, GrammarTokenizer.for_file(TOKENIZER, (end,)), chat.size)
    rng = np.random.default_rng(seed)
    ids = []
    for _ in range(max_tokens):
        logits = mask.apply(rng.normal(size=chat.size) * 5)
        token = int(np.argmax(logits))
        assert np.isfinite(logits[token])
        if token == end:
            return chat.decode(ids), True
        mask.accept(token)
        ids.append(token)
    return chat.decode(ids), False


@pytest.mark.parametrize("seed", range(8))
def test_json_schema_always_yields_a_valid_object(seed):
    text, ended = draw_until_done(ResponseFormat.from_openai(ACTION), seed)
    assert ended, text
    value = json.loads(text)
    assert set(value) == {"action", "urgent", "n"}
    assert value["action"] in ("attack", "defend", "retreat") and isinstance(value["urgent"], bool)
    assert isinstance(value["n"], int)
    assert not any(c.isspace() for c in text)  # compact separators (no string value here holds a space)


@pytest.mark.parametrize("seed", range(4))
def test_json_object_is_an_object(seed):
    text, ended = draw_until_done(ResponseFormat.from_openai({"type": "json_object"}), seed, max_tokens=2000)
    if ended:
        assert isinstance(json.loads(text), dict)
    else:  # random logits may keep a string open forever; what exists is still a valid prefix
        assert text.startswith("{")


def test_mask_leaves_allowed_logits_untouched():
    chat = ChatTokenizer(TOKENIZER)
    mask = GrammarMask(ResponseFormat.from_openai(ACTION), GrammarTokenizer.for_file(TOKENIZER, (chat.im_end,)),
                       chat.size)
    logits = np.random.default_rng(0).normal(size=chat.size)
    masked = mask.apply(logits)
    allowed = np.isfinite(masked)
    assert 0 < allowed.sum() < chat.size
    np.testing.assert_array_equal(masked[allowed], logits[allowed])
    assert chat.decode([int(np.flatnonzero(allowed)[0])]).startswith("{")


def test_text_format_is_no_constraint_and_bad_formats_are_refused():
    assert ResponseFormat.from_openai({"type": "text"}) is None
    for bad in ({"type": "yaml"}, "json", {"type": "json_schema", "json_schema": {"schema": 3}},
                {"type": "json_schema", "json_schema": {"schema": {"type": "frob"}}}):
        with pytest.raises(SettingsError, match="response_format"):
            ResponseFormat.from_openai(bad)
