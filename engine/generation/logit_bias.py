"""OpenAI's `logit_bias`: a fixed amount added to chosen tokens' logits on every draw.

An adjusting processor that runs right after the penalties (engine/generation/processors.py's chain), so the
reported logprobs include it: they are taken after penalties and bias, before any mask, temperature,
top-k, top-p or min-p. The bias is added to the raw logit (−100 all but bans a token, +100 all but forces
it), exactly as OpenAI describes it; it never touches a prompt token's logprob (echo), which is the model's.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..core.errors import SettingsError

BIAS_RANGE = 100.0


def check_logit_bias(pairs: Iterable[tuple[int, float]], vocab_size: int | None = None) -> tuple[tuple[int, float], ...]:
    """(token id, bias) pairs as a sorted tuple; ids unique, biases in −100…100."""
    out: dict[int, float] = {}
    for token, bias in pairs:
        if isinstance(token, bool) or not isinstance(token, int) or token < 0 or (vocab_size is not None and token >= vocab_size):
            limit = f"0..{vocab_size - 1}" if vocab_size is not None else "≥ 0"
            raise SettingsError(f"logit_bias: token id {token!r} is outside {limit}", field="logit_bias")
        if isinstance(bias, bool) or not isinstance(bias, (int, float)) or not -BIAS_RANGE <= bias <= BIAS_RANGE:
            raise SettingsError(f"logit_bias: the bias of token {token} must be a number in −100..100 (got {bias!r})",
                                field="logit_bias")
        out[token] = float(bias)
    return tuple(sorted(out.items()))


class LogitBias:
    """Adds each listed token's bias to its logit (an adjusting processor: logprobs include it)."""

    masks = False
    draw_only = False
    finished = False  # never completes a text

    def __init__(self, pairs: Iterable[tuple[int, float]]) -> None:
        pairs = tuple(pairs)
        self.ids = np.fromiter((t for t, _ in pairs), dtype=np.int64, count=len(pairs))
        self.bias = np.fromiter((b for _, b in pairs), dtype=np.float64, count=len(pairs))

    def apply(self, logits: np.ndarray) -> np.ndarray:
        keep = self.ids < logits.shape[0]
        out = logits.copy()
        out[self.ids[keep]] += self.bias[keep].astype(out.dtype)
        return out

    def accept(self, token: int) -> None:
        pass  # the same bias on every draw
