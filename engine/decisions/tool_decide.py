"""Functions as options: which function the model would call, with a bar for each, and the chosen call's arguments.

The bars are the functions' exact probabilities (engine/constrained/tools.choice_probabilities: each name's canonical token
path `<tool_call>\n<function=NAME>`), renormalised over the offered functions as option bars are; `coverage` is their sum
(the rest is answering in text, or a call no offered name takes). The choice is the most likely function; its
arguments come from one generation constrained to that function's schema.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..model.chat_template import Message, build_chat_prompt
from ..core.clock import Clock
from ..generation.generate import GenerationRequest, generate
from ..constrained.tool_grammar import tool_grammar
from ..constrained.tools import choice_probabilities, parse_tool_calls, tag_ids
from .types import LABELS, DecisionRequest, DecisionResult, OptionResult

MAX_CALL_TOKENS = 256


def decide_tools(runner, request: DecisionRequest, should_stop: Callable[[], bool] | None = None) -> DecisionResult:
    clock = Clock()
    messages = ([Message("system", request.system)] if request.system else []) + [Message("user", request.question)]
    prompt = build_chat_prompt(runner.tokenizer, messages, False, tools=request.tools).ids
    runner.check_prompt(prompt)
    probabilities = choice_probabilities(runner, prompt, request.tools)
    prefill_tokens, reused = runner.stats.last_prefill_tokens, runner.stats.last_prefill_reused
    clock.lap("prefill_s")
    names = list(request.options)
    values = [probabilities["functions"][name] for name in names]
    chosen = max(range(len(names)), key=values.__getitem__)
    grammar = tool_grammar(request.tools, names[chosen], False, tag_ids(runner.tokenizer))
    completion = generate(runner, GenerationRequest(tuple(prompt), request.sampling, MAX_CALL_TOKENS, response_format=grammar,
                                                    checkpoints=(len(prompt),)), should_stop=should_stop)
    clock.lap("sample_s")
    _, calls = parse_tool_calls(completion.content, request.tools)
    mass = sum(values)
    options = [OptionResult(label, name, math.log(max(p, 1e-300)), p / mass if mass > 0 else 1 / len(names))
               for label, name, p in zip(LABELS, names, values)]
    return DecisionResult.build(
        request, options, chosen, mode="tools", coverage=mass, timings=clock.total(),
        usage={"prompt_tokens": len(prompt), "prefill_tokens": prefill_tokens, "reused_tokens": reused,
               "completion_tokens": completion.completion_tokens},
        tool_call=calls[0] if calls else None, tool_probabilities=probabilities,
    )
