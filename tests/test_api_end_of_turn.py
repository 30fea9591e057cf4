"""A generated end of turn is a generated token: counted in usage.completion_tokens, so listed in the logprobs
(issue 26 item 1). On the demo model, which ends its turn right after this answer letter; through the stock
openai client, with and without echo, streamed and not. Chat's logprobs.content stays one entry per content
token (seed behaviour #777, tests/test_seed_behaviours.py): reasoning tokens, counted in the usage too, have none."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.openai_server import openai_client

from decider.app.service import EngineService
from decider.engine.compile.devices import DeviceOptions

DEMO = Path(__file__).resolve().parent.parent / "resources" / "demo-model"
QUESTION = "Scouts report that Trade is the safe choice. What should we do?"
OPTIONS = ["Defend", "Build", "Trade", "Retreat"]
GREEDY = {"temperature": 0, "seed": 1}


@pytest.fixture(scope="module")
def service():
    return EngineService(DEMO, DeviceOptions(device="CPU"))


@pytest.fixture(scope="module")
def client(service):
    with openai_client(service) as client:
        yield client


@pytest.fixture(scope="module")
def answered(service):
    """The decision prompt with the answer "C." written out, as lm-eval sends context + continuation."""
    from decider.engine.decisions.prompt import load_templates, render_user_text

    user = render_user_text(QUESTION, OPTIONS, False, load_templates())
    context = f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    tok = service.runner.tokenizer
    return context, tok.encode_raw(context), tok.encode_raw(context + "C.")


@pytest.mark.parametrize("max_tokens", [1, 5])
def test_echo_lists_the_generated_end_of_turn_and_lm_eval_reads_the_continuation(client, service, answered, max_tokens):
    context, context_ids, ids = answered
    tok = service.runner.tokenizer
    reply = client.completions.create(model="decider", prompt=[ids], max_tokens=max_tokens, logprobs=1, echo=True, **GREEDY)
    choice, lp = reply.choices[0], reply.choices[0].logprobs
    assert choice.finish_reason == "stop" and reply.usage.completion_tokens == 1 and reply.usage.prompt_tokens == len(ids)
    assert len(lp.tokens) == len(lp.token_logprobs) == len(ids) + 1
    assert lp.tokens[-1] == tok.token_text(tok.im_end) and lp.text_offset[-1] == len(choice.text)
    # lm-eval's local-completions: token_logprobs[ctxlen:-1] are the continuation "C." and nothing else
    scored = service.score(ids).entries
    assert lp.token_logprobs[len(context_ids) : -1] == [e.logprob for e in scored[len(context_ids) - 1 :]]
    assert lp.tokens[len(context_ids) : -1] == [tok.token_text(i) for i in ids[len(context_ids) :]]


def test_without_echo_the_end_of_turn_is_the_one_entry(client, service, answered):
    _, _, ids = answered
    tok = service.runner.tokenizer
    common = dict(model="decider", prompt=[ids], max_tokens=5, logprobs=2, **GREEDY)
    choice = client.completions.create(**common).choices[0]
    assert (choice.text, choice.finish_reason, choice.logprobs.tokens) == ("", "stop", [tok.token_text(tok.im_end)])
    assert choice.logprobs.token_logprobs[0] == max(choice.logprobs.top_logprobs[0].values()) < 0
    chunks = list(client.completions.create(stream=True, **common))
    streamed = [t for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.token_logprobs]
    assert streamed == choice.logprobs.token_logprobs and chunks[-1].choices[0].finish_reason == "stop"
