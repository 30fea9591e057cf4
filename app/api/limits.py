"""Cheap checks on a request's text before any heavy work: text that is not text, and prompts that
cannot possibly fit the context (refused without tokenizing them)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import islice

from .errors import ApiError


# A body's shape, bounded before validation: pydantic checks a list item by item and reports every bad item,
# holding the GIL while it builds the report, so 2.4 million empty objects in 7 MB once stalled every other
# client for 28 s. A legitimate body is long only in scalars (token ids, text), never in containers.
MAX_JSON_VALUES = 1 << 20  # every value and key counted: a full 262k-token prompt as ids is 262k
MAX_NESTED_CONTAINERS = 10_000  # messages, content parts, tools, prompt batches: far more than any real request


MAX_JSON_KEYS = 65_536  # object keys in one body: 10,000 messages with a name each are 30,000
# The end of an object key: an unescaped `"` (after an even run of backslashes), optional whitespace, `:`. Inside a
# string a `"` is always escaped, so only a string that starts with a colon is miscounted (as one key more).
_KEY_END = re.compile(rb'(?<!\\)(?:\\\\)*"[ \t\r\n]*:')


def refuse_key_floods(data: bytes) -> None:
    """Before parsing: a body with more than MAX_JSON_KEYS object keys. json.loads holds the GIL while it builds an
    object, so 524k `logit_bias` keys (6.7 MB) once held every other client for a second before their count was
    refused. A colon count (C speed) lets ordinary bodies through; only a body with that many colons is scanned."""
    if data.count(b":") <= MAX_JSON_KEYS:
        return
    keys = sum(1 for _ in islice(_KEY_END.finditer(data), MAX_JSON_KEYS + 1))  # stops once past the bound
    if keys > MAX_JSON_KEYS:
        raise ApiError("request_too_large", f"the body holds more than {MAX_JSON_KEYS:,} object keys (counted before parsing)")


def refuse_bracket_floods(data: bytes) -> None:
    """Before parsing: a body with more `[` and `{` than MAX_JSON_VALUES. Parsing and freeing millions of empty
    containers holds the GIL about a second for 7 MB (every other client waits); text needs no million brackets."""
    brackets = data.count(b"[") + data.count(b"{")  # C speed: a few ms for 8 MiB
    if brackets > MAX_JSON_VALUES:
        raise ApiError("request_too_large", f"the body holds more than {MAX_JSON_VALUES:,} JSON values "
                       f"({brackets:,} `[` and `{{`, counted before parsing)")


def check_body(body: object) -> None:
    """Refuse, naming where, a body with more values than MAX_JSON_VALUES, an array or object
    holding more than MAX_NESTED_CONTAINERS objects or arrays, or a lone surrogate ("\\ud800" in JSON is valid JSON but not
    text: no tokenizer can encode it). One iterative walk (paths are spelled out only for the error)."""
    values = 1
    stack: list[tuple[object, tuple | None]] = [(body, None)]  # (container, (parent's entry, key))
    while stack:
        entry = stack.pop()
        container = entry[0]
        items = container.items() if isinstance(container, dict) else enumerate(container)  # type: ignore[arg-type]
        values += len(container) * (2 if isinstance(container, dict) else 1)  # type: ignore[arg-type]
        if values > MAX_JSON_VALUES:
            raise ApiError("request_too_large", f"the body holds more than {MAX_JSON_VALUES:,} JSON values", param=_path(entry))
        nested = 0
        for key, item in items:
            if isinstance(key, str):
                _refuse_surrogate(key, entry, None)
            if isinstance(item, str):
                _refuse_surrogate(item, entry, key)
            elif isinstance(item, (dict, list)):
                nested += 1
                stack.append((item, (entry, key)))
        if nested > MAX_NESTED_CONTAINERS:
            raise ApiError("request_too_large", f"{_path(entry) or 'the body'} holds {nested:,} objects or arrays "
                           f"(at most {MAX_NESTED_CONTAINERS:,})", param=_path(entry))


def _refuse_surrogate(text: str, entry: tuple, key: object) -> None:
    try:
        text.encode("utf-8")  # C speed, also for megabytes
    except UnicodeEncodeError as exc:
        path = _path(entry, key) if key is not None else _path(entry)  # an object key is named by its object
        raise ApiError(
            "invalid_value",
            f"{path or 'the body'} contains a lone surrogate ({text[exc.start]!r} at character {exc.start}), which is not text",
            param=path,
        ) from None


def _path(entry: tuple, key: object = None) -> str | None:
    """`messages[0].content` for the walk's entry (and a key inside it); None for the body itself."""
    keys = [] if key is None else [key]
    while entry[1] is not None:
        entry, parent_key = entry[1]
        keys.append(parent_key)
    path = ""
    for k in reversed(keys):
        path += f"[{k}]" if isinstance(k, int) else (f".{k}" if path else str(k))
    return path or None


def longest_token_chars(tokenizer) -> int:
    """The most characters one token of this vocabulary covers (its bytes bound its characters)."""
    return max(1, max(len(tokenizer.token_bytes(i)) for i in range(tokenizer.size)))


def refuse_if_surely_too_long(texts: Iterable[str], context_length: int, token_chars: int) -> None:
    """No token covers more than `token_chars` characters, so text longer than context × token_chars
    needs more tokens than the context holds: refuse it before tokenizing (which may take seconds)."""
    chars = sum(len(text) for text in texts)
    if chars > context_length * token_chars:
        raise ApiError(
            "context_length_exceeded",
            f"the prompt is {chars} characters: more than the model's context limit of {context_length} tokens can hold",
        )


SLICE_CHARS = 32_768
# Text is counted here only when it has this many bytes per context token (typical text has 3-5): a
# request that far over is a mistake or an attack, and stops being counted past the limit.
COUNT_ABOVE_BYTES_PER_TOKEN = 4
SLICE_MARGIN = 2  # tokens a cut between two slices can add (it may split one pre-token piece in two)


def count_tokens_at_least(texts: Iterable[str], tokenizer, limit: int) -> int:
    """A lower bound on the texts' token count, exact to within SLICE_MARGIN per slice, counted slice by
    slice: each slice holds the tokenizer briefly (other requests' tokenization goes on between them),
    and counting stops once past `limit`, so a huge text is refused after tokenizing ~limit tokens."""
    total = 0
    for text in texts:
        for start in range(0, len(text), SLICE_CHARS):
            total += len(tokenizer.encode_text(text[start:start + SLICE_CHARS])) - (SLICE_MARGIN if start else 0)
            if total > limit:
                return total
    return total


def refuse_if_too_many_tokens(texts: Iterable[str], tokenizer, context_length: int) -> None:
    """Count the tokens of long text (in a worker thread, before the request queues for the engine) so
    a request that cannot fit is refused without holding the engine, or the tokenizer, for long."""
    texts = list(texts)
    if sum(len(text.encode("utf-8")) for text in texts) <= context_length * COUNT_ABOVE_BYTES_PER_TOKEN:
        return  # not far over, if at all: the engine's own check (exact count, exact message) decides
    tokens = count_tokens_at_least(texts, tokenizer, context_length)
    if tokens > context_length:
        raise ApiError("context_length_exceeded", f"the prompt has more than {context_length} tokens, the model's context limit")
