"""Parity with transformers (float64 references computed by tools/make_fixtures.py)."""

import numpy as np
import pytest

from support.models import MODELS, reference
from decider.engine.generation.drafts import PromptLookup
from decider.engine.generation.generate import generate_step, make_rng
from decider.engine.generation.sampling import make_sampler
from decider.engine.core.logprobs import log_softmax
from decider.engine.compile.devices import DeviceOptions
from decider.engine.runners.runner import ModelRunner
from decider.engine.runners.static import StaticRunner
from decider.engine.core.settings import SamplingSettings

GREEDY_NO_PENALTIES = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0, repetition_penalty=1.0)
TOLERANCE = 1e-4
PARITY_MODELS = sorted(p.name for p in MODELS.iterdir() if (p.parent.parent / "reference" / f"{p.name}.json").exists())


RUNNERS = {
    "dynamic": lambda folder: ModelRunner(folder),
    # Static shapes on the CPU in f32: chunk sizes the reference prompts cross.
    "static": lambda folder: StaticRunner(folder, DeviceOptions(device="CPU", static_chunks=(16, 4, 1))),
}


@pytest.fixture(scope="module", params=[(m, k) for m in PARITY_MODELS for k in RUNNERS], ids="-".join)
def runner_and_reference(request):
    model, kind = request.param
    return RUNNERS[kind](MODELS / model), reference(model)


def test_every_fixture_model_has_a_reference():
    assert {"qwen35-text", "qwen35-vl"} <= set(PARITY_MODELS)


def test_greedy_generation_matches_transformers_top5_at_every_step(runner_and_reference):
    runner, ref = runner_and_reference
    greedy = [c for c in ref["cases"] if c["kind"] == "greedy"]
    assert greedy
    worst = 0.0
    for case in greedy:
        runner.reset()
        steps = list(
            generate_step(runner, case["prompt_ids"], make_sampler(GREEDY_NO_PENALTIES, make_rng(0)), max_tokens=len(case["steps"]), top_logprobs=5)
        )
        expected = case["steps"][: len(steps)]
        stop_ids = runner.tokenizer.stop_ids
        assert len(steps) == len(case["steps"]) or steps[-1].token_id in stop_ids
        for got, want in zip(steps, expected):
            assert got.token_id == want["token"], case["name"]
            assert [t.token_id for t in got.entry.top] == [t[0] for t in want["top"]], case["name"]
            diffs = [abs(t.logprob - w[1]) for t, w in zip(got.entry.top, want["top"])]
            worst = max(worst, *diffs, abs(got.entry.logprob - want["logprob"]))
    assert worst < TOLERANCE, worst


class _ReferenceDrafts(PromptLookup):
    """Drafts the reference's own greedy continuation, every third token wrong: most tokens come from verify rows
    (on their own compile where the plan says so: engine/runners/runner.prepare_verify), and rollbacks run too."""

    def __init__(self, want: list[int], prompt_length: int) -> None:
        super().__init__()
        self.want, self.prompt_length = want, prompt_length

    def propose(self, limit: int) -> list[int]:
        done = len(self.tokens) - self.prompt_length
        drafts = self.want[done : done + min(limit, self.max_draft)]
        return [t + 1 if (done + i) % 3 == 2 else t for i, t in enumerate(drafts)]


def test_drafted_greedy_generation_matches_transformers_top5(runner_and_reference):
    runner, ref = runner_and_reference
    if not runner.verifies:
        pytest.skip("this runner cannot verify drafts")
    worst, checked = 0.0, 0
    for case in (c for c in ref["cases"] if c["kind"] == "greedy"):
        runner.reset()
        drafter = _ReferenceDrafts([s["token"] for s in case["steps"]], len(case["prompt_ids"]))
        steps = list(generate_step(runner, case["prompt_ids"], make_sampler(GREEDY_NO_PENALTIES, make_rng(0)),
                                   max_tokens=len(case["steps"]), top_logprobs=5, drafter=drafter))
        for got, want in zip(steps, case["steps"]):
            assert got.token_id == want["token"], case["name"]
            diffs = [abs(t.logprob - w[1]) for t, w in zip(got.entry.top, want["top"])]
            worst, checked = max(worst, *diffs, abs(got.entry.logprob - want["logprob"])), checked + 1
    assert checked and worst < TOLERANCE, worst


def test_full_distribution_matches_transformers(runner_and_reference):
    runner, ref = runner_and_reference
    for case in (c for c in ref["cases"] if c["kind"] == "distribution"):
        got = log_softmax(runner.prefill(case["prompt_ids"]))
        want = np.array(case["logprobs"])
        assert got.shape == want.shape == (ref["tokenizer_size"],)
        assert np.max(np.abs(got - want)) < TOLERANCE, case["name"]


def test_padded_ids_never_enter_the_softmax(runner_and_reference):
    runner, ref = runner_and_reference
    assert ref["vocab_size"] > ref["tokenizer_size"]
    assert runner.logits_width == ref["vocab_size"] and runner.vocab_size == ref["tokenizer_size"]
    lp = log_softmax(runner.prefill(ref["cases"][0]["prompt_ids"]))
    assert abs(np.logaddexp.reduce(lp)) < 1e-12


def test_sequence_logprobs_match_transformers(runner_and_reference):
    runner, ref = runner_and_reference
    for case in (c for c in ref["cases"] if c["kind"] == "sequence"):
        for continuation, want in zip(case["continuations"], case["token_logprobs"]):
            logits = runner.prefill(case["prompt_ids"])
            got = []
            for i, token in enumerate(continuation):
                got.append(log_softmax(logits)[token])
                if i + 1 < len(continuation):
                    logits = runner.step(token)
            assert np.max(np.abs(np.array(got) - np.array(want))) < TOLERANCE, case["name"]
