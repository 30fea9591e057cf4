"""Golden replies of the local API: a fixed set of requests, their replies normalised, stored as JSON.

The goldens were first recorded from the stdlib server that the uvicorn/Starlette one replaced, so
`tests/test_api_golden.py` can check that the new stack answers the same JSON (ids and timestamps
aside). Re-record only on purpose, when a reply is meant to change:

    python tools/api_goldens.py            # writes tests/api/golden/*.json

Requests go over raw `http.client` so the test sees status lines, headers and bytes as sent.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "fixtures" / "models" / "qwen35-text"
GOLDEN_DIR = ROOT / "tests" / "api" / "golden"
KEY = "golden-key"
KEYED_MAX_BODY = 16 * 1024

HELLO = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hello."}]
GREEDY = {"temperature": 0, "seed": 1, "frequency_penalty": 0, "presence_penalty": 0}
JSON = {"Content-Type": "application/json"}
AUTH = {"Authorization": f"Bearer {KEY}"}

# Headers worth pinning (the rest - Date, Server, Content-Length - belong to the transport).
KEPT_HEADERS = ("content-type", "retry-after", "www-authenticate", "allow")


def _chat(**fields) -> dict:
    return {"model": "decider", "messages": HELLO, "max_tokens": 2, **fields}


# name → (server "open" or "keyed", method, path, body (dict, bytes or None), extra headers)
Case = tuple[str, str, str, object, dict]
SUCCESS_CASES: dict[str, Case] = {
    "models": ("open", "GET", "/v1/models", None, {}),
    "model_alias": ("open", "GET", "/v1/models/decider", None, {}),
    "chat_logprobs": ("open", "POST", "/v1/chat/completions",
                      _chat(max_tokens=6, logprobs=True, top_logprobs=3, **GREEDY), JSON),
    "chat_logprobs_stream": ("open", "POST", "/v1/chat/completions",
                             _chat(max_tokens=6, logprobs=True, top_logprobs=3, stream=True,
                                   stream_options={"include_usage": True}, **GREEDY), JSON),
    "chat_think_stream": ("open", "POST", "/v1/chat/completions",
                          _chat(max_tokens=8, logprobs=True, top_logprobs=2, think=True, temperature=0.8, seed=5,
                                stream=True), JSON),
    "chat_plain": ("open", "POST", "/v1/chat/completions", _chat(max_tokens=4, **GREEDY), JSON),
    "completion_logprobs": ("open", "POST", "/v1/completions",
                            {"model": "decider", "prompt": "Once upon a time", "max_tokens": 8, "logprobs": 3,
                             "temperature": 0.8, "seed": 5}, JSON),
    "completion_stream": ("open", "POST", "/v1/completions",
                          {"model": "decider", "prompt": "Once upon a time", "max_tokens": 8, "logprobs": 3,
                           "temperature": 0.8, "seed": 5, "stream": True, "stream_options": {"include_usage": True}},
                          JSON),
    "decide": ("open", "POST", "/v1/decide",
               {"model": "decider", "question": "Which road to take?", "options": ["the left road", "the right road", "stay"],
                "system": "You decide for a game character.", "context": "The castle is to the left.",
                "permute": True, "temperature": 0, "seed": 3}, JSON),
    # exact reasoning: whether a fast twin reasons depends on the machine's arithmetic (engine/runners/fast_reasoning.py)
    "decide_think": ("open", "POST", "/v1/decide",
                     {"question": "Open the door?", "options": ["yes", "no"], "think": True, "reasoning_budget": 6,
                      "temperature": 0.7, "seed": 9, "top_k": 40, "fast_reasoning": False}, JSON),
    "decide_keyed": ("keyed", "POST", "/v1/decide", {"question": "Open the door?", "options": ["yes", "no"],
                                                    "temperature": 0}, {**JSON, **AUTH}),
}

LONG_TEXT = "hello " * 15000
ERROR_CASES: dict[str, Case] = {
    "invalid_json": ("open", "POST", "/v1/chat/completions", b"{", JSON),
    "bad_utf8": ("open", "POST", "/v1/chat/completions", b"\xff\xfe\x00", JSON),
    "not_an_object": ("open", "POST", "/v1/chat/completions", b"[1, 2]", JSON),
    "missing_messages": ("open", "POST", "/v1/chat/completions", {"model": "decider"}, JSON),
    "messages_not_a_list": ("open", "POST", "/v1/chat/completions", _chat(messages="hi"), JSON),
    "bad_role": ("open", "POST", "/v1/chat/completions", _chat(messages=[{"role": "tool", "content": "x"}]), JSON),
    "image_part": ("open", "POST", "/v1/chat/completions",
                   _chat(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]), JSON),
    "tool_calls_in_message": ("open", "POST", "/v1/chat/completions",
                              _chat(messages=[{"role": "user", "content": "x", "tool_calls": []}]), JSON),
    "last_not_user": ("open", "POST", "/v1/chat/completions",
                      _chat(messages=[{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]), JSON),
    "temperature_type": ("open", "POST", "/v1/chat/completions", _chat(temperature="hot"), JSON),
    "temperature_range": ("open", "POST", "/v1/chat/completions", _chat(temperature=3), JSON),
    "top_p_zero": ("open", "POST", "/v1/chat/completions", _chat(top_p=0), JSON),
    "seed_type": ("open", "POST", "/v1/chat/completions", _chat(seed="x"), JSON),
    "max_tokens_zero": ("open", "POST", "/v1/chat/completions", _chat(max_tokens=0), JSON),
    "max_tokens_string": ("open", "POST", "/v1/chat/completions", _chat(max_tokens="5"), JSON),
    "max_tokens_both": ("open", "POST", "/v1/chat/completions", _chat(max_tokens=3, max_completion_tokens=4), JSON),
    "logprobs_int": ("open", "POST", "/v1/chat/completions", _chat(logprobs=1), JSON),
    "top_logprobs_range": ("open", "POST", "/v1/chat/completions", _chat(logprobs=True, top_logprobs=21), JSON),
    "top_logprobs_alone": ("open", "POST", "/v1/chat/completions", _chat(top_logprobs=2), JSON),
    "stream_options_type": ("open", "POST", "/v1/chat/completions", _chat(stream=True, stream_options=[]), JSON),
    "stop_type": ("open", "POST", "/v1/chat/completions", _chat(stop=5), JSON),
    "stop_too_many": ("open", "POST", "/v1/chat/completions", _chat(stop=["a", "b", "c", "d", "e"]), JSON),
    "think_disagree": ("open", "POST", "/v1/chat/completions", _chat(think=True, enable_thinking=False), JSON),
    "n_too_many": ("open", "POST", "/v1/chat/completions", _chat(n=17), JSON),
    "tools": ("open", "POST", "/v1/chat/completions", _chat(tools=[{"type": "function", "function": {"name": "f", "x": 1}}]), JSON),
    "unknown_field": ("open", "POST", "/v1/chat/completions", _chat(frobnicate=1), JSON),
    "unknown_model": ("open", "POST", "/v1/chat/completions", _chat(model="gpt-4o"), JSON),
    "model_type": ("open", "POST", "/v1/chat/completions", _chat(model=4), JSON),
    "guided_choice_multi_token": ("open", "POST", "/v1/chat/completions",
                                  _chat(guided_choice=["yes", "antidisestablishmentarianism"]), JSON),
    "chat_context_exceeded": ("open", "POST", "/v1/chat/completions",
                              _chat(messages=[{"role": "user", "content": LONG_TEXT}]), JSON),
    "completion_logprobs_range": ("open", "POST", "/v1/completions", {"prompt": "x", "logprobs": 6}, JSON),
    "completion_logprobs_bool": ("open", "POST", "/v1/completions", {"prompt": "x", "logprobs": True}, JSON),
    "completion_prompt_type": ("open", "POST", "/v1/completions", {"prompt": 5}, JSON),
    "completion_empty_prompt": ("open", "POST", "/v1/completions", {"prompt": ""}, JSON),
    "completion_context_exceeded": ("open", "POST", "/v1/completions", {"prompt": LONG_TEXT, "max_tokens": 2}, JSON),
    "decide_options_type": ("open", "POST", "/v1/decide", {"question": "Which?", "options": "a, b"}, JSON),
    "decide_one_option": ("open", "POST", "/v1/decide", {"question": "Which?", "options": ["a"]}, JSON),
    "decide_duplicate": ("open", "POST", "/v1/decide", {"question": "Which?", "options": ["a", "A"]}, JSON),
    "decide_empty_question": ("open", "POST", "/v1/decide", {"question": "", "options": ["a", "b"]}, JSON),
    "decide_question_type": ("open", "POST", "/v1/decide", {"question": None, "options": ["a", "b"]}, JSON),
    "decide_think_type": ("open", "POST", "/v1/decide", {"question": "Which?", "options": ["a", "b"], "think": "y"}, JSON),
    "decide_budget_range": ("open", "POST", "/v1/decide",
                            {"question": "Which?", "options": ["a", "b"], "think": True, "reasoning_budget": 0}, JSON),
    "decide_alternatives_range": ("open", "POST", "/v1/decide",
                                  {"question": "Which?", "options": ["a", "b"], "alternatives": 21}, JSON),
    "decide_unknown": ("open", "POST", "/v1/decide", {"question": "Which?", "options": ["a", "b"], "color": "red"}, JSON),
    "decide_unknown_model": ("open", "POST", "/v1/decide", {"question": "Which?", "options": ["a", "b"], "model": "nope"}, JSON),
    "get_on_post_route": ("open", "GET", "/v1/chat/completions", None, {}),
    "post_on_models": ("open", "POST", "/v1/models", None, {}),
    "unknown_path": ("open", "GET", "/v1/embeddings", None, {}),
    "unknown_model_get": ("open", "GET", "/v1/models/gpt-4", None, {}),
    "missing_key": ("keyed", "GET", "/v1/models", None, {}),
    "wrong_key": ("keyed", "POST", "/v1/chat/completions", _chat(), {**JSON, "Authorization": "Bearer wrong"}),
    "body_too_large": ("keyed", "POST", "/v1/chat/completions",
                       _chat(messages=[{"role": "user", "content": "x" * 20_000}]), {**JSON, **AUTH}),
}


# ----- requests and normalisation -----

_ID = re.compile(r"^(chatcmpl|cmpl)-[0-9a-f]{24}$")


def normalise(value):
    """Replace what differs between runs by design: ids, creation times, timings."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "created" and isinstance(item, int):
                item = 0
            elif key == "id" and isinstance(item, str) and _ID.match(item):
                item = item.split("-")[0] + "-ID"
            elif key == "timings":
                item = "TIMINGS"
            else:
                item = normalise(item)
            out[key] = item
        return out
    if isinstance(value, list):
        return [normalise(item) for item in value]
    return value


def _events(data: bytes) -> list:
    events = []
    for block in data.decode("utf-8").split("\n\n"):
        if not block:
            continue
        assert block.startswith("data: "), block
        payload = block[len("data: "):]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def request(port: int, method: str, path: str, body=None, headers: dict | None = None) -> dict:
    """One request over a fresh connection → {status, headers, body}, normalised."""
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        data = response.read()
        kept = {name: response.headers[name] for name in KEPT_HEADERS if response.headers.get(name) is not None}
    finally:
        conn.close()
    if kept.get("content-type", "").startswith("text/event-stream"):
        parsed = _events(data)
    else:
        parsed = json.loads(data)
    return {"status": response.status, "headers": kept, "body": normalise(parsed)}


def replay(ports: dict[str, int], cases: dict[str, Case]) -> Iterator[tuple[str, dict]]:
    for name, (server, method, path, body, headers) in cases.items():
        yield name, request(ports[server], method, path, body, headers)


@contextmanager
def servers(make_server: Callable[..., object]) -> Iterator[dict[str, int]]:
    """Two servers on one engine: open, and keyed with a small body limit. make_server(service, **kwargs)."""
    from decider.app.service import EngineService
    from decider.engine.compile.devices import DeviceOptions

    service = EngineService(MODEL, DeviceOptions(device="CPU"))
    started = [make_server(service), make_server(service, api_key=KEY, max_body=KEYED_MAX_BODY)]
    try:
        yield {"open": started[0].start(), "keyed": started[1].start()}
    finally:
        for server in started:
            server.stop()


def load(kind: str) -> dict:
    return json.loads((GOLDEN_DIR / f"{kind}.json").read_text(encoding="utf-8"))


def record() -> None:
    from decider.app.api.server import ApiServer

    def make(service, **kwargs):
        return ApiServer(service, "127.0.0.1", 0, **kwargs)

    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    with servers(make) as ports:
        for kind, cases in (("success", SUCCESS_CASES), ("errors", ERROR_CASES)):
            replies = dict(replay(ports, cases))
            text = json.dumps(replies, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
            (GOLDEN_DIR / f"{kind}.json").write_text(text, encoding="utf-8")
            print(f"{kind}: {len(replies)} replies → {GOLDEN_DIR / f'{kind}.json'}")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    record()
