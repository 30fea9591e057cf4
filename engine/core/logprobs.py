"""Exact log-probabilities: logit − logsumexp over the whole real vocabulary, in float64.

"Real vocabulary": the tokenizer's ids (Qwen3.5: 248,077; the demo: 858). The model's head is wider
(padded to a multiple for the kernels: 248,320; 896), and its padding rows are never tokens, so by
default they take no part in the softmax. transformers and llama.cpp normalise over the padded head
width instead; on a trained model the padding rows hold almost no mass, on a random-weight one up to
half of it. `padded_head` is that definition, for a scoring client that compares with them.

The caller passes logits after penalties (and a constraint, if any) and before temperature. Values
are not renormalised over the listed alternatives: those are a window onto the full distribution.

A decode step needs one logsumexp and the top few ids, not a 248k-entry log-softmax vector: that is
what keeps logprobs nearly free per token (BENCHMARKS.md §2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .ranking import top_ids

# OpenAI's limits on how many alternatives a token lists: chat's top_logprobs, completions' logprobs.
MAX_TOP_LOGPROBS = 20
MAX_COMPLETION_LOGPROBS = 5

# float64 exponentials in blocks that stay in cache: a full-size temporary costs more in fresh pages
# than the arithmetic (≈3 ms against ≈0.3 ms over Qwen3.5's vocabulary), with the same result. 8192
# gives 31 blocks over Qwen3.5's vocabulary: more block maxima than the 20 alternatives ever asked for.
_BLOCK = 8192

# How a logprob is normalised: over the tokenizer's real ids (the default) or over the whole padded head.
VOCABULARY, PADDED_HEAD = "vocabulary", "padded_head"
NORMALIZATIONS = (VOCABULARY, PADDED_HEAD)


def block_maxima(logits: np.ndarray) -> np.ndarray:
    return np.maximum.reduceat(logits, np.arange(0, logits.shape[0], _BLOCK))


def logsumexp(logits: np.ndarray, maxima: np.ndarray | None = None) -> float:
    """log Σ exp(logits) in float64; -inf entries (masked tokens) add nothing. maxima: block_maxima(logits)."""
    peak = float(np.max(logits if maxima is None else maxima))
    if not math.isfinite(peak):
        return peak
    total = 0.0
    for start in range(0, logits.shape[0], _BLOCK):
        block = np.asarray(logits[start : start + _BLOCK], dtype=np.float64)
        total += float(np.sum(np.exp(block - peak)))
    return peak + math.log(total)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """The whole float64 log-softmax vector (for reports; a decode step needs only `Distribution`)."""
    return np.asarray(logits, dtype=np.float64) - logsumexp(logits)


@dataclass(frozen=True)
class TopLogprob:
    token_id: int
    logprob: float


@dataclass(frozen=True)
class Alternative:
    """A token with its text and exact logprob: a top_logprobs entry of a generated token or a decision."""

    token: str
    token_id: int  # -1 where only the text is known (a remote server's list)
    logprob: float
    bytes: bytes | None = None  # the token's exact bytes where known (OpenAI's `bytes`)

    def to_dict(self) -> dict:
        """A decision's JSON entry (the shape the API, --json and the history have always used)."""
        return {"token": self.token, "token_id": self.token_id, "logprob": self.logprob}


@dataclass(frozen=True)
class TokenLogprob:
    token_id: int
    logprob: float
    top: tuple[TopLogprob, ...]


class Distribution:
    """Log-probabilities over the full vocabulary, read on demand from the logits and their logsumexp."""

    __slots__ = ("logits", "_lse", "_block_maxima", "padded_mass")

    def __init__(self, logits: np.ndarray, padding: np.ndarray | None = None, normalization: str = VOCABULARY) -> None:
        """padding: the head's rows past the real vocabulary (their mass is measured, and normalised over
        with PADDED_HEAD); None: not known here (the mass stays 0.0 and the definition is the vocabulary's)."""
        self.logits = logits
        # Lazy: every decode step hands the sampler a Distribution, and a greedy draw without logprobs
        # needs neither the block maxima nor the logsumexp (≈1.5 ms over Qwen3.5's vocabulary).
        self._block_maxima: np.ndarray | None = None
        self._lse: float | None = None
        self.padded_mass = 0.0  # the share of the padded head's probability the padding rows hold
        if padding is not None and padding.size:
            padded = logsumexp(padding)
            whole = float(np.logaddexp(self.lse, padded))
            self.padded_mass = math.exp(padded - whole)
            if normalization == PADDED_HEAD:
                self._lse = whole

    @property
    def _maxima(self) -> np.ndarray:
        if self._block_maxima is None:
            self._block_maxima = block_maxima(self.logits)  # one pass that serves both the logsumexp and the top-n
        return self._block_maxima

    @property
    def lse(self) -> float:
        if self._lse is None:
            self._lse = logsumexp(self.logits, self._maxima)
        return self._lse

    def logprob(self, token_id: int) -> float:
        return float(self.logits[token_id]) - self.lse

    def logprobs(self, ids) -> np.ndarray:
        return np.asarray(self.logits[np.asarray(ids, dtype=np.int64)], dtype=np.float64) - self.lse

    def top(self, n: int) -> tuple[TopLogprob, ...]:
        """The n most likely tokens, most likely first, ties by lower id (forbidden ones never)."""
        return tuple(TopLogprob(int(i), self.logprob(int(i))) for i in top_ids(self.logits, n, self._floor(n)))

    def _floor(self, n: int) -> float | None:
        """The n-th highest block maximum: each is a real entry, so at least n entries reach it."""
        if not 0 < n <= self._maxima.size:
            return None
        floor = float(np.partition(self._maxima, -n)[-n])
        return floor if math.isfinite(floor) else None

    def entry(self, token_id: int, n: int) -> TokenLogprob:
        return TokenLogprob(token_id, self.logprob(token_id), self.top(n))
