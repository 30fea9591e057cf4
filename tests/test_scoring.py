"""Prompt scoring (echo logprobs) against transformers float64 and against the generation path."""

import numpy as np
import pytest

from support.models import MODELS, reference
from decider.engine.generation.generate import generate_step, make_rng
from decider.engine.generation.sampling import make_sampler
from decider.engine.core.logprobs import log_softmax
from decider.engine.runners.runner import ModelRunner
from decider.engine.runners.scoring import CHUNK, PromptScorer
from decider.engine.core.settings import SamplingSettings

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
    steps = list(generate_step(runner, prompt, make_sampler(settings, make_rng(0)), max_tokens=CHUNK + 10, top_logprobs=3))
    text = prompt + [s.token_id for s in steps if s.token_id not in runner.tokenizer.stop_ids]
    assert len(text) > CHUNK + 10
    scores = scorer.score(text, top_n=3)
    assert len(scores.entries) == len(text) - 1
    for entry, step in zip(scores.entries[len(prompt) - 1 :], steps):
        assert entry.token_id == step.token_id
        # decoding runs each DeltaNet layer's one-token path (engine/graphs/decode.py), the scorer the fused chunk
        # kernel: the same f32 arithmetic in another order, within 5e-5 on these random fixtures (test_decode_graph)
        assert abs(entry.logprob - step.entry.logprob) < 5e-5
        assert [t.token_id for t in entry.top] == [t.token_id for t in step.entry.top]


@pytest.mark.extra
def test_padded_head_normalisation_is_transformers_own_and_the_default_is_unchanged():
    """Issue 26 item 5: transformers' log_softmax runs over the padded head (896 rows, 858 tokens on this
    random-weight fixture, whose padding rows hold much of the mass); `padded_head` gives its numbers, the
    default stays over the real ids, and the padding's share is measured."""
    torch = pytest.importorskip("torch", reason="the comparison needs torch (pip install -e \".[convert]\")")
    transformers = pytest.importorskip("transformers", reason="the comparison needs transformers (the convert extra)")
    from support.models import ROOT

    from decider.engine.core.logprobs import PADDED_HEAD

    checkpoint = ROOT / "tests" / "fixtures" / "checkpoints" / "qwen35-text"
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    runner = ModelRunner(MODELS / "qwen35-text")
    scorer = PromptScorer(runner)
    ids = runner.tokenizer.encode_raw("Scouts report that the north gate is the safe choice. What should we do?")
    with torch.no_grad():
        head = model(torch.tensor([ids])).logits[0].double()
    assert head.shape[-1] > runner.vocab_size  # a padded head
    full = torch.log_softmax(head, dim=-1).numpy()
    real = torch.log_softmax(head[:, : runner.vocab_size], dim=-1).numpy()
    want_padded = [full[i, t] for i, t in enumerate(ids[1:])]
    want_real = [real[i, t] for i, t in enumerate(ids[1:])]
    padded, default = scorer.score(ids, normalization=PADDED_HEAD), scorer.score(ids)
    assert np.max(np.abs(np.array([e.logprob for e in padded.entries]) - want_padded)) < TOLERANCE
    assert np.max(np.abs(np.array([e.logprob for e in default.entries]) - want_real)) < TOLERANCE
    mass = 1 - torch.exp(torch.logsumexp(head[:-1, : runner.vocab_size], -1) - torch.logsumexp(head[:-1], -1)).numpy()
    assert padded.padded_mass == default.padded_mass == pytest.approx(float(mass.max()), abs=1e-5) and mass.max() > 0.01
