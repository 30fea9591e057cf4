"""`decider ask --tool file.json`: functions as options (engine/tool_decide.py computes the bars and the call)."""

from __future__ import annotations

import json
from pathlib import Path

from decider.engine.errors import SettingsError
from decider.engine.tools import Tool, tools_from_openai
from decider.engine.types import DecisionRequest

MAX_TOOLS_FILE = 1 << 20  # bytes: a tools file is a few functions' schemas


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


def tool_request(question: str, tools: tuple[Tool, ...], **fields) -> DecisionRequest:
    """A decision whose options are the functions' names."""
    return DecisionRequest(question=question, options=tuple(t.name for t in tools), tools=tools, **fields)


def call_text(result) -> str:
    call = result.tool_call
    return f"{call.name}({call.arguments})" if call else "(arguments cut short)"


def ask_with_tools(args, open_service) -> int:
    """`decider ask --tool FILE …`: the functions are the options (no --option); prints bars and the call. With
    --engine URL the tools go through to the server's own tool calling (engine/remote_tools.py)."""
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
