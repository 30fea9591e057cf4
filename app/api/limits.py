"""Cheap checks on a request's text before any heavy work: text that is not text, and prompts that
cannot possibly fit the context (refused without tokenizing them)."""

from __future__ import annotations

from collections.abc import Iterable

from .errors import ApiError


def refuse_surrogates(value: object, path: str | None = None) -> None:
    """A lone surrogate ("\\ud800" in JSON) is valid JSON but not text: no tokenizer can encode it.
    Refused wherever it is, naming where (an object key is named by its object)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")  # C speed, also for megabytes
        except UnicodeEncodeError as exc:
            where = path or "the body"
            raise ApiError(
                "invalid_value",
                f"{where} contains a lone surrogate ({value[exc.start]!r} at character {exc.start}), which is not text",
                param=path,
            ) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            refuse_surrogates(key, path)
            refuse_surrogates(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            refuse_surrogates(item, f"{path}[{i}]")


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
