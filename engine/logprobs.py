"""Exact log-probabilities: logit − logsumexp over the whole real vocabulary, in float64.

The caller passes logits after penalties (and a constraint, if any) and before temperature. Values
are not renormalised over the listed alternatives: those are a window onto the full distribution.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """float64 log-softmax; -inf entries (masked tokens) stay -inf."""
    x = np.asarray(logits, dtype=np.float64)
    peak = np.max(x)
    return x - (peak + np.log(np.sum(np.exp(x - peak))))


@dataclass(frozen=True)
class TopLogprob:
    token_id: int
    logprob: float


@dataclass(frozen=True)
class TokenLogprob:
    token_id: int
    logprob: float
    top: tuple[TopLogprob, ...]


def top_alternatives(logprobs: np.ndarray, n: int) -> tuple[TopLogprob, ...]:
    """The n most likely finite entries, most likely first, ties by lower id (forbidden ones never)."""
    if n <= 0:
        return ()
    n = min(n, int(np.isfinite(logprobs).sum()))
    part = np.argpartition(-logprobs, n - 1)[:n] if n < logprobs.shape[0] else np.arange(logprobs.shape[0])
    # argpartition may cut a tie arbitrarily: widen to every id tied with the n-th value, then rank.
    edge = np.min(logprobs[part])
    part = np.union1d(part[logprobs[part] > edge], np.flatnonzero(logprobs == edge))
    ranked = part[np.lexsort((part, -logprobs[part]))][:n]
    return tuple(TopLogprob(int(i), float(logprobs[i])) for i in ranked)


def token_entry(logprobs: np.ndarray, token_id: int, n: int) -> TokenLogprob:
    return TokenLogprob(token_id, float(logprobs[token_id]), top_alternatives(logprobs, n))
