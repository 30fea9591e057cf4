"""The model's own tokenizer (tokenizer.json) and the byte-exact views of its tokens.

Special-token ids are looked up by their text, never hard-coded: test models have other vocabularies.
"""

from __future__ import annotations

import codecs
import re
import threading
from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer

from ..core.errors import ModelError

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
END_OF_TEXT = "<|endoftext|>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
GIL_FREE_CHARS = 4096  # text at least this long is tokenized without holding the GIL (a few ms of work below it)


@lru_cache(maxsize=1)
def _byte_level_decoder() -> dict[str, int]:
    """Inverse of GPT-2's bytes→unicode table, which byte-level BPE vocabularies are written in."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


class ChatTokenizer:
    """tokenizers.Tokenizer plus Qwen's special tokens, looked up from the file itself."""

    def __init__(self, path: Path, logits_width: int | None = None):
        try:
            self._tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises a bare Exception on malformed files
            raise ModelError(f"{path}: cannot load tokenizer ({exc})") from None
        self.path = path
        # Set once and never toggled: API handlers tokenize from several threads at once, and a flag flipped
        # per call needed a lock that made a small request wait behind a megabyte being tokenized. Raw
        # prompts get their special tokens by splitting at them instead (encode_raw).
        self._tok.encode_special_tokens = True
        self._raw_lock = threading.Lock()
        self._raw_tok: Tokenizer | None = None
        self.size = self._tok.get_vocab_size(with_added_tokens=True)
        missing = [t for t in (IM_START, IM_END) if self._tok.token_to_id(t) is None]
        if missing:
            raise ModelError(f"{path}: tokenizer lacks Qwen chat tokens {', '.join(missing)}; not a Qwen3.5 tokenizer")
        if logits_width is not None and self.size > logits_width:
            raise ModelError(
                f"{path}: tokenizer has {self.size} tokens but the model has only {logits_width} logits; "
                "the tokenizer does not belong to this model"
            )
        # ints, checked (typed tokenizers say token_to_id may give None); <|endoftext|> alone is optional
        self.im_start: int = self.special_id(IM_START)
        self.im_end: int = self.special_id(IM_END)
        self.end_of_text: int | None = self._tok.token_to_id(END_OF_TEXT)
        self.think_open: int = self.special_id(THINK_OPEN)
        self.think_close: int = self.special_id(THINK_CLOSE)
        self.stop_ids = frozenset(i for i in (self.im_end, self.end_of_text) if i is not None)
        added = self._tok.get_added_tokens_decoder()
        self._added = {a.content for a in added.values()}
        self._byte_level = _is_byte_level(self._tok)
        specials = {a.content: i for i, a in added.items() if a.special}
        self._special_ids = specials
        # Splitting at special tokens is what the tokenizer itself does with them, as long as none strips the
        # whitespace around it or matches only whole words; and the post-processor must add nothing.
        self._split_raw = (all(not (a.lstrip or a.rstrip or a.single_word) for a in added.values() if a.special)
                           and self._tok.num_special_tokens_to_add(False) == 0)
        alternatives = "|".join(re.escape(c) for c in sorted(specials, key=len, reverse=True))
        self._special_pattern = re.compile(f"({alternatives})") if specials else None

    def special_id(self, text: str) -> int:
        token_id = self._tok.token_to_id(text)
        if token_id is None:
            raise ModelError(f"{self.path}: tokenizer has no token {text!r}")
        return token_id

    def encode_text(self, text: str) -> list[int]:
        """Encode user-supplied text: special-token look-alikes stay plain text (no prompt injection)."""
        return self._encode([text])

    def encode_raw(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Encode a raw completion prompt: written special tokens become their ids (manual templating).
        add_special_tokens: the tokenizer's own additions (a BOS, for a tokenizer that has one)."""
        if not self._split_raw:
            return self._raw_tokenizer().encode_batch([text], add_special_tokens=add_special_tokens)[0].ids
        pieces = self._special_pattern.split(text) if self._special_pattern else [text]
        # split() alternates text and the special tokens found in it: text at even places
        encoded = iter(self._encode_pieces([p for p in pieces[::2] if p]))
        ids: list[int] = []
        for i, piece in enumerate(pieces):
            if i % 2:
                ids.append(self._special_ids[piece])
            elif piece:
                ids.extend(next(encoded))
        return ids

    def _encode(self, texts: list[str]) -> list[int]:
        return [i for ids in self._encode_pieces(texts) for i in ids]

    def _encode_pieces(self, texts: list[str]) -> list[list[int]]:
        # encode_batch lets go of the GIL while it works (encode does not): a long prompt being tokenized
        # in one request's thread does not stop the event loop or the other requests. Short text (most
        # calls: template pieces, options) takes encode, which costs about half as much per call.
        if sum(len(t) for t in texts) < GIL_FREE_CHARS:
            return [self._tok.encode(t, add_special_tokens=False).ids for t in texts]
        return [e.ids for e in self._tok.encode_batch(texts, add_special_tokens=False)]

    def _raw_tokenizer(self) -> Tokenizer:
        """A second copy that recognises special tokens, for tokenizers the split cannot serve (built once)."""
        with self._raw_lock:
            if self._raw_tok is None:
                self._raw_tok = Tokenizer.from_file(str(self.path))
            return self._raw_tok

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=False)

    def token_text(self, token_id: int) -> str:
        """The token as a string; a token holding part of a UTF-8 character shows its bytes escaped."""
        raw = self.token_bytes(token_id)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw.decode("utf-8", errors="backslashreplace")

    def token_bytes(self, token_id: int) -> bytes:
        piece = self._tok.id_to_token(token_id)
        if piece is None:
            return b""
        if piece in self._added or not self._byte_level:
            return self._tok.decode([token_id], skip_special_tokens=False).encode("utf-8")
        table = _byte_level_decoder()
        try:
            return bytes(table[ch] for ch in piece)
        except KeyError:
            return self._tok.decode([token_id], skip_special_tokens=False).encode("utf-8")

    def stream(self) -> "TextStream":
        return TextStream(self)


def _is_byte_level(tok: Tokenizer) -> bool:
    decoder = tok.decoder
    return decoder is not None and b'"ByteLevel"' in decoder.__getstate__()


class TextStream:
    """Token ids in, text deltas out; a character split across tokens is emitted once complete."""

    def __init__(self, tokenizer: ChatTokenizer):
        self._tokenizer = tokenizer
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        return self._utf8.decode(self._tokenizer.token_bytes(token_id))

    def flush(self) -> str:
        return self._utf8.decode(b"", final=True)
