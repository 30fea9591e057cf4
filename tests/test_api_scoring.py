"""The API as a scoring backend, through the stock openai client: echo with prompt logprobs, max_tokens 0,
token-id and batched prompts, the tokenizer endpoints. Numbers are checked against the engine's own
scorer and generation loop on the fixture model (their parity with transformers is tests/test_scoring.py)."""

from __future__ import annotations

import math
from pathlib import Path

import httpx
import openai
import pytest

from decider.app.api.server import ApiServer
from decider.app.service import EngineService
from decider.engine.compile.devices import DeviceOptions
from decider.engine.completions.echo import echo_prompt

MODEL = Path(__file__).parent / "fixtures" / "models" / "qwen35-text"
GREEDY = {"temperature": 0, "seed": 1234}
PROMPT = "Scouts report that the north gate is the safe choice."


@pytest.fixture(scope="module")
def service():
    return EngineService(MODEL, DeviceOptions(device="CPU"))


@pytest.fixture(scope="module")
def api(service):
    server = ApiServer(service, "127.0.0.1", 0)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(api):
    return openai.OpenAI(base_url=api.url, api_key="unused", max_retries=0, timeout=120)


def lm_eval_parse(choice, ctxlen: int) -> tuple[float, bool]:
    """What lm-evaluation-harness 0.4.13's local-completions does with a choice (parse_logprobs)."""
    logprobs = choice["logprobs"]
    tokens_logprobs = logprobs["token_logprobs"][ctxlen:-1]
    top_logprobs = logprobs["top_logprobs"][ctxlen:-1]
    greedy = all(tok == max(top.values()) for tok, top in zip(tokens_logprobs, top_logprobs))
    return sum(tokens_logprobs), greedy


# ----- echo: prompt logprobs in the legacy shape -----


def test_echo_scores_every_prompt_token_like_the_engine(client, service):
    ids = service.runner.tokenizer.encode_raw(PROMPT)
    reply = client.completions.create(model="decider", prompt=PROMPT, max_tokens=0, logprobs=3, echo=True)
    choice = reply.choices[0]
    lp = choice.logprobs
    assert choice.text == PROMPT and choice.finish_reason == "length"
    assert len(lp.tokens) == len(ids) and reply.usage.prompt_tokens == len(ids) and reply.usage.completion_tokens == 0
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None and lp.text_offset[0] == 0
    assert "".join(lp.tokens) == PROMPT and lp.text_offset == sorted(lp.text_offset)
    assert [PROMPT[o : o + len(t)] for o, t in zip(lp.text_offset, lp.tokens)] == lp.tokens
    want = service.score(ids, 3).entries
    assert lp.token_logprobs[1:] == [e.logprob for e in want]
    for top, entry in zip(lp.top_logprobs[1:], want):
        # the top 3 and the token itself when it is not among them
        assert 3 <= len(top) <= 4
        assert top[service.runner.tokenizer.token_text(entry.token_id)] == entry.logprob
        assert max(top.values()) == entry.top[0].logprob


def test_lm_eval_loglikelihood_request_reads_the_continuation(client, service):
    """lm-eval's exact request: token ids, max_tokens 1, logprobs 1, echo; it reads token_logprobs[ctxlen:-1]."""
    tok = service.runner.tokenizer
    context, continuation = tok.encode_raw("Which of these is an animal?"), tok.encode_raw(" A cat")
    body = {"prompt": [context + continuation], "max_tokens": 1, "logprobs": 1, "echo": True, "temperature": 0, "seed": 1234}
    reply = client.completions.create(model="decider", **body).model_dump()
    choice = reply["choices"][0]
    assert len(choice["logprobs"]["token_logprobs"]) == len(context) + len(continuation) + 1  # and one generated
    total, greedy = lm_eval_parse(choice, len(context))
    scores = service.score(context + continuation, 1)
    want = sum(e.logprob for e in scores.entries[len(context) - 1 :])
    assert math.isclose(total, want, rel_tol=0, abs_tol=1e-9)
    assert greedy == all(e.top[0].token_id == e.token_id for e in scores.entries[len(context) - 1 :])


def test_greedy_continuation_is_reported_greedy(client, service):
    """A continuation that is the model's own greedy text must read as greedy (float-equal maxima)."""
    tok = service.runner.tokenizer
    context = tok.encode_raw(PROMPT)
    generated = client.completions.create(model="decider", prompt=[context], max_tokens=4, **GREEDY,
                                          frequency_penalty=0, presence_penalty=0)
    continuation = [i for i in tok.encode_raw(generated.choices[0].text)]
    ids = context + continuation
    if tok.encode_raw(tok.decode(ids)) != ids:
        pytest.skip("the greedy text does not re-tokenize to the same ids")
    reply = client.completions.create(model="decider", prompt=[ids], max_tokens=1, logprobs=1, echo=True, **GREEDY)
    assert lm_eval_parse(reply.model_dump()["choices"][0], len(context))[1] is True
    wrong = context + [(continuation[0] + 1) % tok.size] + continuation[1:]
    reply = client.completions.create(model="decider", prompt=[wrong], max_tokens=1, logprobs=1, echo=True, **GREEDY)
    assert lm_eval_parse(reply.model_dump()["choices"][0], len(context))[1] is False


def test_echo_with_generation_puts_prompt_entries_first(client, service):
    common = dict(model="decider", max_tokens=5, logprobs=2, **GREEDY)
    plain = client.completions.create(prompt=PROMPT, **common).choices[0]
    echoed = client.completions.create(prompt=PROMPT, echo=True, **common).choices[0]
    n = len(service.runner.tokenizer.encode_raw(PROMPT))
    assert echoed.text == PROMPT + plain.text
    for field in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
        assert getattr(echoed.logprobs, field)[n:] == getattr(plain.logprobs, field)
    assert plain.logprobs.text_offset[0] == len(PROMPT)
    # the scorer and the generation loop agree on the prompt's last prediction
    first = plain.logprobs.token_logprobs[0]
    scored = service.score(service.runner.tokenizer.encode_raw(PROMPT) + [service.runner.tokenizer.encode_raw(plain.text)[0]])
    if service.runner.tokenizer.encode_raw(PROMPT + plain.text)[:n] == service.runner.tokenizer.encode_raw(PROMPT):
        assert abs(scored.entries[-1].logprob - first) < 1e-5


def test_echo_without_logprobs_returns_the_text_only(client):
    choice = client.completions.create(model="decider", prompt=PROMPT, max_tokens=0, echo=True).choices[0]
    assert choice.text == PROMPT and choice.logprobs is None


def test_max_tokens_zero_without_echo_generates_nothing(client):
    reply = client.completions.create(model="decider", prompt=PROMPT, max_tokens=0, logprobs=1)
    choice = reply.choices[0]
    assert choice.text == "" and choice.finish_reason == "length" and choice.logprobs.tokens == []
    assert reply.usage.completion_tokens == 0 and reply.usage.prompt_tokens > 0


# ----- token ids and batches -----


def test_token_id_prompt_equals_the_text_prompt(client, service):
    ids = service.runner.tokenizer.encode_raw(PROMPT)
    common = dict(model="decider", max_tokens=4, logprobs=2, echo=True, **GREEDY)
    by_text = client.completions.create(prompt=PROMPT, **common).choices[0]
    by_ids = client.completions.create(prompt=ids, **common).choices[0]
    assert by_ids.text == by_text.text and by_ids.text.startswith(service.runner.tokenizer.decode(ids))
    assert by_ids.logprobs.token_logprobs == by_text.logprobs.token_logprobs
    assert by_ids.logprobs.tokens == by_text.logprobs.tokens


def test_batched_prompts_give_one_choice_each_in_order(client, service):
    prompts = ["Once upon a time", PROMPT, "Which of these is a tool?"]
    common = dict(model="decider", max_tokens=3, logprobs=1, echo=True, **GREEDY)
    batch = client.completions.create(prompt=prompts, **common)
    assert [c.index for c in batch.choices] == [0, 1, 2]
    singles = [client.completions.create(prompt=p, **common) for p in prompts]
    for choice, single in zip(batch.choices, singles):
        assert choice.text == single.choices[0].text
        assert choice.logprobs.token_logprobs == single.choices[0].logprobs.token_logprobs
    assert batch.usage.prompt_tokens == sum(s.usage.prompt_tokens for s in singles)
    assert batch.usage.completion_tokens == sum(s.usage.completion_tokens for s in singles)
    tok = service.runner.tokenizer
    as_ids = client.completions.create(prompt=[tok.encode_raw(p) for p in prompts], **common)
    assert [c.logprobs.token_logprobs for c in as_ids.choices] == [c.logprobs.token_logprobs for c in batch.choices]


def test_out_of_range_token_id_names_its_prompt(client, service):
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="decider", prompt=[[1, 2], [3, service.runner.vocab_size]], max_tokens=1)
    assert info.value.param == "prompt[1]" and info.value.code == "invalid_value"


# ----- the tokenizer -----


def test_tokenize_and_detokenize_round_trip(client, api, service):
    tok = service.runner.tokenizer
    reply = client.post("/tokenize", cast_to=object, body={"model": "decider", "prompt": PROMPT + "<|im_end|>",
                                                            "return_token_strs": True})
    assert reply["tokens"] == tok.encode_raw(PROMPT) + [tok.im_end]
    assert reply["count"] == len(reply["tokens"]) and reply["max_model_len"] == service.runner.context_length
    assert "".join(reply["token_strs"]) == PROMPT + "<|im_end|>"
    back = client.post("/detokenize", cast_to=object, body={"tokens": reply["tokens"]})
    assert back == {"prompt": PROMPT + "<|im_end|>"}
    # vLLM's paths sit at the server's root (lm-eval strips /v1/completions from its base URL)
    root = api.url.removesuffix("/v1")
    assert httpx.post(f"{root}/tokenize", json={"prompt": "x", "add_special_tokens": False}).json()["tokens"] == tok.encode_raw("x")


def test_tokenizer_info_has_what_lm_eval_reads(api, service):
    info = httpx.get(api.url.removesuffix("/v1") + "/tokenizer_info").json()
    assert info["eos_token"] == "<|im_end|>" and info["bos_token"] is None and info["pad_token"] == "<|endoftext|>"
    assert "<|im_start|>" in info["chat_template"]
    assert info["model_max_length"] == service.runner.context_length


def test_models_list_the_context_as_max_model_len(client, service):
    assert client.models.list().data[0].model_extra["max_model_len"] == service.runner.context_length


@pytest.mark.parametrize("path, body, param", [
    ("/tokenize", {}, "prompt"),
    ("/tokenize", {"prompt": 5}, "prompt"),
    ("/tokenize", {"prompt": "x", "messages": []}, "messages"),
    ("/detokenize", {"tokens": "1 2"}, "tokens"),
    ("/detokenize", {"tokens": [1, 10**7]}, "tokens"),
    ("/detokenize", {"tokens": [1], "model": "gpt-4"}, "model"),
])
def test_tokenizer_endpoints_refuse_bad_input(client, path, body, param):
    with pytest.raises(openai.APIStatusError) as info:
        client.post(path, cast_to=object, body=body)
    assert info.value.status_code in (400, 404) and info.value.body["param"] == param


def test_echo_offsets_follow_decoded_text_for_multibyte_prompts(service):
    tok = service.runner.tokenizer
    text = "Café — 龍 ok"
    echoed = echo_prompt(tok, tok.encode_raw(text), None, text)
    assert echoed.text == text
    assert all(0 <= t.text_offset <= len(text) for t in echoed.tokens)
    assert [t.text_offset for t in echoed.tokens] == sorted(t.text_offset for t in echoed.tokens)


def test_a_request_can_ask_for_the_padded_head_definition(client, service):
    """Issue 26 item 5: `logprob_normalization` (Decider's extension) picks the definition; the padding rows'
    share is reported where it is not negligible (this random-weight fixture: a lot)."""
    from decider.engine.core.logprobs import PADDED_HEAD

    ids = service.runner.tokenizer.encode_raw(PROMPT)
    common = dict(model="decider", prompt=PROMPT, max_tokens=0, logprobs=1, echo=True)
    default = client.completions.create(**common).model_dump()["choices"][0]["logprobs"]
    padded = client.completions.create(**common, extra_body={"logprob_normalization": PADDED_HEAD}).model_dump()
    padded = padded["choices"][0]["logprobs"]
    want = service.score(ids, 1, PADDED_HEAD)
    assert padded["token_logprobs"][1:] == [e.logprob for e in want.entries]
    assert default["token_logprobs"][1:] == [e.logprob for e in service.score(ids, 1).entries]
    assert all(p < d for p, d in zip(padded["token_logprobs"][1:], default["token_logprobs"][1:]))
    assert padded["padded_mass"] == default["padded_mass"] == want.padded_mass > 0.01
    with pytest.raises(openai.BadRequestError) as refused:
        client.completions.create(**common, extra_body={"logprob_normalization": "padded"})
    assert refused.value.body["param"] == "logprob_normalization" and "padded_head" in refused.value.body["message"]
