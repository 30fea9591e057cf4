"""Bodies of millions of tiny JSON values against `decider serve` on the demo model (127.0.0.1 only), while
another client polls `GET /v1/models`: each body's status and time, and the slowest /v1/models answer meanwhile
(issue #25 item 9; the limits are app/api/limits.check_body's). Round three (issue #38): megabytes of tool text,
floods of object keys, and answers of 16 choices with 20 alternatives per token (one refused, one answered).

    python -m bench.api_body_shapes ["7 MB of {}" ...]   # only the bodies whose names start so
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time

from .soak_requests import decider_path

PORT = 18766
MIB = 1024 * 1024
VALUES = 1 << 20  # the body's value limit
HEAD = b'{"messages": [{"role": "user", "content": "hi"}], '


def _array(item: bytes, count: int) -> bytes:
    return b"[" + b",".join([item] * count) + b"]"


SHAPES: dict[str, tuple[str, bytes]] = {
    "7 MB of {} as messages": ("/v1/chat/completions", b'{"messages": ' + _array(b"{}", 7 * MIB // 3) + b"}"),
    "7 MB of [] as stop": ("/v1/chat/completions", HEAD + b'"stop": ' + _array(b"[]", 7 * MIB // 3) + b"}"),
    "10,000 messages": ("/v1/chat/completions", b'{"messages": ' + _array(b"{}", 10_000) + b"}"),
    "1M ints as stop": ("/v1/chat/completions", HEAD + b'"stop": ' + _array(b"1", VALUES - 20) + b"}"),
    "1M strings as stop": ("/v1/chat/completions", HEAD + b'"stop": ' + _array(b'""', VALUES - 20) + b"}"),
    "524k logit_bias keys": ("/v1/chat/completions", HEAD + b'"logit_bias": {'
                             + b",".join(b'"%d": 1' % i for i in range(VALUES // 2 - 20)) + b"}}"),
    "1M completion prompts": ("/v1/completions", b'{"prompt": ' + _array(b'"a"', VALUES - 20) + b"}"),
    "1M decide options": ("/v1/decide", b'{"question": "q", "options": ' + _array(b'""', VALUES - 20) + b"}"),
    "10,000 content parts": ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": '
                             + _array(b'{"type": "text", "text": ""}', 10_000) + b"}]}"),
    "7.7 MB tool description": ("/v1/chat/completions", HEAD + b'"max_tokens": 1, "tool_choice": "none", "tools": [{"type": '
                                b'"function", "function": {"name": "f", "description": "' + b"word " * 1_540_000 + b'"}}]}'),
    "700k metadata keys": ("/v1/chat/completions", HEAD + b'"max_tokens": 1, "metadata": {'
                           + b",".join(b'"%d":0' % i for i in range(700_000)) + b"}}"),
    "n=16 x 4,000 tokens, top 20": ("/v1/chat/completions", HEAD + b'"n": 16, "max_tokens": 4000, "logprobs": true, '
                                    b'"top_logprobs": 20, "temperature": 1, "seed": 1}'),
    "n=16 x 1,000 tokens, top 20": ("/v1/chat/completions", HEAD + b'"n": 16, "max_tokens": 1000, "logprobs": true, '
                                    b'"top_logprobs": 20, "temperature": 1, "seed": 1}'),
}


def _request(method: str, path: str, body: bytes | None = None, timeout: float = 900) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
        reply = connection.getresponse()
        reply.read()
        return reply.status
    finally:
        connection.close()


def _measure(path: str, body: bytes) -> tuple[int, float, float]:
    """(status, seconds for the body's answer, slowest GET /v1/models meanwhile)."""
    worst, done = [0.0], threading.Event()

    def poll() -> None:
        while not done.is_set():
            start = time.monotonic()
            try:
                _request("GET", "/v1/models", timeout=120)
            except OSError:  # no answer in 120 s: counted as the stall it was
                pass
            worst[0] = max(worst[0], time.monotonic() - start)
            time.sleep(0.01)

    watcher = threading.Thread(target=poll)
    watcher.start()
    start = time.monotonic()
    status = _request("POST", path, body)
    took = time.monotonic() - start
    done.set()
    watcher.join()
    return status, took, worst[0]


def _never_end() -> bytes:
    """A logit_bias banning the model's end-of-turn tokens (their ids from the server's /tokenize)."""
    connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
    try:
        connection.request("POST", "/tokenize", body=json.dumps({"prompt": "<|im_end|><|endoftext|>"}),
                           headers={"Content-Type": "application/json"})
        ids = json.loads(connection.getresponse().read())["tokens"]
    finally:
        connection.close()
    return json.dumps({str(i): -100 for i in ids}).encode()


def main() -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": decider_path()}  # the server runs the decider this process imports
    server = subprocess.Popen([sys.executable, "-m", "decider.app.cli", "serve", "--model",
                               os.path.join(root, "resources", "demo-model"), "--device", "CPU", "--port", str(PORT)],
                              cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                _request("GET", "/v1/models", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        print(f"{'body':26s} {'MB':>5s} status  answer  slowest /v1/models")
        chosen = sys.argv[1:]
        never_end = _never_end()
        for name, (path, body) in SHAPES.items():
            if chosen and not any(name.startswith(prefix) for prefix in chosen):
                continue
            if name.startswith("n=16"):  # every choice its whole max_tokens: the end-of-turn tokens banned
                body = body.replace(b'"seed": 1', b'"seed": 1, "logit_bias": ' + never_end)
            status, took, worst = _measure(path, body)
            print(f"{name:26s} {len(body) / 1e6:5.1f} {status:6d} {took:6.2f} s {worst:8.2f} s", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
