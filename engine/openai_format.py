"""OpenAI response shapes for completions and chat completions, built from engine results."""

from __future__ import annotations

import time
import uuid

from .generate import Completion, ContentToken


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
    return {
        "id": request_id or f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": chat_logprobs(completion.logprobs) if completion.logprobs is not None else None,
                "finish_reason": completion.finish_reason,
            }
        ],
        "usage": _usage(completion),
    }


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
    return {
        "id": request_id or f"cmpl-{uuid.uuid4().hex[:24]}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"text": completion.content, "index": 0, "logprobs": logprobs, "finish_reason": completion.finish_reason}
        ],
        "usage": _usage(completion),
    }
