import math

import numpy as np

from engine.logprobs import log_softmax, top_alternatives, token_entry


def test_log_softmax_matches_exact_summation():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 4, size=5000).astype(np.float32)
    lse = math.log(math.fsum(math.exp(float(x)) for x in logits))
    got = log_softmax(logits)
    assert got.dtype == np.float64
    assert abs(got[17] - (float(logits[17]) - lse)) < 1e-12


def test_masked_entries_stay_minus_inf_and_do_not_count():
    logits = np.array([1.0, -np.inf, 1.0])
    out = log_softmax(logits)
    assert out[1] == -np.inf
    assert np.allclose(out[[0, 2]], math.log(0.5))


def test_top_alternatives_rank_by_probability_then_id_and_skip_forbidden():
    lp = log_softmax(np.array([0.0, 2.0, 2.0, -np.inf, 1.0]))
    top = top_alternatives(lp, 4)
    assert [t.token_id for t in top] == [1, 2, 4, 0]
    assert len(top_alternatives(lp, 10)) == 4


def test_entries_are_not_renormalised_over_the_list():
    lp = log_softmax(np.zeros(10))
    entry = token_entry(lp, 3, 2)
    assert abs(entry.logprob - math.log(0.1)) < 1e-15
    assert sum(math.exp(t.logprob) for t in entry.top) < 1.0
