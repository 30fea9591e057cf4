"""The grammar of a tool-calling answer in Qwen3.5's call form (engine/constrained/tool_format.py), for llguidance.

Each call is `<tool_call>\\n<function=NAME>\\n` then the function's parameters in its schema's `properties`
order (required ones always, optional ones or not), each `<parameter=KEY>\\n` VALUE `\\n</parameter>\\n`, then
`</function>\\n</tool_call>`. A value follows its property's schema as the template writes values: a string
as plain text (one of its `enum`/`const` when it has them, at most `maxLength` characters, never holding
`\\n</parameter>\\n`), any other type as JSON under that schema (a boolean also as Python's True/False, as the
template renders earlier calls). A string's `pattern` or `format` is not enforced in plain text.
"""

from __future__ import annotations

import json

from ..core.errors import SettingsError
from .tool_format import CALL_CLOSE, CALL_OPEN, PARAMETER_CLOSE, PARAMETER_NAME, is_plain_string
from .tools import TOOL_CHOICES, Tool

MAX_STRING = 100_000  # characters a bounded plain-text value may be asked for (llguidance builds the repeat)


def _literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _string_value(schema: dict) -> str:
    choices = schema.get("enum", [schema["const"]] if "const" in schema else None)
    if isinstance(choices, list) and choices and all(isinstance(c, str) for c in choices):
        return "(" + " | ".join(_literal(c) for c in choices) + ")"
    low = schema.get("minLength", 0)
    high = schema.get("maxLength")
    if not isinstance(low, int) or isinstance(low, bool) or low < 0:
        low = 0
    span = f"{{{min(low, MAX_STRING)},{min(high, MAX_STRING)}}}" if isinstance(high, int) and not isinstance(high, bool) and high >= low else (
        f"{{{min(low, MAX_STRING)},}}" if low else "*")
    return f"/(?s:.{span})\\n<\\/parameter>\\n/"


def _value_rules(rule: str, schema: object) -> list[str]:
    """Rules for one parameter's value, ending with its `\\n</parameter>\\n` (inside a lazy string lexeme)."""
    close = _literal(PARAMETER_CLOSE)
    if is_plain_string(schema):
        assert isinstance(schema, dict)
        body = _string_value(schema)
        if body.startswith("/"):
            return [f"{rule}[lazy]: {body}"]
        return [f"{rule}: {body} {close}"]
    json_schema = schema if isinstance(schema, dict) else {}
    rules = [f"{rule}: {rule}_json {close}" + (' | ("True" | "False") ' + close if json_schema.get("type") == "boolean" else ""),
             f"{rule}_json: %json {json.dumps(json_schema)}"]
    return rules


def _function_rules(index: int, tool: Tool) -> list[str]:
    properties = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or ())
    rules, parts = [], []
    for position, (key, schema) in enumerate(properties.items()):
        rule = f"v{index}_{position}"
        rules += _value_rules(rule, schema)
        parameter = f'{_literal(f"<parameter={key}>" + chr(10))} {rule}'
        parts.append(parameter if key in required else f"({parameter})?")
    body = " ".join([_literal(f"<function={tool.name}>\n"), *parts, _literal("</function>\n")])
    return [f"f{index}: {body}", *rules]


def check_parameters(tools: tuple[Tool, ...]) -> None:
    """Parameter names the call form can carry: no `<`, `>` or newline (they would be markup in the prompt)."""
    for index, tool in enumerate(tools):
        properties = tool.parameters.get("properties", {})
        if not isinstance(properties, dict):
            raise SettingsError(f"tools[{index}]: parameters.properties must be an object")
        for key in properties:
            if not PARAMETER_NAME.fullmatch(key):
                raise SettingsError(f"tools[{index}]: parameter name {key!r:.70} must be 1-128 characters without <, > or a newline")


def tool_grammar(tools: tuple[Tool, ...], choice: str, parallel: bool = True, tag_ids: tuple[int, int] | None = None):
    """The grammar of the answer: "required" (one call or more), a function's name (that one, once), or "auto"
    (a call, or text that does not start one). `parallel` false: one call, then the turn ends. Refused here, at
    request time, when llguidance cannot compile it. tag_ids: the ids of `<tool_call>` and `</tool_call>` where the
    tokenizer has them as tokens of their own (Qwen's do): llguidance matches such added tokens by id, not by text."""
    import llguidance

    from .structured import ResponseFormat

    check_parameters(tools)
    offered = tools if choice in TOOL_CHOICES else tuple(t for t in tools if t.name == choice)
    opening, closing = (f"<[{tag_ids[0]}]>", f"<[{tag_ids[1]}]>") if tag_ids else (_literal(CALL_OPEN), _literal(CALL_CLOSE))
    block = f'{opening} "\\n" call {closing}'
    calls = f'{block} ("\\n" {block})*' if parallel and choice in ("auto", "required") else block
    rules = [f"start: {'calls | text' if choice == 'auto' else 'calls'}", f"calls: {calls}",
             "call: " + " | ".join(f"f{i}" for i in range(len(offered)))]
    for index, tool in enumerate(offered):
        rules += _function_rules(index, tool)
    if choice == "auto":
        rules.append("text: /[^<][\\s\\S]*/")
    try:
        grammar = llguidance.LLMatcher.grammar_from_lark("\n".join(rules) + "\n")
        error = llguidance.LLMatcher.validate_grammar(grammar)
    except (ValueError, TypeError, RuntimeError) as exc:
        error = str(exc)
    if error:
        raise SettingsError(f"tools: a function's parameters cannot be used as a JSON schema ({_first_line(error)})")
    return ResponseFormat("tool_calls", grammar, None)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:200] if text.strip() else "unknown reason"
