"""Calibration measures on labelled decisions: accuracy, Brier, NLL, ECE, reliability bins, and
temperature scaling (Guo et al. 2017) fitted by minimising NLL. Pure numpy.

Inputs are per-decision option log-probabilities (full-vocabulary, one row per decision, options
padded with -inf) and the index of the right option.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .prompt import LABELS


def _as_rows(option_logprobs: list[list[float]]) -> np.ndarray:
    width = max(len(row) for row in option_logprobs)
    out = np.full((len(option_logprobs), width), -np.inf)
    for i, row in enumerate(option_logprobs):
        out[i, : len(row)] = row
    return out


def probabilities(option_logprobs: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Renormalise over the options, optionally at a temperature (the displayed confidence)."""
    scaled = option_logprobs / temperature
    scaled = scaled - np.max(scaled, axis=1, keepdims=True)
    weights = np.exp(scaled)
    return weights / weights.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class ReliabilityBin:
    low: float
    high: float
    count: int
    confidence: float  # mean confidence of the chosen option in the bin (nan if empty)
    accuracy: float  # fraction right in the bin (nan if empty)


@dataclass(frozen=True)
class CalibrationReport:
    count: int
    accuracy: float
    brier: float  # multi-class Brier score, mean over decisions of Σ (p_i − y_i)²
    nll: float  # mean −log p(right option)
    ece: float  # expected calibration error over equal-width confidence bins
    bins: tuple[ReliabilityBin, ...]


@dataclass(frozen=True)
class TemperatureFit:
    """A temperature fitted on labelled decisions, checked on held-out ones."""

    temperature: float
    fitted_on: int
    held_out: int
    before: CalibrationReport  # on the held-out rows, raw
    after: CalibrationReport  # on the held-out rows, at the fitted temperature


def reliability_bins(confidence: np.ndarray, correct: np.ndarray, bins: int) -> tuple[ReliabilityBin, ...]:
    edges = np.linspace(0.0, 1.0, bins + 1)
    # right-closed bins, except the first which also takes 0: a confidence of exactly 1 is in the last.
    index = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, bins - 1)
    out = []
    for b in range(bins):
        mask = index == b
        count = int(mask.sum())
        out.append(
            ReliabilityBin(
                float(edges[b]), float(edges[b + 1]), count,
                float(confidence[mask].mean()) if count else float("nan"),
                float(correct[mask].mean()) if count else float("nan"),
            )
        )
    return tuple(out)


def evaluate(option_logprobs: list[list[float]] | np.ndarray, right: list[int] | np.ndarray, *, bins: int = 10,
             temperature: float = 1.0) -> CalibrationReport:
    rows = _as_rows(option_logprobs) if isinstance(option_logprobs, list) else option_logprobs
    right = np.asarray(right, dtype=int)
    if rows.shape[0] == 0:
        raise ValueError("no labelled decisions")
    probs = probabilities(rows, temperature)
    chosen = np.argmax(probs, axis=1)
    confidence = probs[np.arange(len(right)), chosen]
    correct = (chosen == right).astype(float)
    onehot = np.zeros_like(probs)
    onehot[np.arange(len(right)), right] = 1.0
    brier = float(np.mean(np.sum((probs - onehot) ** 2, axis=1)))
    nll = float(-np.mean(np.log(np.maximum(probs[np.arange(len(right)), right], 1e-300))))
    table = reliability_bins(confidence, correct, bins)
    ece = sum(b.count * abs(b.accuracy - b.confidence) for b in table if b.count) / len(right)
    return CalibrationReport(len(right), float(correct.mean()), brier, nll, float(ece), table)


def fit_temperature(option_logprobs: list[list[float]] | np.ndarray, right: list[int] | np.ndarray,
                    low: float = 0.05, high: float = 20.0) -> float:
    """The temperature T minimising NLL of softmax(logprobs / T); NLL is convex in 1/T, so a
    golden-section search on log T finds the optimum without gradients."""
    rows = _as_rows(option_logprobs) if isinstance(option_logprobs, list) else option_logprobs
    right = np.asarray(right, dtype=int)

    def nll(log_t: float) -> float:
        probs = probabilities(rows, float(np.exp(log_t)))
        return float(-np.mean(np.log(np.maximum(probs[np.arange(len(right)), right], 1e-300))))

    a, b = np.log(low), np.log(high)
    ratio = (np.sqrt(5) - 1) / 2
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = nll(c), nll(d)
    for _ in range(80):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = nll(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = nll(d)
    return float(np.exp((a + b) / 2))


def letter_bias(chosen: list[int], right: list[int], labels: str = LABELS) -> list[dict]:
    """How often each label is chosen vs how often it is right (option-order bias)."""
    chosen_arr, right_arr = np.asarray(chosen, dtype=int), np.asarray(right, dtype=int)
    total = max(len(chosen_arr), 1)
    width = int(max(chosen_arr.max(initial=-1), right_arr.max(initial=-1))) + 1
    return [
        {
            "label": labels[i],
            "chosen": int((chosen_arr == i).sum()),
            "right": int((right_arr == i).sum()),
            "chosen_rate": float((chosen_arr == i).sum() / total),
            "right_rate": float((right_arr == i).sum() / max(len(right_arr), 1)),
        }
        for i in range(width)
    ]
