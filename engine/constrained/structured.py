"""Structured output: OpenAI `response_format` (json_object, json_schema) as a token mask on the draw.

llguidance (the grammar engine behind llama.cpp's and vLLM's structured output) computes the set of tokens
that keep the text a valid prefix of the grammar, over the model's whole tokenizer, in well under a
millisecond per token at Qwen3.5's 248k vocabulary (bench: `python -m bench structured`). We use it rather
than a JSON state machine of our own: byte-level BPE tokens straddle JSON syntax in ways only a
tokenizer-aware matcher gets right.

The mask restricts the draw only: a token's reported logprob stays the model's (after penalties, before
temperature, over the full vocabulary), so structured output never changes what the numbers mean.
Whitespace is not flexible (compact separators): a model cannot spend its max_tokens on spaces.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..core.errors import SettingsError

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions

_COMPACT: JsonCompileOptions = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}


@dataclass(frozen=True)
class ResponseFormat:
    """A validated response_format: the grammar it compiles to, and its name for the result."""

    kind: str  # "json_object" or "json_schema"
    grammar: str
    name: str | None = None

    @classmethod
    def from_openai(cls, value: object) -> ResponseFormat | None:
        """OpenAI's `response_format` object; None for {"type": "text"} (no constraint)."""
        import llguidance

        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            raise SettingsError("response_format must be an object with a 'type'")
        kind = value["type"]
        if kind == "text":
            return None
        if kind == "json_object":
            schema: dict = {"type": "object"}
            name = None
        elif kind == "json_schema":
            spec = value.get("json_schema")
            if not isinstance(spec, dict) or not isinstance(spec.get("schema", {}), dict):
                raise SettingsError("response_format.json_schema must be an object with a 'schema' object")
            schema = spec.get("schema") or {}
            name = spec.get("name") if isinstance(spec.get("name"), str) else None
        else:
            raise SettingsError(f"response_format type must be text, json_object or json_schema (got {kind!r})")
        _refuse_huge_repeats(schema)
        try:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema), defaults=_COMPACT)
        except (ValueError, TypeError) as exc:
            raise SettingsError(f"response_format: the schema cannot be used ({exc})") from None
        error = llguidance.LLMatcher.validate_grammar(grammar)  # "" when the grammar is usable
        if error:
            raise SettingsError(f"response_format: the schema cannot be used ({error})")
        return cls(kind, grammar, name)


MAX_REPEAT = 10_000  # llguidance's lexer gives up mid-answer on a{1000000}: refused up front instead
_REPEAT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")


def _refuse_huge_repeats(schema: object, depth: int = 0) -> None:
    """A `pattern` whose {n} / {n,m} repeat is larger than the grammar engine can build is a 400 here."""
    if depth > 200:
        raise SettingsError("response_format: the schema is nested too deeply")
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "pattern" and isinstance(value, str):
                for low, high in _REPEAT.findall(value):
                    if max(int(low), int(high or 0)) > MAX_REPEAT:
                        raise SettingsError(f"response_format: a pattern repeats more than {MAX_REPEAT:,} times")
            _refuse_huge_repeats(value, depth + 1)
    elif isinstance(schema, list):
        for value in schema:
            _refuse_huge_repeats(value, depth + 1)


def _first_line(error: str) -> str:
    return (error.strip().splitlines() or ["unknown error"])[0][:160]


def check_grammar(response_format: ResponseFormat, tokenizer) -> None:
    """Compile the grammar against the model's tokenizer at request time: one that fails, or that
    admits no value at all (a $ref loop), is refused before the request queues."""
    mask = grammar_mask(response_format, tokenizer)
    allowed = mask.allowed()
    if mask.error or (not allowed.any() and not mask.finished):
        raise SettingsError("response_format: the schema admits no finite JSON value (a $ref loop?)")


class GrammarTokenizer:
    """llguidance's view of one model's tokenizer, built once (a few seconds at 248k tokens) and shared."""

    _lock = threading.Lock()
    _cache: dict[tuple[str, tuple[int, ...]], object] = {}

    @classmethod
    def for_file(cls, tokenizer_json: Path, eos_ids: tuple[int, ...]):
        import llguidance

        key = (str(tokenizer_json), eos_ids)
        with cls._lock:
            if key not in cls._cache:
                cls._cache[key] = llguidance.LLTokenizer(str(tokenizer_json), eos_token=list(eos_ids))
            return cls._cache[key]


class GrammarMask:
    """A masking stage that restricts the draw to tokens the grammar allows; told every kept token."""

    masks = True
    draw_only = True  # the reported logprobs stay the model's

    def __init__(self, response_format: ResponseFormat, tokenizer, vocab_size: int) -> None:
        import llguidance

        self._matcher = llguidance.LLMatcher(tokenizer, response_format.grammar)
        if self._matcher.is_error():
            raise SettingsError(f"response_format: {_first_line(self._matcher.get_error())}")
        self._words = np.empty((tokenizer.vocab_size + 31) // 32, dtype=np.int32)
        self._vocab = vocab_size

    def allowed(self) -> np.ndarray:
        """A boolean vector over the real vocabulary: True where the grammar allows the token now."""
        from llguidance.numpy import fill_next_token_bitmask

        fill_next_token_bitmask(self._matcher, self._words[None, :])
        bits = np.unpackbits(self._words.view(np.uint8), bitorder="little").astype(bool)
        out = np.zeros(self._vocab, dtype=bool)
        n = min(self._vocab, bits.shape[0])
        out[:n] = bits[:n]
        return out

    def apply(self, logits: np.ndarray) -> np.ndarray:
        return np.where(self.allowed()[: logits.shape[0]], logits, -np.inf)

    def accept(self, token: int) -> None:
        if not self._matcher.consume_token(int(token)):
            # The grammar engine gave up (its own limits): the client's schema, said in one line, no internals.
            raise SettingsError(f"response_format: the schema cannot be followed ({_first_line(self._matcher.get_error())})")

    @property
    def error(self) -> str:
        """The grammar engine's error, first line only ("" when none)."""
        return _first_line(self._matcher.get_error()) if self._matcher.is_error() else ""

    @property
    def finished(self) -> bool:
        """The text is complete: only end-of-turn can follow."""
        return self._matcher.is_stopped()


def grammar_tokenizer(tokenizer):
    """llguidance's view of a ChatTokenizer (built once per model; its end of turn ends the grammar)."""
    return GrammarTokenizer.for_file(tokenizer.path, tuple(sorted(tokenizer.stop_ids)))


def grammar_mask(response_format: ResponseFormat, tokenizer) -> GrammarMask:
    """A fresh mask for one generation (it follows the tokens it is told about)."""
    return GrammarMask(response_format, grammar_tokenizer(tokenizer), tokenizer.size)
