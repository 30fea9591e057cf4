"""The demo model's tokenizer: a byte-level BPE (Qwen's pre-tokenizer regex, Qwen's special tokens) whose
merges are learnt from the engine's own decision prompts, so every word of the demo tasks -- each lexicon
word in both casings of its first letter, each letter label, each word of the template -- is exactly one
token, and any other text still
encodes (byte fallback through the 256 byte symbols).

No torch: needs tokenizers and the engine (for the prompt wording). Used by tools/train_demo.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
for p in (str(ROOT), str(TOOLS)):
    if p not in sys.path:
        sys.path.insert(0, p)

import demo_tasks  # noqa: E402
from decider.engine.decisions.prompt import LABELS, load_templates, render_user_text  # noqa: E402
from modelkit.tokenizer_files import byte_level_bpe, write_tokenizer_files  # noqa: E402


def corpus() -> list[str]:
    """Every prompt shape the tasks produce, once per word in every slot (order does not matter to BPE)."""
    templates = load_templates()
    lines = ["system\n", "user\n", "assistant\n", "\n", "\n\n"]
    base = list(demo_tasks.ACTIONS) + [w for c in sorted(demo_tasks.CATEGORIES) for w in demo_tasks.CATEGORIES[c]]
    words = [v for w in base for v in demo_tasks.variants(w)]
    questions = [demo_tasks.RETRIEVAL_QUESTION.format(x=w) for a in demo_tasks.ACTIONS for w in demo_tasks.variants(a)]
    questions += [demo_tasks.CATEGORY_QUESTIONS[c] for c in sorted(demo_tasks.CATEGORIES)]
    for i, question in enumerate(questions):
        options = [words[(i + k) % len(words)] for k in range(4)]
        lines.append(render_user_text(question, options, False, templates))
    for i in range(0, len(words), 3):
        options = [words[(i + k) % len(words)] for k in range(3)]
        lines.append(render_user_text(questions[i % len(questions)], options, False, templates))
    for n in range(2, len(LABELS) + 1):  # every label, in its option-line context
        lines.append(render_user_text(questions[0], words[:n], False, templates))
    lines += [f"{label}" for label in LABELS]
    return lines


def build():
    # vocab_size is never reached: training stops once every pre-token is one token
    tok = byte_level_bpe(corpus(), vocab_size=100_000, min_frequency=1)
    check(tok)
    return tok


def check(tok) -> None:
    """Every task word (with its leading space, as it appears in prompts) and every label is one token."""
    words = list(demo_tasks.ACTIONS) + [w for c in demo_tasks.CATEGORIES.values() for w in c]
    for w in [v for w in words for v in demo_tasks.variants(w)]:
        ids = tok.encode(" " + w, add_special_tokens=False).ids
        assert len(ids) == 1, f"{' ' + w!r} -> {ids}"
    for label in LABELS:
        assert len(tok.encode(label, add_special_tokens=False).ids) == 1, label
    for s in ("user", "assistant", "\n", "\n\n", "?\n\n", ":\n"):
        assert len(tok.encode(s, add_special_tokens=False).ids) == 1, repr(s)


def write(out: Path):
    tok = build()
    write_tokenizer_files(out, tok)
    return tok


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        t = write(Path(d))
        print("tokenizer size", t.get_vocab_size(), "regular", t.get_vocab_size(with_added_tokens=False))
        from decider.engine.decisions.prompt import build_decision_prompt
        from decider.engine.model.tokenizer import ChatTokenizer

        ct = ChatTokenizer(Path(d) / "tokenizer.json")
        p = build_decision_prompt(ct, demo_tasks.RETRIEVAL_QUESTION.format(x="Attack"), ["Defend", "Attack", "Hide", "Wait"])
        print(len(p.ids), [ct.token_text(i) for i in p.ids])
        p = build_decision_prompt(ct, "Which of these is an animal?", ["hammer", "dog"])
        print(len(p.ids), [ct.token_text(i) for i in p.ids])
