"""tools/local_server.py: the one wait the comparison servers' starters share (llama-cpp-python's, vLLM's)."""

from __future__ import annotations

import subprocess
import sys
import time

from local_server import wait_until_answering


def test_a_server_that_exits_is_reported_at_once():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    start = time.monotonic()
    assert wait_until_answering(process, "http://127.0.0.1:9/v1", timeout=30, interval=0.1) == "exited"
    assert time.monotonic() - start < 10


def test_a_server_that_never_answers_is_ended_after_the_timeout():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert wait_until_answering(process, "http://127.0.0.1:9/v1", timeout=1, interval=0.1) == "did not answer within 1 s"
    assert process.poll() is not None  # killed, not left running
