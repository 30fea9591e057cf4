"""OpenAI response shapes for completions and chat completions, built from engine results."""

from __future__ import annotations

import time
import uuid

from .generate import Completion, ContentToken, Delta


def _envelope(kind: str, request_id: str, created: int, model: str, choices: list) -> dict:
    return {"id": request_id, "object": kind, "created": created, "model": model, "choices": choices}


def _usage(completion: Completion) -> dict:
    return {
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "total_tokens": completion.prompt_tokens + completion.completion_tokens,
    }


def chat_logprob_entry(entry: ContentToken) -> dict:
    return {
        "token": entry.token,
        "logprob": entry.logprob,
        "bytes": list(entry.bytes),
        "top_logprobs": [{"token": a.token, "logprob": a.logprob, "bytes": list(a.bytes)} for a in entry.top],
    }


def chat_logprobs(entries: list[ContentToken] | None) -> dict | None:
    # No content tokens (nothing to describe) gives null, as the seed runtime does.
    if not entries:
        return None
    return {"content": [chat_logprob_entry(e) for e in entries]}


def chat_completion(completion: Completion, model: str, request_id: str | None = None) -> dict:
    message = {"role": "assistant", "content": completion.content}
    if completion.reasoning is not None:
        message["reasoning_content"] = completion.reasoning
    choice = {
        "index": 0,
        "message": message,
        "logprobs": chat_logprobs(completion.logprobs) if completion.logprobs is not None else None,
        "finish_reason": completion.finish_reason,
    }
    request_id = request_id or f"chatcmpl-{uuid.uuid4().hex[:24]}"
    return {**_envelope("chat.completion", request_id, int(time.time()), model, [choice]), "usage": _usage(completion)}


def completion_logprobs(entries: list[ContentToken], prompt_chars: int) -> dict:
    return {
        "tokens": [e.token for e in entries],
        "token_logprobs": [e.logprob for e in entries],
        "top_logprobs": [{a.token: a.logprob for a in e.top} for e in entries],
        "text_offset": [prompt_chars + e.text_offset for e in entries],
    }


def text_completion(completion: Completion, model: str, prompt_chars: int, request_id: str | None = None) -> dict:
    logprobs = None
    if completion.logprobs is not None:
        logprobs = completion_logprobs(completion.logprobs, prompt_chars)
    choice = {"text": completion.content, "index": 0, "logprobs": logprobs, "finish_reason": completion.finish_reason}
    request_id = request_id or f"cmpl-{uuid.uuid4().hex[:24]}"
    return {**_envelope("text_completion", request_id, int(time.time()), model, [choice]), "usage": _usage(completion)}


# ----- streaming (server-sent events): one chunk per engine step that added text -----


def _chunk_usage(chunk: dict, with_usage: bool) -> dict:
    # With stream_options.include_usage every chunk carries "usage": null except the last one.
    if with_usage:
        chunk["usage"] = None
    return chunk


def chat_delta(delta: Delta) -> dict:
    """The `delta` object of one step: its reasoning and/or content text."""
    out = {}
    if delta.reasoning:
        out["reasoning_content"] = delta.reasoning
    if delta.content:
        out["content"] = delta.content
    return out


def chat_chunk(
    request_id: str,
    model: str,
    created: int,
    delta: dict,
    *,
    logprobs: list[ContentToken] | None = None,
    finish_reason: str | None = None,
    with_usage: bool = False,
) -> dict:
    """A chat.completion.chunk; `logprobs` are the entries of this chunk's own content tokens."""
    choice = {"index": 0, "delta": delta, "logprobs": chat_logprobs(logprobs), "finish_reason": finish_reason}
    return _chunk_usage(_envelope("chat.completion.chunk", request_id, created, model, [choice]), with_usage)


def chat_usage_chunk(request_id: str, model: str, created: int, completion: Completion) -> dict:
    """The last chunk when stream_options.include_usage is set: no choices, the whole request's usage."""
    return {**_envelope("chat.completion.chunk", request_id, created, model, []), "usage": _usage(completion)}


def completion_chunk(
    request_id: str,
    model: str,
    created: int,
    text: str,
    *,
    logprobs: list[ContentToken] | None = None,
    prompt_chars: int = 0,
    finish_reason: str | None = None,
    with_usage: bool = False,
) -> dict:
    """A streamed text_completion: the text of one step and, when asked, the entries of its tokens."""
    choice = {
        "text": text,
        "index": 0,
        "logprobs": completion_logprobs(logprobs, prompt_chars) if logprobs is not None else None,
        "finish_reason": finish_reason,
    }
    return _chunk_usage(_envelope("text_completion", request_id, created, model, [choice]), with_usage)


def completion_usage_chunk(request_id: str, model: str, created: int, completion: Completion) -> dict:
    return {**_envelope("text_completion", request_id, created, model, []), "usage": _usage(completion)}
