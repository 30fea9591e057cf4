"""Tools offered to the model: the functions, earlier calls, the answer's calls, and the exact probability of each.

The wire format is Qwen3.5's (engine/constrained/tool_format.py: `<tool_call>\\n<function=NAME>\\n<parameter=KEY>…`), and a call
is constrained through llguidance (engine/constrained/tool_grammar.py, the grammar engine already behind response_format): the
name is one of the offered functions and every value follows its parameter's schema, whatever the model would
rather have written.

Beyond other servers, a result says how sure the model was of each call (`tool_choice_probabilities`): at the
position where the answer starts, the exact full-vocabulary probability that the model starts a tool call at
all, and for each function the probability of the canonical token path `<tool_call>\\n<function=NAME>` — the
product of each token's probability given the ones before it, every factor `logit − logsumexp(logits)` over
the real vocabulary from one forward, as the option bars are. Penalties count drawn tokens only and none has
been drawn at these positions, so they do not change these numbers. The functions' probabilities need not add
up to the call's: the rest is mass on paths no offered name takes (other spellings, other names).
"""

from __future__ import annotations

import re
import numpy as np

from ..core.errors import SettingsError
from .tool_format import CALL_CLOSE, CALL_OPEN, parse_calls
from .tool_types import Tool, ToolCall  # the names callers import from here

MAX_TOOLS = 128
FUNCTION_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # OpenAI's function names: never markup in the prompt
TOOL_CHOICES = ("none", "auto", "required")


def tag_ids(tokenizer) -> tuple[int, int] | None:
    """The tokenizer's own ids for `<tool_call>`/`</tool_call>`, when it has them as single tokens."""
    ids = [tokenizer.encode_text(tag) for tag in (CALL_OPEN, CALL_CLOSE)]
    return (ids[0][0], ids[1][0]) if all(len(i) == 1 for i in ids) else None


def parse_tool_calls(text: str, tools: tuple[Tool, ...] = ()) -> tuple[str | None, list[ToolCall]]:
    """(content, calls) of an answer: the calls it makes, else its text. An answer that opened a call is never
    content, even when max_tokens cut the call short (then it has the complete calls only, maybe none)."""
    if not text.lstrip().startswith(CALL_OPEN):
        return text, []
    return None, parse_calls(text, tools)


def _logprob(logits: np.ndarray, token: int) -> float:
    shifted = logits - logits.max()
    return float(shifted[token] - np.log(np.exp(shifted).sum()))


def function_path(tokenizer, name: str) -> list[int]:
    """A function's canonical token path: `<tool_call>\\n<function=NAME>` (the `>` ends the name: no prefix clash)."""
    return tokenizer.encode_text(f"{CALL_OPEN}\n<function={name}>")


def choice_probabilities(runner, prompt_ids: list, tools: tuple[Tool, ...]) -> dict:
    """The exact probabilities, at the answer's first position, of starting a call and of each function's name
    path (see the module's doc). Runs forwards on `runner` (snapshots at the prompt's end and where the paths
    part, so each extra token costs one step); the caller holds its lock."""
    tokenizer = runner.tokenizer
    prompt = list(prompt_ids)
    paths = {t.name: function_path(tokenizer, t.name) for t in tools}
    logits_after: dict[tuple, np.ndarray] = {}

    def next_logits(prefix: list[int]) -> np.ndarray:
        key = tuple(prefix)
        if key not in logits_after:
            logits_after[key] = runner.prefill(prompt + prefix, checkpoints=[len(prompt)])
        return logits_after[key]

    first = next(iter(paths.values()))[0]
    call = float(np.exp(_logprob(next_logits([]), first)))
    functions = {}
    for name, path in paths.items():
        functions[name] = float(np.exp(sum(_logprob(next_logits(path[:i]), path[i]) for i in range(len(path)))))
    return {"answer": 1.0 - call, "call": call, "functions": functions,
            "definition": "full-vocabulary probability at the answer's first position; a function: its canonical "
                          "token path '<tool_call>\\n<function=NAME>'"}


def check_tools(tools: tuple[Tool, ...]) -> tuple[Tool, ...]:
    if not tools or len(tools) > MAX_TOOLS:
        raise SettingsError(f"tools takes 1 to {MAX_TOOLS} functions")
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise SettingsError("tools: function names must be unique")
    for name in names:
        if not FUNCTION_NAME.fullmatch(name):
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
