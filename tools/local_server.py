"""Waiting for a comparison server a tool started (llama-cpp-python's, vLLM's) until it answers."""

from __future__ import annotations

import subprocess
import time
import urllib.request


def wait_until_answering(process: subprocess.Popen, url: str, timeout: float, interval: float) -> str | None:
    """None once GET {url}/models answers; otherwise why not ("exited", or that it did not answer in time), with
    the process ended, for the caller's error (which adds the server's own output)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return "exited"
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                return None
        except OSError:
            time.sleep(interval)
    process.kill()
    process.wait()
    return f"did not answer within {timeout:.0f} s"
