"""Remote engine: decisions against OpenAI-compatible servers (fake ones here; Decider's own in test_api)."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from decider.engine.decisions.decide import DecisionRequest
from decider.engine.core.errors import SettingsError
from decider.engine.remote.engine import RemoteConfig, RemoteEngine, RemoteError
from decider.engine.core.settings import SamplingSettings

GREEDY = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0)


def chat_answer(token, alternatives):
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": token}, "finish_reason": "length",
                     "logprobs": {"content": [{"token": token, "logprob": alternatives.get(token, -9.0), "bytes": None,
                                               "top_logprobs": [{"token": t, "logprob": v, "bytes": None} for t, v in alternatives.items()]}]}}],
        "usage": {"prompt_tokens": 42, "completion_tokens": 1},
    }


class FakeServer:
    def __init__(self, behaviour):
        outer = self
        self.requests = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body, raw=None):
                data = raw if raw is not None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.headers.get("Authorization"), body))
                behaviour(self, body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(behaviour):
        server = FakeServer(behaviour)
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.close()


REQUEST = DecisionRequest("Which?", ("Attack", "Defend", "Hide"), sampling=GREEDY)


def test_through_chat_an_option_below_the_top_20_is_no_bound_and_not_zero(serve):
    """The server's chat template answered another prompt (issue 26 item 3: 30 of 57 such "upper bounds"
    were below the local exact value): a letter outside its list is an estimate, never a bound."""
    alternatives = {"A": -0.5, "B": -1.5, **{f"w{i}": -3.0 - i * 0.1 for i in range(18)}}  # no "C"
    server = serve(lambda h, body: h._send(200, chat_answer("A", alternatives)))
    result = RemoteEngine(RemoteConfig(server.url)).decide(REQUEST)
    a, b, c = result.options
    assert (a.bound, b.bound, c.bound) == (None, None, None) and {o.bar for o in result.options} == {"estimate"}
    assert (c.low, c.high) == (0.0, 1.0) and result.uncertain
    assert c.logprob == min(alternatives.values()) and c.probability > 0
    assert result.choice_index == 0
    assert result.coverage == pytest.approx(sum(__import__("math").exp(v) for v in (-0.5, -1.5)))
    assert result.engine.kind == "remote" and "top-20" in result.engine.logprobs_text
    _, body = server.requests[-1]
    assert body["max_tokens"] == 1 and body["logprobs"] is True and body["top_logprobs"] == 20
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert "A. Attack" in body["messages"][-1]["content"]


def test_constraint_modes_are_sent_and_recorded(serve):
    server = serve(lambda h, body: h._send(200, chat_answer("B", {"A": -2.0, "B": -0.2, "C": -3.0})))
    result = RemoteEngine(RemoteConfig(server.url, constraint="vllm")).decide(REQUEST)
    assert "guided_choice" not in server.requests[-2][1]  # first the unconstrained read (coverage)
    assert server.requests[-1][1]["guided_choice"] == ["A", "B", "C"]
    assert result.engine.constraint == "vllm" and result.choice.label == "B"
    RemoteEngine(RemoteConfig(server.url, constraint="llama.cpp")).decide(REQUEST)
    assert server.requests[-1][1]["grammar"] == 'root ::= "A" | "B" | "C"'


def test_api_key_is_sent_and_401_is_clear(serve):
    server = serve(lambda h, body: h._send(401, {"error": {"message": "bad key", "type": "auth"}}))
    with pytest.raises(RemoteError, match="401 unauthorized — check the API key \\(bad key\\)"):
        RemoteEngine(RemoteConfig(server.url, api_key="k1")).decide(REQUEST)
    assert server.requests[-1][0] == "Bearer k1"


def test_server_error_and_malformed_answers_are_clear(serve):
    server = serve(lambda h, body: h._send(500, {"error": {"message": "boom"}}))
    with pytest.raises(RemoteError, match="HTTP 500: boom"):
        RemoteEngine(RemoteConfig(server.url)).decide(REQUEST)
    server = serve(lambda h, body: h._send(200, None, raw=b"<html>"))
    with pytest.raises(RemoteError, match="did not answer JSON"):
        RemoteEngine(RemoteConfig(server.url)).decide(REQUEST)
    server = serve(lambda h, body: h._send(200, {"choices": [{"message": {"content": "A"}}]}))
    with pytest.raises(RemoteError, match="no logprobs"):
        RemoteEngine(RemoteConfig(server.url)).decide(REQUEST)


def test_timeout_is_clear(serve):
    server = serve(lambda h, body: (time.sleep(1.5), h._send(200, chat_answer("A", {"A": -0.1}))))
    with pytest.raises(RemoteError, match="no answer within 0.5 s"):
        RemoteEngine(RemoteConfig(server.url, timeout=0.5)).decide(REQUEST)


def test_unreachable_server_is_clear():
    with pytest.raises(RemoteError, match="cannot reach http://127.0.0.1:9"):
        RemoteEngine(RemoteConfig("http://127.0.0.1:9/v1", timeout=2)).models()


def test_connection_test_reports_models_and_logprobs(serve):
    server = serve(lambda h, body: h._send(200, chat_answer("A", {"A": -0.1, "B": -2.5})))
    report = RemoteEngine(RemoteConfig(server.url)).test_connection()
    assert report.models == ["fake-model"] and report.logprobs
    server = serve(lambda h, body: h._send(200, {"choices": [{"message": {"content": "A"}, "logprobs": None}]}))
    assert not RemoteEngine(RemoteConfig(server.url)).test_connection().logprobs


def test_config_validation():
    with pytest.raises(SettingsError, match="must start with http"):
        RemoteConfig("localhost:8000")
    with pytest.raises(SettingsError, match="constraint must be one of"):
        RemoteConfig("http://x", constraint="regex")
    assert RemoteConfig("http://x:1/v1/").base_url == "http://x:1"


# --- a real round trip: Decider's own API server as the remote ------------------------------------------


@pytest.fixture(scope="module")
def own_server():
    from decider.app.api.server import ApiServer
    from decider.app.service import EngineService
    from support.models import model_dir

    service = EngineService(model_dir("qwen35-text"))
    server = ApiServer(service, "127.0.0.1", 0, api_key="secret")
    port = server.start()
    yield service, f"http://127.0.0.1:{port}/v1"
    server.stop()


@pytest.mark.parametrize(
    "request_",
    [
        DecisionRequest("Scouts report that Hide is the safe choice. What should we do?", ("Attack", "Defend", "Hide", "Trade"), sampling=GREEDY),
        DecisionRequest("Which of these is an animal?", ("Hammer", "Horse", "Bread"), system="Answer carefully.",
                        context="Animals breathe; tools do not.", sampling=GREEDY),
    ],
)
def test_remote_decisions_equal_local_ones(own_server, request_):
    service, url = own_server
    local = service.decide(request_)
    plain = RemoteEngine(RemoteConfig(url, api_key="secret")).decide(request_)
    constrained = RemoteEngine(RemoteConfig(url, api_key="secret", constraint="vllm")).decide(request_)
    for remote in (plain, constrained):
        for r, l in zip(remote.options, local.options):
            if r.bound is None:  # listed in the server's top 20: the same full-vocabulary number
                assert abs(r.logprob - l.logprob) < 1e-6
            else:  # not listed: an upper bound, and a true one
                assert l.logprob <= r.logprob
        assert remote.engine.kind == "remote"
    # the constrained read lists every label: bars and choice equal the local ones
    assert constrained.choice_index == local.choice_index
    for r, l in zip(constrained.options, local.options):
        assert abs(r.probability - l.probability) < 1e-6
    assert local.engine.kind == "local" and local.engine.logprobs_text == "exact full-vocabulary (f32)"


def test_remote_connection_test_against_our_server(own_server):
    _, url = own_server
    report = RemoteEngine(RemoteConfig(url, api_key="secret")).test_connection()
    assert "qwen35-text" in report.models and report.logprobs
    with pytest.raises(RemoteError, match="401"):
        RemoteEngine(RemoteConfig(url, api_key="wrong")).models()


def test_cli_ask_with_a_remote_engine(own_server, capsys):
    from decider.app.cli import main

    _, url = own_server
    code = main(["ask", "Which?", "--option", "Attack", "--option", "Hide", "--engine", url, "--engine-key", "secret",
                 "--json", "--no-history", "--temperature", "0"])
    body = json.loads(capsys.readouterr().out)
    assert code == 0 and body["engine"]["kind"] == "remote" and len(body["options"]) == 2


def test_guided_choice_is_validated(own_server):
    import urllib.error
    import urllib.request

    _, url = own_server

    def post(body):
        request = urllib.request.Request(f"{url}/chat/completions", json.dumps(body).encode(), method="POST",
                                         headers={"Authorization": "Bearer secret", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    messages = [{"role": "user", "content": "Pick"}]
    status, body = post({"messages": messages, "guided_choice": ["A", "B"], "logprobs": True, "top_logprobs": 5})
    assert status == 200 and body["choices"][0]["message"]["content"] in ("A", "B")
    tops = body["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    assert {t["token"] for t in tops} == {"A", "B"}
    assert abs(sum(__import__("math").exp(t["logprob"]) for t in tops) - 1) < 1e-9
    status, body = post({"messages": messages, "guided_choice": ["Attack the castle", "B"]})
    assert status == 400 and "each choice must be one token" in body["error"]["message"]
    status, body = post({"messages": messages, "guided_choice": ["A", "B"], "think": True})
    assert status == 400 and body["error"]["param"] == "guided_choice"


# --- the raw prompt, server detection, methods and their checks ------------------------------------------


@pytest.mark.parametrize("system,context,think", [(None, None, False), ("Answer carefully.", "Animals breathe.", False),
                                                  (None, "Rules apply.", True)])
def test_raw_prompt_text_is_the_local_prompt_token_for_token(text_runner, system, context, think):
    from decider.engine.decisions.prompt import build_decision_prompt
    from decider.engine.remote.prompt import decision_text

    options = ["Attack", "Defend", "Hide"]
    text = decision_text("Which?", options, system=system, context=context, think=think)
    ids = build_decision_prompt(text_runner.tokenizer, "Which?", options, system=system, context=context, think=think).ids
    assert text_runner.tokenizer.encode_raw(text) == ids


def test_auto_against_our_server_runs_the_decision_there_exactly(own_server):
    service, url = own_server
    request = DecisionRequest("Which of these is an animal?", ("Hammer", "Horse", "Bread", "Saw"), sampling=GREEDY)
    local = service.decide(request)
    remote = RemoteEngine(RemoteConfig(url, api_key="secret")).decide(request)
    assert remote.engine.method == "decide" and remote.engine.server == "decider"
    assert all(o.bar == "exact" and o.bound is None for o in remote.options)
    assert max(abs(r.probability - l.probability) for r, l in zip(remote.options, local.options)) <= 1e-6
    assert remote.choice_index == local.choice_index
    # settled or not for the same reasons (the random fixture's letters hold a tiny share: uncertain both)
    assert (remote.uncertain, remote.uncertain_why) == (local.uncertain, local.uncertain_why)
    # what a server cannot do elsewhere works there: permute and word scoring run on the server
    permuted = RemoteEngine(RemoteConfig(url, api_key="secret")).decide(
        DecisionRequest(request.question, request.options, sampling=GREEDY, permute=True))
    assert permuted.shown_field == "debiased_probability"
    local_permuted = service.decide(DecisionRequest(request.question, request.options, sampling=GREEDY, permute=True))
    assert [o.debiased_probability for o in permuted.options] == pytest.approx(
        [o.debiased_probability for o in local_permuted.options], abs=1e-9)


def completion_answer(token, listed, value=None):
    return {"choices": [{"index": 0, "text": token, "finish_reason": "length",
                         "logprobs": {"tokens": [token], "token_logprobs": [listed.get(token, value)],
                                      "top_logprobs": [listed], "text_offset": [0]}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 1}}


@pytest.fixture
def serve_owned(serve, monkeypatch):
    """FakeServer whose /v1/models names an owner (the kind detection reads it)."""
    def start(behaviour, owned_by):
        server = serve(behaviour)

        def do_get(handler):
            handler._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": owned_by}]})

        server.httpd.RequestHandlerClass.do_GET = do_get
        return server
    return start


def test_a_server_reporting_biased_logprobs_is_caught_and_bars_are_labelled_bounds(serve_owned):
    listed = {"A": -0.4, "B": -1.6, **{f"w{i}": -3.0 - i * 0.1 for i in range(18)}}  # no C
    ids = {"A": 10, "B": 11, "C": 12}

    def behaviour(h, body):
        if h.path.endswith("tokenize"):
            return h._send(200, {"tokens": [ids[body.get("content") or body.get("prompt") or body.get("input")]]})
        if body.get("logit_bias"):  # the server reports the biased distribution: the forced letter looks certain
            label = next(k for k, v in ids.items() if str(v) in body["logit_bias"])
            return h._send(200, completion_answer(label, {label: -1e-5}, -1e-5))
        return h._send(200, completion_answer("A", listed))

    server = serve_owned(behaviour, "llamacpp")
    result = RemoteEngine(RemoteConfig(server.url)).decide(REQUEST)
    assert result.engine.server == "llama.cpp" and result.engine.method == "top list"
    assert any("biased logprobs" in note for note in result.engine.notes)
    assert [o.bar for o in result.options] == ["estimate", "estimate", "upper"]
    c = result.options[2]
    assert c.low == 0.0 and c.high == pytest.approx(c.probability)  # the one bound letter at its bound
    a = result.options[0]
    assert a.low == pytest.approx(a.probability) and a.high > a.probability  # shown with C at its bound: its lowest
    assert not result.uncertain  # A's lowest possible bar still beats C's highest
    # the raw prompt went to /v1/completions, rendered by Decider with the think block closed
    prompts = [body["prompt"] for _, body in server.requests if "prompt" in body and body.get("max_tokens") == 1]
    assert prompts[-1].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_forced_letters_are_exact_when_the_server_reports_model_logprobs(serve_owned):
    listed = {"A": -0.4, "B": -1.6, **{f"w{i}": -3.0 - i * 0.1 for i in range(18)}}  # no C
    truth = {"A": -0.4, "B": -1.6, "C": -6.5}
    ids = {"A": 10, "B": 11, "C": 12}

    def behaviour(h, body):
        if h.path.endswith("tokenize"):
            return h._send(200, {"tokens": [ids[body.get("content") or body.get("prompt") or body.get("input")]]})
        if body.get("logit_bias"):
            label = next(k for k, v in ids.items() if str(v) in body["logit_bias"])
            return h._send(200, completion_answer(label, {label: truth[label]}, truth[label]))
        return h._send(200, completion_answer("A", listed))

    server = serve_owned(behaviour, "llamacpp")  # (vLLM's unreported bf16 makes these mid bars estimates)
    result = RemoteEngine(RemoteConfig(server.url)).decide(REQUEST)
    assert result.engine.server == "llama.cpp" and result.engine.method == "forced letters"
    assert [o.bar for o in result.options] == ["exact"] * 3 and [o.bound for o in result.options] == [None] * 3
    assert [o.logprob for o in result.options] == [truth["A"], truth["B"], truth["C"]]
    assert result.coverage == pytest.approx(sum(__import__("math").exp(v) for v in truth.values()))


def test_overlapping_bounds_mark_the_choice_uncertain(serve_owned, serve):
    # only A is listed, barely above the floor: B and C could each be as likely as A
    alternatives = {"w0": -0.3, "A": -2.0, **{f"w{i}": -2.01 - i * 0.001 for i in range(1, 19)}}

    def behaviour(h, body):
        if "tokenize" in h.path:  # no tokenizer: letters outside the list stay bounds
            return h._send(404, {"detail": "Not Found"})
        return h._send(200, completion_answer("w0", alternatives))

    server = serve_owned(behaviour, "vllm")
    result = RemoteEngine(RemoteConfig(server.url)).decide(REQUEST)
    assert result.engine.method == "top list"
    assert result.uncertain and result.to_dict()["choice"]["uncertain"]
    assert [o.bar for o in result.options] == ["estimate", "upper", "upper"]
    # a clear lead is not uncertain on the same path
    alternatives["A"] = -0.4
    assert not RemoteEngine(RemoteConfig(server.url)).decide(REQUEST).uncertain
    # through a server's chat template the choice is never settled
    chat = serve(lambda h, body: h._send(200, chat_answer("A", {"A": -0.05, "B": -4.0, "C": -5.0})))
    result = RemoteEngine(RemoteConfig(chat.url)).decide(REQUEST)
    assert result.engine.method == "chat" and result.uncertain and all(o.bar == "estimate" for o in result.options)


def test_a_constraint_that_did_not_renormalise_is_not_believed(serve):
    # the constrained answer lists the letters with their unconstrained values (sum far from 1)
    server = serve(lambda h, body: h._send(200, chat_answer("A", {"A": -1.0, "B": -2.0, "C": -3.0})))
    result = RemoteEngine(RemoteConfig(server.url, constraint="llama.cpp")).decide(REQUEST)
    assert any("did not renormalise" in note for note in result.engine.notes)
    assert "constraint" not in result.engine.method


def test_method_flag_is_validated_and_permute_is_refused_with_a_reason(serve):
    with pytest.raises(SettingsError, match="method must be one of"):
        RemoteConfig("http://x", method="magic")
    server = serve(lambda h, body: h._send(200, chat_answer("A", {"A": -0.1, "B": -2.0, "C": -3.0})))
    with pytest.raises(SettingsError, match="permute on a server needs Decider's own server"):
        RemoteEngine(RemoteConfig(server.url)).decide(DecisionRequest("Which?", ("Attack", "Defend", "Hide"), permute=True))


def test_a_failed_probe_is_an_error_to_retry_not_a_missing_endpoint(serve_owned):
    """Issue 26 item 7: a 500 while probing /v1/completions once sent the engine to chat for its lifetime."""
    listed = {"A": -1e-5, "B": -12.0, "C": -13.0}  # clear: exact even at vLLM's unreported bf16
    state = {"down": True}

    def behaviour(h, body):
        if state["down"]:
            return h._send(500, {"error": {"message": "engine core died"}})
        if "tokenize" in h.path:
            return h._send(404, {"detail": "Not Found"})
        return h._send(200, completion_answer("A", listed))

    server = serve_owned(behaviour, "vllm")
    engine = RemoteEngine(RemoteConfig(server.url))
    with pytest.raises(RemoteError, match="try again.*HTTP 500: engine core died"):
        engine.decide(REQUEST)
    state["down"] = False
    result = engine.decide(REQUEST)  # probed again, not remembered as "no completions"
    assert result.engine.server == "vllm" and result.engine.method in ("top list", "forced letters")
    assert [o.bar for o in result.options] == ["exact"] * 3


def test_vllm_bars_are_exact_only_where_its_unreported_bf16_cannot_move_them(serve_owned):
    """Issue 26 item 7: vLLM computes in bf16 and does not say so; with the same reasoning tokens its bars were
    up to 0.043 from the local f32 ones while labelled exact. A bar near 0 or 1 stays exact; the rest are
    estimates whose range holds the server's number, and a lead inside the ranges is uncertain."""
    def behaviour(h, body):
        if "tokenize" in h.path:
            return h._send(404, {"detail": "Not Found"})
        return h._send(200, completion_answer("A", state["listed"]))

    server = serve_owned(behaviour, "vllm")
    state = {"listed": {"A": -1e-5, "B": -12.0, "C": -13.0}}  # a clear item: bf16 cannot move these bars
    result = RemoteEngine(RemoteConfig(server.url)).decide(REQUEST)
    assert [o.bar for o in result.options] == ["exact"] * 3 and not result.uncertain
    state["listed"] = {"A": -0.45, "B": -1.2, "C": -3.0}  # a lead of 0.75: outside the allowance, bars not exact
    result = RemoteEngine(RemoteConfig(server.url)).decide(REQUEST)
    assert [o.bar for o in result.options] == ["estimate"] * 3 and not result.uncertain
    assert all(o.low < o.probability < o.high for o in result.options)
    assert any("does not report its precision" in note for note in result.engine.notes)
    state["listed"] = {"A": -0.6, "B": -0.9, "C": -3.0}  # a lead of 0.3, within the allowance: uncertain
    assert RemoteEngine(RemoteConfig(server.url)).decide(REQUEST).uncertain


def test_a_probe_that_fails_for_a_moment_is_retried_within_the_decision(serve_owned, monkeypatch):
    """Issue 26 item 7: a vLLM engine still warming up answers 500 once; the probe asks again before failing."""
    import decider.engine.remote.probe as remote_probe

    monkeypatch.setattr(remote_probe, "RETRY_PAUSES", (0.01, 0.01))
    listed = {"A": -1e-5, "B": -12.0, "C": -13.0}  # clear: exact even at vLLM's unreported bf16
    failures = {"left": 2}

    def behaviour(h, body):
        if body.get("prompt") == "Hello" and failures["left"]:
            failures["left"] -= 1
            return h._send(500, {"error": {"message": "engine core warming up"}})
        if "tokenize" in h.path:
            return h._send(404, {"detail": "Not Found"})
        return h._send(200, completion_answer("A", listed))

    server = serve_owned(behaviour, "vllm")
    result = RemoteEngine(RemoteConfig(server.url)).decide(REQUEST)
    assert failures["left"] == 0 and result.engine.server == "vllm" and result.engine.method == "top list"
    assert [o.bar for o in result.options] == ["exact"] * 3


def test_a_constraint_never_moves_a_decision_off_raw_completions(serve_owned):
    """Issue 26 item 3: --engine-constraint llama.cpp used to force the server's chat template."""
    listed = {"A": -0.2, "B": -2.0, "C": -3.0}

    def behaviour(h, body):
        if "tokenize" in h.path:
            return h._send(404, {"detail": "Not Found"})
        return h._send(200, completion_answer("A", listed))

    server = serve_owned(behaviour, "llamacpp")
    result = RemoteEngine(RemoteConfig(server.url, constraint="llama.cpp")).decide(REQUEST)
    assert result.engine.method == "top list" and [o.bar for o in result.options] == ["exact"] * 3
    assert any("constraint llama.cpp not used" in note for note in result.engine.notes)
    assert all("messages" not in body for _, body in server.requests)


def test_llama_cpp_gets_its_own_repetition_penalty_field(serve_owned):
    """Issue 26 item 4: llama.cpp reads `repeat_penalty` (its default 1.1 applied when absent), not vLLM's name."""
    listed = {"A": -0.2, "B": -2.0, "C": -3.0}
    behaviour = lambda h, body: h._send(404, {"detail": "Not Found"}) if "tokenize" in h.path else h._send(
        200, completion_answer("A", listed))
    for owner, field, other in (("llamacpp", "repeat_penalty", "repetition_penalty"),
                                ("vllm", "repetition_penalty", "repeat_penalty")):
        server = serve_owned(behaviour, owner)
        RemoteEngine(RemoteConfig(server.url)).decide(REQUEST)
        body = next(b for _, b in reversed(server.requests) if b.get("max_tokens") == 1 and "prompt" in b)
        assert body[field] == REQUEST.sampling.repetition_penalty and other not in body


def test_an_end_of_turn_inside_the_think_block_is_not_a_closed_block(serve_owned):
    """Issue 26 item 7: vLLM answers finish_reason "stop" with stop_reason null for an end of turn; only
    stop_reason "</think>" means the model closed its reasoning."""
    listed = {"A": -0.2, "B": -2.0, "C": -3.0}

    def behaviour(h, body):
        if "tokenize" in h.path:
            return h._send(404, {"detail": "Not Found"})
        if body["max_tokens"] > 1:  # the reasoning
            answer = completion_answer("Hide is safe.", {})
            answer["choices"][0].update(finish_reason="stop", stop_reason=state["stop_reason"])
            return h._send(200, answer)
        return h._send(200, completion_answer("A", listed))

    server = serve_owned(behaviour, "vllm")
    request = DecisionRequest("Which?", ("Attack", "Defend", "Hide"), sampling=GREEDY, think=True)
    for stop_reason, tail in ((None, "Hide is safe.\n</think>\n\n"), ("</think>", "Hide is safe.</think>\n\n")):
        state = {"stop_reason": stop_reason}
        RemoteEngine(RemoteConfig(server.url)).decide(request)
        answer = next(b for _, b in reversed(server.requests) if b.get("max_tokens") == 1 and "prompt" in b)
        assert answer["prompt"].endswith(tail)


def test_a_near_tie_within_the_servers_unreported_precision_is_uncertain(serve_owned):
    """Issue 26 item 7: bf16 on vLLM's CPU backend flipped near-ties with bars labelled exact."""
    def behaviour(h, body):
        if "tokenize" in h.path:
            return h._send(404, {"detail": "Not Found"})
        return h._send(200, completion_answer("A", state["listed"]))

    server = serve_owned(behaviour, "llamacpp")  # a server whose numbers are not known to be reduced
    for gap, uncertain in ((0.03, True), (0.5, False)):
        state = {"listed": {"A": -0.60, "B": -0.60 - gap, "C": -4.0}}
        result = RemoteEngine(RemoteConfig(server.url)).decide(REQUEST)
        assert [o.bar for o in result.options] == ["exact"] * 3 and result.uncertain is uncertain
        assert any("server's arithmetic" in note for note in result.engine.notes)


def test_bars_after_a_reasoning_sent_back_as_text_are_never_exact(serve_owned):
    """Issue 26 item 2: the server re-tokenizes the reasoning text (llama.cpp: 3 of 10 choices differed from
    local with bars labelled exact, by up to 0.746): those numbers are for other ids, so they are estimates."""
    listed = {"A": -0.2, "B": -2.5, "C": -3.0}

    def behaviour(h, body):
        if "tokenize" in h.path:
            return h._send(404, {"detail": "Not Found"})
        if body["max_tokens"] > 1:
            return h._send(200, completion_answer("Hide is safe.\n", {}))
        return h._send(200, completion_answer("A", listed))

    server = serve_owned(behaviour, "llamacpp")
    request = DecisionRequest("Which?", ("Attack", "Defend", "Hide"), sampling=GREEDY, think=True)
    result = RemoteEngine(RemoteConfig(server.url)).decide(request)
    assert {o.bar for o in result.options} == {"estimate"} and {o.bound for o in result.options} == {None}
    assert result.uncertain and any("re-tokenized" in note for note in result.engine.notes)
    plain = RemoteEngine(RemoteConfig(server.url)).decide(REQUEST)  # without reasoning: Decider's own text
    assert {o.bar for o in plain.options} == {"exact"}
