"""--think locally (#26 item 2): the answer is read after the reasoning closed as Qwen's chat template closes it,
in the ids the tokenizer writes for that text (what a server handed the same text scores), and with no
penalty window carried from the reasoning into the bars. On the bundled demo model, through engine.decide."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "resources" / "demo-model"
if not (DEMO / "config.json").is_file():
    pytest.skip("resources/demo-model is absent (no demo model shipped)", allow_module_level=True)
sys.path.insert(0, str(ROOT / "tools"))
import demo_tasks  # noqa: E402

from decider.engine.decisions.decide import DecisionRequest, decide  # noqa: E402
from decider.engine.decisions.prompt import build_decision_prompt, letter_ids  # noqa: E402
from decider.engine.generation.generate import generate_step, make_rng  # noqa: E402
from decider.engine.core.logprobs import Distribution  # noqa: E402
from decider.engine.remote.prompt import decision_text  # noqa: E402
from decider.engine.runners.runner import ModelRunner  # noqa: E402
from decider.engine.core.settings import SamplingSettings  # noqa: E402

PLAIN = SamplingSettings(temperature=0.0, repetition_penalty=1.0, frequency_penalty=0.0, presence_penalty=0.0)
PENALISED = SamplingSettings(temperature=0.0, frequency_penalty=1.0, presence_penalty=1.5)  # the defaults, greedy
ITEMS = [(i.question, i.options) for i in demo_tasks.heldout_items(7_2028, {"retrieval": 6, "category": 6})]


@pytest.fixture(scope="module")
def runner():
    return ModelRunner(DEMO)


def _reasoning(runner, prompt, sampling, budget=48) -> list[int]:
    tok = runner.tokenizer
    steps = generate_step(runner, prompt.ids, sampling, make_rng(None), max_tokens=budget, stop_ids=tok.stop_ids,
                          end_ids=frozenset({tok.think_close}))
    return [s.token_id for s in steps]


def test_a_budget_spent_on_a_newline_is_closed_in_the_ids_the_tokenizer_writes(runner):
    """Before: the forced close's "\\n" token followed a reasoning that already ended in one
    (`… "\\n", "\\n", </think>`), a sequence no tokenizer writes and no server handed the text scores."""
    tok = runner.tokenizer
    checked = 0
    for question, options in ITEMS:
        prompt = build_decision_prompt(tok, question, list(options), think=True)
        tokens = _reasoning(runner, prompt, PLAIN)
        cuts = [k + 1 for k, t in enumerate(tokens[:-1]) if tok.token_text(t).endswith("\n") and t != tok.think_close]
        if not cuts:
            continue
        budget = cuts[-1]  # the reasoning ends on a newline: the budget runs out there
        request = DecisionRequest(question, options, sampling=PLAIN, think=True, reasoning_budget=budget, fast_reasoning=False)
        result = decide(runner, request)
        answer_prefix = list(runner.history)  # prompt + reasoning + close: what the answer position was read after
        text = decision_text(question, list(options), think=True) + tok.decode(tokens[:budget]).rstrip("\n") + "\n</think>\n\n"
        assert answer_prefix == tok.encode_raw(text)  # the tokenizer's ids for the template's text
        assert answer_prefix[: len(prompt.ids)] == prompt.ids
        assert result.reasoning == tok.decode(tokens[:budget]).strip("\n")
        checked += 1
    assert checked >= 3  # the items give the test something to check


def test_the_answer_s_bars_carry_no_penalty_window_from_the_reasoning(runner):
    """Penalties shape the reasoning, not the bars: with the default frequency/presence penalties, a reasoning
    that writes an option letter left that letter's bar pushed down (a server reading the answer as a new
    request reports it unpenalised). The bars must be the model's distribution after the reasoning."""
    tok = runner.tokenizer
    fresh = ModelRunner(DEMO)
    checked = 0
    for question, options in ITEMS:
        letters = letter_ids(tok, len(options))
        prompt = build_decision_prompt(tok, question, list(options), think=True)
        if not set(letters) & set(_reasoning(runner, prompt, PENALISED)):
            continue  # the reasoning wrote no option letter: nothing a window could push
        request = DecisionRequest(question, options, sampling=PENALISED, think=True, reasoning_budget=48, fast_reasoning=False)
        result = decide(runner, request)
        fresh.reset()
        model = Distribution(fresh.prefill(list(runner.history))).logprobs(letters)
        assert np.abs(np.array([o.logprob for o in result.options]) - model).max() < 1e-4
        checked += 1
    assert checked >= 3
