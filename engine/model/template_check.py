"""The model folder's own chat template, held against Decider's built-in rendering (engine/model/chat_template.py).

Real checkpoints ship their template (`chat_template.jinja`, or `chat_template` in tokenizer_config.json). Decider
builds prompts from token ids itself, so at load it renders a small corpus of conversations — tools, calls, tool
results, several turns, thinking on and off, reasoning, images, system text — through the folder's template
the way transformers' `apply_chat_template` does (a sandboxed jinja2 with trim_blocks/lstrip_blocks, `tojson`
as json.dumps(ensure_ascii=False), `raise_exception`), tokenizes that text, and compares the ids. Any
conversation that differs is named in the engine's info and `decider doctor`: never silently assumed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from .chat_template import Message, build_chat_prompt
from .tokenizer import ChatTokenizer
from ..constrained.tools import Tool, ToolCall
from .vision_tokens import IMAGE_PAD, ImageToken, image_tokens

MAX_TEMPLATE_CHARS = 1 << 20


def folder_template(folder: Path) -> str | None:
    """The folder's chat template text: chat_template.jinja, else tokenizer_config.json's `chat_template`."""
    jinja = folder / "chat_template.jinja"
    try:
        if jinja.is_file() and jinja.stat().st_size <= MAX_TEMPLATE_CHARS:
            return jinja.read_text(encoding="utf-8")
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    template = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(template, list):  # the older list-of-named-templates form
        template = next((t.get("template") for t in template if isinstance(t, dict) and t.get("name") == "default"), None)
    return template if isinstance(template, str) else None


@lru_cache(maxsize=8)
def _compiled(template: str):
    """The template compiled once per text (compiling costs more than rendering the whole corpus)."""
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda value, **_: json.dumps(value, ensure_ascii=False)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template)


def render(template: str, messages: list[dict], tools: list[dict] | None, think: bool) -> str:
    """The template rendered as transformers' apply_chat_template renders it (add_generation_prompt)."""
    return _compiled(template).render(messages=messages, tools=tools, add_generation_prompt=True, enable_thinking=think)


def message_dict(message: Message) -> dict:
    """A Message as an OpenAI-style message dict for the template (images as {"type": "image"} parts)."""
    if isinstance(message.content, str):
        content: object = message.content
    else:
        content = [{"type": "text", "text": p} if isinstance(p, str) else {"type": "image"} for p in message.content]
    out: dict = {"role": message.role, "content": content}
    if message.reasoning is not None:
        out["reasoning_content"] = message.reasoning
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.loads(c.arguments)}}
                             for c in message.tool_calls]
    return out


@dataclass(frozen=True)
class Conversation:
    name: str
    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] = ()
    think: bool = False


_PIXELS = np.zeros((2, 2, 3), dtype=np.uint8)  # stands for a picture: `see` gives it one token
_WEATHER = Tool("get_weather", {"type": "object", "properties": {"city": {"type": "string", "description": "a city"},
                                                                  "days": {"type": "integer"}, "units": {"type": "string", "enum": ["C", "F"]}},
                                "required": ["city"]}, "Weather for a city — météo")
_MOVE = Tool("move", {"type": "object", "properties": {"to": {"type": "array", "items": {"type": "number"}},
                                                       "fast": {"type": "boolean"}, "plan": {"type": "object"}, "note": {"type": ["string", "null"]}}})
_CALL = ToolCall("get_weather", '{"city": "Paris", "days": 3}', "call_1")
_CALL_TYPED = ToolCall("move", '{"to": [1.5, -2], "fast": true, "plan": {"a": "b"}, "note": null}', "call_2")

CORPUS = (
    Conversation("user_only", (Message("user", "  Hi there  "),)),
    Conversation("system_think_on", (Message("system", "Be brief.\n"), Message("user", "Pick one.")), think=True),
    Conversation("several_turns", (Message("system", "S"), Message("user", "One?"), Message("assistant", "Yes."),
                                   Message("user", "Two?"))),
    Conversation("reasoning_before_query", (Message("user", "A?"), Message("assistant", "B.", reasoning="because"),
                                            Message("user", "C?")), think=True),
    Conversation("think_in_content", (Message("user", "A?"), Message("assistant", "<think>\nhm\n</think>\n\nB."), Message("user", "C?"))),
    Conversation("tools_no_system", (Message("user", "Weather in Paris?"),), (_WEATHER, _MOVE)),
    Conversation("tools_with_system", (Message("system", " You help. "), Message("user", "Weather?")), (_WEATHER,)),
    Conversation("call_and_result", (Message("user", "Weather in Paris?"), Message("assistant", "", (_CALL,)),
                                     Message("tool", "sunny, 21 C")), (_WEATHER,)),
    Conversation("content_calls_results", (
        Message("system", "Sys"), Message("user", "Go"),
        Message("assistant", "Let me check.", (_CALL, _CALL_TYPED), reasoning="two calls"),
        Message("tool", "sunny"), Message("tool", "moved"), Message("assistant", "Done."), Message("user", "Again?")),
        (_WEATHER, _MOVE), think=True),
    Conversation("result_after_reasoning", (Message("user", "Go"), Message("assistant", "", (_CALL_TYPED,), reasoning="plan"),
                                            Message("tool", "ok")), (_MOVE,), think=True),
    Conversation("image", (Message("user", ("Look: ", _PIXELS, " and this ", _PIXELS, " ?")),)),
    Conversation("image_with_tools", (Message("system", "Sys"), Message("user", (_PIXELS, "What is it?"))), (_WEATHER,)),
)


def _see(pixels: np.ndarray) -> list[ImageToken]:
    return image_tokens("corpus", 1, 1)


def decider_ids(tokenizer: ChatTokenizer, conversation: Conversation) -> list[int]:
    """Decider's prompt for a conversation, each image as the template writes it (one `<|image_pad|>`)."""
    items = build_chat_prompt(tokenizer, list(conversation.messages), conversation.think, see=_see, tools=conversation.tools).ids
    pad = tokenizer.special_id(IMAGE_PAD)
    return [pad if isinstance(item, ImageToken) else item for item in items]


def template_ids(tokenizer: ChatTokenizer, template: str, conversation: Conversation) -> list[int]:
    tools = [t.signature() for t in conversation.tools] or None
    text = render(template, [message_dict(m) for m in conversation.messages], tools, conversation.think)
    return tokenizer.encode_raw(text)


def template_differences(folder: Path, tokenizer: ChatTokenizer) -> list[str]:
    """The corpus conversations the folder's template renders to other ids than Decider (empty: none, or the
    folder has no template). A template that fails to render a conversation counts as different."""
    template = folder_template(folder)
    if template is None:
        return []
    try:
        import jinja2  # noqa: F401
    except ImportError:  # a dependency; without it nothing can be compared, and that is said
        return ["(jinja2 is not installed: not compared)"]
    different = []
    for conversation in CORPUS:
        try:
            same = template_ids(tokenizer, template, conversation) == decider_ids(tokenizer, conversation)
        except Exception:  # noqa: BLE001 — any template error (syntax, raise_exception, sandbox) is a difference
            same = False
        if not same:
            different.append(conversation.name)
    return different


def differences_note(names: list[str]) -> str | None:
    """One line for the engine's info and the doctor (None: the template agrees with Decider)."""
    if not names:
        return None
    return (f"the model folder's chat template renders {len(names)} of Decider's {len(CORPUS)} reference conversations "
            f"differently ({', '.join(names)}): Decider builds prompts in Qwen3.5's format, not this template's")
