"""logit_bias and structured output (response_format) through the stock openai client, on the fixture model.

The fixture's weights are random: whatever it wants, a JSON-schema request must come back as JSON of
the schema, within max_tokens, with the model's own logprobs for the tokens it drew."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from support.openai_server import openai_client

from decider.app.service import EngineService
from decider.engine.compile.devices import DeviceOptions
from decider.engine.generation.generate import GenerationRequest
from decider.engine.generation.logit_bias import LogitBias
from decider.engine.generation.processors import AllowedTokens, Penalties, check_order, make_processors
from decider.engine.core.settings import SamplingSettings
from decider.engine.constrained.structured import ResponseFormat

MODEL = Path(__file__).parent / "fixtures" / "models" / "qwen35-text"
PLAIN = {"temperature": 0, "seed": 1, "frequency_penalty": 0, "presence_penalty": 0}
ACTION_SCHEMA = {
    "type": "object",
    "properties": {"action": {"enum": ["attack", "defend", "retreat"]}, "urgent": {"type": "boolean"},
                   "n": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["action", "urgent", "n"],
    "additionalProperties": False,
}
ACTION = {"type": "json_schema", "json_schema": {"name": "action", "strict": True, "schema": ACTION_SCHEMA}}
ASK = [{"role": "user", "content": "The dragon wakes. What now?"}]


@pytest.fixture(scope="module")
def service():
    return EngineService(MODEL, DeviceOptions(device="CPU"))


@pytest.fixture(scope="module")
def client(service):
    with openai_client(service) as client:
        yield client


def assert_action(text: str) -> None:
    value = json.loads(text)
    assert set(value) == {"action", "urgent", "n"}, text
    assert value["action"] in ("attack", "defend", "retreat") and isinstance(value["urgent"], bool)
    assert isinstance(value["n"], int) and 0 <= value["n"] <= 99


# ----- logit_bias -----


def test_logit_bias_sits_after_the_penalties_and_before_the_masks():
    chain = make_processors(SamplingSettings(), allowed=[1, 2], logit_bias=((2, 5.0),))
    assert [type(p) for p in chain] == [Penalties, LogitBias, AllowedTokens]
    check_order(chain)
    logits = np.zeros(4, dtype=np.float32)
    out = LogitBias(((2, 5.0), (3, -100.0))).apply(logits)
    assert out.tolist() == [0.0, 0.0, 5.0, -100.0] and logits.tolist() == [0.0] * 4  # never edits its input


def test_logit_bias_moves_the_distribution_as_openai_defines_it(client):
    """The bias is added to the logit; the logprobs reported are of the biased distribution."""
    base = dict(model="decider", prompt="Once upon a time", max_tokens=1, logprobs=5, **PLAIN)
    plain = client.completions.create(**base).choices[0].logprobs
    top = plain.top_logprobs[0]
    second = list(top)[1]
    token_id = client.post("/tokenize", cast_to=object, body={"prompt": second})["tokens"]
    assert len(token_id) == 1
    bias = 3.0
    biased = client.completions.create(logit_bias={str(token_id[0]): bias}, **base).choices[0].logprobs
    p = math.exp(top[second])
    want = top[second] + bias - math.log(1 - p + p * math.exp(bias))
    assert abs(biased.top_logprobs[0][second] - want) < 1e-6
    assert biased.tokens[0] == second  # greedy now takes the boosted token
    banned = client.completions.create(logit_bias={str(token_id[0]): -100}, **base).choices[0].logprobs
    assert second not in banned.top_logprobs[0]


def test_logit_bias_in_chat_forces_a_token(client, service):
    tok = service.runner.tokenizer
    forced = tok.encode_text(" scouts")[0]
    reply = client.chat.completions.create(model="decider", messages=ASK, max_tokens=3, logprobs=True,
                                           logit_bias={str(forced): 100}, **PLAIN)
    entries = reply.choices[0].logprobs.content
    assert [e.token for e in entries] == [tok.token_text(forced)] * 3
    assert all(e.logprob > -1e-6 for e in entries)


# ----- response_format -----


@pytest.mark.parametrize("seed", range(4))
def test_json_schema_chat_returns_the_schema_even_when_sampling(client, seed):
    reply = client.chat.completions.create(model="decider", messages=ASK, max_tokens=40, temperature=1.0, seed=seed,
                                           response_format=ACTION)
    choice = reply.choices[0]
    assert choice.finish_reason == "stop"
    assert_action(choice.message.content)


def test_json_schema_completion_and_stream(client):
    common = dict(model="decider", prompt="Action:", max_tokens=40, logprobs=1, extra_body={"response_format": ACTION}, **PLAIN)
    whole = client.completions.create(**common).choices[0]
    assert whole.finish_reason == "stop"
    assert_action(whole.text)
    chunks = list(client.completions.create(stream=True, **common))
    assert "".join(c.choices[0].text for c in chunks) == whole.text
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_json_schema_parses_into_a_typed_object(client):
    """The openai client's own structured-output helper (a pydantic model as response_format)."""
    from pydantic import BaseModel, Field

    class Move(BaseModel):
        direction: str = Field(json_schema_extra={"enum": ["north", "south"]})
        steps: int = Field(ge=0, le=9)

    parsed = client.beta.chat.completions.parse(model="decider", messages=ASK, max_tokens=40, response_format=Move, **PLAIN)
    move = parsed.choices[0].message.parsed
    assert isinstance(move, Move) and move.direction in ("north", "south") and 0 <= move.steps <= 9


def test_the_mask_restricts_the_draw_not_the_logprobs(service):
    """Reported logprobs are the model's over the whole vocabulary: the prompt scorer, which knows
    nothing of the grammar, gives the same numbers for the same tokens."""
    tok = service.runner.tokenizer
    prompt = tuple(tok.encode_raw("Action:"))
    sampling = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0, repetition_penalty=1.0)
    request = GenerationRequest(prompt, sampling, 40, top_logprobs=0, response_format=ResponseFormat.from_openai(ACTION))
    completion = service.run(request)
    assert completion.finish_reason == "stop" and completion.completion_tokens < 40
    assert completion.token_ids[-1] not in tok.stop_ids  # ended when the value closed, without another forward
    assert_action(completion.content)
    scored = service.score(list(prompt) + completion.token_ids).entries[len(prompt) - 1 :]
    got = [e.logprob for e in completion.logprobs]
    assert len(got) == len(scored)
    # Decoded steps run the one-token DeltaNet path, the scorer the plugin's fused kernel: the same f32 arithmetic in
    # another order, within 5e-5 on these random fixtures (as tests/test_scoring.py holds them); a masked distribution
    # would be off by nats.
    assert max(abs(a - b.logprob) for a, b in zip(got, scored)) < 5e-5
    assert min(got) < -0.5  # the grammar forced tokens the model did not want: their logprobs say so


