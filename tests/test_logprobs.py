import math

import numpy as np
import pytest

from decider.engine.core.logprobs import Distribution, log_softmax, logsumexp
from decider.engine.core.ranking import top_ids


def test_log_softmax_matches_exact_summation():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 4, size=50_000).astype(np.float32)  # several blocks of the blocked sum
    lse = math.log(math.fsum(math.exp(float(x)) for x in logits))
    got = log_softmax(logits)
    assert got.dtype == np.float64
    assert abs(got[17] - (float(logits[17]) - lse)) < 1e-12
    assert abs(Distribution(logits).logprob(40_000) - (float(logits[40_000]) - lse)) < 1e-12


def test_logsumexp_survives_large_logits():
    assert logsumexp(np.array([1000.0, 1000.0])) == pytest.approx(1000.0 + math.log(2), abs=1e-12)
    assert logsumexp(np.array([-np.inf, -np.inf])) == -np.inf


def test_masked_entries_stay_minus_inf_and_do_not_count():
    logits = np.array([1.0, -np.inf, 1.0])
    out = log_softmax(logits)
    assert out[1] == -np.inf
    assert np.allclose(out[[0, 2]], math.log(0.5))
    assert Distribution(logits).logprob(1) == -np.inf


def test_top_alternatives_rank_by_probability_then_id_and_skip_forbidden():
    dist = Distribution(np.array([0.0, 2.0, 2.0, -np.inf, 1.0]))
    top = dist.top(4)
    assert [t.token_id for t in top] == [1, 2, 4, 0]
    assert len(dist.top(10)) == 4
    assert top[0].logprob == pytest.approx(2.0 - math.log(2 * math.e**2 + math.e + 1))


def test_entries_are_not_renormalised_over_the_list():
    entry = Distribution(np.zeros(10)).entry(3, 2)
    assert abs(entry.logprob - math.log(0.1)) < 1e-15
    assert sum(math.exp(t.logprob) for t in entry.top) < 1.0


@pytest.mark.parametrize("seed", range(12))
def test_top_ids_equal_a_full_sort(seed):
    rng = np.random.default_rng(seed)
    vocab = int(rng.choice([5, 64, 65, 1000, 248_320]))
    shape = rng.choice(["normal", "peaked", "flat", "ties", "masked"])
    logits = rng.normal(0, 3, vocab)
    if shape == "peaked":
        logits[rng.integers(0, vocab, 3)] += 30
    elif shape == "flat":
        logits = np.round(logits * 0.01, 2)  # many equal values around the n-th
    elif shape == "ties":
        logits[:] = 1.0
    elif shape == "masked":
        logits[rng.random(vocab) < 0.97] = -np.inf
    finite = np.flatnonzero(np.isfinite(logits))
    full = finite[np.lexsort((finite, -logits[finite]))]
    for n in (1, 5, 20, 64):
        assert top_ids(logits, n).tolist() == full[:n].tolist(), (shape, vocab, n)


@pytest.mark.parametrize("shape", ["normal", "peaked", "ties", "masked", "one_block"])
def test_distribution_top_equals_a_full_sort(shape):
    # Distribution narrows the search with its block maxima; the answer must not depend on it.
    rng = np.random.default_rng(7)
    logits = rng.normal(0, 3, 248_320)
    if shape == "peaked":
        logits[rng.integers(0, logits.size, 4)] += 25
    elif shape == "ties":
        logits = np.round(logits, 0)
    elif shape == "masked":
        logits[rng.random(logits.size) < 0.9999] = -np.inf  # ~25 allowed ids: most blocks are all -inf
    elif shape == "one_block":
        logits = logits[:3000]  # fewer blocks than alternatives asked for
    finite = np.flatnonzero(np.isfinite(logits))
    full = finite[np.lexsort((finite, -logits[finite]))]
    dist = Distribution(logits)
    lse = math.log(math.fsum(math.exp(float(x)) for x in logits[finite]))
    assert abs(dist.lse - lse) < 1e-11
    for n in (1, 5, 20):
        assert [t.token_id for t in dist.top(n)] == full[:n].tolist(), (shape, n)
