"""Hostile input, round two (issue #25), against a live server on the fixture text model: an unbounded
/tokenize, ambiguous HTTP framing (request smuggling), images while other clients wait."""

from __future__ import annotations

import base64
import http.client
import io
import json
import os
import threading
import time
from pathlib import Path

import pytest
from PIL import Image

from decider.app.api.server import ApiServer
from decider.app.service import EngineService
from decider.engine.compile.devices import DeviceOptions
from test_api_hostile import MODEL, call, error_of, raw

EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n{ 1 pop } loop\n"


@pytest.fixture(scope="module")
def decisions():
    return []


@pytest.fixture(scope="module")
def api(decisions):
    server = ApiServer(EngineService(MODEL, DeviceOptions(device="CPU")), "127.0.0.1", 0, on_decision=decisions.append)
    server.start()
    yield server
    server.stop()


class Watch:
    """GET /v1/models in a loop while something else runs: the slowest answer, in seconds."""

    def __init__(self, port: int):
        self.port, self.worst, self.done = port, 0.0, False
        self.thread = threading.Thread(target=self._poll)

    def _poll(self) -> None:
        while not self.done:
            start = time.monotonic()
            status, _, _ = call(self.port, "GET", "/v1/models", timeout=10)
            assert status == 200
            self.worst = max(self.worst, time.monotonic() - start)
            time.sleep(0.01)

    def __enter__(self) -> "Watch":
        self.thread.start()
        time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.done = True
        self.thread.join()


def watched(port: int, send):
    """send() while another client polls GET /v1/models: (its result, the seconds it took, the poll's worst wait)."""
    with Watch(port) as watch:
        start = time.monotonic()
        result = send()
        took = time.monotonic() - start
    return result, took, watch.worst


def test_tokenize_over_the_context_is_refused_before_counting_it_out(api):
    status, _, body = call(api.port, "GET", "/tokenizer_info")
    context = body["model_max_length"]
    status, _, body = call(api.port, "POST", "/tokenize", {"prompt": "hello " * (context + 10)})
    assert status == 400 and error_of(body)["code"] == "context_length_exceeded"
    status, _, body = call(api.port, "POST", "/tokenize", {"prompt": "hello world"})
    assert status == 200 and body["count"] == len(body["tokens"]) > 0


def test_a_huge_tokenize_body_gets_a_fast_4xx(api):
    start = time.monotonic()
    status, _, body = call(api.port, "POST", "/tokenize", {"prompt": "a b " * 1_500_000})
    assert 400 <= status < 500 and time.monotonic() - start < 10


def test_transfer_encoding_with_content_length_is_refused_and_the_connection_closed(api, decisions):
    before = len(decisions)
    smuggled = json.dumps({"question": "Smuggled?", "options": ["yes", "no"], "temperature": 0}).encode()
    second = (b"POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(smuggled)).encode() + b"\r\n\r\n" + smuggled)
    first = (b"POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n")
    reply = raw(api.port, first + second)
    assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
    assert reply.count(b"HTTP/1.1 ") == 1, reply  # the bytes after the chunked terminator never ran
    time.sleep(0.3)
    assert len(decisions) == before


def post_raw(port: int, path: str, body: bytes) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        reply = connection.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        connection.close()


def test_millions_of_tiny_values_are_refused_while_other_clients_are_answered(api):
    """7 MB of `{}` as messages: 2.4 million values. Validating them item by item once stalled every other
    client for 28 s (the validation report is built holding the GIL): refused by the body's shape instead."""
    body = b'{"messages": [' + b"{}," * (7 * 1024 * 1024 // 3) + b'{}], "max_tokens": 1}'
    (status, reply), took, worst = watched(api.port, lambda: post_raw(api.port, "/v1/chat/completions", body))
    assert status == 413 and "JSON values" in error_of(reply)["message"]
    assert took < 5 and worst < 1


def test_millions_of_empty_lists_are_refused_before_parsing(api):
    """7 MB of `[]`: parsing and freeing 2.4 million lists alone held the GIL ~1 s; counted before parsing instead."""
    body = b'{"messages": [{"role": "user", "content": "hi"}], "stop": [' + b"[]," * (7 * 1024 * 1024 // 3) + b"[]]}"
    (status, reply), took, worst = watched(api.port, lambda: post_raw(api.port, "/v1/chat/completions", body))
    assert status == 413 and "counted before parsing" in error_of(reply)["message"]
    assert took < 1 and worst < 0.5


def test_ten_thousand_objects_in_one_array_is_the_limit(api):
    ok = {"messages": [{"role": "user", "content": "hi"}] * 10_000, "max_tokens": 1}
    status, _, body = call(api.port, "POST", "/v1/chat/completions", ok)
    assert status == 400 and error_of(body)["code"] == "context_length_exceeded"  # validated, then too long
    status, _, body = call(api.port, "POST", "/v1/chat/completions", {**ok, "messages": ok["messages"] * 2})
    assert status == 413 and error_of(body)["param"] == "messages" and "at most 10,000" in error_of(body)["message"]


def test_a_lone_surrogate_is_named_by_its_path():
    from decider.app.api.errors import ApiError
    from decider.app.api.limits import check_body

    body = json.loads('{"messages": [{"role": "user", "content": [{"type": "text", "text": "a\\ud800"}]}]}')
    with pytest.raises(ApiError) as caught:
        check_body(body)
    assert caught.value.param == "messages[0].content[0].text"
    with pytest.raises(ApiError) as caught:
        check_body(json.loads('{"logit_bias": {"\\udc00": 1}}'))
    assert caught.value.param == "logit_bias"


def png_url(width: int, height: int) -> str:
    out = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(out, "PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def test_images_to_a_text_model_are_refused_fast_without_decoding(api):
    part = {"type": "image_url", "image_url": {"url": png_url(8192, 8192)}}
    messages = [{"role": "user", "content": [part] * 8}]
    (status, _, body), took, worst = watched(
        api.port, lambda: call(api.port, "POST", "/v1/chat/completions", {"messages": messages, "max_tokens": 1}))
    assert status == 400 and "cannot see images" in error_of(body)["message"]
    assert took < 2 and worst < 1


def test_eps_is_a_fast_4xx_and_no_ghostscript_runs(api):
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(EPS).decode()}}
    request = {"question": "Q?", "options": ["a", "b"], "images": [part["image_url"]["url"]]}
    (status, _, _), took, worst = watched(api.port, lambda: call(api.port, "POST", "/v1/decide", request, timeout=5))
    assert 400 <= status < 500 and took < 2 and worst < 1
    assert not [name for name in children() if name in ("gs", "gsc")]


def children() -> list[str]:
    """The names of this process's children (the server runs in it)."""
    names = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)
            name, ppid = fields[0].split("(", 1)[1], int(fields[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid():
            names.append(name)
    return names


SCHEMAS = {
    "a million repeats": {"type": "object", "properties": {"x": {"type": "string", "pattern": "^a{1000000}$"}},
                          "required": ["x"]},
    "a bare string with a million repeats": {"type": "string", "pattern": "^a{1000000}$"},
    "$ref to itself": {"$ref": "#"},
    "a to b to a": {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
}


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_schemas_the_grammar_cannot_follow_are_400s_with_a_short_reason(api, name):
    body = {"messages": [{"role": "user", "content": "Answer."}], "max_tokens": 8, "temperature": 0,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMAS[name]}}}
    status, _, reply = call(api.port, "POST", "/v1/chat/completions", body)
    assert status == 400, reply
    error = error_of(reply)
    assert error["param"] == "response_format" and "\n" not in error["message"] and "<state>" not in error["message"]
    assert len(error["message"]) < 200
