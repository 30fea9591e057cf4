"""Hostile input against a live server (fixture model, 127.0.0.1): web pages (Host, Origin, content
types, CORS), bad text, malformed HTTP over raw sockets, slow clients, resets, and one huge request
beside a small one. What must hold: a clean 4xx with OpenAI's error object, never a 5xx, a traceback
or a stall of the others."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import struct
import threading
import time
from pathlib import Path

import openai
import pytest

from decider.app.api.server import ApiServer
from decider.app.service import EngineService
from decider.engine.compile.devices import DeviceOptions

MODEL = Path(__file__).parent / "fixtures" / "models" / "qwen35-text"
GAME = "http://game.example:3000"
HELLO = [{"role": "user", "content": "Say hello."}]
DECISION = {"question": "Which?", "options": ["left", "right"], "temperature": 0}
JSON = {"Content-Type": "application/json"}
LIMITS = dict(max_connections=12, header_timeout=1.0, body_timeout=1.0)


@pytest.fixture(scope="module")
def service():
    return EngineService(MODEL, DeviceOptions(device="CPU"))


@pytest.fixture(scope="module")
def decisions():
    return []


@pytest.fixture(scope="module")
def api(service, decisions):
    server = ApiServer(service, "127.0.0.1", 0, allow_origins=(GAME,), on_decision=decisions.append, **LIMITS)
    server.start()
    yield server
    server.stop()


def call(port: int, method: str, path: str, body=None, headers=None, timeout: float = 30):
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers if headers is not None else dict(JSON))
        response = conn.getresponse()
        data = response.read()
    finally:
        conn.close()
    try:
        data = json.loads(data)
    except ValueError:
        pass
    return response.status, response.headers, data


def raw(port: int, data: bytes, timeout: float = 10) -> bytes:
    """Send raw bytes, read until the server closes (no half-close: the server takes that as leaving)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
        except OSError:
            pass
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    return received


def error_of(data) -> dict:
    assert isinstance(data, dict) and set(data) == {"error"}, data
    assert set(data["error"]) == {"message", "type", "param", "code"} and data["error"]["message"]
    return data["error"]


def parse_raw(reply: bytes) -> tuple[int, dict]:
    head, _, body = reply.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, error_of(json.loads(body))


# ----- web pages: Host, Origin, content type, CORS -----


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8765", "127.0.0.1.nip.io", "localhost.attacker.example", "", "a b"])
def test_a_foreign_host_is_refused(api, host):
    status, _, data = call(api.port, "GET", "/v1/models", headers={"Host": host})
    assert status == 403 if host.strip() else status in (400, 403), data
    assert error_of(data)["code"] in ("forbidden", "bad_request")


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST", "[::1]:{port}", "game.localhost:{port}",
                                  "10.0.0.7", "[fe80::1]"])
def test_loopback_names_and_ip_literals_are_served(api, host):
    status, _, data = call(api.port, "GET", "/v1/models", headers={"Host": host.format(port=api.port)})
    assert status == 200, data


def test_a_server_on_all_interfaces_also_answers_to_this_machines_names(service):
    """LAN clients type the machine's name; a page's own name (DNS rebinding) is still refused."""
    from decider.app.api.policy import machine_names

    server = ApiServer(service, "0.0.0.0", 0, api_key="lan-key", **LIMITS)
    server.start()
    try:
        names = machine_names()
        assert names and names <= server.policy.own_names
        auth = {"Authorization": "Bearer lan-key"}
        for name in sorted(names) + ["127.0.0.1", "192.168.1.20"]:
            status, _, data = call(server.port, "GET", "/v1/models", headers={**auth, "Host": f"{name.upper()}:{server.port}"})
            assert status == 200, (name, data)
        for name in ["attacker.example", f"{min(names)}.attacker.example", f"attacker-{min(names)}"]:
            status, _, data = call(server.port, "GET", "/v1/models", headers={**auth, "Host": name})
            assert status == 403 and error_of(data)["param"] == "Host", (name, data)
            assert min(names) in error_of(data)["message"]  # the refusal names what to use instead
    finally:
        server.stop()


def test_the_machines_names_are_accepted_only_beyond_loopback():
    from decider.app.api.policy import Policy

    lan = Policy("0.0.0.0", "k", own_names=frozenset({"GamingPC", "gamingpc.local."}))
    assert lan.host_allowed(b"gamingpc:8765") and lan.host_allowed(b"GAMINGPC.LOCAL") and lan.host_allowed(b"gamingpc.local.:1")
    assert not lan.host_allowed(b"gamingpc.evil.example") and not lan.host_allowed(b"evil.example")
    loopback = Policy("127.0.0.1", None)
    assert not loopback.host_allowed(b"gamingpc") and loopback.host_allowed(b"localhost:8765")


def test_allowed_origins_are_compared_in_the_spelling_browsers_send():
    """`--allow-origin http://game.example:80/` means the page whose browser sends `http://game.example`; a value
    that is no origin is refused when the server is set up (it could never match), not silently kept."""
    from decider.app.api.policy import Policy
    from decider.engine.core.errors import SettingsError

    policy = Policy("127.0.0.1", None, ("HTTP://Game.Example:80/", "https://tool.example:8443"))
    assert policy.origin_allowed("http://game.example") and policy.origin_allowed("https://tool.example:8443")
    assert not policy.origin_allowed("https://game.example") and not policy.origin_allowed("null")
    assert not policy.origin_allowed("http://game.example:8080") and not policy.origin_allowed("http://game.example:x")
    assert Policy("127.0.0.1", None, ("*",)).origin_allowed("http://anything.example")
    for bad in ("localhost:3000", "http://game.example/page", "null"):
        with pytest.raises(SettingsError, match="origin"):
            Policy("127.0.0.1", None, (bad,))


def test_the_drive_by_web_page_of_the_report_is_refused(api, decisions):
    before = len(decisions)
    headers = {"Content-Type": "text/plain", "Origin": "http://evil.example", "Host": "attacker.example"}
    status, _, data = call(api.port, "POST", "/v1/decide", json.dumps(DECISION), headers)
    assert status == 403 and error_of(data)["param"] == "Host"
    for headers in ({"Content-Type": "text/plain", "Origin": "http://evil.example"},  # a page on its own origin
                    {"Content-Type": "text/plain"}):  # a "simple" request whose Origin the browser left out
        status, _, data = call(api.port, "POST", "/v1/decide", json.dumps(DECISION), headers)
        assert status in (403, 415), data
    assert len(decisions) == before  # nothing was decided


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://game.example", "https://game.example:3000"])
def test_an_origin_not_allowed_is_refused(api, origin):
    status, headers, data = call(api.port, "POST", "/v1/decide", DECISION, {**JSON, "Origin": origin})
    assert status == 403 and error_of(data)["param"] == "Origin", data
    assert "Access-Control-Allow-Origin" not in headers


def test_an_allowed_origin_gets_cors_headers_and_a_preflight(api):
    status, headers, data = call(api.port, "POST", "/v1/decide", DECISION, {**JSON, "Origin": GAME})
    assert status == 200 and data["choice"]["text"] in ("left", "right")
    assert headers["Access-Control-Allow-Origin"] == GAME and "Origin" in headers["Vary"]
    preflight = {"Origin": GAME, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type, authorization"}
    status, headers, _ = call(api.port, "OPTIONS", "/v1/chat/completions", headers=preflight)
    assert status == 204
    assert headers["Access-Control-Allow-Origin"] == GAME
    assert "POST" in headers["Access-Control-Allow-Methods"]
    assert {"authorization", "content-type"} <= {h.strip().lower() for h in headers["Access-Control-Allow-Headers"].split(",")}
    status, headers, data = call(api.port, "OPTIONS", "/v1/chat/completions", headers={**preflight, "Origin": "http://evil.example"})
    assert status == 403 and "Access-Control-Allow-Origin" not in headers
    status, _, data = call(api.port, "OPTIONS", "/v1/models", headers={})  # not a preflight: a wrong method
    assert status == 405


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                                          "application/jsonp", "text/json"])
def test_post_bodies_must_be_json(api, content_type):
    headers = {} if content_type is None else {"Content-Type": content_type}
    status, _, data = call(api.port, "POST", "/v1/decide", json.dumps(DECISION), headers)
    assert status == 415 and error_of(data)["code"] == "unsupported_media_type"
    status, _, data = call(api.port, "POST", "/v1/decide", DECISION, {"Content-Type": "Application/JSON; charset=utf-8"})
    assert status == 200, data


def test_the_api_key_is_compared_in_constant_time(service, monkeypatch):
    import decider.app.api.policy as policy

    compared = []
    real = policy.hmac.compare_digest
    monkeypatch.setattr(policy.hmac, "compare_digest", lambda a, b: compared.append((a, b)) or real(a, b))
    server = ApiServer(service, "127.0.0.1", 0, api_key="k-123")
    server.start()
    try:
        status, _, _ = call(server.port, "GET", "/v1/models", headers={"Authorization": "Bearer k-124"})
        assert status == 401 and compared == [(b"k-124", b"k-123")]
        status, _, _ = call(server.port, "GET", "/v1/models", headers={"Authorization": "Bearer k-123"})
        assert status == 200
    finally:
        server.stop()


# ----- bad text -----

SURROGATE = "\ud800"
SURROGATE_CASES = [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": SURROGATE}], "max_tokens": 1}, "messages[0].content"),
    ("/v1/chat/completions", {"messages": [{"role": "system", "content": "a" + SURROGATE}, *HELLO], "max_tokens": 1},
     "messages[0].content"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "text", "text": SURROGATE}]}]},
     "messages[0].content[0].text"),
    ("/v1/chat/completions", {"messages": HELLO, "max_tokens": 1, "stop": ["x", SURROGATE]}, "stop[1]"),
    ("/v1/chat/completions", {"messages": HELLO, "max_tokens": 1, "model": SURROGATE}, "model"),
    ("/v1/chat/completions", {"messages": HELLO, "max_tokens": 1, "user": SURROGATE}, "user"),
    ("/v1/completions", {"prompt": SURROGATE + "x", "max_tokens": 1}, "prompt"),
    ("/v1/decide", {**DECISION, "question": SURROGATE}, "question"),
    ("/v1/decide", {**DECISION, "options": ["a", "b" + SURROGATE]}, "options[1]"),
    ("/v1/decide", {**DECISION, "context": SURROGATE}, "context"),
    ("/v1/decide", {**DECISION, "system": "\udfff"}, "system"),
    ("/v1/decide", {**DECISION, SURROGATE: 1}, None),
]


@pytest.mark.parametrize("path, body, param", SURROGATE_CASES)
def test_a_lone_surrogate_in_any_text_is_a_400(api, path, body, param):
    data = json.dumps(body).encode()  # ASCII JSON with the \ud800 escape, as a client would send it
    assert b"\\ud" in data
    status, _, reply = call(api.port, "POST", path, data)
    assert status == 400, reply
    error = error_of(reply)
    if param is not None:
        assert error["param"] == param and "surrogate" in error["message"]


CONTENT_LENGTH_CASES = {
    "superscript two": b"Content-Length: \xc2\xb2\r\n",
    "negative": b"Content-Length: -1\r\n",
    "float": b"Content-Length: 1e3\r\n",
    "hex": b"Content-Length: 0x10\r\n",
    "empty": b"Content-Length: \r\n",
    "two that disagree": b"Content-Length: 2\r\nContent-Length: 3\r\n",
    "comma list": b"Content-Length: 2, 3\r\n",
    "with chunked": b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n",
    "100-continue, bad length": b"Expect: 100-continue\r\nContent-Length: \xc2\xb2\r\n",
    "100-continue, too large": b"Expect: 100-continue\r\nContent-Length: 99999999999\r\n",
    "huge": b"Content-Length: 999999999999999999999999999\r\n",
}


@pytest.mark.parametrize("name", list(CONTENT_LENGTH_CASES))
def test_bad_content_lengths_get_a_clean_4xx(api, name):
    request = (b"POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               + CONTENT_LENGTH_CASES[name] + b"\r\n{}")
    reply = raw(api.port, request)
    assert reply.startswith(b"HTTP/1.1 4"), reply[:200]
    status, error = parse_raw(reply)
    assert 400 <= status < 500 and error["code"]


MALFORMED = [
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40,  # a TLS hello
    b"GET\r\n\r\n",
    b"GET /v1/models HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header Line\r\n\r\n",
    b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n: empty-name\r\n\r\n",
    b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"a" * 200_000 + b"\r\n\r\n",
    b"GET /v1/mod\x00els HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET /v1/models HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    b"POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n",
    b"POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"\r\n\r\n\r\n",
    "GET /v1/models/é HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode("utf-8"),
]


@pytest.mark.parametrize("request_", MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_http_gets_a_4xx_or_a_close(api, request_):
    reply = raw(api.port, request_)
    if reply:  # a reply, when there is one, is a 4xx with OpenAI's error object
        assert reply.startswith(b"HTTP/1.1 4") or reply.startswith(b"HTTP/1.0 4"), reply[:200]
        assert parse_raw(reply)[1]["code"]
    assert call(api.port, "GET", "/v1/models", headers={})[0] == 200


# ----- slow clients, resets, one huge request -----


def read_to_end(sock: socket.socket) -> bytes:
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def test_slow_clients_are_closed_and_capped(api):
    idle = [socket.create_connection(("127.0.0.1", api.port), timeout=10) for _ in range(LIMITS["max_connections"])]
    try:
        time.sleep(0.2)
        extra = raw(api.port, b"")  # over the cap: answered 503 and closed at once
        assert extra.startswith(b"HTTP/1.1 503") and parse_raw(extra)[1]["code"] == "server_busy"
        started = time.monotonic()
        for sock in idle:  # the header timeout closes every idle connection (or the cap refused it)
            sock.settimeout(5)
            assert read_to_end(sock) in (b"", extra), "an idle connection was answered"
        assert time.monotonic() - started < 3
        trickle = socket.create_connection(("127.0.0.1", api.port), timeout=10)
        started = time.monotonic()
        for byte in b"GET /v1/models HTTP/1.1\r\n":
            try:
                trickle.send(bytes([byte]))
            except OSError:
                break
            time.sleep(0.1)
        trickle.settimeout(5)
        assert read_to_end(trickle) == b""  # a trickle of headers is closed after the header timeout
        assert time.monotonic() - started < 6
    finally:
        for sock in idle:
            sock.close()
    assert call(api.port, "GET", "/v1/models", headers={})[0] == 200


def test_a_stalled_body_gets_408(api):
    with socket.create_connection(("127.0.0.1", api.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"q")
        started = time.monotonic()
        reply = sock.recv(65536)
        assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
        assert time.monotonic() - started < 5


def _reset(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_resets_and_disconnects_are_one_debug_line_not_a_traceback(api, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    body = json.dumps({"messages": HELLO, "stream": True, "max_tokens": 2000}).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    cancelled = api.stats["cancelled"]
    for when in ("streaming", "before the body", "after the request"):
        sock = socket.create_connection(("127.0.0.1", api.port), timeout=10)
        if when == "before the body":
            sock.sendall(head)
        else:
            sock.sendall(head + body)
        if when == "streaming":
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        _reset(sock)
    deadline = time.monotonic() + 10
    while api.stats["cancelled"] < cancelled + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert api.stats["cancelled"] >= cancelled + 2
    assert call(api.port, "POST", "/v1/decide", DECISION)[0] == 200
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not loud, [r.getMessage() for r in loud]
    assert any(r.name == "decider.api" and r.levelno == logging.DEBUG and "left" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("words", [1_200_000, 120_000], ids=["6 MB: over the character bound", "600 kB: counted"])
def test_a_small_decision_answers_while_a_huge_request_is_refused(api, words):
    huge = json.dumps({"messages": [{"role": "user", "content": "word " * words}], "max_tokens": 1}).encode()
    assert len(huge) > words * 5
    outcome: dict = {}

    def send_huge():
        outcome["huge"] = call(api.port, "POST", "/v1/chat/completions", huge, timeout=120)

    client = openai.OpenAI(base_url=api.url, api_key="unused", max_retries=0, timeout=30)
    client.post("/decide", cast_to=object, body=DECISION)  # warm
    thread = threading.Thread(target=send_huge)
    thread.start()
    time.sleep(0.05)
    started = time.monotonic()
    decided = client.post("/decide", cast_to=object, body=DECISION)
    elapsed = time.monotonic() - started
    thread.join(60)
    assert decided["choice"]["text"] in ("left", "right")
    assert elapsed < 1.0, elapsed
    status, _, data = outcome["huge"]
    assert status == 400 and error_of(data)["code"] == "context_length_exceeded"
