"""The files of a Qwen3.5 tokenizer folder, as the fixtures (tools/make_fixtures.py), the demo models
(tools/demo_tokenizer.py, the trainers) and the benchmark models (bench/build.py) all write them: Qwen's
pre-tokenizer regex and added tokens, its chat template, a byte-level BPE trained on a corpus, and
tokenizer.json / tokenizer_config.json / special_tokens_map.json / chat_template.jinja.

Needs `tokenizers` only (no torch, no transformers).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")

QWEN_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# (content, special).  Order matters: ids are assigned right after the regular vocabulary in this order.
ADDED_TOKENS = [
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
]
# Real Qwen2.5/3/3.5 tokenizers mark <tool_call>, the fim/repo/file tokens and <tool_response> as special=False
# as well (only the <|...|> control tokens up to <|video_pad|> are special=True); <think>/</think> are special=False.

# Qwen3.5's chat template, reduced to what the fixtures need but keeping its observable behaviour for
# system / user / assistant / tool turns with string or text-part content: contents are trimmed, a system
# message must come first, past assistant turns after the last user query keep their <think> block, and the
# generation prompt opens `<think>\n` unless enable_thinking is false (then an empty, closed think block).
CHAT_TEMPLATE = r"""{%- macro render_content(content) %}
    {%- if content is string %}
        {{- content }}
    {%- elif content is iterable and content is not mapping %}
        {%- for item in content %}
            {%- if 'image' in item or 'image_url' in item or item.type == 'image' %}
                {{- '<|vision_start|><|image_pad|><|vision_end|>' }}
            {%- elif 'video' in item or item.type == 'video' %}
                {{- '<|vision_start|><|video_pad|><|vision_end|>' }}
            {%- elif 'text' in item %}
                {{- item.text }}
            {%- else %}
                {{- raise_exception('Unexpected item type in content.') }}
            {%- endif %}
        {%- endfor %}
    {%- elif content is none or content is undefined %}
        {{- '' }}
    {%- else %}
        {{- raise_exception('Unexpected content type.') }}
    {%- endif %}
{%- endmacro %}
{%- if not messages %}
    {{- raise_exception('No messages provided.') }}
{%- endif %}
{%- if messages[0].role == 'system' %}
    {%- set content = render_content(messages[0].content)|trim %}
    {{- '<|im_start|>system\n' + content + '<|im_end|>\n' }}
{%- endif %}
{%- set ns = namespace(searching=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.searching and message.role == 'user' %}
        {%- set ns.searching = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- set content = render_content(message.content)|trim %}
    {%- if message.role == 'system' %}
        {%- if not loop.first %}
            {{- raise_exception('System message must be at the beginning.') }}
        {%- endif %}
    {%- elif message.role == 'user' %}
        {{- '<|im_start|>user\n' + content + '<|im_end|>\n' }}
    {%- elif message.role == 'assistant' %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- elif '</think>' in content %}
            {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
            {%- set content = content.split('</think>')[-1].lstrip('\n') %}
        {%- endif %}
        {%- set reasoning_content = reasoning_content|trim %}
        {%- if loop.index0 > ns.last_query_index %}
            {{- '<|im_start|>assistant\n<think>\n' + reasoning_content + '\n</think>\n\n' + content + '<|im_end|>\n' }}
        {%- else %}
            {{- '<|im_start|>assistant\n' + content + '<|im_end|>\n' }}
        {%- endif %}
    {%- elif message.role == 'tool' %}
        {%- if loop.previtem and loop.previtem.role != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' + content + '\n</tool_response>' }}
        {%- if loop.last or loop.nextitem.role != 'tool' %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- else %}
        {{- raise_exception('Unexpected message role.') }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- else %}
        {{- '<think>\n' }}
    {%- endif %}
{%- endif %}
"""


# Not listed in additional_special_tokens: they have their own keys (pad, eos), as in Qwen's own files.
_OWN_KEYS = ("<|endoftext|>", "<|im_end|>")


def byte_level_bpe(corpus: Iterable[str], vocab_size: int, min_frequency: int):
    """A byte-level BPE with Qwen's normaliser, pre-tokeniser and decoder, trained on `corpus`, then
    ADDED_TOKENS appended right after the regular vocabulary (their ids checked); a tokenizers.Tokenizer."""
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
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    n_regular = tok.get_vocab_size(with_added_tokens=False)
    tok.add_tokens(
        [AddedToken(t, special=s, normalized=False, single_word=False, lstrip=False, rstrip=False) for t, s in ADDED_TOKENS]
    )
    for i, (t, _) in enumerate(ADDED_TOKENS):
        assert tok.token_to_id(t) == n_regular + i, (t, tok.token_to_id(t), n_regular + i)
    return tok


def _added(tok) -> list[tuple[int, str, bool]]:
    """(id, content, special) of `tok`'s added tokens, in id order."""
    return [(i, t.content, t.special) for i, t in sorted(tok.get_added_tokens_decoder().items())]


def tokenizer_config_dict(tok) -> dict:
    added = {
        str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": special}
        for i, t, special in _added(tok)
    }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": [t for _, t, s in _added(tok) if s and t not in _OWN_KEYS],
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 262144,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "TokenizersBackend",
        "unk_token": None,
    }


def special_tokens_map_dict(tok=None) -> dict:
    """`tok`'s map (by default the one of a tokenizer with ADDED_TOKENS)."""
    added = _added(tok) if tok is not None else [(None, t, s) for t, s in ADDED_TOKENS]

    def token(content):
        return {"content": content, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}

    return {
        "additional_special_tokens": [t for _, t, s in added if s and t not in _OWN_KEYS],
        "eos_token": token("<|im_end|>"),
        "pad_token": token("<|endoftext|>"),
    }


def write_tokenizer_files(out: Path, tok, save: bool = True) -> None:
    """The four TOKENIZER_FILES of `tok` into `out` (with save=False, a tokenizer.json already there is kept)."""
    out.mkdir(parents=True, exist_ok=True)
    if save:
        tok.save(str(out / "tokenizer.json"), pretty=False)
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config_dict(tok), indent=2, ensure_ascii=False) + "\n")
    (out / "special_tokens_map.json").write_text(json.dumps(special_tokens_map_dict(tok), indent=2) + "\n")
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
