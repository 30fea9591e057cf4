"""What a decision's labels may claim: one place says when a choice is uncertain and when a bar is not exact,
for every engine and every surface (CLI text and --json, /v1/decide, the GUI, the overlay, history).

A choice is uncertain, with the reason said, when
  - its lead is a near-tie: the most likely option's shown bar is within NEAR_TIE_NATS (in log-probability)
    of the runner-up's. A lead that small is what another precision or device moves: measured, vLLM's bf16
    flipped 10 of 17 such items against f32, and a reduced local compile drifts more;
  - the bars' possible ranges overlap (a server's bounds and estimates, a reduced precision's allowance);
  - its coverage is tiny: under TINY_COVERAGE of the model's probability went to the options at all (a
    random model's function calls at 3.4e-90), so the bars renormalise almost nothing. Word scoring is
    exempt: the probability of whole option texts is tiny by nature, and its coverage says so.
Under a reduced precision (--fast, an NPU's f16) no bar is labelled exact: each is "reduced", with the range
the stated allowance REDUCED_GAP_NATS gives it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .server_precision import precision_ranges

NEAR_TIE_NATS = 0.08  # bf16 carries 8 bits of mantissa: a logit near 10 is known to ±0.04, a gap to twice that
TINY_COVERAGE = 0.1  # under a tenth of the model's probability on the options: the bars say little
# A logprob gap a reduced compile may be off by: vLLM's bf16 allowance (engine/decisions/server_precision.py, twice the
# worst gap error measured), stated, not a bound; a local fast compile (bf16 + u8 KV cache) drifts at least as much.
REDUCED_GAP_NATS = 0.5
COVERED_MODES = ("letters", "tools")  # modes whose coverage is a share of the model's next-token probability


def lead_nats(shown: Sequence[float]) -> float:
    """log(most likely bar / runner-up's): how far the choice leads (inf when the runner-up is 0)."""
    ordered = sorted(shown, reverse=True)
    if len(ordered) < 2 or ordered[1] <= 0:
        return math.inf
    return math.log(ordered[0]) - math.log(ordered[1]) if ordered[0] > 0 else 0.0


def ranges_overlap(shown: Sequence[float], low: Sequence[float | None], high: Sequence[float | None]) -> bool:
    """Another option's highest possible bar reaches the most likely one's lowest."""
    top = int(np.argmax(shown))
    floor = low[top]
    top_low = shown[top] if floor is None else floor
    return any((shown[j] if h is None else h) >= top_low for j, h in enumerate(high) if j != top)


def uncertain_reasons(shown: Sequence[float], low: Sequence[float | None], high: Sequence[float | None],
                      coverage: float, mode: str) -> list[str]:
    """Why the choice among these bars is not settled; empty when it is (see the module docstring)."""
    reasons = []
    if mode in COVERED_MODES and coverage < TINY_COVERAGE:
        reasons.append(f"tiny coverage: only {coverage:.2g} of the model's probability went to the options "
                       f"(under {TINY_COVERAGE:g}), so the bars are renormalised over almost nothing")
    lead = lead_nats(shown)
    if lead < NEAR_TIE_NATS:
        reasons.append(f"near-tie: the most likely option leads the next by {lead:.3f} in log-probability, "
                       f"under the stated margin {NEAR_TIE_NATS}")
    elif any(v is not None for v in (*low, *high)) and ranges_overlap(shown, low, high):
        reasons.append("the bars are bounds or estimates whose ranges overlap")
    return reasons


def reduced_ranges(logprobs: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Each bar's range when every option logprob may be off by REDUCED_GAP_NATS / 2 either way."""
    return precision_ranges(np.asarray(logprobs, dtype=float), REDUCED_GAP_NATS)


def uncertain_text(result) -> str:
    """Why the choice is not settled, in the result's own words (a DecisionResult; every surface says this)."""
    why = "; ".join(result.uncertain_why) or "the bars are bounds or estimates that overlap"
    return f"uncertain: {why}; the bars do not settle the choice"


def usage_text(usage: dict) -> str:
    """Token counts that add up: the prompt; what the model read before the answer (the prompt, and with
    think the reasoning and its close), split into what the cache held and what was computed; what it wrote."""
    prompt, reused, computed = usage.get("prompt_tokens", 0), usage.get("reused_tokens", 0), usage.get("prefill_tokens", 0)
    read = reused + computed
    text = f"{prompt} prompt tokens"
    if read != prompt:
        text += f" · {read} read"
    text += f" ({reused} from the cache, {computed} computed)" if reused else ""
    return text + f" · {usage.get('completion_tokens', 0)} generated"
