import numpy as np
import pytest

from engine import sampling
from engine.settings import SamplingSettings


def test_repetition_penalty_is_ctrl_style():
    logits = np.array([2.0, -2.0, 1.0, 0.5])
    out = sampling.apply_penalties(logits, [0, 1], repetition=2.0, frequency=0.0, presence=0.0)
    assert out.tolist() == [1.0, -4.0, 1.0, 0.5]
    assert logits.tolist() == [2.0, -2.0, 1.0, 0.5], "stages must not modify their input"


def test_frequency_and_presence_follow_openai():
    logits = np.zeros(5)
    out = sampling.apply_penalties(logits, [3, 3, 3, 1], repetition=1.0, frequency=0.5, presence=1.5)
    assert out[3] == pytest.approx(-(3 * 0.5 + 1.5))
    assert out[1] == pytest.approx(-(0.5 + 1.5))
    assert out[0] == out[2] == out[4] == 0.0


def test_penalties_apply_repetition_before_frequency():
    out = sampling.apply_penalties(np.array([3.0]), [0], repetition=1.5, frequency=1.0, presence=0.0)
    assert out[0] == pytest.approx(3.0 / 1.5 - 1.0)


def test_top_k_breaks_ties_towards_lower_ids():
    logits = np.array([1.0, 5.0, 3.0, 3.0, 3.0, 0.0])
    out = sampling.top_k(logits, 3)
    assert np.isfinite(out).tolist() == [False, True, True, True, False, False]


def test_top_p_keeps_smallest_prefix_reaching_p():
    probs = np.array([0.1, 0.5, 0.3, 0.1])
    out = sampling.top_p(np.log(probs), 0.75)
    assert np.isfinite(out).tolist() == [False, True, True, False]
    # p smaller than the top token still keeps one
    assert np.isfinite(sampling.top_p(np.log(probs), 0.01)).sum() == 1


def test_min_p_is_relative_to_the_top_token():
    probs = np.array([0.5, 0.3, 0.04, 0.16])
    out = sampling.min_p(np.log(probs), 0.1)
    assert np.isfinite(out).tolist() == [True, True, False, True]


def test_constraint_masks_everything_else():
    out = sampling.constrain(np.arange(6.0), np.array([1, 4]))
    assert np.isfinite(out).tolist() == [False, True, False, False, True, False]


def test_greedy_ties_to_lowest_id_on_both_paths():
    logits = np.array([0.0, 7.0, 7.0, 1.0])
    greedy = SamplingSettings(temperature=0.0)
    assert sampling.sample(logits, greedy, np.random.default_rng(0)) == 1
    top1 = SamplingSettings(temperature=1.0, top_k=1)
    assert sampling.sample(logits, top1, np.random.default_rng(0)) == 1


def test_seeded_draws_repeat_and_follow_the_distribution():
    logits = np.log(np.array([0.2, 0.5, 0.3]))
    settings = SamplingSettings(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
    first = [sampling.sample(logits, settings, np.random.default_rng(7)) for _ in range(3)]
    assert len(set(first)) == 1
    rng = np.random.default_rng(123)
    counts = np.bincount([sampling.sample(logits, settings, rng) for _ in range(6000)], minlength=3) / 6000
    assert np.allclose(counts, [0.2, 0.5, 0.3], atol=0.03)


def test_temperature_sharpens_before_the_draw():
    logits = np.log(np.array([0.4, 0.6]))
    cold = SamplingSettings(temperature=0.05, top_k=0, top_p=1.0)
    rng = np.random.default_rng(1)
    assert all(sampling.sample(logits, cold, rng) == 1 for _ in range(200))


def test_top_p_is_computed_before_temperature():
    # At temperature 0.1, p=0.5 would still keep only the top token; the order says p sees raw probs.
    logits = np.log(np.array([0.45, 0.55]))
    out = sampling.top_p(logits, 0.9)
    assert np.isfinite(out).all()


def test_a_vanishing_temperature_approaches_greedy_without_overflow():
    logits = np.array([1.0, 3.0, 2.0, -np.inf])
    settings = SamplingSettings(temperature=1e-300, top_k=0, top_p=1.0)
    rng = np.random.default_rng(0)
    assert all(sampling.sample(logits, settings, rng) == 1 for _ in range(50))
