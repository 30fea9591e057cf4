"""Logits processors: the per-request stages between the model's logits and the sampler, as data.

A processor is an object with two methods, the way llama.cpp's sampler chain works:

    apply(logits) -> logits   a new vector (or the same one when it changes nothing); never edits its input
    accept(token)             told about every token that was *kept* as generated text

The generation loop (engine/generate.py) runs a request's processors in order on every step and calls
`accept` only for a kept token: a stop token, a forced token or a draw that is thrown away is never
accepted, so the penalty window holds exactly the generated text (the seed's discarded-draw rule).

Two kinds, in this order:
- adjusting processors (`masks = False`) move logits: the penalties; later `logit_bias`.
- masking processors (`masks = True`) remove tokens (-inf): the letter constraint; later a grammar mask.
The loop hands out the logits between the two (`Step.penalized`: what a decision's bars read, whatever
the constraint) and the logits after both (what the draw and its logprobs see: after penalties and the
constraint, before temperature). `make_processors` builds the chain for one request in that order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np

from .settings import SamplingSettings


class LogitsProcessor(Protocol):
    masks: bool  # True: only removes tokens (runs after every adjusting processor)

    def apply(self, logits: np.ndarray) -> np.ndarray: ...

    def accept(self, token: int) -> None: ...


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
) -> list[LogitsProcessor]:
    """One request's chain: adjusting processors first, masks last.

    penalties: an existing Penalties to continue (a phased decision); None builds a fresh one.
    Where later stages plug in: a `logit_bias` processor (adjusting) goes right after the penalties,
    a grammar mask (masking) after the allowed-token constraint.
    """
    chain: list[LogitsProcessor] = [penalties if penalties is not None else Penalties.for_sampling(sampling)]
    if allowed is not None:
        chain.append(AllowedTokens(allowed))
    return chain


def check_order(processors: Sequence[LogitsProcessor]) -> None:
    """Masks come last: an adjusting processor after a mask could move a removed token back."""
    masking = False
    for processor in processors:
        if processor.masks:
            masking = True
        elif masking:
            raise ValueError(f"{type(processor).__name__} adjusts logits after a mask: adjusting processors come first")


def run_processors(processors: Sequence[LogitsProcessor], logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the logits after the adjusting processors, the logits after all of them); masks come last."""
    adjusted = processed = logits
    for processor in processors:
        processed = processor.apply(processed)
        if not processor.masks:
            adjusted = processed
    return adjusted, processed


def accept(self, token: int) -> None: ...


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
) -> list[LogitsProcessor]:
    """One request's chain: adjusting processors first, masks last.

    penalties: an existing Penalties to continue (a phased decision); None builds a fresh one.
    Where later stages plug in: a `logit_bias` processor (adjusting) goes right after the penalties,
    a grammar mask (masking) after the allowed-token constraint.
    """
    chain: list[LogitsProcessor] = [penalties if penalties is not None else Penalties.for_sampling(sampling)]
    if allowed is not None:
        chain.append(AllowedTokens(allowed))
    return chain


def run_processors(processors: Sequence[LogitsProcessor], logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the logits after the adjusting processors, the logits after all of them)."""
    adjusted = logits
    index = 0
    for index, processor in enumerate(processors):  # noqa: B007 - the index is where the masks start
        if processor.masks:
            break
        adjusted = processor.apply(adjusted)
    else:
        return adjusted, adjusted
    processed = adjusted
    for processor in processors[index:]:
        if not processor.masks:
            raise ValueError(f"{type(processor).__name__} adjusts logits after a mask: adjusting processors come first")
        processed = processor.apply(processed)
    return adjusted, processed


def accept(processors: Sequence[LogitsProcessor], token: int) -> None:
    """Tell every processor that `token` was kept as generated text."""
    for processor in processors:
        processor.accept(token)
