"""--think on a raw-completions server (#26 item 2): how the reasoning is closed, and when the answer's bars may
be labelled exact. Fake servers here, with a tokenize endpoint writing one id per character; the real
llama-cpp-python server is in tests/test_remote_llama.py."""

import pytest

from decider.engine.decisions.decide import DecisionRequest
from decider.engine.remote.engine import RemoteConfig, RemoteEngine
from decider.engine.core.settings import SamplingSettings
from test_remote import GREEDY, completion_answer, serve, serve_owned  # noqa: F401  (fixtures)

LISTED = {"A": -0.2, "B": -2.0, "C": -3.0}
REASONING = "Hide is safe."
THINK = DecisionRequest("Which?", ("Attack", "Defend", "Hide"), sampling=GREEDY, think=True)


def _server(serve_owned, owner, counted, finish="stop", stop_reason=..., reasoning=REASONING, again=None):
    """A server that reasons `reasoning` and reports `counted(len(reasoning))` completion tokens; asked again
    for fewer tokens than that, it reasons `again` (default: the same text)."""
    def behaviour(h, body):
        if h.path.endswith("tokenize"):
            text = body.get("input") or body.get("prompt") or body.get("content")
            return h._send(200, {"tokens": [ord(c) for c in text]})
        if body["max_tokens"] > 1:  # the reasoning
            shorter = again is not None and body["max_tokens"] < counted(len(reasoning))
            answer = completion_answer(again if shorter else reasoning, {})
            answer["choices"][0]["finish_reason"] = finish
            if stop_reason is not ...:
                answer["choices"][0]["stop_reason"] = stop_reason
            answer["usage"]["completion_tokens"] = counted(len(reasoning))
            return h._send(200, answer)
        return h._send(200, completion_answer("A", LISTED))

    return serve_owned(behaviour, owner)


def _answer_prompt(server) -> str:
    return next(b for _, b in reversed(server.requests) if b.get("max_tokens") == 1 and "prompt" in b)["prompt"]


@pytest.mark.parametrize("counted, tail", [
    (lambda n: n, f"{REASONING}\n</think>\n\n"),  # every token in the text: an uncounted end of turn ended it
    (lambda n: n + 1, f"{REASONING}</think>\n\n"),  # one more: the model's </think>, kept as it wrote it
], ids=["uncounted-end-of-turn", "model-closed"])
def test_llama_cpp_s_end_of_turn_inside_the_block_is_told_from_its_close_and_the_bars_are_exact(serve_owned, counted, tail):
    """llama-cpp-python answers "stop" both for the </think> string and for an end of turn it does not count: the
    server's own tokenize endpoint tells them apart, and shows the text is the ids it generated."""
    server = _server(serve_owned, "llamacpp", counted)
    result = RemoteEngine(RemoteConfig(server.url)).decide(THINK)
    assert _answer_prompt(server).endswith("<think>\n" + tail)
    assert [o.bar for o in result.options] == ["exact"] * 3 and not result.uncertain
    assert result.reasoning == REASONING
    assert any("tokenize endpoint showed" in note for note in result.engine.notes)


def test_a_budget_spent_after_a_newline_is_closed_with_one_newline(serve_owned):
    """The chat template's close after the reasoning's trailing newlines: never "\\n\\n</think>" (which the
    local engine once matched by forcing a second "\\n" token no tokenizer writes)."""
    server = _server(serve_owned, "llamacpp", lambda n: n, finish="length", reasoning="Hide is safe.\n")
    result = RemoteEngine(RemoteConfig(server.url)).decide(THINK)
    assert _answer_prompt(server).endswith("<think>\nHide is safe.\n</think>\n\n")
    assert [o.bar for o in result.options] == ["exact"] * 3


@pytest.mark.parametrize("owner, counted, why", [
    ("llamacpp", lambda n: n + 3, "tokenizes to 13 ids on the server, which reported generating 16"),
    ("vllm", lambda n: n - 2, "reported generating 11"),
], ids=["llama.cpp", "vllm"])
def test_text_that_is_not_the_ids_the_server_generated_gives_estimates(serve_owned, owner, counted, why):
    server = _server(serve_owned, owner, counted)
    result = RemoteEngine(RemoteConfig(server.url)).decide(THINK)
    assert [o.bar for o in result.options] == ["estimate"] * 3 and result.uncertain
    assert any(why in note and "every bar is an estimate" in note for note in result.engine.notes)


def test_vllm_s_counted_end_of_turn_is_no_close(serve_owned):
    """vLLM counts its end-of-turn token and says so with stop_reason null: one token more than the text, yet
    the block was not closed by the model."""
    server = _server(serve_owned, "vllm", lambda n: n + 1, stop_reason=None)
    result = RemoteEngine(RemoteConfig(server.url)).decide(THINK)
    assert _answer_prompt(server).endswith(f"<think>\n{REASONING}\n</think>\n\n")
    # the reasoning checked out (no re-tokenization estimate); these mid bars are estimates only for vLLM's
    # unreported bf16 (engine/decisions/server_precision.py)
    assert not any("re-tokenized" in note for note in result.engine.notes)
    assert any("does not report its precision" in note for note in result.engine.notes)


def test_llama_cpp_s_stop_one_id_short_of_its_text_is_generated_again_to_tell_a_close_from_an_end_of_turn(serve_owned):
    """llama-cpp-python does not count its end of turn: after a reasoning written in one id more than its text
    re-tokenizes to, that looks like a counted </think>. Generated again one token short (greedy: the same
    tokens), a </think> ending gives back the same text; here the text is shorter, so an end of turn ended a
    reasoning that is not its text's ids: the template's close, and estimates (it was a closed block, exact)."""
    server = _server(serve_owned, "llamacpp", lambda n: n + 1, again=REASONING[:-1])
    result = RemoteEngine(RemoteConfig(server.url)).decide(THINK)
    assert [b["max_tokens"] for _, b in server.requests if b.get("max_tokens", 1) > 1] == [THINK.reasoning_budget, len(REASONING)]
    assert _answer_prompt(server).endswith(f"<think>\n{REASONING}\n</think>\n\n")
    assert [o.bar for o in result.options] == ["estimate"] * 3 and result.uncertain
    assert any("one id more than its text" in note for note in result.engine.notes)


def test_a_sampled_unseeded_reasoning_whose_stop_is_ambiguous_gives_estimates(serve_owned):
    server = _server(serve_owned, "llamacpp", lambda n: n + 1)
    hot = DecisionRequest("Which?", ("Attack", "Defend", "Hide"), think=True,
                          sampling=SamplingSettings(temperature=0.7, frequency_penalty=0.0, presence_penalty=0.0))
    result = RemoteEngine(RemoteConfig(server.url)).decide(hot)
    assert len([b for _, b in server.requests if b.get("max_tokens", 1) > 1]) == 1  # nothing generated again
    assert [o.bar for o in result.options] == ["estimate"] * 3
    assert any("cannot be checked again" in note for note in result.engine.notes)


# --- a real Decider server, `--engine-method forced` (#37 item 4) --------------------------------------------

DEMO = __import__("pathlib").Path(__file__).resolve().parents[1] / "resources" / "demo-model"


@pytest.fixture(scope="module")
def demo_server():
    """`decider serve` on the demo model, in this process, and the held-out items tools/remote_parity.py uses."""
    import sys

    if not (DEMO / "config.json").is_file():
        pytest.skip("resources/demo-model is absent (no demo model shipped)")
    sys.path.insert(0, str(DEMO.parents[1] / "tools"))
    import remote_parity
    from decider.app.api.server import ApiServer
    from decider.app.service import EngineService

    service = EngineService(DEMO)
    server = ApiServer(service, "127.0.0.1", 0)
    port = server.start()
    yield service, f"http://127.0.0.1:{port}/v1", remote_parity
    server.stop()


def test_think_through_a_decider_server_with_forced_letters_scores_the_local_ids(demo_server, monkeypatch):
    """`decider ask --engine URL --think --engine-method forced` against `decider serve`: the server's reasoning
    often ends on an end of turn, which Decider's server counts; before it said so (`stop_reason`, as vLLM
    does) the client took that for the model's `</think>`, closed the block one token short of the local
    engine's close, and bars labelled exact were up to 0.08 off with 9 of 24 choices flipped. Every item
    now scores the local ids: the same choice, the same token counts, bars labelled exact equal to local."""
    from decider.engine.remote import http as remote_http

    service, url, parity = demo_server
    cases = parity.items(24)
    local = parity.local_results(cases, think=True)
    flags = parity.ask_flags(think=True, penalties=True)
    reasonings = []  # the server's answers to the reasoning requests
    call = remote_http.JsonClient.call

    def recording(self, method, path, body=None):
        answer = call(self, method, path, body)
        if body and body.get("stop") == ["</think>"]:
            reasonings.append(answer["choices"][0])
        return answer

    monkeypatch.setattr(remote_http.JsonClient, "call", recording)
    for (question, options), mine in zip(cases, local):
        remote = parity.ask(url, question, options, "forced", flags)
        assert remote["reasoning"] == mine["reasoning"]
        assert remote["choice"]["index"] == mine["choice"]["index"], question
        # the same sequence scored: the decision prompt, then reasoning + close + answer, as the local engine counts
        assert (remote["usage"]["prompt_tokens"], remote["usage"]["completion_tokens"]) == (
            mine["usage"]["prompt_tokens"], mine["usage"]["completion_tokens"]), question
        for r, m in zip(remote["options"], mine["options"]):
            if r["bar"] == "exact":
                assert abs(r["probability"] - m["probability"]) < 1e-6, question
        # the method reported is the one whose numbers these are, and its list is the length the server granted
        assert remote["engine"]["method"] in ("forced letters", "top list")
        if remote["engine"]["method"] == "top list":
            assert remote["engine"]["bars"] == "from the top-5 list"  # Decider's /v1/completions grants 5, as OpenAI
    # the case that failed is exercised: reasonings ended by an end of turn, and by the model's </think>
    ended = [(c["finish_reason"], c.get("stop_reason")) for c in reasonings]
    assert ended.count(("stop", None)) >= 3 and ended.count(("stop", "</think>")) >= 1


def test_decider_s_completions_say_what_stopped_them(demo_server):
    """vLLM's `stop_reason`: the stop string that ended the text, null for an end of turn."""
    import json
    import urllib.request

    _, url, _ = demo_server

    def stop_reason(stop):
        body = {"prompt": "<|im_start|>user\nWhich?<|im_end|>\n<|im_start|>assistant\n", "max_tokens": 64,
                "temperature": 0, "stop": stop}
        request = urllib.request.Request(f"{url}/completions", json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            choice = json.loads(response.read())["choices"][0]
        return choice["text"], choice["finish_reason"], choice["stop_reason"]

    text, finish, reason = stop_reason([])
    assert finish == "stop" and reason is None  # an end of turn (the demo model answers briefly)
    word = text.split()[0]
    cut, finish, reason = stop_reason([word])
    assert (finish, reason) == ("stop", word) and cut == text[: text.index(word)]
