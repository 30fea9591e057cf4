"""The API's HTTP stack against a baseline tree's: import and start-up time, memory, request latency.

    python -m bench.api_transport [--baseline-ref REF] [--rounds 40]

Both servers run at once in their own processes on the fixture model (CPU); the requests alternate
between them, so a busy machine slows both alike: the report gives medians and the candidate/baseline
ratio of each. REF (default: main) is unpacked with `git archive` and must have the current layout
(`decider.app.api.server`); the stdlib server the transport replaced is gone from the tree, and comparing
against it needs its own (pre-package) layout, so it is no longer a peer here.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from .common import rss_mib

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "fixtures" / "models" / "qwen35-text"
DEFAULT_BASELINE = "main"

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from decider.app.api.server import ApiServer
imported = time.perf_counter() - t0
from decider.app.service import EngineService
from decider.engine.compile.devices import DeviceOptions
service = EngineService(sys.argv[1], DeviceOptions(device="CPU"))
server = ApiServer(service, "127.0.0.1", 0)
t0 = time.perf_counter()
port = server.start()
started = time.perf_counter() - t0
print(json.dumps({"port": port, "import_s": imported, "start_s": started}), flush=True)
sys.stdin.read()
server.stop()
"""

REQUESTS = {
    "GET /v1/models": ("GET", "/v1/models", None),
    "POST /v1/decide": ("POST", "/v1/decide", {"question": "Left or right?", "options": ["left", "right"], "temperature": 0}),
    "POST chat, 1 token": ("POST", "/v1/chat/completions",
                           {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "temperature": 0}),
    "POST chat, 8 tokens streamed": ("POST", "/v1/chat/completions",
                                     {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0,
                                      "stream": True, "logprobs": True}),
}


def importable(tree: Path, into: Path) -> Path:
    """A folder where `decider` is `tree` (the repository root is the package), for PYTHONPATH."""
    into.mkdir(parents=True, exist_ok=True)
    (into / "decider").symlink_to(tree.resolve(), target_is_directory=True)
    return into


def start(tree: Path, path_dir: Path) -> tuple[subprocess.Popen, dict]:
    env = {**os.environ, "PYTHONPATH": str(importable(tree, path_dir))}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(MODEL)], cwd=tree, env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    info = json.loads(child.stdout.readline())
    info["rss_start_mb"] = rss_mib(child.pid)
    return child, info


def timed(port: int, method: str, path: str, body) -> float:
    data = json.dumps(body).encode() if body is not None else None
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    response = conn.getresponse()
    response.read()
    conn.close()
    assert response.status == 200, response.status
    return time.perf_counter() - started


def unpack(ref: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-ref", default=DEFAULT_BASELINE)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"baseline": unpack(args.baseline_ref, Path(tmp) / "baseline"), "candidate": ROOT}
        children = {name: start(tree, Path(tmp) / f"path-{name}") for name, tree in trees.items()}
        try:
            times: dict[tuple[str, str], list[float]] = {}
            for name, (method, path, body) in REQUESTS.items():
                for side, (_, info) in children.items():
                    timed(info["port"], method, path, body)  # warm-up
                for i in range(args.rounds):
                    order = list(children) if i % 2 == 0 else list(reversed(children))
                    for side in order:
                        times.setdefault((side, name), []).append(timed(children[side][1]["port"], method, path, body))
            for side, (child, info) in children.items():
                info["rss_end_mb"] = rss_mib(child.pid)
        finally:
            for child, _ in children.values():
                child.stdin.close()
                child.wait(30)
    base, cand = children["baseline"][1], children["candidate"][1]
    print(f"baseline {args.baseline_ref} vs candidate (this tree), {args.rounds} alternating rounds, medians\n")
    print(f"{'':32} {'baseline':>10} {'candidate':>10} {'ratio':>7}")
    for label, key, scale, unit in (("import of the server module", "import_s", 1000, "ms"),
                                    ("start()", "start_s", 1000, "ms"),
                                    ("RSS after start", "rss_start_mb", 1, "MB"),
                                    ("RSS after the requests", "rss_end_mb", 1, "MB")):
        print(f"{label:32} {base[key] * scale:8.1f}{unit} {cand[key] * scale:8.1f}{unit} {cand[key] / base[key]:7.2f}")
    for name in REQUESTS:
        b = statistics.median(times[("baseline", name)]) * 1000
        c = statistics.median(times[("candidate", name)]) * 1000
        print(f"{name:32} {b:8.2f}ms {c:8.2f}ms {c / b:7.2f}")


if __name__ == "__main__":
    main()
