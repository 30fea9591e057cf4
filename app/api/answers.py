"""Big answers: bounded before anything is drawn, and encoded off the event loop in pieces.

An answer with logprobs grows as choices × tokens × (1 + alternatives) entries: n=16 × 4,000 tokens with
top_logprobs 20 was a 111 MiB answer, built and encoded on the event loop, and held every other client
(`GET /v1/models`) for 23.8 s. So an answer of several choices may hold at most MAX_ANSWER_LOGPROBS entries
(checked from the request, before it queues), and every JSON answer is built and encoded in a worker thread,
in pieces of a few hundred entries: `json.dumps` holds the GIL for the whole of what it is given, a piece only
for a millisecond or so, and the event loop runs between pieces.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

from anyio import to_thread
from starlette.responses import Response

from .errors import ApiError

MAX_ANSWER_LOGPROBS = 1 << 20  # 1,048,576 logprob entries (~85 MiB of JSON) in one answer of several choices
PIECE_ITEMS = 256  # list items encoded by one json.dumps call
PIECE_DEPTH = 5  # answer → choices → choice → logprobs → content: deeper values are encoded whole


def refuse_huge_answer(choices: int, tokens: int, alternatives: int | None) -> None:
    """An answer of `choices` choices holding up to `tokens` tokens together, with logprobs and `alternatives` top
    logprobs per token (None: no logprobs), that could hold more than MAX_ANSWER_LOGPROBS entries."""
    if alternatives is None or choices < 2:
        return  # text alone is bounded by the context; one choice can be streamed
    entries = tokens * (1 + alternatives)
    if entries > MAX_ANSWER_LOGPROBS:
        raise ApiError(
            "invalid_value",
            f"this answer of {choices} choices could hold {tokens:,} tokens × {1 + alternatives} logprobs = {entries:,} "
            f"logprob entries, more than the {MAX_ANSWER_LOGPROBS:,} one answer may hold: ask for fewer choices (n), "
            "fewer tokens (max_tokens) or fewer alternatives", param="n",
        )


async def json_answer(build: Callable[[], object]) -> Response:
    """A 200 JSON answer, `build()` and its encoding run in a worker thread."""
    return Response(await to_thread.run_sync(lambda: encode(build())), status_code=200, media_type="application/json")


def encode(payload: object) -> bytes:
    """The bytes of errors.dumps(payload) (UTF-8, no NaN; all-ASCII when a lone surrogate is in it), made in pieces."""
    try:
        return b"".join(_pieces(payload, 0, False))
    except UnicodeEncodeError:
        return b"".join(_pieces(payload, 0, True))


def _dump(value: object, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only, allow_nan=False).encode("ascii" if ascii_only else "utf-8")


def _pieces(value: object, depth: int, ascii_only: bool) -> Iterator[bytes]:
    """json.dumps's default layout (", " and ": "), a container at a time down to PIECE_DEPTH."""
    if depth < PIECE_DEPTH and isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
        for index, (key, item) in enumerate(value.items()):
            yield (b", " if index else b"{") + _dump(key, ascii_only) + b": "
            yield from _pieces(item, depth + 1, ascii_only)
        yield b"}"
    elif depth < PIECE_DEPTH and isinstance(value, list) and value:
        if len(value) > PIECE_ITEMS:  # long: a few hundred items a call, each item whole
            for start in range(0, len(value), PIECE_ITEMS):
                yield (b", " if start else b"[") + _dump(value[start:start + PIECE_ITEMS], ascii_only)[1:-1]
        else:
            for index, item in enumerate(value):
                yield b", " if index else b"["
                yield from _pieces(item, depth + 1, ascii_only)
        yield b"]"
    else:
        yield _dump(value, ascii_only)
