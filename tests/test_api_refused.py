"""docs/api.md's "Refused" list is the server's (#37 item 7): the table is the request classes' own
declarations (app/api/refusals.py), every row is a 400 `unsupported_parameter` from a running server while
its neutral values pass, and what the server takes (`n` > 1, tools, tool_choice, images, tool messages,
which the page once listed as refused) is absent from the list and answered."""

from __future__ import annotations

import base64
import re

import pytest

from decider.app.api import fields, protocol
from decider.app.api.refusals import ENDPOINTS, refusals, refusals_table
from decider.app.api.server import ApiServer
from decider.app.service import EngineService
from support.models import FIXTURES, ROOT, model_dir
from test_api import assert_error, call

DOCS = ROOT / "docs" / "api.md"
MARKERS = ("<!-- refused-fields: from app/api/refusals.py -->\n", "\n<!-- /refused-fields -->")
# the smallest request each endpoint answers: a refused field is added to it
BASE = {
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1},
    "/v1/completions": {"prompt": "Hi", "max_tokens": 1},
    "/v1/decide": {"question": "Which?", "options": ["Owl", "Hammer"]},
    "/tokenize": {"prompt": "Hi"},
    "/detokenize": {"tokens": [32]},
}
PNG = "data:image/png;base64," + base64.b64encode((FIXTURES / "images" / "small_40x24.png").read_bytes()).decode()
CALL = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"owl\"}"}}
TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}
# What the page once said was refused, and the server takes: (endpoint, fields it names, request)
TAKEN = {
    "n > 1 (chat)": ("/v1/chat/completions", {"n"}, {"n": 2}),
    "n > 1 (completions)": ("/v1/completions", {"n"}, {"n": 2}),
    "tools and tool_choice": ("/v1/chat/completions", {"tools", "tool_choice", "parallel_tool_calls"},
                              {"tools": [TOOL], "tool_choice": "auto", "parallel_tool_calls": False}),
    "an image part": ("/v1/chat/completions", {"messages", "image_url"}, {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": PNG}}, {"type": "text", "text": "What is it?"}]}]}),
    "a tool message after a call": ("/v1/chat/completions", {"messages", "tool", "tool_calls", "tool_call_id"}, {
        "tools": [TOOL], "messages": [{"role": "user", "content": "Owl?"}, {"role": "assistant", "tool_calls": [CALL]},
                                      {"role": "tool", "tool_call_id": "call_1", "content": "a bird"}]}),
}
# Refused in combination (the prose under the table): (endpoint, request, the param the 400 names)
COMBINED = {
    "stream with echo": ("/v1/completions", {"stream": True, "echo": True}, "stream"),
    "stream with n > 1": ("/v1/completions", {"stream": True, "n": 2}, "stream"),
    "stream with several prompts": ("/v1/completions", {"stream": True, "prompt": ["Hi", "Yo"]}, "stream"),
    "a guided_choice of several tokens": ("/v1/chat/completions", {"guided_choice": ["Attack the castle", "B"]}, None),
    "an unknown message field": ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi", "audio": {}}]}, None),
    "tool_call_id outside a tool message": ("/v1/chat/completions",
                                            {"messages": [{"role": "user", "content": "Hi", "tool_call_id": "x"}]}, None),
}


@pytest.fixture(scope="module")
def api():
    server = ApiServer(EngineService(model_dir("qwen35-vl")), "127.0.0.1", 0)  # a vision model: images are taken
    server.start()
    yield server
    server.stop()


def _documented_table() -> str:
    text = DOCS.read_text(encoding="utf-8")
    start, end = text.index(MARKERS[0]) + len(MARKERS[0]), text.index(MARKERS[1])
    return text[start:end]


def test_the_docs_refused_table_is_the_code_s():
    assert _documented_table() == refusals_table(), f"docs/api.md's Refused table should read:\n{refusals_table()}"
    assert len(refusals()) >= 9  # the declarations were found (an empty list would match an empty table)


def test_every_request_class_with_a_refused_field_is_listed():
    """A refused field declared on a class no endpoint in ENDPOINTS parses would be missing from the page."""
    def classes(base):
        for sub in base.__subclasses__():
            yield sub
            yield from classes(sub)

    declaring = {kind for kind in classes(fields.Strict) if any(
        getattr(getattr(m, "func", None), "refusal", None) for info in kind.model_fields.values() for m in info.metadata)}
    listed = set(ENDPOINTS.values())
    assert declaring and all(any(issubclass(kind, endpoint) for endpoint in listed) for kind in declaring - listed), declaring
    assert protocol.ChatCompletionRequest in declaring


@pytest.mark.parametrize("refusal", refusals(), ids=lambda r: f"{r.endpoint}:{r.field}")
def test_every_listed_field_is_refused_by_the_server_and_its_neutral_values_pass(api, refusal):
    status, _, data = call(api.port, "POST", refusal.endpoint, {**BASE[refusal.endpoint], refusal.field: "x"})
    assert_error(status, data, 400, "unsupported_parameter", refusal.field)
    assert refusal.why in data["error"]["message"]
    for neutral in (None, *refusal.neutral.values):
        status, _, data = call(api.port, "POST", refusal.endpoint, {**BASE[refusal.endpoint], refusal.field: neutral})
        assert status == 200, (neutral, data)


@pytest.mark.parametrize("name", list(COMBINED))
def test_what_is_refused_in_combination_is(api, name):
    endpoint, extra, param = COMBINED[name]
    status, _, data = call(api.port, "POST", endpoint, {**BASE[endpoint], **extra})
    assert status == 400 and data["error"]["code"] == "unsupported_parameter", data
    if param is not None:
        assert data["error"]["param"] == param


@pytest.mark.parametrize("name", list(TAKEN))
def test_what_the_server_takes_is_not_in_the_refused_list(api, name):
    endpoint, named, extra = TAKEN[name]
    status, _, data = call(api.port, "POST", endpoint, {**BASE[endpoint], **extra}, timeout=120)
    assert status == 200, data
    listed = set(re.findall(r"^\| `[^`]+` \| `([^`]+)` \|", _documented_table(), flags=re.M))
    assert listed and not named & listed
