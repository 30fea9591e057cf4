"""One drawn token of the step loop: what generate_step yields and the drafted loop (speculative.py) builds.

Its own module so that the loop (generate.py) and its drafted variant (speculative.py) both use it without
importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.logprobs import Distribution, TokenLogprob


@dataclass(frozen=True)
class Step:
    token_id: int
    entry: TokenLogprob | None  # logprob of the draw and its alternatives, when asked for
    penalized: np.ndarray  # the logits the draw saw after the adjusting processors (penalties), before any mask

    @property
    def unmasked(self) -> Distribution:
        """The full-vocabulary distribution after the penalties and before any mask: what a decision's bars read."""
        return Distribution(self.penalized)
