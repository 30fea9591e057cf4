"""Drawing one option from the bars: the decision's choice when sample_choice asks for a draw (local and remote)."""

from __future__ import annotations

import numpy as np


def softmax(values: np.ndarray) -> np.ndarray:
    shifted = np.exp(values - values.max())
    return shifted / shifted.sum()


def draw_option(probabilities: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """One option drawn from shown bars sharpened or softened by the sampling temperature (0: the argmax)."""
    if temperature == 0.0:
        return int(np.argmax(probabilities))
    with np.errstate(divide="ignore"):
        logits = np.log(probabilities) / temperature
    return int(rng.choice(len(probabilities), p=softmax(logits)))
