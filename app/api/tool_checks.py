"""A chat request's tools and tool messages, checked when the request arrives (before anything queues).

- Every tool's schema, whatever `tool_choice` says (even "auto" or "none"): it must compile as a JSON schema,
  name only parameters it has as `required`, and give a call grammar in Qwen3.5's call form; a 400 names
  `tools[i]`.
- Tool messages matched to calls as OpenAI does: every earlier call has an id, unique in the conversation, and a
  function name that is a name (no markup); the calls of an assistant turn are answered by the tool messages
  right after it, each naming one of those calls by `tool_call_id`, once. Ids never reach the prompt (Qwen's
  template writes none) and names are checked, so neither can become markup.
"""

from __future__ import annotations

import json

from decider.engine.core.errors import SettingsError
from decider.engine.constrained.tool_format import PARAMETER_NAME
from decider.engine.constrained.tool_grammar import check_parameters, tool_grammar
from decider.engine.constrained.tools import FUNCTION_NAME, Tool

from .errors import field_error


def check_tool_schemas(tools: tuple[Tool, ...]) -> None:
    """Each tool on its own, so the error names it."""
    import llguidance

    for index, tool in enumerate(tools):
        param = f"tools[{index}]"
        parameters = tool.parameters
        properties = parameters.get("properties", {})
        required = parameters.get("required", [])
        try:
            if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
                raise SettingsError("parameters.required must be a list of parameter names")
            missing = [r for r in required if not isinstance(properties, dict) or r not in properties]
            if missing:
                raise SettingsError(f"parameters.required names {missing[0]!r:.70}, which is not in its properties")
            check_parameters((tool,))
            grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(parameters))
            error = llguidance.LLMatcher.validate_grammar(grammar)
            if error:
                raise SettingsError(f"parameters cannot be used as a JSON schema ({error.strip().splitlines()[0][:200]})")
            tool_grammar((tool,), tool.name, False)
        except (SettingsError, ValueError, TypeError) as exc:
            text = str(exc).removeprefix("tools: ")
            raise field_error("invalid_value", f"{param} ({tool.name}): {text}", param) from None


def check_tool_messages(messages: list) -> None:
    """ChatMessage list: calls with ids and names, each answered once by the tool messages right after it."""
    seen: set[str] = set()
    pending: dict[str, int] = {}  # call id → the index of the assistant message that made it
    answered: set[str] = set()
    for index, message in enumerate(messages):
        if message.role == "tool":
            _check_result(index, message, pending, answered)
            continue
        _unanswered(pending)
        pending, answered = {}, set()
        for position, call in enumerate(message.tool_calls):
            where = f"messages[{index}].tool_calls[{position}]"
            if not call.id:
                raise field_error("invalid_value", f"{where}.id is missing: a tool message answers a call by its id", f"{where}.id")
            if call.id in seen:
                raise field_error("invalid_value", f"{where}.id {call.id!r:.70} is used by an earlier call", f"{where}.id")
            if not FUNCTION_NAME.fullmatch(call.name):
                raise field_error("invalid_value", f"{where}.function.name {call.name!r:.70} must be 1-64 letters, digits, _ . or -",
                                  f"{where}.function.name")
            bad = next((k for k in json.loads(call.arguments) if not PARAMETER_NAME.fullmatch(k)), None)
            if bad is not None:
                raise field_error("invalid_value", f"{where}.function.arguments: parameter name {bad!r:.70} must be 1-128 "
                                  "characters without <, > or a newline", f"{where}.function.arguments")
            seen.add(call.id)
            pending[call.id] = index
    _unanswered(pending)


def _check_result(index: int, message, pending: dict[str, int], answered: set[str]) -> None:
    where = f"messages[{index}].tool_call_id"
    if not message.tool_call_id:
        raise field_error("invalid_value", f"{where} is missing: a tool message names the call it answers", where)
    if message.tool_call_id in answered:
        raise field_error("invalid_value", f"{where}: call {message.tool_call_id!r:.70} already has a result", where)
    if message.tool_call_id not in pending:
        raise field_error("invalid_value", f"{where}: {message.tool_call_id!r:.70} is not a call of the assistant message "
                          "just before", where)
    answered.add(message.tool_call_id)
    del pending[message.tool_call_id]


def _unanswered(pending: dict[str, int]) -> None:
    if pending:
        made = next(iter(pending.values()))
        raise field_error("invalid_value", f"messages[{made}] made calls with no tool message answering them "
                          f"({', '.join(repr(i)[:40] for i in pending)}): each call needs its result right after it",
                          f"messages[{made}].tool_calls")
