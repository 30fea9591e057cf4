"""The demo model's tokenizer: a byte-level BPE (Qwen's pre-tokenizer regex, Qwen's special tokens) whose
merges are learnt from the engine's own decision prompts, so every word of the demo tasks -- each lexicon
word in both casings of its first letter, each letter label, each word of the template -- is exactly one
token, and any other text still
encodes (byte fallback through the 256 byte symbols).

No torch: needs tokenizers and the engine (for the prompt wording). Used by tools/train_demo.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
for p in (str(ROOT), str(TOOLS)):
    if p not in sys.path:
        sys.path.insert(0, p)

import demo_tasks  # noqa: E402
from decider.engine.decision_prompt import LABELS, load_templates, render_user_text  # noqa: E402
from make_fixtures import (  # noqa: E402  (the fixture tokenizer's specials, regex and chat template)
    ADDED_TOKENS,
    CHAT_TEMPLATE,
    QWEN_SPLIT_REGEX,
    special_tokens_map_dict,
    tokenizer_config_dict,
)

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


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
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=100_000,  # never reached: training stops once every pre-token is one token
        min_frequency=1,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    n_regular = tok.get_vocab_size(with_added_tokens=False)
    tok.add_tokens(
        [AddedToken(t, special=s, normalized=False, single_word=False, lstrip=False, rstrip=False) for t, s in ADDED_TOKENS]
    )
    for i, (t, _) in enumerate(ADDED_TOKENS):
        assert tok.token_to_id(t) == n_regular + i, t
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
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"), pretty=False)
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config_dict(tok), indent=2, ensure_ascii=False) + "\n")
    (out / "special_tokens_map.json").write_text(json.dumps(special_tokens_map_dict(), indent=2) + "\n")
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    return tok


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        t = write(Path(d))
        print("tokenizer size", t.get_vocab_size(), "regular", t.get_vocab_size(with_added_tokens=False))
        from decider.engine.decision_prompt import build_decision_prompt
        from decider.engine.tokenizer import ChatTokenizer

        ct = ChatTokenizer(Path(d) / "tokenizer.json")
        p = build_decision_prompt(ct, demo_tasks.RETRIEVAL_QUESTION.format(x="Attack"), ["Defend", "Attack", "Hide", "Wait"])
        print(len(p.ids), [ct.token_text(i) for i in p.ids])
        p = build_decision_prompt(ct, "Which of these is an animal?", ["hammer", "dog"])
        print(len(p.ids), [ct.token_text(i) for i in p.ids])
