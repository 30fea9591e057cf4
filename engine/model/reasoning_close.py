"""Closing a think block after reasoning, one definition for the local engine (ids) and the remote one (text).

The answer is read after `<think>\\n` + reasoning + the close. The model's own words are kept as it wrote
them; what Decider writes is what Qwen's chat template writes after a reasoning: `\\n</think>\\n\\n`, after
the reasoning's trailing newlines (the template strips them). When the model closed the block itself, its
`</think>` is kept and only the blank line follows.

Both sides then score the sequence the tokenizer produces for that text, never a concatenation of ids
no tokenizer would produce: forcing the ids of "\\n" after a reasoning that already ended in "\\n" gave
`… "\\n", "\\n", </think>` locally while a server, handed the same text, scored `… "\\n\\n", </think>` (in Qwen3.5's
vocabulary " \\n" is one token too). The text between `<think>` and `</think>` is encoded as one
piece, as a tokenizer splits a rendered template at special tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

from .tokenizer import THINK_CLOSE, ChatTokenizer

ANSWER_START = "\n\n"  # the blank line between `</think>` and the answer


def closing_text(reasoning: str, closed_by_model: bool) -> str:
    """What follows the open think block (`<think>\\n`): the reasoning as generated, closed."""
    if closed_by_model:
        return f"{reasoning}{THINK_CLOSE}{ANSWER_START}"
    return f"{reasoning.rstrip(chr(10))}\n{THINK_CLOSE}{ANSWER_START}"


def close_reasoning(tokenizer: ChatTokenizer, prompt_ids: Sequence, body: Sequence[int], closed_by_model: bool) -> list:
    """The answer's prefix: `prompt_ids` (ending in `<think>` + "\n") + the reasoning `body` (the generated ids
    without the model's `</think>` or end of turn) closed as `closing_text` writes it, as the tokenizer
    encodes it. Ids the tokenizer would write differently (the reasoning's last token merged with the
    close's newline, a sampled split of a word) are re-encoded: the caller's runner re-prefills from where
    they differ. A reasoning that is not whole UTF-8 (a budget spent inside a character) has no text to
    encode: its ids are kept as generated and the close's ids follow them."""
    prompt_ids, body = list(prompt_ids), list(body)
    opened = [tokenizer.think_open, *tokenizer.encode_text("\n")]
    if tokenizer.think_close is None or prompt_ids[-len(opened):] != opened:
        raise ValueError("the prompt does not end in an open think block")
    close = [tokenizer.think_close, *tokenizer.encode_text(ANSWER_START)]
    try:
        reasoning = b"".join(tokenizer.token_bytes(t) for t in body).decode("utf-8")
    except UnicodeDecodeError:
        return prompt_ids + body + ([] if closed_by_model else tokenizer.encode_text("\n")) + close
    text = "\n" + closing_text(reasoning, closed_by_model)[: -len(THINK_CLOSE + ANSWER_START)]
    # raw: a special token the model wrote inside its reasoning stays that token, as on a server given the text
    return prompt_ids[: 1 - len(opened)] + tokenizer.encode_raw(text) + close
