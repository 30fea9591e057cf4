"""One regression test per behaviour of the seed PR series (FastFlowLM #776–#780)."""

from collections import deque

import numpy as np
import pytest

from decider.engine.model.chat_template import Message, build_chat_prompt
from decider.engine.decisions.decide import DecisionRequest, decide
from decider.engine.decisions.prompt import build_decision_prompt, letter_ids
from decider.engine.generation.generate import GenerationRequest, Step, _Assembler, Completion, generate, generate_step, make_rng
from decider.engine.core.logprobs import Distribution, log_softmax
from decider.engine.completions.openai_format import chat_completion
from decider.engine.core.settings import SamplingSettings

PENALISED_GREEDY = SamplingSettings(temperature=0.0, frequency_penalty=1.0, presence_penalty=1.5)
PLAIN_GREEDY = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0)
QUESTION = "The scouts report that Retreat is the safe choice. What should we do?"
OPTIONS = ("Attack", "Retreat", "Trade", "Hide")


def chat_ids(runner, text, think=False):
    return build_chat_prompt(runner.tokenizer, [Message("user", text)], think)


# --- #776: a draw that is thrown away never enters the penalty windows ------------------------------


def test_776_the_prefill_draw_sees_an_empty_penalty_window(text_runner):
    # With the default penalties on, the answer must still be the unpenalised argmax: nothing drawn
    # before the answer position may count as generated text.
    penalised = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=PENALISED_GREEDY))
    plain = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=PLAIN_GREEDY))
    assert [o.logprob for o in penalised.options] == [o.logprob for o in plain.options]
    assert penalised.choice_index == plain.choice_index


def test_776_kept_tokens_enter_the_window_and_stop_tokens_do_not(text_runner):
    prompt = chat_ids(text_runner, "Hello there").ids
    window: deque[int] = deque(maxlen=64)
    steps = list(generate_step(text_runner, prompt, PENALISED_GREEDY, make_rng(0), max_tokens=5, window=window))
    assert list(window) == [s.token_id for s in steps]
    # Make the second draw a stop token: it must not be recorded.
    first = steps[0].token_id
    window2: deque[int] = deque(maxlen=64)
    stopped = list(
        generate_step(text_runner, prompt, PENALISED_GREEDY, make_rng(0), max_tokens=5, window=window2,
                      stop_ids=frozenset({steps[1].token_id}))
    )
    assert [s.token_id for s in stopped] == [first, steps[1].token_id]
    assert list(window2) == [first]


def test_776_penalties_see_the_kept_tokens_on_the_next_step(text_runner):
    prompt = chat_ids(text_runner, "Hello there").ids
    steps = list(generate_step(text_runner, prompt, PENALISED_GREEDY, make_rng(0), max_tokens=2))
    first = steps[0].token_id
    text_runner.reset()
    raw = text_runner.prefill(prompt + [first])
    assert steps[1].penalized[first] == pytest.approx(raw[first] - 1.0 - 1.5)


# --- #777: exact logprobs in OpenAI's shapes, aligned with the content --------------------------------


def test_777_one_entry_per_content_token_in_order(text_runner):
    prompt = chat_ids(text_runner, "Tell me about the river")
    request = GenerationRequest(tuple(prompt.ids), PLAIN_GREEDY, max_tokens=12, top_logprobs=3, checkpoints=(prompt.checkpoint,))
    completion = generate(text_runner, request)
    entries = completion.logprobs
    content_tokens = [t for t in completion.token_ids if t not in text_runner.tokenizer.stop_ids]
    assert [e.token_id for e in entries] == content_tokens
    assert b"".join(e.bytes for e in entries).decode("utf-8", "replace") == completion.content
    assert [e.text_offset for e in entries] == sorted(e.text_offset for e in entries)
    for e in entries:
        assert len(e.top) == 3 and e.top[0].logprob >= e.logprob - 1e-12


def test_777_eos_gets_no_entry_and_tokens_outside_the_text_get_none(text_runner):
    tok = text_runner.tokenizer
    completion = Completion(prompt_tokens=1)
    request = GenerationRequest((1,), PLAIN_GREEDY, max_tokens=8, think=True, top_logprobs=0)
    assembler = _Assembler(text_runner, request, completion)
    logits = np.zeros(tok.size)
    word = tok.encode_text("Attack")[0]
    blank = tok.encode_text("\n\n")
    for token in [word, tok.think_close, *blank, word, tok.im_end]:
        assembler.add(Step(token, Distribution(logits).entry(token, 0), logits))
    assembler.finish()
    assert completion.reasoning == tok.decode([word])
    assert completion.content == tok.decode([word])
    assert [e.token_id for e in completion.logprobs] == [word]  # no </think>, no blank line, no EOS


def test_777_no_content_means_null_logprobs(text_runner):
    prompt = chat_ids(text_runner, "Think about it", think=True)
    request = GenerationRequest(tuple(prompt.ids), PLAIN_GREEDY, max_tokens=3, think=True, top_logprobs=2)
    completion = generate(text_runner, request)
    body = chat_completion(completion, "m")
    assert body["choices"][0]["message"]["content"] == ""
    assert body["choices"][0]["logprobs"] is None
    assert body["choices"][0]["message"]["reasoning_content"] is not None


def test_777_logprob_is_not_renormalised_over_the_listed_alternatives(text_runner):
    prompt = chat_ids(text_runner, "Hello there").ids
    step = next(generate_step(text_runner, prompt, PLAIN_GREEDY, make_rng(0), max_tokens=1, top_logprobs=5))
    assert sum(np.exp(t.logprob) for t in step.entry.top) < 1.0
    full = log_softmax(text_runner.prefill(prompt))
    assert step.entry.logprob == full[step.token_id]


def test_777_constrained_logprobs_are_normalised_over_the_allowed_tokens(text_runner):
    prompt = chat_ids(text_runner, "Pick one").ids
    allowed = np.array(letter_ids(text_runner.tokenizer, 3))
    step = next(generate_step(text_runner, prompt, PLAIN_GREEDY, make_rng(0), max_tokens=1, top_logprobs=10, allowed=allowed))
    assert step.token_id in allowed
    assert {t.token_id for t in step.entry.top} <= set(allowed.tolist())
    assert np.isclose(sum(np.exp(t.logprob) for t in step.entry.top), 1.0)


# --- #778: max_tokens is exact --------------------------------------------------------------------------


@pytest.mark.parametrize("max_tokens", [1, 2, 5])
def test_778_max_tokens_n_gives_n_tokens_and_n_forwards(text_runner, max_tokens):
    text_runner.reset()
    text_runner.clear_snapshots()
    prompt = chat_ids(text_runner, "Count to ten")
    before = text_runner.stats.forwards
    request = GenerationRequest(tuple(prompt.ids), PLAIN_GREEDY, max_tokens=max_tokens)
    completion = generate(text_runner, request)
    if completion.finish_reason == "length":
        assert completion.completion_tokens == max_tokens
        assert text_runner.stats.forwards - before == max_tokens  # one prefill + (N-1) decode steps
    else:
        assert completion.completion_tokens <= max_tokens


# --- #779: the empty think block is prefilled; the answer comes from the prefill draw ---------------------


def test_779_single_turn_decision_costs_one_forward(text_runner):
    text_runner.reset()
    text_runner.clear_snapshots()
    before = text_runner.stats.forwards
    result = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=PLAIN_GREEDY))
    # one forward per prompt chunk (the chunks are the snapshot checkpoints); no decode step at all
    prompt = build_decision_prompt(text_runner.tokenizer, QUESTION, list(OPTIONS))
    chunks = len({c for c in prompt.checkpoints if 0 < c < len(prompt.ids)}) + 1
    assert text_runner.stats.forwards - before == chunks == 1
    assert result.usage["completion_tokens"] == 1


def test_779_prefilled_block_answers_like_the_four_step_path(text_runner):
    tok = text_runner.tokenizer
    prompt = build_decision_prompt(tok, QUESTION, list(OPTIONS))
    block = [tok.think_open, *tok.encode_text("\n\n"), tok.think_close, *tok.encode_text("\n\n")]
    assert prompt.ids[-len(block):] == block and len(block) == 4
    letters = letter_ids(tok, len(OPTIONS))
    text_runner.reset()
    logits = text_runner.prefill(prompt.ids[: -len(block)])
    for token in block:  # the old path: four decode steps
        logits = text_runner.step(token)
    four_step = log_softmax(logits)[letters]
    text_runner.reset()
    one_forward = log_softmax(text_runner.prefill(prompt.ids))[letters]
    assert np.max(np.abs(four_step - one_forward)) < 1e-4
    assert int(np.argmax(four_step)) == int(np.argmax(one_forward))


def test_779_identical_requests_1000_times_do_not_crash_and_agree(text_runner):
    request = DecisionRequest(QUESTION, OPTIONS, sampling=PLAIN_GREEDY)
    first = decide(text_runner, request)
    forwards = text_runner.stats.forwards
    for _ in range(999):
        again = decide(text_runner, request)
        assert again.choice_index == first.choice_index
        assert [o.logprob for o in again.options] == [o.logprob for o in first.options]
    # a full match restores the snapshot taken at the prompt's end: no forward at all
    assert text_runner.stats.forwards == forwards


def test_779_identical_generation_requests_twice_with_max_tokens_1(text_runner):
    prompt = chat_ids(text_runner, "Same again")
    request = GenerationRequest(tuple(prompt.ids), PLAIN_GREEDY, max_tokens=1, top_logprobs=2, checkpoints=(prompt.checkpoint,))
    first = generate(text_runner, request)
    second = generate(text_runner, request)
    assert text_runner.stats.last_prefill_tokens > 0  # recomputed from the checkpoint, never an empty prefill
    assert first.token_ids == second.token_ids
    assert first.logprobs == second.logprobs


# --- #780: logprobs are captured on the prefill draw --------------------------------------------------------


def test_780_the_prefill_draw_carries_logprobs(text_runner):
    prompt = chat_ids(text_runner, "Which one?")
    request = GenerationRequest(tuple(prompt.ids), PLAIN_GREEDY, max_tokens=1, top_logprobs=5)
    completion = generate(text_runner, request)
    assert len(completion.logprobs) == 1 and completion.completion_tokens == 1
    entry = completion.logprobs[0]
    text_runner.reset()
    full = log_softmax(text_runner.prefill(prompt.ids))
    assert entry.token_id == int(np.argmax(full))
    assert entry.logprob == full[entry.token_id]
    body = chat_completion(completion, "m")
    assert body["choices"][0]["logprobs"]["content"][0]["logprob"] == entry.logprob
