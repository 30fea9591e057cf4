"""Decision results for tests that need one without running a model (history, calibration, the widgets).

Built through `DecisionResult.build`, the builder every engine uses, so a test's result passes the same
checks (the options are the request's, the choice one of them) and is labelled uncertain where the engine's
would be; never field by field.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from decider.engine.core.logprobs import Alternative
from decider.engine.decisions.types import LABELS, DecisionRequest, DecisionResult, OptionResult

USAGE = {"prompt_tokens": 10, "prefill_tokens": 10, "reused_tokens": 0, "completion_tokens": 1}


def letters_result(logprobs: Sequence[float], request: DecisionRequest | None = None, *, choice: int | None = None,
                   reasoning: str | None = None, alternatives: Sequence[Alternative] = ()) -> DecisionResult:
    """A letters-mode result whose options have these full-vocabulary logprobs (renormalised for the bars,
    their sum the coverage), for `request` (by default "Which?" over "option 0", "option 1", …); the choice
    is the largest logprob unless given."""
    logprobs = [float(v) for v in logprobs]
    request = request or DecisionRequest("Which?", tuple(f"option {i}" for i in range(len(logprobs))))
    top = max(logprobs)
    weights = [math.exp(v - top) for v in logprobs]
    options = [OptionResult(LABELS[i], text, v, w / sum(weights))
               for i, (text, v, w) in enumerate(zip(request.options, logprobs, weights, strict=True))]
    return DecisionResult.build(
        request, options, max(range(len(logprobs)), key=logprobs.__getitem__) if choice is None else choice,
        mode="letters", coverage=sum(math.exp(v) for v in logprobs), timings={"total_s": 0.01}, usage=dict(USAGE),
        reasoning=reasoning, alternatives=alternatives,
    )
