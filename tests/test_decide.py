"""Decisions on the fixture models."""

import numpy as np
import pytest

from support.models import model_dir
from decider.engine.decisions.decide import DecisionRequest, decide
from decider.engine.decisions.prompt import build_decision_prompt, letter_ids
from decider.engine.core.errors import SettingsError
from decider.engine.core.logprobs import log_softmax
from decider.engine.runners.runner import ModelRunner
from decider.engine.core.settings import SamplingSettings

GREEDY = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0)
QUESTION = "Scouts report that Hide is the safe choice. What should we do?"
OPTIONS = ("Attack", "Defend", "Hide", "Trade", "Wait")
CONTEXT = " ".join(f"Rule {i}: a unit that moves may not attack in the same turn." for i in range(40))


def test_probabilities_are_a_softmax_of_full_vocabulary_option_logprobs(text_runner):
    result = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=GREEDY))
    tok = text_runner.tokenizer
    prompt = build_decision_prompt(tok, QUESTION, list(OPTIONS))
    text_runner.reset()
    full = log_softmax(text_runner.prefill(prompt.ids))
    letters = letter_ids(tok, len(OPTIONS))
    assert [o.logprob for o in result.options] == pytest.approx(full[letters].tolist(), abs=1e-12)
    expected = np.exp(full[letters]) / np.exp(full[letters]).sum()
    assert [o.probability for o in result.options] == pytest.approx(expected.tolist(), abs=1e-12)
    assert abs(sum(o.probability for o in result.options) - 1.0) < 1e-9
    assert result.coverage == pytest.approx(float(np.exp(full[letters]).sum()), abs=1e-12)
    assert result.choice_index == int(np.argmax(full[letters]))
    assert [a.token_id for a in result.alternatives][:1] == [int(np.argmax(full))]


def test_sampled_and_greedy_decisions_report_the_same_probabilities(text_runner):
    greedy = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=GREEDY))
    hot = SamplingSettings(temperature=1.5, top_k=0, top_p=1.0, frequency_penalty=0.0, presence_penalty=0.0)
    for seed in range(20):
        sampled = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=hot.with_changes(seed=seed)))
        assert [o.probability for o in sampled.options] == [o.probability for o in greedy.options]
        assert 0 <= sampled.choice_index < len(OPTIONS)


def test_constrained_choice_is_always_an_option_and_follows_the_distribution(text_runner):
    hot = SamplingSettings(temperature=1.0, top_k=0, top_p=1.0, frequency_penalty=0.0, presence_penalty=0.0)
    rng = np.random.default_rng(5)
    counts = np.zeros(len(OPTIONS))
    result = None
    for _ in range(400):
        result = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=hot, sample_choice=True), rng=rng)
        counts[result.choice_index] += 1
    probabilities = np.array([o.probability for o in result.options])
    assert np.abs(counts / counts.sum() - probabilities).max() < 0.08


def test_think_budget_exhaustion_still_decides(text_runner):
    request = DecisionRequest(QUESTION, OPTIONS, think=True, reasoning_budget=6, sampling=GREEDY)
    result = decide(text_runner, request)
    assert result.choice.label in "ABCDE"
    assert result.reasoning is not None
    tok = text_runner.tokenizer
    # the answer was read after a forced "\n</think>\n\n"
    assert text_runner.history[-3:] == tok.encode_text("\n") + [tok.think_close] + tok.encode_text("\n\n") or \
        text_runner.history[-2:] == [tok.think_close] + tok.encode_text("\n\n")
    assert abs(sum(o.probability for o in result.options) - 1) < 1e-9


def test_think_decision_can_be_cancelled(text_runner):
    from decider.engine.core.errors import Cancelled

    calls = []

    def stop():
        calls.append(1)
        return len(calls) > 3

    with pytest.raises(Cancelled):
        from decider.engine.decisions.decide import decide as run

        run(text_runner, DecisionRequest(QUESTION, OPTIONS, think=True, reasoning_budget=500, sampling=GREEDY), should_stop=stop)


def test_shared_context_prefills_only_the_new_tokens_and_equals_a_cold_run():
    runner = ModelRunner(model_dir("qwen35-text"))
    first = decide(runner, DecisionRequest(QUESTION, OPTIONS, context=CONTEXT, sampling=GREEDY))
    cold_tokens = first.usage["prefill_tokens"]
    second_request = DecisionRequest("Which unit should move first?", ("Archers", "Knights", "Scouts"), context=CONTEXT, sampling=GREEDY)
    warm = decide(runner, second_request)
    assert warm.usage["reused_tokens"] > 400
    assert warm.usage["prefill_tokens"] < cold_tokens / 5
    cold = decide(ModelRunner(model_dir("qwen35-text")), second_request)
    assert cold.usage["reused_tokens"] == 0
    assert [o.logprob for o in warm.options] == [o.logprob for o in cold.options]  # bit-identical


class PriorOnlyRunner:
    """A stand-in model that ignores the prompt: every answer is the letter prior."""

    def __init__(self, runner, prior):
        self.tokenizer = runner.tokenizer
        self.stats = runner.stats
        self.logits = np.full(runner.vocab_size, -5.0)
        self.logits[letter_ids(runner.tokenizer, len(prior))] = np.log(prior)

    def prefill(self, ids, checkpoints=()):
        return self.logits.copy()

    def settle(self):  # nothing ever runs ahead: a decision without think makes no decode step
        pass


def test_permute_divides_out_a_pure_letter_prior(text_runner):
    prior = np.array([0.6, 0.25, 0.1, 0.05])
    fake = PriorOnlyRunner(text_runner, prior)
    result = decide(fake, DecisionRequest(QUESTION, OPTIONS[:4], permute=True, sampling=GREEDY))
    assert [o.probability for o in result.options] == pytest.approx((prior / prior.sum()).tolist())
    assert [o.debiased_probability for o in result.options] == pytest.approx([0.25] * 4)


def test_permute_averages_the_rotations(text_runner):
    result = decide(text_runner, DecisionRequest(QUESTION, OPTIONS[:3], permute=True, sampling=GREEDY))
    expected = np.zeros(3)
    for shift in range(3):
        order = [(i + shift) % 3 for i in range(3)]
        rotated = decide(text_runner, DecisionRequest(QUESTION, tuple(OPTIONS[i] for i in order), sampling=GREEDY))
        for position, option in enumerate(order):
            expected[option] += rotated.options[position].probability / 3
    assert [o.debiased_probability for o in result.options] == pytest.approx(expected.tolist(), abs=1e-12)
    assert result.choice_index == int(np.argmax(expected))


def test_word_option_scoring_sums_sequence_logprobs(text_runner):
    options = ("Attack the castle", "Retreat", "Trade")
    result = decide(text_runner, DecisionRequest(QUESTION, options, score_options=True, sampling=GREEDY))
    tok = text_runner.tokenizer
    prompt = build_decision_prompt(tok, QUESTION, list(options), words=True)
    for option, scored in zip(options, result.options):
        sequence = tok.encode_text(option) + [tok.im_end]
        text_runner.reset()
        text_runner.clear_snapshots()
        total = 0.0
        for i, token in enumerate(sequence):  # teacher-forced, one prefill per position
            total += log_softmax(text_runner.prefill(prompt.ids + sequence[:i]))[token]
        assert scored.logprob == pytest.approx(total, abs=1e-4)
        assert scored.token_count == len(sequence)
        assert scored.normalized_logprob == pytest.approx(total / len(sequence), abs=1e-4)
    assert result.mode == "words"
    assert result.usage["reused_tokens"] >= 2 * len(prompt.ids)  # branches restore the snapshot


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(question="Q?", options=()), "no options"),
        (dict(question="Q?", options=("one",)), "only one option"),
        (dict(question="Q?", options=("a", "b", "A")), "duplicate option"),
        (dict(question="  ", options=("a", "b")), "the question is empty"),
        (dict(question="Q?", options=("a", " ")), "an option is empty"),
        (dict(question="Q?", options=tuple("abcdefghijk")), "11 options: at most 10"),
        (dict(question="Q?", options=("a", "b"), reasoning_budget=0), "reasoning_budget must be an integer"),
        (dict(question="Q?", options=("a", "b"), think=True, score_options=True), "turn think off"),
    ],
)
def test_validation_messages(kwargs, message):
    with pytest.raises(SettingsError, match=message):
        DecisionRequest(**kwargs)
