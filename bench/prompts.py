"""The benchmark's prompts, as token ids every engine receives identically.

Decision prompts are built by Decider's own `build_decision_prompt` from a question padded with real
text until the whole prompt (template, options, empty think block) is exactly N tokens.
"""

from __future__ import annotations

from pathlib import Path

from .common import CONTEXT_TOKENS, LENGTHS, OPTIONS, THINK_TOKENS, write_json
from .text import QUESTIONS, words

ASK = "Given all of this, what should the convoy do this season?"


def _filler(count: int) -> str:
    pool = words()
    return " ".join(pool[i % len(pool)] for i in range(count))


def _fit(measure, target: int) -> tuple[str, int]:
    """The text (filler + tail) whose measure(text) is exactly target tokens (pads with one-token words)."""
    low, high = 0, 4 * target
    while low < high:  # largest filler word count that stays within the target
        mid = (low + high + 1) // 2
        if measure(_filler(mid)) <= target:
            low = mid
        else:
            high = mid - 1
    text = _filler(low)
    for pad in (" so", " yes", " then", " now", " and"):
        trial = text
        while measure(trial) < target:
            trial += pad
        if measure(trial) == target:
            return trial, target
    return text, measure(text)


def build(tokenizer_json: Path, out: Path) -> dict:
    from decider.engine.decisions.prompt import build_decision_prompt
    from decider.engine.model.tokenizer import ChatTokenizer

    tok = ChatTokenizer(Path(tokenizer_json))
    options = list(OPTIONS)

    def decision_ids(question: str, **kw) -> list[int]:
        return build_decision_prompt(tok, question, options, **kw).ids

    prompts: dict = {"options": options, "decisions": {}, "questions": list(QUESTIONS)}
    for length in LENGTHS:
        base = len(decision_ids(ASK))
        body, got = _fit(lambda text: len(decision_ids(f"{text}\n\n{ASK}")) if text else base, length)
        question = f"{body}\n\n{ASK}" if body else ASK
        ids = decision_ids(question)
        prompts["decisions"][str(length)] = {"question": question, "ids": ids, "tokens": len(ids)}
    # the shared context of the warm/cold measurement: CONTEXT_TOKENS tokens of its own segment
    context, got = _fit(lambda text: len(tok.encode_text(text)), CONTEXT_TOKENS)
    prompts["context"] = {"text": context, "tokens": got}
    prompts["warm"] = [
        {"question": q, "tokens": len(decision_ids(q, context=context)),
         "shared": build_decision_prompt(tok, q, options, context=context).context_end}
        for q in QUESTIONS
    ]
    # the think generation: a 64-token decision prompt that opens a think block
    think_question = prompts["decisions"][str(LENGTHS[0])]["question"]
    prompts["think"] = {"ids": decision_ids(think_question, think=True), "max_tokens": THINK_TOKENS}
    letters = [tok.encode_text(label)[0] for label in "ABCDEFGHIJ"[: len(options)]]
    prompts["letters"] = letters
    prompts["vocab"] = tok.size  # ids past this are padding rows of the head
    write_json(out, prompts)
    return prompts
