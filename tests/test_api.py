"""The local OpenAI-compatible API (#5), against live servers on 127.0.0.1 with the fixture model."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from openai.types import Completion as TextCompletion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from decider.app.api.server import ApiServer, check_bind
from decider.app.service import EngineService
from decider.engine.compile.devices import DeviceOptions
from decider.engine.core.errors import SettingsError

MODEL = Path(__file__).parent / "fixtures" / "models" / "qwen35-text"
KEY = "sekrit-test-key"
GREEDY = {"temperature": 0, "seed": 1}
HELLO = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hello."}]


# ----- servers and clients -----


@pytest.fixture(scope="module")
def service():
    return EngineService(MODEL, DeviceOptions(device="CPU"))


@pytest.fixture(scope="module")
def hooks():
    return {"decisions": [], "chats": []}


@pytest.fixture(scope="module")
def api(service, hooks):
    server = ApiServer(
        service, "127.0.0.1", 0,
        on_decision=hooks["decisions"].append,
        on_chat_completion=lambda messages, completion: hooks["chats"].append((messages, completion)),
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def keyed(service):
    """A second server on the same engine: API key, a one-place queue, a 16 KiB body limit."""
    server = ApiServer(service, "127.0.0.1", 0, api_key=KEY, max_queue=1, max_body=16 * 1024)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(api):
    return openai.OpenAI(base_url=api.url, api_key="unused", max_retries=0, timeout=60)


def call(port: int, method: str, path: str, body=None, headers=None, timeout: float = 60):
    """One raw request; returns (status, headers, decoded JSON or raw bytes). A body is sent as JSON
    (Content-Type: application/json) unless the headers say otherwise."""
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    if body is not None:
        headers = {"Content-Type": "application/json", **(headers or {})}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        data = response.read()
    finally:
        conn.close()
    try:
        data = json.loads(data)
    except ValueError:
        pass
    return response.status, response.headers, data


def assert_error(status: int, data, expected_status: int, code: str | None = None, param: str | None = None):
    assert status == expected_status, data
    assert isinstance(data, dict) and set(data) == {"error"}, data
    error = data["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    if code is not None:
        assert error["code"] == code, error
    if param is not None:
        assert error["param"] == param, error


def entries(choice_logprobs) -> list[dict]:
    return [e.model_dump() for e in (choice_logprobs.content if choice_logprobs and choice_logprobs.content else [])]


# ----- models -----


def test_models(client, service):
    listed = client.models.list()
    assert [m.id for m in listed.data] == [service.model_name]
    assert client.models.retrieve("decider").id == "decider"
    with pytest.raises(openai.NotFoundError) as info:
        client.models.retrieve("gpt-4o")
    assert info.value.code == "model_not_found"


def test_start_is_fast_and_binds_loopback(service):
    server = ApiServer(service, port=0)
    started = time.perf_counter()
    port = server.start()
    try:
        assert time.perf_counter() - started < 0.5
        assert server.url == f"http://127.0.0.1:{port}/v1"
        status, _, data = call(port, "GET", "/v1/models")
        assert status == 200 and data["data"][0]["id"] == service.model_name
    finally:
        server.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


# ----- chat -----


def test_chat_logprobs_parse_into_typed_objects(client, service, hooks):
    response = client.chat.completions.create(
        model="decider", messages=HELLO, max_tokens=6, logprobs=True, top_logprobs=3,
        frequency_penalty=0, presence_penalty=0, **GREEDY,
    )
    assert isinstance(response, ChatCompletion)
    assert response.model == service.model_name and response.object == "chat.completion"
    choice = response.choices[0]
    assert choice.message.role == "assistant" and choice.finish_reason in ("stop", "length")
    content = choice.logprobs.content
    assert len(content) == response.usage.completion_tokens == 6
    for entry in content:
        assert entry.logprob <= 0 and len(entry.top_logprobs) == 3
        # greedy: the drawn token is the most probable alternative
        assert entry.top_logprobs[0].token == entry.token and entry.top_logprobs[0].logprob == entry.logprob
        assert [a.logprob for a in entry.top_logprobs] == sorted((a.logprob for a in entry.top_logprobs), reverse=True)
    assert b"".join(bytes(e.bytes) for e in content).decode("utf-8", "replace") == choice.message.content
    assert response.usage.total_tokens == response.usage.prompt_tokens + 6
    messages, completion = hooks["chats"][-1]
    assert messages[-1].content == "Say hello." and completion.content == choice.message.content


def test_chat_extra_fields_top_k_think_and_alias_names(client, service):
    response = client.chat.completions.create(
        model=service.model_name, messages=HELLO, max_completion_tokens=5, top_p=0.9, stop=["\n\n\n"],
        extra_body={"top_k": 5, "min_p": 0.01, "repetition_penalty": 1.1, "chat_template_kwargs": {"enable_thinking": True}},
        **GREEDY,
    )
    # the fixture never closes its think block: everything is reasoning
    assert response.choices[0].message.content == ""
    assert response.choices[0].message.model_extra["reasoning_content"]
    assert response.usage.completion_tokens == 5


@pytest.mark.parametrize(
    "kwargs",
    [
        {"temperature": 0.9, "seed": 11, "top_logprobs": 5},  # sampled: the seed carries over
        {"temperature": 0, "seed": 3, "top_logprobs": 0, "frequency_penalty": 0, "presence_penalty": 0},
        {"temperature": 0.8, "seed": 5, "top_logprobs": 2, "extra_body": {"think": True}},
    ],
)
def test_streamed_logprobs_concatenate_to_the_non_streamed(client, kwargs):
    common = dict(model="decider", messages=HELLO, max_tokens=12, logprobs=True, **kwargs)
    whole = client.chat.completions.create(**common)
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **common))
    assert all(isinstance(c, ChatCompletionChunk) for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert len({c.id for c in chunks}) == 1
    *body, finish, usage = chunks
    assert finish.choices[0].finish_reason == whole.choices[0].finish_reason and finish.choices[0].delta.content is None
    assert usage.choices == [] and usage.usage.model_dump() == whole.usage.model_dump()
    assert all(c.usage is None for c in chunks[:-1])
    streamed = [e for c in body for e in entries(c.choices[0].logprobs)]
    assert streamed == entries(whole.choices[0].logprobs)
    text = "".join(c.choices[0].delta.content or "" for c in body)
    assert text == whole.choices[0].message.content
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content", "") for c in body)
    assert reasoning == (whole.choices[0].message.model_extra.get("reasoning_content") or "")
    for chunk in body:  # each chunk carries the entries of its own delta
        delta_entries = entries(chunk.choices[0].logprobs)
        if delta_entries:
            assert b"".join(bytes(e["bytes"]) for e in delta_entries).decode("utf-8", "replace") == chunk.choices[0].delta.content


def test_stop_strings_stream_like_the_whole(client):
    base = dict(model="decider", messages=HELLO, max_tokens=10, logprobs=True, **GREEDY)
    reference = client.chat.completions.create(**base).choices[0].message.content
    stop = reference[len(reference) // 2 : len(reference) // 2 + 2]
    assert stop.strip()
    whole = client.chat.completions.create(stop=stop, **base)
    assert whole.choices[0].finish_reason == "stop"
    assert whole.choices[0].message.content == reference[: reference.index(stop)]
    chunks = list(client.chat.completions.create(stop=[stop], stream=True, **base))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == whole.choices[0].message.content
    assert [e for c in chunks for e in entries(c.choices[0].logprobs)] == entries(whole.choices[0].logprobs)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_a_stop_string_completed_by_the_last_flushed_bytes_is_a_stop(client):
    """Token 37 of this greedy text is a lone UTF-8 lead byte: only the final flush turns it into U+FFFD,
    and a stop string matched there still ends the completion as "stop", not "length" (issue 26 item 6)."""
    common = dict(model="decider", prompt="Scouts report that the north gate is the safe choice.", max_tokens=37, presence_penalty=0, frequency_penalty=0,
                  extra_body={"repetition_penalty": 1.0}, **GREEDY)
    plain = client.completions.create(**common).choices[0]
    assert plain.text.endswith("\ufffd") and plain.text.count("\ufffd") == 1 and plain.finish_reason == "length"
    stopped = client.completions.create(stop=["\ufffd"], **common).choices[0]
    assert (stopped.text, stopped.finish_reason) == (plain.text[:-1], "stop")
    chunks = list(client.completions.create(stop=["\ufffd"], stream=True, **common))
    assert "".join(c.choices[0].text for c in chunks) == plain.text[:-1] and chunks[-1].choices[0].finish_reason == "stop"


# ----- completions -----


def test_completions_logprobs_and_stream(client):
    prompt = "Once upon a time"
    common = dict(model="decider", prompt=prompt, max_tokens=8, logprobs=3, temperature=0.8, seed=5)
    whole = client.completions.create(**common)
    assert isinstance(whole, TextCompletion)
    lp = whole.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 8
    assert lp.text_offset[0] == len(prompt)
    assert all(len(top) <= 3 and max(top.values()) <= 0 for top in lp.top_logprobs)
    chunks = list(client.completions.create(stream=True, stream_options={"include_usage": True}, **common))
    *body, finish, usage = chunks
    assert finish.choices[0].finish_reason == whole.choices[0].finish_reason
    assert usage.usage.model_dump() == whole.usage.model_dump()
    assert "".join(c.choices[0].text for c in body) == whole.choices[0].text
    for field in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
        assert [x for c in body for x in getattr(c.choices[0].logprobs, field)] == getattr(lp, field)


def test_completion_logprobs_zero_is_the_drawn_token_only(client):
    response = client.completions.create(model="decider", prompt="Hi", max_tokens=3, logprobs=0, **GREEDY)
    lp = response.choices[0].logprobs
    assert len(lp.token_logprobs) == 3 and all(top == {} for top in lp.top_logprobs)
    plain = client.completions.create(model="decider", prompt="Hi", max_tokens=3, **GREEDY)
    assert plain.choices[0].logprobs is None and plain.choices[0].text == response.choices[0].text


# ----- decide -----


@pytest.mark.parametrize(
    "extra, flags",
    [
        ({"permute": True, "temperature": 0, "seed": 3}, ["--permute", "--temperature", "0", "--seed", "3"]),
        (
            {"think": True, "reasoning_budget": 6, "temperature": 0.7, "seed": 9, "top_k": 40},
            ["--think", "--reasoning-budget", "6", "--temperature", "0.7", "--seed", "9", "--top-k", "40"],
        ),
    ],
)
def test_decide_equals_cli_ask_json(api, hooks, tmp_path, capsys, extra, flags):
    from decider.app.cli import main

    question = f"Which road to take? ({extra})"
    options = ["the left road", "the right road", "stay"]
    system = "You decide for a game character."
    context = f"The castle is to the left. The sea is to the right. Case {len(flags)}."
    status, _, data = call(
        api.port, "POST", "/v1/decide",
        {"model": "decider", "question": question, "options": options, "system": system, "context": context, **extra},
    )
    assert status == 200, data
    context_file = tmp_path / "context.txt"
    context_file.write_text(context, encoding="utf-8")
    argv = ["ask", question, "--model", str(MODEL), "--device", "CPU", "--json", "--no-history", "--system", system,
            "--context", str(context_file)]
    for option in options:
        argv += ["--option", option]
    assert main(argv + flags) == 0
    cli = json.loads(capsys.readouterr().out)
    for result in (data, cli):
        result.pop("timings")
    assert data == cli
    decided = hooks["decisions"][-1]
    assert decided.result.choice_index == data["choice"]["index"] and decided.request.question == question


# ----- errors -----

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
DECIDE = "/v1/decide"


def chat(**fields):
    return {"model": "decider", "messages": HELLO, "max_tokens": 2, **fields}


def decision(**fields):
    return {"question": "Which?", "options": ["a", "b"], **fields}


ERROR_CASES = [
    # (path, body, status, code, param)
    (CHAT, b"{", 400, "invalid_json", None),
    (CHAT, b"\xff\xfe\x00", 400, "invalid_json", None),
    (CHAT, b"[1, 2]", 400, "invalid_json", None),
    (CHAT, b"[" * 100_000 + b"]" * 100_000, 400, "invalid_json", None),
    (CHAT, {"model": "decider"}, 400, None, "messages"),
    (CHAT, chat(messages="hi"), 400, "invalid_type", "messages"),
    (CHAT, chat(messages=[]), 400, None, "messages"),
    (CHAT, chat(messages=[{"role": "tool", "content": "x"}]), 400, None, "messages[0].role"),
    (CHAT, chat(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]), 400, None, None),
    (CHAT, chat(messages=[{"role": "user", "content": "x", "tool_calls": []}]), 400, "unsupported_parameter", None),
    (CHAT, chat(messages=[{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]), 400, None, None),
    (CHAT, chat(temperature="hot"), 400, None, "temperature"),
    (CHAT, chat(temperature=3), 400, None, "temperature"),
    (CHAT, chat(top_p=0), 400, None, "top_p"),
    (CHAT, chat(top_k=-1), 400, None, "top_k"),
    (CHAT, chat(min_p=2), 400, None, "min_p"),
    (CHAT, chat(repetition_penalty=0), 400, None, "repetition_penalty"),
    (CHAT, chat(presence_penalty=2.5), 400, None, "presence_penalty"),
    (CHAT, chat(seed=-1), 400, None, "seed"),
    (CHAT, chat(seed="x"), 400, None, "seed"),
    (CHAT, chat(max_tokens=0), 400, None, "max_tokens"),
    (CHAT, chat(max_tokens="5"), 400, "invalid_type", "max_tokens"),
    (CHAT, chat(max_tokens=3, max_completion_tokens=4), 400, None, "max_completion_tokens"),
    (CHAT, chat(logprobs=1), 400, "invalid_type", "logprobs"),
    (CHAT, chat(logprobs=True, top_logprobs=21), 400, None, "top_logprobs"),
    (CHAT, chat(top_logprobs=2), 400, None, "top_logprobs"),
    (CHAT, chat(stream="yes"), 400, "invalid_type", "stream"),
    (CHAT, chat(stream=True, stream_options=[]), 400, "invalid_type", "stream_options"),
    (CHAT, chat(stop=5), 400, "invalid_type", "stop"),
    (CHAT, chat(stop=["a", "b", "c", "d", "e"]), 400, None, "stop"),
    (CHAT, chat(stop=[""]), 400, None, "stop"),
    (CHAT, chat(think=True, enable_thinking=False), 400, None, "think"),
    (CHAT, chat(chat_template_kwargs={"enable_thinking": "yes"}), 400, "invalid_type", None),
    (CHAT, chat(n=17), 400, None, "n"),
    (CHAT, chat(tools=[{"type": "function", "function": {"name": "f", "x": 1}}]), 400, "invalid_value", "tools"),
    (CHAT, chat(tool_choice="required"), 400, "invalid_value", "tool_choice"),
    (CHAT, chat(response_format={"type": "xml"}), 400, "invalid_value", "response_format"),
    (CHAT, chat(response_format={"type": "json_object"}, think=True), 400, "invalid_value", "response_format"),
    (CHAT, chat(logit_bias={"one": 5}), 400, "invalid_value", "logit_bias"),
    (CHAT, chat(logit_bias={"1": 101}), 400, "invalid_value", "logit_bias"),
    (CHAT, chat(logit_bias={"10000000": 1}), 400, "invalid_value", "logit_bias"),
    (CHAT, chat(logit_bias=[1, 2]), 400, "invalid_type", "logit_bias"),
    (CHAT, chat(reasoning_effort="high"), 400, "unsupported_parameter", "reasoning_effort"),
    (CHAT, chat(frobnicate=1), 400, "unknown_parameter", "frobnicate"),
    (CHAT, chat(model="gpt-4o"), 404, "model_not_found", "model"),
    (CHAT, chat(model=4), 400, "invalid_type", "model"),
    (COMPLETIONS, {"prompt": "x", "logprobs": 6}, 400, None, "logprobs"),
    (COMPLETIONS, {"prompt": "x", "logprobs": True}, 400, "invalid_type", "logprobs"),
    (COMPLETIONS, {"prompt": "x", "echo": "yes"}, 400, "invalid_type", "echo"),
    (COMPLETIONS, {"prompt": "x", "echo": True, "stream": True}, 400, "unsupported_parameter", "stream"),
    (COMPLETIONS, {"prompt": "x", "best_of": 2}, 400, "unsupported_parameter", "best_of"),
    (COMPLETIONS, {"prompt": "x", "suffix": "y"}, 400, "unsupported_parameter", "suffix"),
    (COMPLETIONS, {"prompt": [1, "a"]}, 400, "invalid_type", "prompt"),
    (COMPLETIONS, {"prompt": [[1, 2], []]}, 400, "invalid_type", "prompt"),
    (COMPLETIONS, {"prompt": []}, 400, "invalid_value", "prompt"),
    (COMPLETIONS, {"prompt": [1, 2, 10**9]}, 400, "invalid_value", "prompt"),
    (COMPLETIONS, {"prompt": ["a", "b"], "stream": True}, 400, "unsupported_parameter", "stream"),
    (COMPLETIONS, {"prompt": 5}, 400, "invalid_type", "prompt"),
    (COMPLETIONS, {"prompt": ""}, 400, None, None),
    (COMPLETIONS, {"prompt": "x", "max_tokens": -1}, 400, None, "max_tokens"),
    (COMPLETIONS, {"prompt": "x", "model": "text-davinci-003"}, 404, "model_not_found", "model"),
    (DECIDE, decision(options="a, b"), 400, "invalid_type", "options"),
    (DECIDE, decision(options=["a"]), 400, None, None),
    (DECIDE, decision(options=["a", "A"]), 400, None, None),
    (DECIDE, decision(options=[str(i) for i in range(11)]), 400, None, None),
    (DECIDE, decision(options=["a", 2]), 400, "invalid_type", "options"),
    (DECIDE, decision(question=""), 400, None, None),
    (DECIDE, decision(question=None), 400, "invalid_type", "question"),
    (DECIDE, decision(think="y"), 400, "invalid_type", "think"),
    (DECIDE, decision(think=True, reasoning_budget=0), 400, None, "reasoning_budget"),
    (DECIDE, decision(think=True, score_options=True), 400, None, None),
    (DECIDE, decision(alternatives=21), 400, None, "alternatives"),
    (DECIDE, decision(temperature=9), 400, None, "temperature"),
    (DECIDE, decision(system=3), 400, "invalid_type", "system"),
    (DECIDE, decision(color="red"), 400, "unknown_parameter", "color"),
    (DECIDE, decision(model="nope"), 404, "model_not_found", "model"),
]


@pytest.mark.parametrize("path, body, status, code, param", ERROR_CASES)
def test_bad_input_gets_an_openai_error(api, path, body, status, code, param):
    got, _, data = call(api.port, "POST", path, body, {"Content-Type": "application/json"})
    assert_error(got, data, status, code, param)


@pytest.mark.parametrize(
    "method, path, status",
    [("GET", CHAT, 405), ("POST", "/v1/models", 405), ("DELETE", DECIDE, 405), ("GET", "/v1/embeddings", 404),
     ("POST", "/v2/chat/completions", 404), ("BREW", "/v1/models", 405), ("GET", "/v1/models/gpt-4", 404)],
)
def test_wrong_method_or_path(api, method, path, status):
    got, _, data = call(api.port, method, path)
    assert_error(got, data, status)


def test_chunked_request_body_needs_a_length(api):
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
    conn.request("POST", CHAT, body=iter([json.dumps(chat()).encode()]), encode_chunked=True,
                 headers={"Transfer-Encoding": "chunked"})
    response = conn.getresponse()
    assert_error(response.status, json.loads(response.read()), 411)
    conn.close()


def test_prompt_over_the_context_limit(api, client, service):
    long_text = "hello " * 15000
    assert len(service.runner.tokenizer.encode_text(long_text)) > service.runner.context_length
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="decider", messages=[{"role": "user", "content": long_text}], max_tokens=2)
    assert info.value.code == "context_length_exceeded"
    status, _, data = call(api.port, "POST", COMPLETIONS, {"prompt": long_text, "max_tokens": 2})
    assert_error(status, data, 400, "context_length_exceeded")
    status, _, data = call(api.port, "POST", CHAT, chat(stream=True, messages=[{"role": "user", "content": long_text}]))
    assert_error(status, data, 400, "context_length_exceeded")


def test_openai_client_sees_typed_errors(client):
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="decider", messages=HELLO, temperature=5)
    assert info.value.status_code == 400 and info.value.param == "temperature"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4o", messages=HELLO, max_tokens=1)
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model="decider", prompt="x", best_of=2, max_tokens=1)


def test_engine_failure_is_a_500_and_the_server_keeps_serving(api, client, service, monkeypatch):
    def broken_run(*args, **kwargs):
        raise RuntimeError("the device fell over")

    monkeypatch.setattr(service, "run", broken_run)
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model="decider", messages=HELLO, max_tokens=2)
    assert "the device fell over" in info.value.message and info.value.status_code == 500
    monkeypatch.undo()

    real_stream = service.stream

    def failing_after_first(request, should_stop=None):
        steps = real_stream(request, should_stop)
        try:
            yield next(steps)
        finally:
            steps.close()
        raise RuntimeError("the device fell over mid-stream")

    monkeypatch.setattr(service, "stream", failing_after_first)
    with pytest.raises(openai.APIError) as info:
        list(client.chat.completions.create(model="decider", messages=HELLO, max_tokens=5, stream=True))
    assert "mid-stream" in info.value.message
    monkeypatch.undo()
    assert api.stats["errors"] >= 2
    assert client.chat.completions.create(model="decider", messages=HELLO, max_tokens=2).choices[0].message.content


# ----- keys, body limit, queue, disconnects -----


def test_api_key(keyed):
    status, headers, data = call(keyed.port, "GET", "/v1/models")
    assert_error(status, data, 401, "invalid_api_key")
    assert headers["WWW-Authenticate"] == "Bearer"
    status, _, data = call(keyed.port, "POST", CHAT, chat(), {"Authorization": "Bearer wrong"})
    assert_error(status, data, 401, "invalid_api_key")
    status, _, data = call(keyed.port, "POST", CHAT, chat(), {"Authorization": KEY})
    assert_error(status, data, 401, "invalid_api_key")
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=keyed.url, api_key="wrong", max_retries=0).models.list()
    good = openai.OpenAI(base_url=keyed.url, api_key=KEY, max_retries=0)
    assert good.models.list().data
    assert good.chat.completions.create(model="decider", messages=HELLO, max_tokens=2).usage.completion_tokens == 2


def test_body_too_large(keyed):
    big = chat(messages=[{"role": "user", "content": "x" * 20_000}])
    status, headers, data = call(keyed.port, "POST", CHAT, big, {"Authorization": f"Bearer {KEY}"})
    assert_error(status, data, 413, "request_too_large")
    assert headers["Connection"] == "close"
    # refused before the body is sent when the client asks first
    sock = socket.create_connection(("127.0.0.1", keyed.port), timeout=10)
    sock.sendall(
        f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\nContent-Length: 999999\r\n"
        "Expect: 100-continue\r\n\r\n".encode()
    )
    assert sock.recv(4096).startswith(b"HTTP/1.1 413")
    sock.close()


# The fixture's end-of-text ids (generation_config.json): biased out, a stream without max_tokens cannot end by itself
# (on some CPU its sampled or greedy path would reach one, and a test holding the engine busy would race its end).
NEVER_ENDS = {"logit_bias": {"1710": -100, "1712": -100}}


def endless_stream(port: int) -> socket.socket:
    """A streamed chat that runs until its client leaves (the whole 32k context: minutes), once its first event arrived."""
    return open_stream(port, {"model": "decider", "messages": HELLO, "stream": True, **NEVER_ENDS})


def open_stream(port: int, body: dict) -> socket.socket:
    """Start a streamed chat on a raw socket and return once the first event arrived."""
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n".encode() + data
    )
    received = b""
    while b"data: " not in received:
        chunk = sock.recv(4096)
        assert chunk, received
        received += chunk
    assert received.startswith(b"HTTP/1.1 200")
    return sock


def wait_for(condition, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_queue_full_429_and_disconnect_cancels(keyed):
    good = openai.OpenAI(base_url=keyed.url, api_key=KEY, max_retries=0, timeout=60)
    cancelled = keyed.stats["cancelled"]
    running = endless_stream(keyed.port)  # A: minutes of work unless the disconnect cancels it
    waiting: dict = {}
    thread = threading.Thread(
        target=lambda: waiting.update(r=good.chat.completions.create(model="decider", messages=HELLO, max_tokens=2))
    )
    thread.start()
    wait_for(lambda: keyed.queue.waiting == 1)
    with pytest.raises(openai.RateLimitError) as info:
        good.chat.completions.create(model="decider", messages=HELLO, max_tokens=2)
    assert info.value.code == "queue_full"
    status, headers, data = call(keyed.port, "POST", DECIDE, decision(), {"Authorization": f"Bearer {KEY}"})
    assert_error(status, data, 429, "queue_full")
    assert headers["Retry-After"]
    before = time.monotonic()  # the engine is busy, the queue full: connections are still served
    status, _, data = call(keyed.port, "GET", "/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    assert status == 200 and time.monotonic() - before < 1
    started = time.monotonic()
    running.close()
    thread.join(timeout=20)
    assert not thread.is_alive() and waiting["r"].usage.completion_tokens == 2
    assert time.monotonic() - started < 10
    wait_for(lambda: keyed.stats["cancelled"] > cancelled)
    assert keyed.stats["rejected"] >= 2


def test_a_queued_client_that_leaves_is_dropped(keyed):
    running = endless_stream(keyed.port)
    data = json.dumps(chat(max_tokens=2)).encode()
    queued = socket.create_connection(("127.0.0.1", keyed.port), timeout=10)
    queued.sendall(
        f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data
    )
    wait_for(lambda: keyed.queue.waiting == 1)
    queued.close()
    wait_for(lambda: keyed.queue.waiting == 0)
    running.close()
    wait_for(lambda: not keyed.queue.busy)


def test_engine_queue_is_first_come_first_served():
    import asyncio

    from decider.app.api.errors import QueueFull
    from decider.app.api.state import EngineQueue
    from decider.engine.core.errors import Cancelled

    async def scenario() -> list[str]:
        queue = EngineQueue(max_waiting=3)
        order: list[str] = []
        release = asyncio.Event()

        async def holder():
            async with queue.slot():
                await release.wait()

        async def waiter(name: str, gone: asyncio.Event | None = None):
            async with queue.slot(gone):
                order.append(name)

        async def settle():
            for _ in range(5):
                await asyncio.sleep(0)

        tasks = [asyncio.create_task(holder())]
        await settle()
        assert queue.busy
        left = asyncio.Event()
        for i, name in enumerate("BCD"):
            tasks.append(asyncio.create_task(waiter(name, left if name == "C" else None)))
            await settle()
            assert queue.waiting == i + 1
        with pytest.raises(QueueFull):
            async with queue.slot():
                pass
        left.set()  # C's client leaves while queued: it is dropped, the others keep their places
        await settle()
        assert queue.waiting == 2
        with pytest.raises(Cancelled):
            await tasks[2]
        release.set()
        await asyncio.gather(tasks[0], tasks[1], tasks[3])
        assert not queue.busy and queue.waiting == 0
        return order

    assert asyncio.run(scenario()) == ["B", "D"]


# ----- load -----


def test_200_concurrent_requests(api, client):
    prompts = [f"Question number {i}: left or right?" for i in range(4)]
    common = dict(model="decider", max_tokens=2, logprobs=True, top_logprobs=2, **GREEDY)
    expected = {
        p: client.chat.completions.create(messages=[{"role": "user", "content": p}], **common) for p in prompts
    }

    def ask(i: int):
        prompt = prompts[i % len(prompts)]
        response = client.chat.completions.create(messages=[{"role": "user", "content": prompt}], **common)
        return prompt, response

    errors = api.stats["errors"]
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(ask, range(200)))
    assert len(results) == 200
    for prompt, response in results:
        assert response.choices[0].message.content == expected[prompt].choices[0].message.content
        assert entries(response.choices[0].logprobs) == entries(expected[prompt].choices[0].logprobs)
    assert api.stats["errors"] == errors
    assert client.models.list().data  # still alive


# ----- binding -----


def test_non_loopback_bind_needs_a_key(service, monkeypatch, capsys):
    for host in ("0.0.0.0", "::", "192.168.1.20", ""):
        with pytest.raises(SettingsError, match="API key"):
            check_bind(host, None)
        with pytest.raises(SettingsError):
            ApiServer(service, host=host, port=0)
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        check_bind(host, None)
    check_bind("0.0.0.0", "k")
    from decider.app.cli import main

    monkeypatch.delenv("DECIDER_API_KEY", raising=False)
    started = time.perf_counter()
    assert main(["serve", "--model", str(MODEL), "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "API key" in capsys.readouterr().err
    assert time.perf_counter() - started < 1  # refused before the model load


# ----- fuzzing: mostly valid bodies (so generations, streams and decisions run) with 0-2 fields spoiled -----

junk = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.integers(2**62, 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6), st.lists(st.integers(0, 3), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
# where a large valid number would mean a long generation
small_junk = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 0), st.floats(-3, 3), st.sampled_from([float("nan"), float("inf")]),
    st.text(max_size=4), st.lists(st.integers(0, 3), max_size=2),
)
SMALL_FIELDS = {"max_tokens", "max_completion_tokens", "reasoning_budget"}
WORD = st.lists(
    st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), min_size=1, max_size=6)
    | st.sampled_from(["日本", "<|im_end|>", "<think>", "\n", "🙂"]),
    min_size=1, max_size=3,
).map("".join)

SAMPLING = {
    "temperature": st.floats(0, 2),
    "top_p": st.floats(0.01, 1),
    "top_k": st.integers(0, 50),
    "min_p": st.floats(0, 0.5),
    "seed": st.integers(0, 2**63 - 1),
    "presence_penalty": st.floats(-2, 2),
    "frequency_penalty": st.floats(-2, 2),
    "repetition_penalty": st.floats(0.05, 10),
}
MODEL_NAME = st.sampled_from(["decider", "qwen35-text"])
STREAM = {"stream": st.booleans(), "stream_options": st.fixed_dictionaries({}, optional={"include_usage": st.booleans()})}
STOP = st.one_of(WORD, st.lists(WORD, max_size=4))


@st.composite
def conversations(draw):
    turns = draw(st.integers(0, 2))
    messages = [{"role": draw(st.sampled_from(["system", "developer"])), "content": draw(WORD)}] if draw(st.booleans()) else []
    for _ in range(turns):
        messages += [{"role": "user", "content": draw(WORD)}, {"role": "assistant", "content": draw(WORD)}]
    content = draw(WORD | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": WORD}), min_size=1, max_size=2))
    return messages + [{"role": "user", "content": content}]


CHAT_BODY = st.fixed_dictionaries(
    {"messages": conversations(), "max_tokens": st.integers(1, 3)},
    optional={
        "model": MODEL_NAME, **SAMPLING, **STREAM, "stop": STOP, "logprobs": st.just(True), "top_logprobs": st.integers(0, 20),
        "think": st.booleans(), "chat_template_kwargs": st.fixed_dictionaries({"enable_thinking": st.booleans()}),
        "n": st.just(1), "response_format": st.just({"type": "text"}), "user": WORD,
    },
)
COMPLETION_BODY = st.fixed_dictionaries(
    {"prompt": WORD, "max_tokens": st.integers(1, 3)},
    optional={"model": MODEL_NAME, **SAMPLING, **STREAM, "logprobs": st.integers(0, 5), "echo": st.just(False), "stop": STOP},
)
DECIDE_BODY = st.fixed_dictionaries(
    {"question": WORD, "options": st.lists(WORD.filter(str.strip), min_size=2, max_size=10, unique_by=lambda o: o.strip().casefold())},
    optional={
        "model": MODEL_NAME, **SAMPLING, "system": WORD, "context": WORD, "think": st.booleans(),
        "reasoning_budget": st.integers(1, 3), "permute": st.booleans(), "score_options": st.booleans(),
        "alternatives": st.integers(0, 20),
    },
)


@st.composite
def spoiled(draw, path: str, valid):
    body = draw(valid)
    names = sorted(set(body) | {"bogus", "model", "stream", "temperature", "max_tokens", "logprobs", "options", "think"})
    for _ in range(draw(st.integers(0, 2))):
        name = draw(st.sampled_from(names))
        body[name] = draw(small_junk if name in SMALL_FIELDS else junk)
    return path, bounded(path, body)


def bounded(path: str, body: dict) -> dict:
    """Keep every fuzzed generation a few tokens long (the defaults would run to the context limit)."""
    if path == CHAT and body.get("max_tokens") is None and body.get("max_completion_tokens") is None:
        body["max_tokens"] = 2
    if path == COMPLETIONS and body.get("max_tokens") is None:
        body["max_tokens"] = 2
    if path == DECIDE and body.get("reasoning_budget") is None:
        body["reasoning_budget"] = 2
    return body


REQUESTS = st.one_of(
    spoiled(CHAT, CHAT_BODY),
    spoiled(COMPLETIONS, COMPLETION_BODY),
    spoiled(DECIDE, DECIDE_BODY),
    st.tuples(st.sampled_from([CHAT, COMPLETIONS, DECIDE]), st.binary(max_size=40)),
)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(REQUESTS)
def test_fuzzed_bodies_never_get_a_5xx(api, request_):
    path, body = request_
    if isinstance(body, dict):
        body = json.dumps(body).encode()  # NaN/Infinity go out as JSON's common extension
    status, headers, data = call(api.port, "POST", path, body)
    event(f"{path} {status}")
    assert status < 500, data
    if status >= 400:
        assert_error(status, data, status)
    elif headers["Content-Type"].startswith("text/event-stream"):
        assert isinstance(data, bytes) and data.endswith(b"data: [DONE]\n\n")
        for line in data.split(b"\n\n")[:-2]:
            assert "error" not in json.loads(line[len(b"data: "):])
    else:
        assert isinstance(data, dict) and "error" not in data
