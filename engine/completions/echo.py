"""A prompt echoed back with its tokens (OpenAI `echo`): their text, where each starts, their logprobs.

The logprobs come from `engine/runners/scoring.py` (one all-position pass; the first token has none, nothing
precedes it). A prompt token's alternatives always include the token itself, as vLLM's prompt logprobs
do: a client such as lm-evaluation-harness tells whether a continuation is the greedy one by comparing a
token's logprob with the largest value of its alternatives, which must then be the same float.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.logprobs import Alternative

if TYPE_CHECKING:  # scoring imports openvino; the shapes here stay importable without it
    from ..runners.scoring import PromptScores


@dataclass(frozen=True)
class PromptToken:
    token_id: int
    token: str
    logprob: float | None  # None for the first token
    top: tuple[Alternative, ...]  # the top-N alternatives and the token itself (empty for the first token)
    text_offset: int  # where its text starts in the echoed prompt


@dataclass(frozen=True)
class EchoedPrompt:
    text: str
    tokens: list[PromptToken]


def echo_prompt(tokenizer, ids: Sequence[int], scores: PromptScores | None, text: str | None = None) -> EchoedPrompt:
    """The prompt's text (`text` when the client sent text, else the decoded ids) and its tokens;
    `scores` None: text and offsets only."""
    stream = tokenizer.stream()
    tokens: list[PromptToken] = []
    offset = 0
    for position, token_id in enumerate(ids):
        logprob: float | None = None
        top: tuple[Alternative, ...] = ()
        if scores is not None and position > 0:
            entry = scores.entries[position - 1]
            logprob = entry.logprob
            listed = {a.token_id: a.logprob for a in entry.top}
            listed.setdefault(entry.token_id, entry.logprob)
            top = tuple(
                Alternative(token=tokenizer.token_text(i), token_id=i, logprob=lp, bytes=tokenizer.token_bytes(i))
                for i, lp in listed.items()
            )
        tokens.append(PromptToken(token_id, tokenizer.token_text(token_id), logprob, top, offset))
        offset += len(stream.push(token_id))
    decoded_length = offset + len(stream.flush())
    if text is None:
        text = tokenizer.decode(list(ids))
    # Offsets count decoded characters; clamp them to the text the client sees (a normaliser may differ).
    if decoded_length != len(text):
        tokens = [PromptToken(t.token_id, t.token, t.logprob, t.top, min(t.text_offset, len(text))) for t in tokens]
    return EchoedPrompt(text, tokens)
