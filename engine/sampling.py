"""Sampler stages: small pure numpy functions over a float64 logits vector, applied in this order:

    penalties → constraint → top-k → top-p → min-p → temperature → draw

A removed candidate is set to -inf. Every stage breaks ties towards the lower token id, so the same
logits give the same token on the greedy and on the sampled path. Log-probabilities are taken after
the constraint and before top-k (see logprobs.py), i.e. after penalties and before temperature.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .settings import SamplingSettings


def apply_penalties(
    logits: np.ndarray, window: Iterable[int], repetition: float, frequency: float, presence: float
) -> np.ndarray:
    """Repetition (CTRL: positive logits divided, the rest multiplied), then OpenAI frequency/presence."""
    tokens = np.fromiter(window, dtype=np.int64)
    if tokens.size == 0 or (repetition == 1.0 and frequency == 0.0 and presence == 0.0):
        return logits
    ids, counts = np.unique(tokens, return_counts=True)
    keep = ids < logits.shape[0]
    ids, counts = ids[keep], counts[keep]
    out = logits.copy()
    seen = out[ids]
    if repetition != 1.0:
        seen = np.where(seen > 0, seen / repetition, seen * repetition)
    out[ids] = seen - counts * frequency - presence
    return out


def constrain(logits: np.ndarray, allowed: np.ndarray | None) -> np.ndarray:
    """Keep only the allowed ids (e.g. the option letters); None means no constraint."""
    if allowed is None:
        return logits
    out = np.full_like(logits, -np.inf)
    out[allowed] = logits[allowed]
    return out


def top_k(logits: np.ndarray, k: int) -> np.ndarray:
    """Keep the k highest logits; at the boundary, equal logits are kept lowest id first."""
    finite = int(np.isfinite(logits).sum())
    if k <= 0 or k >= finite:
        return logits
    threshold = np.partition(logits, -k)[-k]
    above = logits > threshold
    ties = np.flatnonzero(logits == threshold)[: k - int(above.sum())]
    keep = above
    keep[ties] = True
    return np.where(keep, logits, -np.inf)


def _ranked(logits: np.ndarray) -> np.ndarray:
    """Finite candidate ids, highest logit first, ties by lower id."""
    ids = np.flatnonzero(np.isfinite(logits))
    return ids[np.lexsort((ids, -logits[ids]))]


def top_p(logits: np.ndarray, p: float) -> np.ndarray:
    """Keep the smallest high-probability prefix whose mass reaches p (at least one token)."""
    if p >= 1.0:
        return logits
    ranked = _ranked(logits)
    shifted = np.exp(logits[ranked] - logits[ranked[0]])
    cumulative = np.cumsum(shifted) / shifted.sum()
    cut = int(np.searchsorted(cumulative, p, side="left")) + 1
    out = np.full_like(logits, -np.inf)
    kept = ranked[:cut]
    out[kept] = logits[kept]
    return out


def min_p(logits: np.ndarray, p: float) -> np.ndarray:
    """Drop tokens less likely than p times the most likely one."""
    if p <= 0.0:
        return logits
    floor = np.max(logits) + np.log(p)
    return np.where(logits >= floor, logits, -np.inf)


def apply_temperature(logits: np.ndarray, temperature: float) -> np.ndarray:
    # Shift the best logit to 0 first: the same distribution, and a tiny temperature can then only
    # push the others towards -inf (the greedy limit) instead of overflowing to +inf.
    with np.errstate(over="ignore"):
        return (logits - np.max(logits)) / temperature


def greedy(logits: np.ndarray) -> int:
    return int(np.argmax(logits))  # the first maximum: the lowest id on ties


def draw(logits: np.ndarray, rng: np.random.Generator) -> int:
    ids = np.flatnonzero(np.isfinite(logits))
    weights = np.exp(logits[ids] - logits[ids].max())
    cumulative = np.cumsum(weights)
    index = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
    return int(ids[min(index, ids.size - 1)])


def sample(processed: np.ndarray, settings: SamplingSettings, rng: np.random.Generator) -> int:
    """Draw from logits that already went through penalties and the constraint."""
    if settings.greedy:
        return greedy(processed)
    candidates = top_k(processed, settings.top_k)
    candidates = top_p(candidates, settings.top_p)
    candidates = min_p(candidates, settings.min_p)
    return draw(apply_temperature(candidates, settings.temperature), rng)
