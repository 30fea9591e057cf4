"""Qwen3.5's wire format for tools, as its chat template writes it (the `chat_template.jinja` real checkpoints ship).

- The system turn: `# Tools` … `<tools>`, one `tojson` tool object a line, `</tools>`, then the instruction block
  with its example call and four rules; a system message's (trimmed) text comes after that block.
- A call: `<tool_call>\\n<function=NAME>\\n`, per argument `<parameter=KEY>\\n` VALUE `\\n</parameter>\\n`, then
  `</function>\\n</tool_call>`. An object or array value is written as JSON (`tojson`), anything else as its
  plain string (Jinja's `string` filter: Python's str(), so true is `True` and null `None`).

Parsing a call back gives each value the type its schema names (OpenAI `arguments` are JSON): a string
parameter keeps the text as written, any other is read as JSON (Python's True/False/None too).
"""

from __future__ import annotations

import json
import re
import uuid

from .tool_types import Tool, ToolCall

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
TOOLS_HEAD = "# Tools\n\nYou have access to the following functions:\n\n<tools>"
TOOLS_RULES = (
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"
    "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified "
    "format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural "
    "language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question "
    "like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>"
)
PARAMETER_CLOSE = "\n</parameter>\n"
# A parameter's name as the call form can carry it: `<`, `>` or a newline would be markup in the prompt.
PARAMETER_NAME = re.compile(r"[^<>\n]{1,128}")


def tojson(value: object) -> str:
    """The template's `tojson` as transformers defines it."""
    return json.dumps(value, ensure_ascii=False)


def tools_system_text(tools: tuple[Tool, ...], system: str | None) -> str:
    """The system turn's text when functions are offered; `system`: the system message's trimmed text."""
    lines = [TOOLS_HEAD, *("\n" + tojson(tool.signature()) for tool in tools), "\n</tools>", TOOLS_RULES]
    if system:
        lines.append("\n\n" + system)
    return "".join(lines)


def value_text(value: object) -> str:
    """An argument's value as the template writes it: objects and arrays as JSON, the rest as Python's str()."""
    if isinstance(value, (dict, list)):
        return tojson(value)
    return str(value)  # Jinja's `string` filter: True, None, 1.5, text as is


def call_opening(name: str) -> str:
    return f"{CALL_OPEN}\n<function={name}>\n"


def call_text(call: ToolCall) -> str:
    """An earlier call as the template renders it in an assistant turn."""
    arguments = json.loads(call.arguments) if call.arguments.strip() else {}
    body = "".join(f"<parameter={key}>\n{value_text(value)}{PARAMETER_CLOSE}" for key, value in arguments.items())
    return f"{call_opening(call.name)}{body}</function>\n{CALL_CLOSE}"


def calls_text(content: str, calls: tuple[ToolCall, ...]) -> str:
    """What follows an assistant turn's (trimmed) content: its calls, the first after a blank line when
    there is content, each later one after a newline."""
    if not calls:
        return ""
    joined = "\n".join(call_text(c) for c in calls)
    return ("\n\n" if content.strip() else "") + joined


_CALL = re.compile(re.escape(CALL_OPEN) + r"\n<function=([^>\n]+)>\n(.*?)</function>\n" + re.escape(CALL_CLOSE), re.S)
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>\n(.*?)\n</parameter>\n", re.S)


def parse_value(text: str, schema: object) -> object:
    """A parameter's text as the value its schema types: a string as written; anything else read as JSON
    (Python's True/False/None, as the template writes them, too); text that is no JSON stays text."""
    if is_plain_string(schema):
        return text
    python = {"True": "true", "False": "false", "None": "null"}.get(text.strip(), text)
    try:
        return json.loads(python)
    except ValueError:
        return text


def is_plain_string(schema: object) -> bool:
    """A parameter the template writes as plain text: a string (or an enum/const of strings only)."""
    if not isinstance(schema, dict):
        return False
    if schema.get("type") == "string":
        return True
    choices = schema.get("enum", [schema["const"]] if "const" in schema else None)
    return "type" not in schema and isinstance(choices, list) and bool(choices) and all(isinstance(c, str) for c in choices)


def parse_calls(text: str, tools: tuple[Tool, ...]) -> list[ToolCall]:
    """The complete calls in an answer, their arguments as JSON typed by each function's schema."""
    by_name = {t.name: t for t in tools}
    calls = []
    for name, body in _CALL.findall(text):
        tool = by_name.get(name)
        properties = (tool.parameters.get("properties") if tool else None) or {}
        arguments = {key: parse_value(value, properties.get(key)) for key, value in _PARAMETER.findall(body)}
        calls.append(ToolCall(name, tojson(arguments), f"call_{uuid.uuid4().hex[:24]}"))
    return calls
