"""Tool calls in Qwen's format, constrained by a grammar, with the exact probability of each call.

Qwen3.5's template offers functions in the system turn (`# Tools` … `<tools>` one JSON signature a line
`</tools>`) and the model calls one as `<tool_call>\\n{"name": …, "arguments": {…}}\\n</tool_call>`; results come
back as `<tool_response>` blocks in a user turn. Here the call is constrained through llguidance (the grammar
engine already behind response_format): the name is one of the offered functions and the arguments are valid
under that function's JSON schema, whatever the model would rather have written.

Beyond other servers, a result says how sure the model was of each call (`tool_choice_probabilities`): at the
position where the answer starts, the exact full-vocabulary probability that the model starts a tool call at
all, and for each function the probability of the canonical token path `<tool_call>\\n{"name": "NAME"` — the
product of each token's probability given the ones before it, every factor `logit − logsumexp(logits)` over
the real vocabulary from one forward, as the option bars are. Penalties count drawn tokens only and none has
been drawn at these positions, so they do not change these numbers. The functions' probabilities need not add
up to the call's: the rest is mass on paths no offered name takes (other spellings, other names).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

import numpy as np

from .errors import SettingsError

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
# The separators of the template's `tojson`: the constrained call is written the way the model saw calls.
_TEMPLATE_JSON = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
MAX_TOOLS = 128
TOOL_CHOICES = ("none", "auto", "required")


@dataclass(frozen=True)
class Tool:
    name: str
    parameters: dict
    description: str | None = None
    strict: bool = False

    def signature(self) -> dict:
        """The OpenAI tool object, as the template renders it into the system turn."""
        function: dict = {"name": self.name}
        if self.description is not None:
            function["description"] = self.description
        function["parameters"] = self.parameters
        return {"type": "function", "function": function}


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # a JSON object, as text
    id: str = ""

    def to_openai(self) -> dict:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def tools_system_text(tools: tuple[Tool, ...], system: str | None) -> str:
    """The system turn's text when functions are offered (Qwen's wording)."""
    lines = [f"{system}\n\n" if system else "", "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n",
             "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"]
    lines += ["\n" + json.dumps(tool.signature(), ensure_ascii=False) for tool in tools]
    lines.append("\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
                 "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")
    return "".join(lines)


def call_text(call: ToolCall) -> str:
    """An earlier call as the template renders it in an assistant turn."""
    return f'{CALL_OPEN}\n{{"name": {json.dumps(call.name, ensure_ascii=False)}, "arguments": {call.arguments}}}\n{CALL_CLOSE}'


def _call_schema(tools: tuple[Tool, ...]) -> dict:
    variants = [
        {"type": "object", "properties": {"name": {"const": t.name}, "arguments": t.parameters or {"type": "object"}},
         "required": ["name", "arguments"], "additionalProperties": False}
        for t in tools
    ]
    schema = variants[0] if len(variants) == 1 else {"anyOf": variants}
    return {**schema, "x-guidance": _TEMPLATE_JSON}


def tool_grammar(tools: tuple[Tool, ...], choice: str, parallel: bool = True, tag_ids: tuple[int, int] | None = None):
    """The grammar of the answer: "required" (one call or more), a function's name (that one, once), or "auto"
    (a call, or text that does not start one). Refused here, at request time, when llguidance cannot compile it.
    tag_ids: the ids of `<tool_call>` and `</tool_call>` where the tokenizer has them as tokens of their own (Qwen's
    do): llguidance matches such added tokens by id, not by their text."""
    import llguidance

    from .structured import ResponseFormat

    offered = tools if choice in TOOL_CHOICES else tuple(t for t in tools if t.name == choice)
    opening, closing = (f"<[{tag_ids[0]}]>", f"<[{tag_ids[1]}]>") if tag_ids else (f'"{CALL_OPEN}"', f'"{CALL_CLOSE}"')
    block = f'{opening} "\\n" call "\\n" {closing}'
    calls = f"{block} (\"\\n\" {block})*" if parallel and choice in ("auto", "required") else block
    lark = f"start: {'calls | text' if choice == 'auto' else 'calls'}\ncalls: {calls}\ncall: %json {json.dumps(_call_schema(offered))}\n"
    if choice == "auto":
        lark += "text: /[^<][\\s\\S]*/\n"
    try:
        grammar = llguidance.LLMatcher.grammar_from_lark(lark)
        error = llguidance.LLMatcher.validate_grammar(grammar)
    except (ValueError, TypeError, RuntimeError) as exc:
        error = str(exc)
    if error:
        raise SettingsError(f"tools: a function's parameters cannot be used as a JSON schema ({_first_line(error)})")
    return ResponseFormat("tool_calls", grammar, None)


def tag_ids(tokenizer) -> tuple[int, int] | None:
    """The tokenizer's own ids for `<tool_call>`/`</tool_call>`, when it has them as single tokens."""
    ids = [tokenizer.encode_text(tag) for tag in (CALL_OPEN, CALL_CLOSE)]
    return (ids[0][0], ids[1][0]) if all(len(i) == 1 for i in ids) else None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:200] if text.strip() else "unknown reason"


_CALL = re.compile(re.escape(CALL_OPEN) + r"\s*(\{.*?\})\s*" + re.escape(CALL_CLOSE), re.S)


def parse_tool_calls(text: str) -> tuple[str | None, list[ToolCall]]:
    """(content, calls) of an answer: the calls it makes (the grammar guarantees their shape), else the text."""
    if not text.lstrip().startswith(CALL_OPEN):
        return text, []
    calls = []
    for body in _CALL.findall(text):
        value = json.loads(body)
        arguments = json.dumps(value["arguments"], ensure_ascii=False)
        calls.append(ToolCall(value["name"], arguments, f"call_{uuid.uuid4().hex[:24]}"))
    return (None, calls) if calls else (text, [])


def _logprob(logits: np.ndarray, token: int) -> float:
    shifted = logits - logits.max()
    return float(shifted[token] - np.log(np.exp(shifted).sum()))


def choice_probabilities(runner, prompt_ids: list, tools: tuple[Tool, ...]) -> dict:
    """The exact probabilities, at the answer's first position, of starting a call and of each function's name
    path (see the module's doc). Runs forwards on `runner` (snapshots at the prompt's end and where the paths
    part, so each extra token costs one step); the caller holds its lock."""
    tokenizer = runner.tokenizer
    prompt = list(prompt_ids)
    paths = {t.name: tokenizer.encode_text(f'{CALL_OPEN}\n{{"name": {json.dumps(t.name, ensure_ascii=False)}') for t in tools}
    logits_after: dict[tuple, np.ndarray] = {}

    def next_logits(prefix: list[int]) -> np.ndarray:
        key = tuple(prefix)
        if key not in logits_after:
            logits_after[key] = runner.prefill(prompt + prefix, checkpoints=[len(prompt)])
        return logits_after[key]

    first = tokenizer.encode_text(CALL_OPEN)[0]
    call = float(np.exp(_logprob(next_logits([]), first)))
    functions = {}
    for name, path in paths.items():
        functions[name] = float(np.exp(sum(_logprob(next_logits(path[:i]), path[i]) for i in range(len(path)))))
    return {"answer": 1.0 - call, "call": call, "functions": functions,
            "definition": "full-vocabulary probability at the answer's first position; a function: its canonical "
                          "token path '<tool_call>\\n{\"name\": \"NAME\"'"}


def check_tools(tools: tuple[Tool, ...]) -> tuple[Tool, ...]:
    if not tools or len(tools) > MAX_TOOLS:
        raise SettingsError(f"tools takes 1 to {MAX_TOOLS} functions")
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise SettingsError("tools: function names must be unique")
    for name in names:
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name):
            raise SettingsError(f"tools: function name {name!r:.70} must be 1-64 letters, digits, _ . or -")
    return tools


TOOLS_SHAPE = 'a list of {"type": "function", "function": {"name": ..., "description": ..., "parameters": {...}}}'


def tools_from_openai(value: object) -> tuple[Tool, ...]:
    """OpenAI's `tools` list (a file's too: a single tool object or a bare function is accepted there), checked."""
    if isinstance(value, dict):
        value = [value if value.get("type") == "function" else {"type": "function", "function": value}]
    if not isinstance(value, list):
        raise SettingsError(f"tools must be {TOOLS_SHAPE}")
    tools = []
    for index, item in enumerate(value):
        function = item.get("function") if isinstance(item, dict) and item.get("type") == "function" else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or set(item) - {"type", "function"}:
            raise SettingsError(f"tools[{index}] must be {TOOLS_SHAPE[10:]}")
        unknown = sorted(set(function) - {"name", "description", "parameters", "strict"})
        if unknown:
            raise SettingsError(f"tools[{index}].function.{unknown[0]} is not supported")
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        description = function.get("description")
        if not isinstance(parameters, dict) or not (description is None or isinstance(description, str)):
            raise SettingsError(f"tools[{index}].function: parameters must be a JSON schema object, description a string")
        tools.append(Tool(function["name"], parameters, description, function.get("strict") is True))
    return check_tools(tuple(tools))
