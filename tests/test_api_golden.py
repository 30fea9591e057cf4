"""The API answers what it answered before its transport was replaced: the golden replies in
tests/api/golden were recorded from the stdlib server (tools/api_goldens.py, ids and times normalised).

Floats (logprobs, probabilities) are compared to 1e-5 relative: these goldens pin the transport and
the JSON (every key, string, token and count exactly), while the engine's f32 arithmetic may move in
the last bits when its kernels or its prefill chunking change (the engine's own reference tests pin
its numbers against float64).
"""

from __future__ import annotations

import math

import pytest

import api_goldens as goldens
from decider.app.api.server import ApiServer


@pytest.fixture(scope="module")
def ports():
    def make(service, **kwargs):
        return ApiServer(service, "127.0.0.1", 0, **kwargs)

    with goldens.servers(make) as ports:
        yield ports


def same(got, want, where: str = "") -> None:
    if isinstance(want, float) and isinstance(got, float):
        assert math.isclose(got, want, rel_tol=1e-5, abs_tol=1e-7), f"{where}: {got} != {want}"
    elif isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for key in want:
            same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got!r:.300} != {want!r:.300}"
        for i, (a, b) in enumerate(zip(got, want)):
            same(a, b, f"{where}[{i}]")
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r:.300} != {want!r:.300}"


@pytest.mark.parametrize("name", list(goldens.SUCCESS_CASES))
def test_success_replies_equal_the_goldens(ports, name):
    reply = goldens.request(ports[goldens.SUCCESS_CASES[name][0]], *goldens.SUCCESS_CASES[name][1:])
    same(reply, goldens.load("success")[name], name)


@pytest.mark.parametrize("name", list(goldens.ERROR_CASES))
def test_error_replies_equal_the_goldens(ports, name):
    reply = goldens.request(ports[goldens.ERROR_CASES[name][0]], *goldens.ERROR_CASES[name][1:])
    same(reply, goldens.load("errors")[name], name)


def test_the_goldens_cover_the_pinned_shapes():
    """The goldens hold what the comparison is for (a re-recording that lost them would pass vacuously)."""
    success, errors = goldens.load("success"), goldens.load("errors")
    assert set(success) == set(goldens.SUCCESS_CASES) and set(errors) == set(goldens.ERROR_CASES)
    stream = success["chat_logprobs_stream"]["body"]
    assert stream[-1] == "[DONE]" and stream[0]["choices"][0]["delta"]["role"] == "assistant"
    assert any(c["choices"] and c["choices"][0]["logprobs"] for c in stream[1:-1])
    assert success["decide"]["body"]["options"][0]["debiased_probability"] is not None
    assert {e["status"] for e in errors.values()} >= {400, 401, 404, 405, 413}
