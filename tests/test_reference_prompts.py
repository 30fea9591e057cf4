"""Decisions against transformers' float64 references for prompts built by the engine itself."""

import numpy as np
import pytest

from support.models import MODELS, reference
from decider.engine.model.chat_template import Message, build_chat_prompt
from decider.engine.decisions.decide import DecisionRequest, decide
from decider.engine.decisions.prompt import build_decision_prompt, letter_ids
from decider.engine.runners.runner import ModelRunner
from decider.engine.core.settings import SamplingSettings
from fixture_cases import CHATS, DECISIONS, WORD_OPTIONS

GREEDY = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0)
MODEL_NAMES = ["qwen35-text", "qwen35-vl", "qwen35-moe-text"]


@pytest.fixture(scope="module", params=MODEL_NAMES)
def model(request):
    return ModelRunner(MODELS / request.param), {c["name"]: c for c in reference(request.param)["cases"]}


def test_the_engine_still_builds_the_reference_prompts(model):
    runner, cases = model
    tok = runner.tokenizer
    for name, text, think in CHATS:
        prompt = build_chat_prompt(tok, [Message("system", "You are a careful strategist."), Message("user", text)], think)
        assert prompt.ids == cases[name]["prompt_ids"], f"{name}: regenerate with tools/make_fixtures.py --references-only"
    for name, question, options, context in DECISIONS:
        assert build_decision_prompt(tok, question, options, context=context).ids == cases[name]["prompt_ids"], name


def test_decision_probabilities_and_coverage_match_the_reference(model):
    runner, cases = model
    for name, question, options, context in DECISIONS:
        want = np.array(cases[name]["logprobs"])[letter_ids(runner.tokenizer, len(options))]
        result = decide(runner, DecisionRequest(question, tuple(options), context=context, sampling=GREEDY))
        got = np.array([o.logprob for o in result.options])
        assert np.max(np.abs(got - want)) < 1e-4, name
        expected = np.exp(want) / np.exp(want).sum()
        assert np.max(np.abs(np.array([o.probability for o in result.options]) - expected)) < 1e-4
        assert abs(sum(o.probability for o in result.options) - 1) < 1e-9
        assert result.coverage == pytest.approx(np.exp(want).sum(), abs=1e-4)
        assert options[result.choice_index] == options[int(np.argmax(want))]


def test_word_option_scores_match_the_reference_sequence_logprobs(model):
    runner, cases = model
    name, question, options = WORD_OPTIONS
    case = cases[name]
    result = decide(runner, DecisionRequest(question, tuple(options), score_options=True, sampling=GREEDY))
    for scored, token_logprobs in zip(result.options, case["token_logprobs"]):
        assert scored.logprob == pytest.approx(sum(token_logprobs), abs=2e-4)
        assert scored.token_count == len(token_logprobs)
