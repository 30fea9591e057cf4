"""Functions as options (`decider ask --tool file.json`): which function the model would call, with a bar for each,
and the chosen call's arguments drawn under that function's schema.

The bars are the functions' exact probabilities (engine/tools.choice_probabilities: each name's canonical token
path after `<tool_call>`), renormalised over the offered functions as option bars are; `coverage` is their sum
(the rest is answering in text, or a call no offered name takes). The chosen function is the most likely one;
its arguments come from one constrained generation (tool_choice naming it).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path

from decider.engine.chat_template import Message, build_chat_prompt
from decider.engine.types import LABELS, DecisionResult, OptionResult
from decider.engine.errors import SettingsError
from decider.engine.generate import GenerationRequest, generate
from decider.engine.settings import SamplingSettings
from decider.engine.tools import Tool, ToolCall, choice_probabilities, parse_tool_calls, tag_ids, tool_grammar, tools_from_openai

MAX_TOOLS_FILE = 1 << 20  # bytes: a tools file is a few functions' schemas


@dataclass
class ToolDecision:
    result: DecisionResult  # one option per function, its bar the function's probability renormalised
    call: ToolCall | None  # the chosen function's call (None when max_tokens cut its arguments short)
    probabilities: dict  # choice_probabilities: answer, call, functions

    def to_dict(self) -> dict:
        return {**self.result.to_dict(), "tool_call": self.call.to_openai() if self.call else None,
                "tool_choice_probabilities": self.probabilities}


def load_tools(path: str) -> tuple[Tool, ...]:
    """A JSON file of OpenAI tools (a list, one tool object, or a bare function)."""
    file = Path(path)
    if not file.is_file():
        raise SettingsError(f"--tool {path}: not a regular file")
    if file.stat().st_size > MAX_TOOLS_FILE:
        raise SettingsError(f"--tool {path}: larger than {MAX_TOOLS_FILE} bytes")
    try:
        value = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SettingsError(f"--tool {path}: not JSON ({exc})") from None
    try:
        return tools_from_openai(value)
    except SettingsError as exc:
        raise SettingsError(f"--tool {path}: {exc}") from None


def decide_tools(service, question: str, tools: tuple[Tool, ...], sampling: SamplingSettings,
                 system: str | None = None, max_tokens: int = 256) -> ToolDecision:
    runner, started = service.runner, time.perf_counter()
    messages = ([Message("system", system)] if system else []) + [Message("user", question)]
    with service.lock:
        prompt = build_chat_prompt(runner.tokenizer, messages, False, tools=tools).ids
        runner.check_prompt(prompt)
        probabilities = choice_probabilities(runner, prompt, tools)
        names = list(probabilities["functions"])
        chosen = max(range(len(names)), key=lambda i: probabilities["functions"][names[i]])
        grammar = tool_grammar(tools, names[chosen], False, tag_ids(runner.tokenizer))
        completion = generate(runner, GenerationRequest(tuple(prompt), sampling, max_tokens, response_format=grammar,
                                                        checkpoints=(len(prompt),)))
    _, calls = parse_tool_calls(completion.content)
    mass = sum(probabilities["functions"].values())
    options = [
        OptionResult(LABELS[i], name, math.log(max(p, 1e-300)), p / mass if mass > 0 else 1 / len(names))
        for i, (name, p) in enumerate(probabilities["functions"].items())
    ]
    result = DecisionResult(
        choice_index=chosen, options=options, coverage=mass, mode="tools", reasoning=None, alternatives=[],
        timings={"total_s": time.perf_counter() - started},
        usage={"prompt_tokens": len(prompt), "reused_tokens": runner.stats.last_prefill_reused,
               "answer_tokens": completion.completion_tokens},
    )
    result.engine = replace(service.info)
    return ToolDecision(result, calls[0] if calls else None, probabilities)


def render_call(call: ToolCall | None) -> str:
    if call is None:
        return "call: (arguments cut short by --max-tokens)"
    return f"call: {call.name}({call.arguments})"


def ask_with_tools(args, open_service) -> int:
    """`decider ask --tool FILE …`: the functions are the options (no --option); prints bars and the call."""
    import sys

    from .render import render_decision
    from .requests import sampling_from

    clashes = [flag for flag, given in (("--option", args.option), ("--image", args.image), ("--think", args.think),
                                        ("--permute", args.permute), ("--engine", args.engine), ("--context", args.context)) if given]
    if clashes:
        raise SettingsError(f"--tool takes the functions as the options: not with {', '.join(clashes)}")
    tools = load_tools(args.tool)  # before the (slow) model load
    service = open_service()
    decision = decide_tools(service, args.question, tools, sampling_from(vars(args), service.defaults), args.system)
    if args.json:
        print(json.dumps(decision.to_dict(), ensure_ascii=False))
    else:
        print(render_decision(args.question, decision.result, service.model_name))
        print(render_call(decision.call))
    sys.stdout.flush()
    return 0
