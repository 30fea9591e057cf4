"""Sampler stages: small pure numpy functions, applied in this order:

    (logits processors: penalties → constraint) → top-k → top-p → min-p → temperature → draw

The logits processors (engine/processors.py) map the whole logits vector to a new one (a removed
token becomes -inf) before the sampler sees it. From top-k on, the stages pass `Candidates`: the ids
still in the running with their logits, so a decode step never sorts, masks or exponentiates the 248k
vocabulary again once top-k has picked its few (engine/ranking.py finds them without a full sort). Every stage breaks ties towards the lower
token id and the draw walks the survivors in id order, so the same logits give the same token on the
greedy and on the sampled path, and a seed gives the same tokens whatever the stages' internals.
Log-probabilities are taken after the constraint and before top-k (see logprobs.py), i.e. after
penalties and before temperature.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .logprobs import logsumexp
from .ranking import top_ids
from .settings import SamplingSettings


@dataclass(frozen=True)
class Candidates:
    """Tokens still in the running: their ids and logits."""

    ids: np.ndarray
    logits: np.ndarray

    @cached_property
    def mass(self) -> float:
        """The logsumexp of the set, which top-p normalises over (only top-p needs it)."""
        return logsumexp(self.logits)


def top_k(logits: np.ndarray, k: int) -> Candidates:
    """The k highest logits (at the boundary, equal logits lowest id first); k ≤ 0 keeps every finite one."""
    ids = top_ids(logits, k) if k > 0 else np.flatnonzero(np.isfinite(logits))
    return Candidates(ids, logits[ids])


def top_p(candidates: Candidates, p: float) -> Candidates:
    """Keep the smallest high-probability prefix whose mass reaches p (at least one token)."""
    if p >= 1.0:
        return candidates
    size = candidates.ids.size
    n = min(size, 64)
    while True:
        # Rank only as many as the nucleus can need: with top-k off that is a few of 248k, not all.
        ranked = top_ids(candidates.logits, n)
        cumulative = np.cumsum(np.exp(candidates.logits[ranked] - candidates.mass))
        if cumulative[-1] >= p or n >= size:
            break
        n = min(size, n * 8)
    cut = min(int(np.searchsorted(cumulative, p, side="left")) + 1, ranked.size)
    kept = ranked[:cut]
    return Candidates(candidates.ids[kept], candidates.logits[kept])


def min_p(candidates: Candidates, p: float) -> Candidates:
    """Drop tokens less likely than p times the most likely one."""
    if p <= 0.0:
        return candidates
    keep = candidates.logits >= np.max(candidates.logits) + np.log(p)
    return Candidates(candidates.ids[keep], candidates.logits[keep])


def apply_temperature(candidates: Candidates, temperature: float) -> Candidates:
    # Shift the best logit to 0 first: the same distribution, and a tiny temperature can then only
    # push the others towards -inf (the greedy limit) instead of overflowing to +inf.
    with np.errstate(over="ignore"):
        scaled = (candidates.logits - np.max(candidates.logits)) / temperature
    return Candidates(candidates.ids, scaled)


def greedy(logits: np.ndarray) -> int:
    return int(np.argmax(logits))  # the first maximum: the lowest id on ties


def draw(candidates: Candidates, rng: np.random.Generator) -> int:
    order = np.argsort(candidates.ids, kind="stable")
    ids, logits = candidates.ids[order], candidates.logits[order]
    weights = np.exp(logits - logits.max())
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
