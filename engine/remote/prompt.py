"""The decision prompt as text in Qwen's chat format, for servers that take a raw prompt (/v1/completions).

Rendering it here, not through the server's chat template, makes the prompt the one the local engine
builds (build_decision_prompt: the same text, token for token, under Qwen's tokenizer), and keeps the
think block under Decider's control: a server that ignores `chat_template_kwargs` can no longer leave
a think block open.
"""

from __future__ import annotations

from ..decisions.prompt import load_templates, user_segments
from ..model.reasoning_close import closing_text

IM_START, IM_END, THINK_OPEN, THINK_CLOSE = "<|im_start|>", "<|im_end|>", "<think>", "</think>"


def decision_text(question: str, options: list[str], *, system: str | None = None, context: str | None = None,
                  think: bool = False) -> str:
    text = f"{IM_START}system\n{system}{IM_END}\n" if system else ""
    text += f"{IM_START}user\n" + "".join(user_segments(question, options, context, False, load_templates())) + f"{IM_END}\n"
    text += f"{IM_START}assistant\n{THINK_OPEN}\n"
    return text if think else text + f"\n{THINK_CLOSE}\n\n"


def after_reasoning(reasoning: str, closed_by_model: bool) -> str:
    """What follows the open think block once the server has reasoned: the model's own close, or the chat
    template's when the budget ran out, as the local engine closes it (engine/model/reasoning_close.py)."""
    return closing_text(reasoning, closed_by_model)
