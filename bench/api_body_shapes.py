"""Bodies of millions of tiny JSON values against `decider serve` on the demo model (127.0.0.1 only), while
another client polls `GET /v1/models`: each body's status and time, and the slowest /v1/models answer meanwhile
(issue #25 item 9; the limits are app/api/limits.check_body's).

    python -m bench.api_body_shapes ["7 MB of {}" ...]   # only the bodies whose names start so
"""

from __future__ import annotations

import http.client
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
}


def _request(method: str, path: str, body: bytes | None = None, timeout: float = 120) -> int:
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
        for name, (path, body) in SHAPES.items():
            if chosen and not any(name.startswith(prefix) for prefix in chosen):
                continue
            status, took, worst = _measure(path, body)
            print(f"{name:26s} {len(body) / 1e6:5.1f} {status:6d} {took:6.2f} s {worst:8.2f} s", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
