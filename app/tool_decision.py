"""`decider ask --tool file.json`: functions as options (engine/decisions/tool_decide.py computes the bars and the call)."""

from __future__ import annotations

import json

from decider.engine.core.errors import SettingsError
from decider.engine.constrained.tools import Tool, tools_from_openai
from decider.engine.decisions.types import DecisionRequest

MAX_TOOLS_FILE = 1 << 20  # bytes: a tools file is a few functions' schemas


MAX_TOOLS_NESTING = 64  # levels of objects and arrays: a schema nests a handful


def load_tools(path: str) -> tuple[Tool, ...]:
    """A JSON file of OpenAI tools (a list, one tool object, or a bare function)."""
    from .images import read_bounded

    data = read_bounded(path, MAX_TOOLS_FILE, "--tool ")  # a FIFO or a device refused at once
    try:
        value = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise SettingsError(f"--tool {path}: nested deeper than {MAX_TOOLS_NESTING} levels") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise SettingsError(f"--tool {path}: not JSON ({exc})") from None
    if nesting(value) > MAX_TOOLS_NESTING:  # deep schemas would fail deeper down, in the grammar or the prompt
        raise SettingsError(f"--tool {path}: nested deeper than {MAX_TOOLS_NESTING} levels")
    try:
        return tools_from_openai(value)
    except SettingsError as exc:
        raise SettingsError(f"--tool {path}: {exc}") from None


def nesting(value: object) -> int:
    """How many levels of objects and arrays `value` holds (iteratively: any depth is counted safely)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def tool_request(question: str, tools: tuple[Tool, ...], **fields) -> DecisionRequest:
    """A decision whose options are the functions' names."""
    return DecisionRequest(question=question, options=tuple(t.name for t in tools), tools=tools, **fields)


def call_text(result) -> str:
    call = result.tool_call
    return f"{call.name}({call.arguments})" if call else "(arguments cut short)"


def ask_with_tools(args, open_service) -> int:
    """`decider ask --tool FILE …`: the functions are the options (no --option); prints bars and the call. With
    --engine URL the tools go through to the server's own tool calling (engine/remote/tool_calls.py)."""
    from .render import render_decision
    from .requests import sampling_from

    clashes = [flag for flag, given in (("--option", args.option), ("--image", args.image), ("--think", args.think),
                                        ("--permute", args.permute), ("--context", args.context)) if given]
    if clashes:
        raise SettingsError(f"--tool takes the functions as the options: not with {', '.join(clashes)}")
    tools = load_tools(args.tool)  # before the (slow) model load
    service = open_service()
    result = service.decide(tool_request(args.question, tools, system=args.system,
                                         sampling=sampling_from(vars(args), service.defaults)), source="cli")
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    else:
        print(render_decision(args.question, result, service.model_name))
        print(f"call: {call_text(result)}")
    return 0
