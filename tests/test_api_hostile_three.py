"""Hostile input, round three (issue #38), against a live server on the fixture text model: tool text bounded
before tokenizing, answers too big to hold, floods of object keys; and the encoder that keeps big answers off
the event loop."""

from __future__ import annotations

import asyncio
import json
import resource
import time

import pytest

from decider.app.api.answers import MAX_ANSWER_LOGPROBS, encode, json_answer
from decider.app.api.errors import dumps
from decider.app.api.fields import MAX_METADATA_KEYS
from decider.app.api.limits import MAX_JSON_KEYS
from decider.app.api.server import ApiServer
from decider.app.service import EngineService
from decider.engine.compile.devices import DeviceOptions
from test_api_hostile import HELLO, MODEL, call, error_of
from test_api_hostile_two import watched

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def api():
    server = ApiServer(EngineService(MODEL, DeviceOptions(device="CPU")), "127.0.0.1", 0)
    server.start()
    yield server
    server.stop()


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def tool(description: str = "Look something up.", parameters: dict | None = None) -> dict:
    return {"type": "function", "function": {"name": "lookup", "description": description,
                                             "parameters": parameters or {"type": "object", "properties": {}}}}


def refused_quickly(api, body: dict) -> dict:
    """POST the chat body while another client polls: a 400 for the context, quick, the other client served
    at once and the server's memory not grown by the size of a tokenization."""
    before = peak_rss()
    (status, _, reply), took, worst = watched(api.port, lambda: call(api.port, "POST", "/v1/chat/completions", body))
    grown = peak_rss() - before
    print(f"\nrefused in {took:.2f} s, GET /v1/models at worst {worst:.2f} s, peak RSS +{grown / MIB:.0f} MiB")
    assert status == 400 and error_of(reply)["code"] == "context_length_exceeded", reply
    # The memory bound proves the text was not tokenized; the wall-clock bound only catches a refusal that does the
    # tokenization's work anyway (seconds per megabyte). 10 s: a shared 2-vCPU machine at load 10 took 6.2 s for
    # the 8,000-property schema, a quiet one under 1 s. The other client's wait is what a user feels: 0.5 s.
    assert took < 10.0 and worst < 0.5
    assert grown < 400 * MIB  # tokenized whole, 7.7 MB of text took 1.6 GB
    return reply


def test_a_huge_tool_description_is_refused_before_it_is_tokenized(api):
    body = {"messages": HELLO, "tools": [tool("word " * 1_540_000)], "tool_choice": "none", "max_tokens": 1}
    refused_quickly(api, body)


def test_huge_tool_schemas_and_earlier_arguments_count_too(api):
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "x" * 60} for i in range(8_000)}}
    refused_quickly(api, {"messages": HELLO, "tools": [tool(parameters=schema)], "tool_choice": "none", "max_tokens": 1})
    arguments = json.dumps({"query": "word " * 1_400_000})
    messages = [{"role": "user", "content": "Look it up."},
                {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                      "function": {"name": "lookup", "arguments": arguments}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "found"}]
    refused_quickly(api, {"messages": messages, "tools": [tool()], "tool_choice": "none", "max_tokens": 1})


def test_tool_text_that_fits_still_runs(api):
    status, _, reply = call(api.port, "POST", "/v1/chat/completions",
                            {"messages": HELLO, "tools": [tool("Look up a word. " * 20)], "tool_choice": "none",
                             "max_tokens": 2, "temperature": 0})
    assert status == 200 and reply["choices"][0]["message"]["content"] is not None


def test_an_answer_too_big_to_hold_is_refused_before_it_is_drawn(api):
    body = {"messages": HELLO, "n": 16, "max_tokens": 4000, "logprobs": True, "top_logprobs": 20}
    (status, _, reply), took, worst = watched(api.port, lambda: call(api.port, "POST", "/v1/chat/completions", body, timeout=20))
    assert status == 400 and error_of(reply)["param"] == "n", reply
    assert "1,344,000" in error_of(reply)["message"] and f"{MAX_ANSWER_LOGPROBS:,}" in error_of(reply)["message"]
    assert took < 2.0 and worst < 0.5
    # the same without max_tokens: bounded by the rest of the context, refused too
    status, _, reply = call(api.port, "POST", "/v1/chat/completions", {**body, "max_tokens": None}, timeout=20)
    assert status == 400 and error_of(reply)["param"] == "n"
    # completions: every prompt's choices count, echoed prompts too
    many = {"prompt": ["Once upon a time"] * 16, "n": 8, "max_tokens": 2000, "logprobs": 5}
    status, _, reply = call(api.port, "POST", "/v1/completions", many, timeout=20)
    assert status == 400 and "128 choices" in error_of(reply)["message"], reply


def test_an_answer_of_several_choices_within_the_bound_is_answered(api):
    body = {"messages": HELLO, "n": 3, "max_tokens": 4, "logprobs": True, "top_logprobs": 20, "temperature": 1, "seed": 5}
    status, _, reply = call(api.port, "POST", "/v1/chat/completions", body)
    assert status == 200 and len(reply["choices"]) == 3
    assert all(len(c["logprobs"]["content"][0]["top_logprobs"]) == 20 for c in reply["choices"])
    streamed = call(api.port, "POST", "/v1/chat/completions", {**body, "stream": True})
    assert streamed[0] == 200 and streamed[2].count(b"top_logprobs") >= 3 and streamed[2].endswith(b"data: [DONE]\n\n")


def test_floods_of_object_keys_are_refused_before_parsing_while_others_are_served(api):
    bodies = {
        "metadata": {"messages": HELLO, "max_tokens": 1, "metadata": {str(i): 0 for i in range(700_000)}},
        "logit_bias": {"messages": HELLO, "max_tokens": 1, "logit_bias": {str(i): 1 for i in range(524_000)}},
    }
    for name, body in bodies.items():
        data = json.dumps(body, separators=(",", ":")).encode()
        assert len(data) < 8 * MIB
        (status, _, reply), took, worst = watched(api.port, lambda: call(api.port, "POST", "/v1/chat/completions", data))
        print(f"\n{name}: {status} in {took:.2f} s, GET /v1/models at worst {worst:.2f} s")
        assert status == 413 and f"{MAX_JSON_KEYS:,} object keys" in error_of(reply)["message"], reply
        assert worst < 0.5


def test_metadata_is_bounded_as_openai_bounds_it(api):
    for metadata, status_wanted in (({f"k{i}": "v" for i in range(MAX_METADATA_KEYS)}, 200),
                                    ({f"k{i}": "v" for i in range(MAX_METADATA_KEYS + 1)}, 400), ("tag", 400)):
        status, _, reply = call(api.port, "POST", "/v1/chat/completions",
                                {"messages": HELLO, "max_tokens": 1, "metadata": metadata})
        assert status == status_wanted, reply
        if status == 400:
            assert error_of(reply)["param"] == "metadata"


def test_keys_in_text_are_not_counted_as_keys(api):
    """Text full of `":` (JSON inside a string, as a tool result carries it) is text, not keys."""
    text = json.dumps({f"k{i}": i for i in range(70_000)})
    data = json.dumps({"prompt": text}).encode()
    assert data.count(b":") > MAX_JSON_KEYS  # scanned, not waved through
    status, _, reply = call(api.port, "POST", "/tokenize", data)
    assert status == 400 and error_of(reply)["code"] == "context_length_exceeded", reply  # over the context, not 413


def big_answer(entries: int) -> dict:
    entry = {"token": "tok", "logprob": -1.25, "bytes": [116, 111, 107],
             "top_logprobs": [{"token": f"t{k}", "logprob": -2.5, "bytes": [116]} for k in range(20)]}
    per_choice = entries // 21 // 4
    return {"id": "x", "object": "chat.completion", "choices": [
        {"index": i, "message": {"role": "assistant", "content": "é ☃ " * 100}, "finish_reason": "length",
         "logprobs": {"content": [entry] * per_choice}} for i in range(4)], "usage": {"total_tokens": 1}}


def test_the_encoder_writes_what_json_dumps_writes():
    samples = [big_answer(21 * 4 * 700), {"a": [], "b": {}, "c": [[1, 2], {"d": None}], 5: "int key"}, [], "text",
               {"choices": [{"message": {"content": "a lone \ud800 surrogate"}}]}]
    for payload in samples:
        assert encode(payload) == dumps(payload)


def test_a_big_answer_is_encoded_without_holding_the_event_loop():
    """1M logprob entries (~75 MiB): encoded in one json.dumps call on the loop it held it for seconds."""
    payload = big_answer(MAX_ANSWER_LOGPROBS)

    async def measure() -> tuple[float, int]:
        gaps: list[float] = []
        done = asyncio.Event()

        async def tick() -> None:
            last = time.monotonic()
            while not done.is_set():
                await asyncio.sleep(0.005)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        ticker = asyncio.create_task(tick())
        response = await json_answer(lambda: payload)
        done.set()
        await ticker
        return max(gaps), len(response.body)

    worst, size = asyncio.run(measure())
    print(f"\n{size / MIB:.0f} MiB encoded; the event loop waited at most {worst * 1000:.0f} ms")
    assert size > 50 * MIB and worst < 0.25


def test_the_collector_is_held_off_while_any_answer_is_made_and_comes_back_after():
    import gc
    import threading

    from decider.app.api.answers import collector_paused

    assert gc.isenabled()
    inside: list[bool] = []
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused:
            entered.set()
            release.wait(10)
            inside.append(gc.isenabled())

    worker = threading.Thread(target=other)
    with collector_paused:
        worker.start()
        entered.wait(10)
        with collector_paused:
            inside.append(gc.isenabled())
    inside.append(gc.isenabled())  # the other answer is still being made
    release.set()
    worker.join()
    assert inside == [False, False, False] and gc.isenabled()
