import numpy as np
import pytest

from decider.engine.generation import sampling
from decider.engine.core.logprobs import Distribution
from decider.engine.generation.sampling import Chain, Draw, Greedy, MinP, Temperature, TopK, TopP, make_sampler
from decider.engine.core.settings import SamplingSettings


def sample(logits: np.ndarray, settings: SamplingSettings, rng: np.random.Generator) -> int:
    """One draw through the sampler the generation loop is given."""
    return make_sampler(settings, rng)(Distribution(logits))


def kept(candidates) -> list[int]:
    return sorted(candidates.ids.tolist())


def every(logits):
    return sampling.top_k(np.asarray(logits, dtype=np.float64), 0)


def test_top_k_breaks_ties_towards_lower_ids():
    logits = np.array([1.0, 5.0, 3.0, 3.0, 3.0, 0.0])
    out = sampling.top_k(logits, 3)
    assert out.ids.tolist() == [1, 2, 3]  # ranked: highest first, then the lower id
    assert out.logits.tolist() == [5.0, 3.0, 3.0]
    assert kept(sampling.top_k(np.array([1.0, -np.inf, 2.0]), 5)) == [0, 2]  # never a forbidden token


def test_top_p_keeps_smallest_prefix_reaching_p():
    probs = np.array([0.1, 0.5, 0.3, 0.1])
    assert kept(sampling.top_p(every(np.log(probs)), 0.75)) == [1, 2]
    # p smaller than the top token still keeps one
    assert kept(sampling.top_p(every(np.log(probs)), 0.01)) == [1]


def test_top_p_normalises_over_what_top_k_left():
    probs = np.array([0.4, 0.3, 0.2, 0.1])
    # after top-2, token 0 holds 0.4/0.7 = 0.57 of the mass: p=0.5 keeps it alone, p=0.6 both
    assert kept(sampling.top_p(sampling.top_k(np.log(probs), 2), 0.5)) == [0]
    assert kept(sampling.top_p(sampling.top_k(np.log(probs), 2), 0.6)) == [0, 1]


def test_top_p_without_top_k_finds_the_nucleus_in_a_large_vocabulary():
    # a few likely tokens among 200,000: the widening search must stop at the same prefix a full sort gives
    rng = np.random.default_rng(3)
    logits = rng.normal(0, 1, 200_000)
    logits[rng.choice(200_000, 40, replace=False)] += rng.uniform(8, 14, 40)
    for p in (0.3, 0.9, 0.999999):
        got = kept(sampling.top_p(every(logits), p))
        order = np.lexsort((np.arange(logits.size), -logits))
        mass = np.cumsum(np.exp(logits[order] - np.logaddexp.reduce(logits)))
        want = sorted(order[: int(np.searchsorted(mass, p)) + 1].tolist())
        assert got == want


def test_min_p_is_relative_to_the_top_token():
    probs = np.array([0.5, 0.3, 0.04, 0.16])
    assert kept(sampling.min_p(every(np.log(probs)), 0.1)) == [0, 1, 3]


def test_greedy_ties_to_lowest_id_on_both_paths():
    logits = np.array([0.0, 7.0, 7.0, 1.0])
    greedy = SamplingSettings(temperature=0.0)
    assert sample(logits, greedy, np.random.default_rng(0)) == 1
    top1 = SamplingSettings(temperature=1.0, top_k=1)
    assert sample(logits, top1, np.random.default_rng(0)) == 1


def test_seeded_draws_repeat_and_follow_the_distribution():
    logits = np.log(np.array([0.2, 0.5, 0.3]))
    settings = SamplingSettings(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
    first = [sample(logits, settings, np.random.default_rng(7)) for _ in range(3)]
    assert len(set(first)) == 1
    rng = np.random.default_rng(123)
    counts = np.bincount([sample(logits, settings, rng) for _ in range(6000)], minlength=3) / 6000
    assert np.allclose(counts, [0.2, 0.5, 0.3], atol=0.03)


def test_temperature_sharpens_before_the_draw():
    logits = np.log(np.array([0.4, 0.6]))
    cold = SamplingSettings(temperature=0.05, top_k=0, top_p=1.0)
    rng = np.random.default_rng(1)
    assert all(sample(logits, cold, rng) == 1 for _ in range(200))


def test_top_p_is_computed_before_temperature():
    # At temperature 0.1, p=0.9 would keep only the top token; the order says p sees raw probs.
    logits = np.log(np.array([0.45, 0.55]))
    settings = SamplingSettings(temperature=0.1, top_k=0, top_p=0.9)
    assert kept(sampling.top_p(every(logits), 0.9)) == [0, 1]
    rng = np.random.default_rng(5)
    assert 0 in {sample(logits, settings, rng) for _ in range(400)}


def test_a_vanishing_temperature_approaches_greedy_without_overflow():
    logits = np.array([1.0, 3.0, 2.0, -np.inf])
    settings = SamplingSettings(temperature=1e-300, top_k=0, top_p=1.0)
    rng = np.random.default_rng(0)
    assert all(sample(logits, settings, rng) == 1 for _ in range(50))


# ----- the candidate pipeline against a plain full-vocabulary one -----


def reference_sample(logits: np.ndarray, settings: SamplingSettings, rng: np.random.Generator) -> int:
    """The stages written the obvious way in float64, from numpy alone (none of engine/generation/sampling.py's functions):
    full-size masks and a full sort (slow, plainly right)."""
    x = np.array(logits, dtype=np.float64)
    if settings.greedy:
        return int(np.argmax(x))
    finite = np.flatnonzero(np.isfinite(x))
    ranked = finite[np.lexsort((finite, -x[finite]))]
    if 0 < settings.top_k < ranked.size:
        x[ranked[settings.top_k:]] = -np.inf
        ranked = ranked[: settings.top_k]
    if settings.top_p < 1.0:
        weights = np.exp(x[ranked] - x[ranked[0]])
        cut = int(np.searchsorted(np.cumsum(weights) / weights.sum(), settings.top_p)) + 1
        x[ranked[cut:]] = -np.inf
    if settings.min_p > 0.0:
        x[x < np.max(x) + np.log(settings.min_p)] = -np.inf
    ids = np.flatnonzero(np.isfinite(x))
    scaled = (x[ids] - x[ids].max()) / settings.temperature
    cumulative = np.cumsum(np.exp(scaled - scaled.max()))
    return int(ids[min(int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right")), ids.size - 1)])


@pytest.mark.parametrize("case", range(40))
def test_the_pipeline_draws_what_the_plain_stages_draw(case):
    rng = np.random.default_rng(case)
    vocab = int(rng.choice([7, 300, 5000, 248_320]))
    logits = rng.normal(0, rng.uniform(0.3, 6), vocab)
    logits[rng.random(vocab) < 0.1] = -np.inf  # some forbidden
    logits[rng.integers(0, vocab, 3)] = logits[rng.integers(0, vocab)]  # some ties
    settings = SamplingSettings(
        temperature=float(rng.choice([0.0, 0.3, 0.7, 1.0, 1.8])),
        top_k=int(rng.choice([0, 1, 5, 20, 64])),
        top_p=float(rng.choice([1.0, 0.95, 0.8, 0.3])),
        min_p=float(rng.choice([0.0, 0.05])),
    )
    for draw_seed in range(5):
        got = sample(logits, settings, np.random.default_rng(draw_seed))
        want = reference_sample(logits, settings, np.random.default_rng(draw_seed))
        assert got == want, (settings, draw_seed)


# ----- the sampler as data -----


def test_make_sampler_lists_only_the_stages_that_act_in_the_fixed_order():
    rng = np.random.default_rng(0)
    assert make_sampler(SamplingSettings(temperature=0.0), rng) == Greedy()
    assert make_sampler(SamplingSettings(temperature=1.0, top_k=1), rng) == Greedy()  # top-1 is the argmax
    every_stage = make_sampler(SamplingSettings(temperature=0.7, top_k=20, top_p=0.8, min_p=0.05), rng)
    assert every_stage == Chain(TopK(20), (TopP(0.8), MinP(0.05), Temperature(0.7)), Draw(rng))
    assert every_stage.draw.rng is rng  # the request's generator: a seed fixes every draw of every phase
    plain = make_sampler(SamplingSettings(temperature=1.3, top_k=0, top_p=1.0, min_p=0.0), rng)
    assert plain == Chain(TopK(0), (Temperature(1.3),), Draw(rng))


@pytest.mark.parametrize("case", range(60))
def test_the_sampler_chain_draws_what_a_float64_reference_draws(case):
    rng = np.random.default_rng(1000 + case)
    vocab = int(rng.choice([5, 64, 3000, 248_320]))
    logits = rng.normal(0, rng.uniform(0.2, 8), vocab).astype(rng.choice([np.float32, np.float64]))
    top = float(np.max(logits))
    logits[rng.random(vocab) < rng.choice([0.0, 0.3, 0.97])] = -np.inf  # none, some or most forbidden
    logits[rng.integers(0, vocab, 2)] = top  # a tie at the top (and never nothing left to draw)
    settings = SamplingSettings(
        temperature=float(rng.choice([0.0, 1e-6, 0.3, 0.7, 1.0, 2.0])),
        top_k=int(rng.choice([0, 1, 2, 20, 1000])),
        top_p=float(rng.choice([1.0, 0.99, 0.8, 0.1])),
        min_p=float(rng.choice([0.0, 0.01, 0.5])),
    )
    # the same generator through several draws: the chain must consume it exactly as one draw per token
    chained, plain = np.random.default_rng(case), np.random.default_rng(case)
    sampler = make_sampler(settings, chained)
    got = [sampler(Distribution(logits)) for _ in range(8)]
    want = [reference_sample(logits, settings, plain) for _ in range(8)]
    assert got == want, settings


def test_a_greedy_draw_costs_no_logsumexp_over_the_vocabulary(monkeypatch):
    # The loop hands every step's logits to the sampler as a Distribution: it must stay lazy, or each greedy
    # step would pay the full-vocabulary maxima and logsumexp (~1.5 ms at 248k) that only logprobs need.
    from decider.engine.core import logprobs

    calls = []
    real = logprobs.logsumexp
    monkeypatch.setattr(logprobs, "logsumexp", lambda *a: calls.append(1) or real(*a))
    logits = np.random.default_rng(0).normal(0, 1, 5000)
    distribution = Distribution(logits)
    assert make_sampler(SamplingSettings(temperature=0.0), np.random.default_rng(0))(distribution) == np.argmax(logits)
    assert calls == []
    assert distribution.logprob(0) == pytest.approx(logits[0] - np.logaddexp.reduce(logits))  # computed when asked
    assert calls == [1]
    distribution.entry(0, 3)
    assert calls == [1]  # once
