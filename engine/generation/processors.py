"""Logits processors: the per-request stages between the model's logits and the sampler, as data.

A processor is an object with the interface `LogitsProcessor` declares, the way llama.cpp's sampler chain works:

    apply(logits) -> logits   a new vector (or the same one when it changes nothing); never edits its input
    accept(token)             told about every token that was *kept* as generated text
    finished                  True once only the end of turn can follow (a closed JSON value): the loop
                              then starts no further forward; False for a processor that never completes

The generation loop (engine/generation/generate.py) runs a request's processors in order on every step and calls
`accept` only for a kept token: a stop token, a forced token or a draw that is thrown away is never
accepted, so the penalty window holds exactly the generated text (the seed's discarded-draw rule).

Three kinds, in this order:
- adjusting processors (`masks = False`) move logits: the penalties; later `logit_bias`.
- masks (`masks = True`) remove tokens (-inf) from the draw and from the logprobs: the letter constraint.
- draw-only masks (`masks = True, draw_only = True`) remove tokens from the draw only, so the reported
  logprobs stay the model's: a grammar (engine/constrained/structured.py's GrammarMask for response_format).
The loop reads three vectors: after the adjusting processors (`Step.penalized`, read as a `Distribution`
through `Step.unmasked`: what a decision's bars read, whatever the constraint), after the masks (what
logprobs are taken from: after penalties and the constraint, before temperature) and after everything
(what the sampler draws from). `make_processors` builds the chain for one request in that order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from .logit_bias import LogitBias
from ..core.settings import SamplingSettings


@runtime_checkable
class LogitsProcessor(Protocol):
    masks: bool  # True: only removes tokens (runs after every adjusting processor)
    draw_only: bool  # a mask that restricts the draw but not the reported logprobs (runs last)

    def apply(self, logits: np.ndarray) -> np.ndarray: ...

    def accept(self, token: int) -> None: ...

    @property
    def finished(self) -> bool: ...


INTERFACE = ("masks", "draw_only", "apply", "accept", "finished")  # what check_order asks of every processor


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


class Penalties:
    """Repetition, frequency and presence penalties over a window of the last kept tokens.

    It owns its window; a caller that generates in phases (reasoning, then the answer) passes the same
    object to each phase so earlier kept tokens still count.
    """

    masks = False
    draw_only = False
    finished = False  # never completes a text

    def __init__(self, repetition: float, frequency: float, presence: float, window: deque[int]) -> None:
        self.repetition, self.frequency, self.presence = repetition, frequency, presence
        self.window = window

    @classmethod
    def for_sampling(cls, sampling: SamplingSettings, window: deque[int] | None = None) -> "Penalties":
        """window: an existing deque to continue (its maxlen is kept); None starts an empty one."""
        if window is None:
            window = deque(maxlen=sampling.penalty_window)
        return cls(sampling.repetition_penalty, sampling.frequency_penalty, sampling.presence_penalty, window)

    def apply(self, logits: np.ndarray) -> np.ndarray:
        return apply_penalties(logits, self.window, self.repetition, self.frequency, self.presence)

    def accept(self, token: int) -> None:
        self.window.append(token)


class AllowedTokens:
    """Only these ids may be drawn (e.g. the option letters); logprobs renormalise over them."""

    masks = True
    draw_only = False
    finished = False  # never completes a text

    def __init__(self, ids: Sequence[int] | np.ndarray) -> None:
        self.ids = np.asarray(ids, dtype=np.int64)

    def apply(self, logits: np.ndarray) -> np.ndarray:
        return constrain(logits, self.ids)

    def accept(self, token: int) -> None:
        pass  # the same set for every draw


def make_processors(
    sampling: SamplingSettings,
    *,
    allowed: Sequence[int] | np.ndarray | None = None,
    penalties: Penalties | None = None,
    logit_bias: Sequence[tuple[int, float]] = (),
    grammar: LogitsProcessor | None = None,
) -> list[LogitsProcessor]:
    """One request's chain: adjusting processors first, masks last.

    penalties: an existing Penalties to continue (a phased decision); None builds a fresh one.
    logit_bias: (token id, bias) pairs, an adjusting processor right after the penalties
    (engine/generation/logit_bias.py). grammar: a draw-only mask (engine/constrained/structured.py's GrammarMask), last.
    """
    chain: list[LogitsProcessor] = [penalties if penalties is not None else Penalties.for_sampling(sampling)]
    if logit_bias:
        chain.append(LogitBias(logit_bias))
    if allowed is not None:
        chain.append(AllowedTokens(allowed))
    if grammar is not None:
        chain.append(grammar)
    return chain


def check_order(processors: Sequence[LogitsProcessor]) -> None:
    """Every one a processor (all of INTERFACE), and adjusting processors, then masks, then draw-only masks:
    an adjustment after a mask could move a removed token back, and a mask after a draw-only one would leak
    the draw's restriction into logprobs."""
    rank = 0
    for processor in processors:
        missing = [name for name in INTERFACE if not hasattr(processor, name)]
        if missing:
            raise TypeError(f"{type(processor).__name__} is not a logits processor: it has no {', '.join(missing)}")
        kind = 2 if processor.draw_only else 1 if processor.masks else 0
        if kind < rank:
            order = "adjusting processors, then masks, then draw-only masks"
            raise ValueError(f"{type(processor).__name__} is out of order: {order}")
        rank = kind


def run_processors(
    processors: Sequence[LogitsProcessor], logits: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(after the adjusting processors, after the masks, after everything) for a chain in check_order's
    order; a vector no stage changed is the same object, so an empty stage costs no copy."""
    adjusted = scored = drawn = logits
    for processor in processors:
        drawn = processor.apply(drawn)
        if not processor.masks:
            adjusted = drawn
        if not processor.draw_only:
            scored = drawn
    return adjusted, scored, drawn


def accept(processors: Sequence[LogitsProcessor], token: int) -> None:
    """Tell every processor that `token` was kept as generated text."""
    for processor in processors:
        processor.accept(token)
