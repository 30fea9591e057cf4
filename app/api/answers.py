"""Big answers: bounded before anything is drawn, and encoded off the event loop in pieces.

An answer with logprobs grows as choices × tokens × (1 + alternatives) entries: n=16 × 4,000 tokens with
top_logprobs 20 was a 111 MiB answer, built and encoded on the event loop, and held every other client
(`GET /v1/models`) for 23.8 s. So an answer of several choices may hold at most MAX_ANSWER_LOGPROBS entries
(checked from the request, before it queues), and every JSON answer is built and encoded in a worker thread,
in pieces of a few hundred entries: `json.dumps` holds the GIL for the whole of what it is given, a piece only
for a millisecond or so, and the event loop runs between pieces.
"""

from __future__ import annotations

import gc
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from anyio import to_thread
from starlette.responses import Response

from decider.engine.generation.generate import Completion
from decider.engine.completions.openai_format import chat_choice_chunks, chat_completions

from .errors import ApiError

T = TypeVar("T")
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


class _CollectorPause:
    """Python's cyclic garbage collector held off while answers are drawn and built (reentrant, any thread).

    A full collection walks every live object with the GIL held: while 16 choices of 1,000 tokens with 20
    alternatives each were drawn and built (millions of objects), collections of 0.1–0.8 s each held every
    other client's request as long (measured: each slow `GET /v1/models` began with one). The answer's objects
    are freed by their reference counts as usual; the collector runs again once no answer is being made."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._disabled = False

    def __enter__(self) -> None:
        with self._lock:
            if self._active == 0 and gc.isenabled():
                gc.disable()
                self._disabled = True
            self._active += 1

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._active -= 1
            if self._active == 0 and self._disabled:
                self._disabled = False
                gc.enable()


collector_paused = _CollectorPause()


def paused(work: Callable[..., T]) -> Callable[..., T]:
    """`work`, run with the collector held off (for a worker thread)."""

    def run(*args):
        with collector_paused:
            return work(*args)

    return run


async def json_answer(build: Callable[[], object], *owned: list) -> Response:
    """A 200 JSON answer, `build()` and its encoding run in a worker thread. The `owned` lists (what the answer was
    built from) are emptied there too: freeing a big answer's hundreds of thousands of objects on the event loop,
    when the route returns, would hold it as long as building them did."""

    def work() -> bytes:
        with collector_paused:
            body = encode(build())
            for items in owned:
                items.clear()
        return body

    return Response(await to_thread.run_sync(work), status_code=200, media_type="application/json")


def replay_chunks(request_id: str, model: str, choices: list[dict], completions: list[Completion], usage: bool) -> list[bytes]:
    """A finished chat answer (n > 1, tool calls) as its stream chunks, encoded (in a worker thread); the
    choices and completions are emptied (freed here, not on the event loop)."""
    created = int(time.time())
    with collector_paused:
        chunks = [encode(chunk) for choice in choices for chunk in chat_choice_chunks(request_id, model, created, choice, usage)]
        if usage:
            chunks.append(encode({**chat_completions(choices, completions, model, request_id), "object": "chat.completion.chunk",
                                  "choices": []}))
        choices.clear()
        completions.clear()
    return chunks


def encode(payload: object) -> bytes:
    """The bytes of errors.dumps(payload) (UTF-8, no NaN; all-ASCII when a lone surrogate is in it), made in pieces."""
    try:
        return b"".join(_yielding(_pieces(payload, 0, False)))
    except UnicodeEncodeError:
        return b"".join(_yielding(_pieces(payload, 0, True)))


def _yielding(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """Each piece, then the GIL offered to the event loop: left to the interpreter's 5 ms switch interval, a
    thread that needs the GIL a few dozen times to answer one request waits that long each time."""
    for piece in pieces:
        yield piece
        time.sleep(0)


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
