"""The Qwen3.5 chat template, built from token ids.

Rendered as HF's template would render it, then encoded segment by segment: special tokens become
their ids and the text between them is encoded as plain text, which is exactly how a tokenizer splits
a rendered template, except that user text can never smuggle in a special token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..core.errors import SettingsError
from .tokenizer import ChatTokenizer
from ..constrained.tool_format import calls_text, tools_system_text
from ..constrained.tools import Tool, ToolCall
from .vision_tokens import ImageToken, Item, image_block

ROLES = ("system", "user", "assistant", "tool")


# A message's content: text, or parts in order, each text, one image's tokens (from the runner) or one
# image's pixels ([H, W, 3] uint8, made into tokens by build_chat_prompt's `see`).
Part = str | tuple[ImageToken, ...] | np.ndarray


@dataclass(frozen=True)
class Message:
    role: str
    content: str | tuple[Part, ...]
    tool_calls: tuple[ToolCall, ...] = ()  # an assistant turn's calls (rendered after its text)
    reasoning: str | None = None  # an assistant turn's reasoning (`reasoning_content`), kept after the last user query

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise SettingsError(f"message role must be one of {', '.join(ROLES)} (got {self.role!r})")
        if isinstance(self.content, str):
            return
        if not isinstance(self.content, tuple) or not all(_is_part(p) for p in self.content):
            raise SettingsError("message content must be a string or a sequence of text and image parts")

    @property
    def parts(self) -> tuple[Part, ...]:
        return (self.content,) if isinstance(self.content, str) else self.content


def _is_part(part) -> bool:
    return isinstance(part, (str, np.ndarray)) or (isinstance(part, tuple) and bool(part) and all(isinstance(t, ImageToken) for t in part))


@dataclass(frozen=True)
class ChatPrompt:
    ids: list[Item]
    # Prefix length just before the generation prompt's think block: the state here is what the next
    # turn of a conversation (or the same request again) shares, so the runner keeps a snapshot here.
    checkpoint: int


def validate_messages(messages: list[Message]) -> None:
    if not messages:
        raise SettingsError("messages must not be empty")
    if any(m.role == "system" for m in messages[1:]):
        raise SettingsError("a system message may only come first")
    if messages[-1].role not in ("user", "tool"):
        raise SettingsError("the last message must be from the user (or a tool's result)")
    if any(m.tool_calls and m.role != "assistant" for m in messages):
        raise SettingsError("only assistant messages carry tool calls")
    if messages[0].role == "system" and not all(isinstance(p, str) for p in messages[0].parts):
        raise SettingsError("a system message cannot hold images")
    if _last_query(messages) is None:
        raise SettingsError("the conversation has no user message (only tool results)")


def _last_query(messages: list[Message]) -> int | None:
    """The last user message that is not a tool result written by hand (the template's last_query_index)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role != "user":
            continue
        text = "".join(p for p in trimmed(message.parts) if isinstance(p, str)) if all(isinstance(p, str) for p in message.parts) else "<"
        if not (text.startswith("<tool_response>") and text.endswith("</tool_response>")):
            return index
    return None


def trimmed(parts: tuple[Part, ...]) -> list[Part]:
    """The template's `render_content(...)|trim`: whitespace off both ends of the rendered content (images are
    markup, never whitespace, so the trim stops at one)."""
    out = list(parts)
    while out and isinstance(out[0], str) and not out[0].strip():
        out.pop(0)
    if out and isinstance(out[0], str):
        out[0] = out[0].lstrip()
    while out and isinstance(out[-1], str) and not out[-1].strip():
        out.pop()
    if out and isinstance(out[-1], str):
        out[-1] = out[-1].rstrip()
    return out


def build_chat_prompt(
    tokenizer: ChatTokenizer, messages: list[Message], think: bool, see: Callable[[np.ndarray], Sequence[ImageToken]] | None = None,
    tools: tuple[Tool, ...] = (),
) -> ChatPrompt:
    """As Qwen3.5's chat template renders the conversation (engine/constrained/tool_format.py for the tools' parts).
    see: an image's pixels → its tokens (runner.image_tokens); without it a message with pixels is refused.
    tools: functions offered in the system turn (engine/constrained/tools.py)."""
    validate_messages(messages)
    last_query = _last_query(messages)
    ids: list[Item] = []
    system = messages[0] if messages[0].role == "system" else None
    if tools or system:
        text = "".join(p for p in trimmed(system.parts) if isinstance(p, str)) if system else None
        ids += _turn(tokenizer, "system\n", (tools_system_text(tools, text) if tools else text or "",))
    for index, message in enumerate(messages):
        if message.role == "tool":
            if index and messages[index - 1].role == "tool":
                continue  # rendered with the first of its run
            # A run of tool results is one user turn, each in <tool_response> tags: one text, as a tokenizer splits it.
            run: list[Part] = []
            for result in messages[index:]:
                if result.role != "tool":
                    break
                run += ["\n<tool_response>\n", *(_seen(p, see) for p in trimmed(result.parts)), "\n</tool_response>"]
            ids += _turn(tokenizer, "user", tuple(run))
        elif message.role == "user":
            ids += _turn(tokenizer, "user\n", tuple(_seen(p, see) for p in trimmed(message.parts)))
        elif message.role == "assistant":
            ids += _turn(tokenizer, "assistant\n", _assistant_parts(message, see, last_query is not None and index > last_query))
    ids.append(tokenizer.im_start)
    ids += tokenizer.encode_text("assistant\n")
    checkpoint = len(ids)
    ids += think_block(tokenizer, think)
    return ChatPrompt(ids=ids, checkpoint=checkpoint)


def _turn(tokenizer: ChatTokenizer, lead: str, parts: tuple[Part, ...]) -> list[Item]:
    return [tokenizer.im_start, *encode_parts(tokenizer, lead, parts), tokenizer.im_end, *tokenizer.encode_text("\n")]


def _assistant_parts(message: Message, see, keeps_reasoning: bool) -> tuple[Part, ...]:
    """An assistant turn's content, its reasoning (kept only after the last user query) and its calls."""
    parts = [_seen(p, see) for p in trimmed(message.parts)]
    reasoning = message.reasoning
    if all(isinstance(p, str) for p in parts):
        content = "".join(p for p in parts if isinstance(p, str))
        if reasoning is None and "</think>" in content:  # the reasoning written into the content, as the template splits it
            reasoning = content.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
            content = content.split("</think>")[-1].lstrip("\n")
        parts = [content]
    lead = f"<think>\n{(reasoning or '').strip()}\n</think>\n\n" if keeps_reasoning else ""
    shown = "".join(p if isinstance(p, str) else "<image>" for p in parts)  # an image is content, never blank
    return (lead, *parts, calls_text(shown, message.tool_calls))


def _seen(part: Part, see) -> Part:
    if not isinstance(part, np.ndarray):
        return part
    if see is None:
        raise SettingsError("this conversation has an image, and nothing here can see it")
    return tuple(see(part))


def encode_parts(tokenizer: ChatTokenizer, lead: str, parts: tuple[Part, ...]) -> list[Item]:
    """Text parts encoded between the image blocks, as a tokenizer splits a rendered template at special
    tokens: the text run up to an image is one segment (so `lead` joins the first text part)."""
    ids: list[Item] = []
    text = lead
    for part in parts:
        if isinstance(part, str):
            text += part
            continue
        if isinstance(part, np.ndarray):  # pixels: `see` turns a picture into its image tokens before this
            raise TypeError("encode_parts takes image tokens, not pixels")
        if text:
            ids += tokenizer.encode_text(text)
        ids += image_block(tokenizer, part)
        text = ""
    if text:
        ids += tokenizer.encode_text(text)
    return ids


def think_block(tokenizer: ChatTokenizer, think: bool) -> list[int]:
    """The start of the assistant turn: an open think block, or an empty closed one."""
    if tokenizer.think_open is None or tokenizer.think_close is None:
        return []
    if think:
        return [tokenizer.think_open] + tokenizer.encode_text("\n")
    return [tokenizer.think_open] + tokenizer.encode_text("\n\n") + [tokenizer.think_close] + tokenizer.encode_text("\n\n")


def close_think(tokenizer: ChatTokenizer) -> list[int]:
    """The close's own ids ("\n", </think>, "\n\n"). Decisions close a reasoning through
    engine/model/reasoning_close.py instead, which encodes the reasoning and the close together as the tokenizer
    would (a reasoning ending in "\n" must not be followed by a second "\n" token)."""
    return tokenizer.encode_text("\n") + [tokenizer.think_close] + tokenizer.encode_text("\n\n")
