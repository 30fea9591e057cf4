"""OpenAI response shapes for completions and chat completions, built from engine results."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

from .echo import EchoedPrompt
from ..generation.generate import Completion, ContentToken, Delta
from ..constrained.tools import Tool, parse_tool_calls


def _envelope(kind: str, request_id: str, created: int, model: str, choices: list) -> dict:
    return {"id": request_id, "object": kind, "created": created, "model": model, "choices": choices}


def _usage(completion: Completion) -> dict:
    return {
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "total_tokens": completion.prompt_tokens + completion.completion_tokens,
    }


def _byte_list(data: bytes | None) -> list[int] | None:
    """OpenAI's `bytes`: the token's UTF-8 bytes as integers, or null where they are not known."""
    return list(data) if data is not None else None


def chat_logprob_entry(entry: ContentToken) -> dict:
    return {
        "token": entry.token,
        "logprob": entry.logprob,
        "bytes": _byte_list(entry.bytes),
        "top_logprobs": [{"token": a.token, "logprob": a.logprob, "bytes": _byte_list(a.bytes)} for a in entry.top],
    }


def _sharing(entries: list[ContentToken], every: int = 64) -> Iterator[ContentToken]:
    """The entries, the GIL offered to other threads after every `every` of them. An answer of 16 choices × 1,000
    tokens × 20 alternatives takes seconds to build in a server's worker thread; left to the interpreter's 5 ms
    switch interval, the server's event loop, which needs the GIL dozens of times per request, waited up to a
    second for each answer it gave meanwhile (bench/api_body_shapes.py)."""
    for index, entry in enumerate(entries):
        yield entry
        if index % every == every - 1:
            time.sleep(0)


def chat_logprobs(entries: list[ContentToken] | None) -> dict | None:
    # No content tokens (nothing to describe) gives null, as the seed runtime does.
    if not entries:
        return None
    return {"content": [chat_logprob_entry(e) for e in _sharing(entries)]}


def chat_choice(completion: Completion, index: int = 0, *, tools: tuple[Tool, ...] = (), probabilities: dict | None = None) -> dict:
    """One choice of a chat.completion. With tools offered, an answer that calls functions is `tool_calls`
    (content null, finish_reason "tool_calls"; a call cut by max_tokens is never content: null, with the complete
    calls only and finish_reason "length"); `probabilities` is Decider's extension field
    `tool_choice_probabilities` (engine/constrained/tools.choice_probabilities)."""
    content, calls = parse_tool_calls(completion.content, tools) if tools else (completion.content, [])
    message: dict = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [call.to_openai() for call in calls]
    if completion.reasoning is not None:
        message["reasoning_content"] = completion.reasoning
    choice = {
        "index": index,
        "message": message,
        "logprobs": chat_logprobs(completion.logprobs) if completion.logprobs is not None else None,
        "finish_reason": "tool_calls" if calls and completion.finish_reason == "stop" else completion.finish_reason,
    }
    if probabilities is not None:
        choice["tool_choice_probabilities"] = probabilities
    return choice


def chat_completion(completion: Completion, model: str, request_id: str | None = None) -> dict:
    return chat_completions([chat_choice(completion)], [completion], model, request_id)


def chat_completions(choices: list[dict], completions: list[Completion], model: str, request_id: str | None = None) -> dict:
    """A chat.completion of n choices drawn from one prompt: the prompt counted once, the draws summed."""
    request_id = request_id or f"chatcmpl-{uuid.uuid4().hex[:24]}"
    generated = sum(c.completion_tokens for c in completions)
    usage = {"prompt_tokens": completions[0].prompt_tokens, "completion_tokens": generated,
             "total_tokens": completions[0].prompt_tokens + generated}
    return {**_envelope("chat.completion", request_id, int(time.time()), model, choices), "usage": usage}


def chat_choice_chunks(request_id: str, model: str, created: int, choice: dict, with_usage: bool = False) -> list[dict]:
    """A finished choice as stream chunks (role, its text or its calls, the finish), for answers that are only
    known whole: tool calls (parsed once complete) and n > 1. Accumulated by a client, they equal the choice."""
    message, index = choice["message"], choice["index"]

    def chunk(delta: dict, finish: str | None = None, logprobs: dict | None = None) -> dict:
        body = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
        return _chunk_usage(_envelope("chat.completion.chunk", request_id, created, model, [body]), with_usage)

    chunks = [chunk({"role": "assistant", "content": "" if message["content"] is not None else None})]
    if message.get("reasoning_content"):
        chunks.append(chunk({"reasoning_content": message["reasoning_content"]}))
    if message["content"]:
        chunks.append(chunk({"content": message["content"]}, logprobs=choice["logprobs"]))
    for position, call in enumerate(message.get("tool_calls", [])):
        chunks.append(chunk({"tool_calls": [{"index": position, **call}]}, logprobs=choice["logprobs"] if position == 0 else None))
    last = chunk({}, choice["finish_reason"])
    if "tool_choice_probabilities" in choice:
        last["choices"][0]["tool_choice_probabilities"] = choice["tool_choice_probabilities"]
    return chunks + [last]


def completion_logprobs(entries: list[ContentToken], prompt_chars: int) -> dict:
    return {
        "tokens": [e.token for e in entries],
        "token_logprobs": [e.logprob for e in entries],
        "top_logprobs": [{a.token: a.logprob for a in e.top} for e in _sharing(entries)],
        "text_offset": [prompt_chars + e.text_offset for e in entries],
    }


def echo_logprobs(prompt: EchoedPrompt) -> dict:
    """The legacy logprobs of an echoed prompt: null for the first token (nothing precedes it)."""
    return {
        "tokens": [t.token for t in prompt.tokens],
        "token_logprobs": [t.logprob for t in prompt.tokens],
        "top_logprobs": [None if t.logprob is None else {a.token: a.logprob for a in t.top} for t in prompt.tokens],
        "text_offset": [t.text_offset for t in prompt.tokens],
    }


def completion_choice(
    completion: Completion, index: int, prompt_chars: int, *, logprobs: bool, echoed: EchoedPrompt | None = None
) -> dict:
    """One choice of a text_completion; with `echoed`, the prompt's text and entries come first."""
    text, entries = completion.content, None
    if logprobs:
        entries = completion_logprobs(completion.logprobs or [], prompt_chars)
        if echoed is not None:
            entries = {key: values + entries[key] for key, values in echo_logprobs(echoed).items()}
    if echoed is not None:
        text = echoed.text + text
    # stop_reason as vLLM writes it: the stop string that ended the text, null for an end of turn (or no stop)
    return {"text": text, "index": index, "logprobs": entries, "finish_reason": completion.finish_reason,
            "stop_reason": completion.stop_reason}


def text_completions(choices: list[dict], completions: list[Completion], model: str, request_id: str | None = None) -> dict:
    """A text_completion with one choice per prompt; usage sums them."""
    request_id = request_id or f"cmpl-{uuid.uuid4().hex[:24]}"
    prompt = sum(c.prompt_tokens for c in completions)
    generated = sum(c.completion_tokens for c in completions)
    usage = {"prompt_tokens": prompt, "completion_tokens": generated, "total_tokens": prompt + generated}
    return {**_envelope("text_completion", request_id, int(time.time()), model, choices), "usage": usage}


def text_completion(completion: Completion, model: str, prompt_chars: int, request_id: str | None = None) -> dict:
    choice = completion_choice(completion, 0, prompt_chars, logprobs=completion.logprobs is not None)
    return text_completions([choice], [completion], model, request_id)


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
