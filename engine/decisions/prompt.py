"""Decision prompts: the wording lives in prompts/decision.txt; this builds token ids from it.

The shared context is encoded as its own segment, so its tokens are the same whatever question
follows, and the state after it can be snapshotted and reused by the next decision.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ..model.chat_template import think_block
from ..core.errors import SettingsError
from ..model.tokenizer import ChatTokenizer
from ..model.vision_tokens import ImageToken, Item, image_block

from .types import LABELS  # noqa: E402 (one alphabet for prompts and results)
_SECTION = re.compile(r"^\[(\w+)\]\s*$")


@lru_cache(maxsize=4)
def load_templates(path: str | None = None) -> dict[str, str]:
    text = Path(path).read_text(encoding="utf-8") if path else resources.files("decider.engine.decisions").joinpath("prompts/decision.txt").read_text(encoding="utf-8")
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = _SECTION.match(line)
        if match:
            current = sections.setdefault(match.group(1), [])
        elif current is not None:
            current.append(line)
    templates = {name: "\n".join(lines).strip("\n") for name, lines in sections.items()}
    missing = {"context", "option", "letters", "words", "word_option"} - templates.keys()
    if missing:
        raise SettingsError(f"decision prompt file lacks section(s): {', '.join(sorted(missing))}")
    return templates


@dataclass(frozen=True)
class DecisionPrompt:
    ids: list[Item]
    checkpoints: tuple[int, ...]  # after the system message + context, and the prompt's end
    context_end: int  # tokens that a decision with the same system prompt and context shares


def render_user_text(question: str, options: list[str], words: bool, templates: dict[str, str]) -> str:
    if words:
        lines = [templates["word_option"].format(text=text) for text in options]
    else:
        lines = [templates["option"].format(label=LABELS[i], text=text) for i, text in enumerate(options)]
    return templates["words" if words else "letters"].format(question=question, options="\n".join(lines))


def user_segments(question: str, options: list[str], context: str | None, words: bool, templates: dict[str, str]) -> list[str]:
    """The user turn's text: the shared context (if any) as its own segment, then the question."""
    segments = [templates["context"].format(context=context) + "\n\n"] if context else []
    return segments + [render_user_text(question, options, words, templates)]


def build_decision_prompt(
    tokenizer: ChatTokenizer,
    question: str,
    options: list[str],
    *,
    system: str | None = None,
    context: str | None = None,
    think: bool = False,
    words: bool = False,
    templates: dict[str, str] | None = None,
    images: Sequence[Sequence[ImageToken]] = (),
) -> DecisionPrompt:
    """images: each image's tokens (runner.image_tokens), shown first in the user turn, then the context:
    both are what the next decision about the same screen shares."""
    templates = templates or load_templates()
    ids: list[Item] = []
    if system:
        ids += [tokenizer.im_start, *tokenizer.encode_text(f"system\n{system}"), tokenizer.im_end, *tokenizer.encode_text("\n")]
    ids += [tokenizer.im_start, *tokenizer.encode_text("user\n")]
    for tokens in images:
        ids += image_block(tokenizer, tokens)
    *shared, question_text = user_segments(question, options, context, words, templates)
    for segment in shared:
        ids += tokenizer.encode_text(segment)
    context_end = len(ids)
    ids += tokenizer.encode_text(question_text)
    ids += [tokenizer.im_end, *tokenizer.encode_text("\n"), tokenizer.im_start, *tokenizer.encode_text("assistant\n")]
    ids += think_block(tokenizer, think)
    # A snapshot after a shared system prompt/context/screenshot pays off; after "<|im_start|>user\n" it would not.
    checkpoints = (context_end, len(ids)) if system or context or images else (len(ids),)
    return DecisionPrompt(ids=ids, checkpoints=checkpoints, context_end=context_end)


def letter_ids(tokenizer: ChatTokenizer, count: int) -> list[int]:
    """The token each label is written as at the answer position (right after the prompt)."""
    ids = []
    for label in LABELS[:count]:
        encoded = tokenizer.encode_text(label)
        if len(encoded) != 1:
            raise SettingsError(f"the tokenizer writes option label {label!r} as {len(encoded)} tokens; cannot constrain to it")
        ids.append(encoded[0])
    if len(set(ids)) != len(ids):
        raise SettingsError("option labels share a token; cannot tell them apart")
    return ids
