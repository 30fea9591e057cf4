"""The sampler as data: `make_sampler(settings, rng)` lists the stages one request's draws go through,

    (logits processors: penalties → constraint) → top-k → top-p → min-p → temperature → draw

and returns them as one callable over a step's `Distribution` that the generation loop is handed (the
way mlx-lm passes `make_sampler(...)` into `generate_step`): the loop never reads the settings. Only the
stages that change something are listed (top-p 1, min-p 0 are left out), and temperature 0 (or top-k 1)
is the greedy sampler, no stages at all. Each stage is a small frozen object over a pure numpy function.

The logits processors (engine/generation/processors.py) map the whole logits vector to a new one (a removed
token becomes -inf) before the sampler sees it. From top-k on, the stages pass `Candidates`: the ids
still in the running with their logits, so a decode step never sorts, masks or exponentiates the 248k
vocabulary again once top-k has picked its few (engine/core/ranking.py finds them without a full sort). Every stage breaks ties towards the lower
token id and the draw walks the survivors in id order, so the same logits give the same token on the
greedy and on the sampled path, and a seed gives the same tokens whatever the stages' internals.
Log-probabilities are taken after the constraint and before top-k (see logprobs.py), i.e. after
penalties and before temperature.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np

from ..core.logprobs import Distribution, logsumexp
from ..core.ranking import top_ids
from ..core.settings import SamplingSettings


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


def verify_point_mass(candidates: Candidates, draft: int, rng: np.random.Generator) -> int:
    """Speculative sampling for a draft that is a point mass q = 1 at `draft` (a prompt-lookup draft): accept it
    with probability min(1, p/q) = p(draft), else draw from the normalised max(0, p − q), which is p with the
    draft removed. The token this returns is distributed exactly as draw(candidates) (p(draft) + 0 for the
    draft, (1 − p(draft))·p(y)/(1 − p(draft)) = p(y) for any other y)."""
    weights = np.exp(candidates.logits - candidates.logits.max())
    hit = candidates.ids == draft
    if rng.random() * weights.sum() < weights[hit].sum():
        return int(draft)
    rest = Candidates(candidates.ids[~hit], candidates.logits[~hit])
    return draw(rest, rng) if rest.ids.size else int(draft)


def verify_distribution(candidates: Candidates, draft: int, q: Candidates, rng: np.random.Generator) -> int:
    """Speculative sampling for a draft drawn from a distribution q (an MTP head's, over its own candidates): accept
    it with probability min(1, p(draft)/q(draft)), else draw from the normalised max(0, p − q). Then for any y,
    P(y) = q(y)·min(1, p(y)/q(y)) + (1 − Σ_x min(p(x), q(x)))·max(0, p(y) − q(y))/Σ_x max(0, p(x) − q(x)) = p(y)
    (Leviathan et al. 2023; Chen et al. 2023). p and q are the sampling weights after every stage (temperature
    included): `Candidates.logits` up to a constant."""
    p = np.exp(candidates.logits - candidates.logits.max())
    p /= p.sum()
    q_weights = np.exp(q.logits - q.logits.max())
    q_weights /= q_weights.sum()
    q_of = dict(zip(q.ids.tolist(), q_weights.tolist()))
    hit = candidates.ids == draft
    p_draft = float(p[hit].sum())
    q_draft = q_of.get(int(draft), 0.0)
    if q_draft > 0.0 and rng.random() * q_draft < p_draft:
        return int(draft)
    residual = np.maximum(p - np.array([q_of.get(int(i), 0.0) for i in candidates.ids.tolist()]), 0.0)
    if residual.sum() <= 0.0:  # p = q: nothing is ever rejected, unreachable up to rounding
        return draw(candidates, rng)
    with np.errstate(divide="ignore"):
        return draw(Candidates(candidates.ids, np.log(residual)), rng)


# ----- the stages as data -----

Sampler = Callable[[Distribution], int]  # a step's distribution (after every processor) → the drawn token id


class Stage(Protocol):
    """A stage between top-k and the draw: narrows or reshapes the candidates, never edits its input."""

    def __call__(self, candidates: Candidates) -> Candidates: ...


@dataclass(frozen=True)
class TopK:
    """The first stage: from the whole vocabulary to the k best (k ≤ 0: every token still allowed)."""

    k: int

    def __call__(self, distribution: Distribution) -> Candidates:
        return top_k(distribution.logits, self.k)


@dataclass(frozen=True)
class TopP:
    p: float

    def __call__(self, candidates: Candidates) -> Candidates:
        return top_p(candidates, self.p)


@dataclass(frozen=True)
class MinP:
    p: float

    def __call__(self, candidates: Candidates) -> Candidates:
        return min_p(candidates, self.p)


@dataclass(frozen=True)
class Temperature:
    temperature: float

    def __call__(self, candidates: Candidates) -> Candidates:
        return apply_temperature(candidates, self.temperature)


@dataclass(frozen=True)
class Draw:
    """The last stage: one token drawn from the candidates' weights with the request's generator."""

    rng: np.random.Generator

    def __call__(self, candidates: Candidates) -> int:
        return draw(candidates, self.rng)


@dataclass(frozen=True)
class Greedy:
    """Temperature 0 (or top-k 1): the most likely token, the lowest id on ties; no generator used."""

    def __call__(self, distribution: Distribution) -> int:
        return greedy(distribution.logits)

    def verify(self, distribution: Distribution, draft: int, q: Candidates | None = None) -> int:
        """The token this position yields given a draft: greedy ignores it (a draft is kept when it is the argmax)."""
        return greedy(distribution.logits)


@dataclass(frozen=True)
class Chain:
    """A sampled draw: top-k picks the candidates, the stages run in order, the draw picks one of them."""

    top_k: TopK
    stages: tuple[Stage, ...]
    draw: Draw

    def __call__(self, distribution: Distribution) -> int:
        return self.draw(self.candidates(distribution))

    def candidates(self, distribution: Distribution) -> Candidates:
        """What the draw picks from: the candidates after every stage."""
        candidates = self.top_k(distribution)
        for stage in self.stages:
            candidates = stage(candidates)
        return candidates

    def verify(self, distribution: Distribution, draft: int, q: Candidates | None = None) -> int:
        """The token this position yields given a draft (drawn from q; None: a point mass), distributed exactly as
        a plain draw."""
        if q is None:
            return verify_point_mass(self.candidates(distribution), draft, self.draw.rng)
        return verify_distribution(self.candidates(distribution), draft, q, self.draw.rng)


def make_sampler(settings: SamplingSettings, rng: np.random.Generator) -> Greedy | Chain:
    """One request's sampler; a caller that draws in phases passes the same rng so a seed fixes them all."""
    if settings.greedy:
        return Greedy()
    stages: list[Stage] = []
    if settings.top_p < 1.0:
        stages.append(TopP(settings.top_p))
    if settings.min_p > 0.0:
        stages.append(MinP(settings.min_p))
    stages.append(Temperature(settings.temperature))
    return Chain(TopK(settings.top_k), tuple(stages), Draw(rng))
