"""Functions as options on a server: the tools go through to the server's own tool calling (vLLM, llama.cpp, OVMS,
another Decider), and each bar says whether the server could give it.

A Decider server answers with `tool_choice_probabilities` (the exact per-function probabilities of
engine/constrained/tools.py): the bars are those, renormalised, labelled exact. Any other server only makes a call: its
logprobs describe the tokens it drew, not the other functions' paths, so the called function's bar is an
estimate of 1 and the others 0, the result is marked uncertain and a note says the bars are not probabilities.
"""

from __future__ import annotations

import json
import math

from ..core.clock import Clock
from .http import RemoteError
from ..decisions.types import LABELS, DecisionRequest, DecisionResult, OptionResult
from ..constrained.tools import ToolCall

MAX_CALL_TOKENS = 256
# What each server kind takes: llama-cpp-python (its chatml-function-calling format) answers "required" with an HTTP
# 500 and makes a call under "auto" (measured, 0.3.36); the others honour "required", which never answers in text.
TOOL_CHOICE = {"llama.cpp": "auto"}
TOOLS_EXACT, TOOLS_CALL_ONLY = "tools, computed by the server", "tools, the server's call only"
NO_PROBABILITIES = "the server made the call but reports no per-function probabilities: the bars only show which it called"


def decide_tools_remote(engine, request: DecisionRequest) -> DecisionResult:
    clock = Clock()
    messages = ([{"role": "system", "content": request.system}] if request.system else []) + [
        {"role": "user", "content": request.question}]
    kind = engine.profile().kind
    sampling = request.sampling.request_fields(kind, tool_calls=True)  # the settings declared tool_calls
    body = {"model": engine.model, "messages": messages, "tools": [t.signature() for t in request.tools],
            "tool_choice": TOOL_CHOICE.get(kind, "required"), "parallel_tool_calls": False, "max_tokens": MAX_CALL_TOKENS, **sampling}
    answer = engine.client.call("POST", f"{engine.config.api}/chat/completions", body)
    choice = (answer.get("choices") or [{}])[0]
    calls = (choice.get("message") or {}).get("tool_calls") or []
    names = list(request.options)
    function = (calls[0].get("function") or {}) if calls else {}
    if function.get("name") not in names:
        raise RemoteError(f"{engine.config.base_url} answered without calling one of the offered functions "
                          f"(finish_reason {choice.get('finish_reason')!r})")
    call = ToolCall(function["name"], _arguments(function.get("arguments")), str(calls[0].get("id", "")))
    clock.lap("prefill_s")
    probabilities = choice.get("tool_choice_probabilities")
    exact = isinstance(probabilities, dict) and isinstance(probabilities.get("functions"), dict)
    if exact:
        values = [float(probabilities["functions"].get(name, 0.0)) for name in names]
        mass = sum(values)
        options = [OptionResult(label, name, math.log(max(p, 1e-300)), p / mass if mass > 0 else 1 / len(names))
                   for label, name, p in zip(LABELS, names, values)]
        chosen, coverage, notes = names.index(call.name), mass, []
    else:
        chosen = names.index(call.name)
        options = [OptionResult(label, name, 0.0 if i == chosen else -math.inf, 1.0 if i == chosen else 0.0, bar="estimate")
                   for i, (label, name) in enumerate(zip(LABELS, names))]
        coverage, notes = 0.0, [NO_PROBABILITIES]
    return DecisionResult.build(
        request, options, chosen, mode="tools", coverage=coverage, timings=clock.total(), usage=answer.get("usage") or {},
        uncertain=not exact, engine=engine.info(TOOLS_EXACT if exact else TOOLS_CALL_ONLY, notes),
        tool_call=call, tool_probabilities=probabilities if exact else None,
    )


def _arguments(value) -> str:
    try:
        parsed = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return str(value)
    return json.dumps(parsed, ensure_ascii=False) if isinstance(parsed, dict) else str(value)
