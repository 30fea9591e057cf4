"""Functions as options (`decider ask --tool file.json`, #28): a bar per function from its exact call probability,
the chosen call's arguments valid under its schema, and the overlay showing the call under its bar."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.gui import dirs, load, make_window  # noqa: F401 (pytest fixtures)

from decider.app.service import EngineService
from decider.app.tool_decision import call_text, load_tools, tool_request
from decider.engine.model.chat_template import Message, build_chat_prompt
from decider.engine.compile.devices import DeviceOptions
from decider.engine.core.errors import SettingsError
from decider.engine.runners.runner import ModelRunner
from decider.engine.core.settings import SamplingSettings
from decider.engine.constrained.tools import choice_probabilities

DEMO = Path(__file__).resolve().parent.parent / "resources" / "demo-model"
QUESTION = "Scouts report that an orc guards the bridge. What should we do?"
TOOLS = [
    {"type": "function", "function": {"name": "attack", "parameters": {
        "type": "object", "properties": {"target": {"type": "string", "enum": ["orc", "troll"]}}, "required": ["target"]}}},
    {"type": "function", "function": {"name": "retreat", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "trade", "parameters": {"type": "object", "properties": {
        "item": {"type": "string", "maxLength": 10}, "price": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["item", "price"]}}},
]


@pytest.fixture
def tools_file(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(TOOLS))
    return path


def test_the_bars_are_the_functions_exact_probabilities_renormalised(tools_file):
    service = EngineService(DEMO, DeviceOptions(device="CPU"))
    tools = load_tools(str(tools_file))
    decision = service.decide(tool_request(QUESTION, tools, sampling=SamplingSettings(temperature=0.0)))
    runner = ModelRunner(DEMO, DeviceOptions(device="CPU"))  # a fresh runner: a direct computation
    prompt = build_chat_prompt(runner.tokenizer, [Message("user", QUESTION)], False, tools=tools).ids
    want = choice_probabilities(runner, prompt, tools)["functions"]
    total = sum(want.values())
    assert [o.text for o in decision.options] == ["attack", "retreat", "trade"]
    for option in decision.options:
        assert abs(option.probability - want[option.text] / total) < 1e-6
    assert abs(decision.coverage - total) < 1e-9
    chosen = decision.options[decision.choice_index].text
    assert chosen == max(want, key=want.get) and decision.tool_call.name == chosen
    assert decision.engine.exact and decision.to_dict()["tool_call"]["function"]["name"] == chosen
    arguments = json.loads(decision.tool_call.arguments)
    assert isinstance(arguments, dict)
    if chosen == "attack":
        assert arguments["target"] in ("orc", "troll")


def test_the_cli_prints_bars_and_the_call(tools_file):
    done = subprocess.run([sys.executable, "-m", "decider.app.cli", "ask", QUESTION, "--tool", str(tools_file),
                           "--model", str(DEMO), "--device", "CPU", "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["mode"] == "tools" and len(body["options"]) == 3
    assert body["tool_call"]["function"]["name"] == body["choice"]["text"]
    assert set(body["tool_choice_probabilities"]["functions"]) == {"attack", "retreat", "trade"}
    clash = subprocess.run([sys.executable, "-m", "decider.app.cli", "ask", QUESTION, "--tool", str(tools_file), "--option", "a"],
                           capture_output=True, text=True, timeout=120)
    assert clash.returncode != 0 and "not with --option" in clash.stderr and "Traceback" not in clash.stderr


def test_a_bad_tools_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    for text, message in (("[", "not JSON"), ('[{"type": "function", "function": {"name": "bad name"}}]', "function name"),
                          ('{"type": "function"}', "must be")):
        bad.write_text(text)
        with pytest.raises(SettingsError, match=message):
            load_tools(str(bad))
    with pytest.raises(SettingsError, match="a folder, not a file"):
        load_tools(str(tmp_path))


def test_the_overlay_shows_the_call_under_its_bar(qtbot, tools_file):
    from decider.ui.overlay import CompanionOverlay

    service = EngineService(DEMO, DeviceOptions(device="CPU"))
    decision = service.decide(tool_request(QUESTION, load_tools(str(tools_file)), sampling=SamplingSettings(temperature=0.0)))
    overlay = CompanionOverlay()
    qtbot.addWidget(overlay)
    overlay.show_result(QUESTION, decision)  # the result carries its call: the overlay shows it under the bars
    assert overlay.hint.text().startswith(f"Call: {call_text(decision)}")
    assert decision.tool_call.name in overlay.choice.text()


def test_functions_as_options_are_checked(tools_file):
    tools = load_tools(str(tools_file))
    with pytest.raises(SettingsError, match="functions' names"):
        tool_request(QUESTION, tools).__class__(question=QUESTION, options=("a", "b", "c"), tools=tools)
    with pytest.raises(SettingsError, match="not with think"):
        tool_request(QUESTION, tools, think=True)


def test_a_decider_server_gives_the_same_exact_bars_through_the_remote_engine(tools_file):
    """The tools go through to the server's own tool calling; a Decider server reports the per-function
    probabilities, so the remote bars are the local ones and are labelled exact."""
    from decider.app.api.server import ApiServer
    from decider.app.service import RemoteService
    from decider.engine.remote.engine import RemoteConfig

    tools = load_tools(str(tools_file))
    greedy = SamplingSettings(temperature=0.0)
    local = EngineService(DEMO, DeviceOptions(device="CPU"))
    server = ApiServer(EngineService(DEMO, DeviceOptions(device="CPU")), "127.0.0.1", 0)
    server.start()
    try:
        remote = RemoteService(RemoteConfig(server.url)).decide(tool_request(QUESTION, tools, sampling=greedy))
    finally:
        server.stop()
    want = local.decide(tool_request(QUESTION, tools, sampling=greedy))
    assert remote.engine.exact and remote.engine.remote and "computed by Decider on the server" in remote.engine.bars_text
    for got, expected in zip(remote.options, want.options):
        assert abs(got.probability - expected.probability) < 1e-6 and got.bar == "exact"
    assert remote.tool_call.name == want.tool_call.name
    assert (remote.uncertain, remote.uncertain_why) == (want.uncertain, want.uncertain_why)  # tiny coverage both


def test_the_window_decides_between_functions_and_shows_the_call(qtbot, make_window, tools_file):
    window = make_window()
    load(qtbot, window, str(DEMO))
    window.question.setPlainText(QUESTION)
    window.set_tools(load_tools(str(tools_file)))
    assert window.options.options() == ["attack", "retreat", "trade"]
    with qtbot.waitSignal(window.decision_shown, timeout=60_000):
        window.decide()
    result = window.result_view.result
    assert result.mode == "tools" and result.tool_call is not None
    assert f"Call: {call_text(result)}" in window.result_view.choice_meta.text()
    window.options.set_options(["attack", "flee"])  # edited away from the functions: an ordinary decision again
    assert window.build_request().tools == ()


def test_ask_engine_url_tool_file_works_against_decider_serve(tools_file):
    """`decider ask --engine URL --tool FILE` (docs/api.md): the tools go through to the server, the bars are the
    server's exact per-function probabilities, equal to a local decision's."""
    from decider.app.api.server import ApiServer

    server = ApiServer(EngineService(DEMO, DeviceOptions(device="CPU")), "127.0.0.1", 0)
    server.start()
    try:
        done = subprocess.run([sys.executable, "-m", "decider.app.cli", "ask", QUESTION, "--tool", str(tools_file), "--engine",
                               server.url, "--temperature", "0", "--json", "--no-history"], capture_output=True, text=True, timeout=300)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    local = EngineService(DEMO, DeviceOptions(device="CPU")).decide(
        tool_request(QUESTION, load_tools(str(tools_file)), sampling=SamplingSettings(temperature=0.0)))
    assert body["mode"] == "tools" and body["engine"]["kind"] == "remote" and "exact" in body["engine"]["bars"]
    assert [o["text"] for o in body["options"]] == ["attack", "retreat", "trade"]
    for got, want in zip(body["options"], local.options):
        assert abs(got["probability"] - want.probability) < 1e-6 and got["bar"] == "exact"
    assert body["tool_call"]["function"]["name"] == local.tool_call.name == body["choice"]["text"]
