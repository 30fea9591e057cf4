"""Prompt scoring (echo logprobs) against transformers float64 and against the generation path."""

import numpy as np
import pytest

from conftest import MODELS, reference
from decider.engine.generate import generate_step, make_rng
from decider.engine.logprobs import log_softmax
from decider.engine.runner import ModelRunner
from decider.engine.scoring import CHUNK, PromptScorer
from decider.engine.settings import SamplingSettings

TOLERANCE = 1e-4
PARITY_MODELS = sorted(p.name for p in MODELS.iterdir() if (p.parent.parent / "reference" / f"{p.name}.json").exists())


@pytest.fixture(scope="module", params=PARITY_MODELS)
def scorer_and_reference(request):
    runner = ModelRunner(MODELS / request.param)
    return runner, PromptScorer(runner), reference(request.param)


def test_scored_continuations_match_transformers(scorer_and_reference):
    _, scorer, ref = scorer_and_reference
    cases = [c for c in ref["cases"] if c["kind"] == "sequence"]
    assert cases
    worst = 0.0
    for case in cases:
        prompt = case["prompt_ids"]
        for continuation, want in zip(case["continuations"], case["token_logprobs"]):
            scores = scorer.score(prompt + continuation)
            got = [e.logprob for e in scores.entries[len(prompt) - 1 :]]
            assert [e.token_id for e in scores.entries[len(prompt) - 1 :]] == continuation
            worst = max(worst, float(np.max(np.abs(np.array(got) - np.array(want)))))
    assert worst < TOLERANCE, worst


def test_scored_greedy_text_has_transformers_top5(scorer_and_reference):
    _, scorer, ref = scorer_and_reference
    for case in (c for c in ref["cases"] if c["kind"] == "greedy"):
        prompt, steps = case["prompt_ids"], case["steps"]
        scores = scorer.score(prompt + [s["token"] for s in steps], top_n=5)
        for entry, want in zip(scores.entries[len(prompt) - 1 :], steps):
            assert entry.token_id == want["token"]
            assert [t.token_id for t in entry.top] == [t[0] for t in want["top"]], case["name"]
            assert abs(entry.logprob - want["logprob"]) < TOLERANCE


def test_next_logits_equal_the_runners_prefill(scorer_and_reference):
    runner, scorer, ref = scorer_and_reference
    case = next(c for c in ref["cases"] if c["kind"] == "distribution")
    got = log_softmax(scorer.score(case["prompt_ids"]).next_logits)
    assert np.max(np.abs(got - log_softmax(runner.prefill(case["prompt_ids"])))) < 1e-5
    assert np.max(np.abs(got - np.array(case["logprobs"]))) < TOLERANCE


def test_prompts_longer_than_a_chunk_equal_generation_logprobs():
    """Across chunk borders the scorer says what decoding the same tokens one by one says."""
    runner = ModelRunner(MODELS / "qwen35-text")
    scorer = PromptScorer(runner)
    settings = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0, repetition_penalty=1.0)
    prompt = runner.tokenizer.encode_text("Scouts report that the north gate is the safe choice. " * 6)
    steps = list(generate_step(runner, prompt, settings, make_rng(0), max_tokens=CHUNK + 10, top_logprobs=3))
    text = prompt + [s.token_id for s in steps if s.token_id not in runner.tokenizer.stop_ids]
    assert len(text) > CHUNK + 10
    scores = scorer.score(text, top_n=3)
    assert len(scores.entries) == len(text) - 1
    for entry, step in zip(scores.entries[len(prompt) - 1 :], steps):
        assert entry.token_id == step.token_id
        assert abs(entry.logprob - step.entry.logprob) < 1e-5
        assert [t.token_id for t in entry.top] == [t.token_id for t in step.entry.top]
