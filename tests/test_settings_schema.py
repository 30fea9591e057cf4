"""The one settings schema (engine.settings): every front end's list of settings is generated from it
or checked against it here, so a setting added in one place and forgotten in another fails a test."""

from dataclasses import fields

import pytest

from decider.engine.core.errors import SettingsError
from decider.engine.core.settings import DECISION_SETTINGS, SAMPLING_NAMES, SAMPLING_SETTINGS, SETTINGS, SamplingSettings

DECIDE_NAMES = ("think", "reasoning_budget", "permute", "score_options", "alternatives")


def test_the_engine_dataclasses_take_their_fields_and_defaults_from_the_schema():
    from decider.engine.decisions.decide import DecisionRequest

    assert [f.name for f in fields(SamplingSettings)] == [s.name for s in SAMPLING_SETTINGS]
    assert SamplingSettings().to_dict() == {s.name: s.default for s in SAMPLING_SETTINGS}
    request = DecisionRequest("Q?", ("a", "b"))
    for name in DECIDE_NAMES:
        assert getattr(request, name) == SETTINGS[name].default


@pytest.mark.parametrize("setting", SAMPLING_SETTINGS + DECISION_SETTINGS + (SETTINGS["max_tokens"],), ids=lambda s: s.name)
def test_every_setting_checks_its_own_range(setting):
    setting.check(setting.default)
    if setting.kind is bool:
        with pytest.raises(SettingsError, match=f"{setting.name} must be true or false"):
            setting.check(1)
        return
    if setting.kind is str:  # a choice
        for value in setting.choices:
            setting.check(value)
        with pytest.raises(SettingsError, match=f"{setting.name} must be one of"):
            setting.check("none of them")
        assert setting.range_text() == " | ".join(setting.choices)
        return
    with pytest.raises(SettingsError, match=f"{setting.name} must be"):
        setting.check(setting.high + 1)
    with pytest.raises(SettingsError, match=f"{setting.name} must be"):
        setting.check("1")
    assert setting.range_text()


def test_cli_flags_are_generated_from_the_schema():
    from decider.app.cli import build_parser

    parser = build_parser()
    for command in ("complete", "chat", "ask"):
        actions = {a.dest: a for a in parser._subparsers._group_actions[0].choices[command]._actions}
        for name in SAMPLING_NAMES:
            action = actions[name]
            assert action.option_strings == [SETTINGS[name].flag] and action.type is SETTINGS[name].kind
            assert action.default is None  # absent: the model's default stays
        assert actions["max_tokens"].default == SETTINGS["max_tokens"].default
    args = parser.parse_args(["ask", "Q?", "--option", "a", "--option", "b"])
    for name in ("think", "reasoning_budget", "permute", "score_options"):
        assert getattr(args, name) == SETTINGS[name].default
    args = parser.parse_args(["ask", "Q?", "--think", "--reasoning-budget", "9", "--top-p", "0.5", "--seed", "3"])
    assert (args.think, args.reasoning_budget, args.top_p, args.seed) == (True, 9, 0.5, 3)


def test_the_preferences_keep_the_declared_settings_with_their_defaults_and_ranges():
    from decider.app.preferences import DECISION_NAMES, GuiSettings, setting_range

    stored = {f.name: f.default for f in fields(GuiSettings)}
    for name in SAMPLING_NAMES + DECISION_NAMES:
        assert stored[name] == SETTINGS[name].default, name
        if SETTINGS[name].kind in (int, float):
            assert setting_range(name) == SETTINGS[name].range
    with pytest.raises(SettingsError, match=r"reasoning_budget must be an integer in \[1, 32768\]"):
        GuiSettings(reasoning_budget=0)
    assert GuiSettings().sampling() == SamplingSettings()


def test_the_api_takes_exactly_the_declared_sampling_fields():
    from decider.app.requests import SAMPLING_FIELDS, sampling_from

    assert SAMPLING_FIELDS == {name: SETTINGS[name].kind for name in SAMPLING_NAMES}
    assert "penalty_window" not in SAMPLING_FIELDS  # engine-internal: never a request field
    changed = sampling_from({"top_k": 3, "seed": 1}, SamplingSettings())
    assert (changed.top_k, changed.seed) == (3, 1)


def test_the_api_request_classes_carry_the_declared_fields():
    from decider.app.api.protocol import ChatCompletionRequest, CompletionRequest, DecideRequest

    for request in (ChatCompletionRequest, CompletionRequest, DecideRequest):
        assert set(SAMPLING_NAMES) <= set(request.model_fields), request.__name__
        assert "penalty_window" not in request.model_fields
    assert "max_tokens" in ChatCompletionRequest.model_fields and "max_tokens" in CompletionRequest.model_fields
    assert set(DECIDE_NAMES) <= set(DecideRequest.model_fields)
    decided = DecideRequest(question="Q?", options=["a", "b"], top_k=4, reasoning_budget=9).to_request(SamplingSettings())
    assert (decided.sampling.top_k, decided.reasoning_budget) == (4, 9)
    with pytest.raises(SettingsError, match="reasoning_budget must be an integer in"):
        DecideRequest(question="Q?", options=["a", "b"], reasoning_budget=0).to_request(SamplingSettings())


def test_the_remote_request_carries_every_declared_sampling_setting():
    from test_remote import FakeServer, chat_answer

    from decider.engine.decisions.decide import DecisionRequest
    from decider.engine.remote.engine import RemoteConfig, RemoteEngine

    server = FakeServer(lambda h, body: h._send(200, chat_answer("A", {"A": -0.1, "B": -2.5})))
    try:
        sampling = SamplingSettings(temperature=0.3, top_k=7, top_p=0.9, min_p=0.05, repetition_penalty=1.1,
                                    frequency_penalty=0.2, presence_penalty=0.4, seed=11)
        RemoteEngine(RemoteConfig(server.url, model="m")).decide(DecisionRequest("Q?", ("a", "b"), sampling=sampling))
    finally:
        server.close()
    _, body = server.requests[-1]
    sent = {name: body[name] for name in SAMPLING_NAMES if name in body}
    # every one but the local ones (how this engine computes: drafts)
    assert sent == {name: getattr(sampling, name) for name in SAMPLING_NAMES if not SETTINGS[name].local}


def test_the_settings_form_is_generated_from_the_schema(qtbot):
    pytest.importorskip("PySide6")
    from PySide6.QtWidgets import QLabel

    from decider.app.gui_ports import settings_rules
    from decider.app.preferences import DECISION_NAMES, GuiSettings
    from decider.ui.settings_panel import SettingsPanel

    panel = SettingsPanel(GuiSettings(), settings_rules())
    qtbot.addWidget(panel)
    for name in SAMPLING_NAMES + DECISION_NAMES:
        assert name in panel.fields, name
    labels = {label.text() for label in panel.findChildren(QLabel)}
    for name in SAMPLING_NAMES + ("max_tokens", "reasoning_budget"):
        assert SETTINGS[name].label in labels
        assert SETTINGS[name].help in panel.fields[name].toolTip() or SETTINGS[name].optional
    for name in ("top_k", "reasoning_budget", "max_tokens"):
        low, high, _ = SETTINGS[name].range
        assert (panel.fields[name].minimum(), panel.fields[name].maximum()) == (low, high)


def test_every_desktop_setting_has_exactly_one_rule_in_the_table():
    """_check_field is a table: a GuiSettings field without a rule, or a rule for no field, fails here."""
    from decider.app.preferences import FIELD_RULES, GuiSettings, _check_field

    assert set(FIELD_RULES) == {f.name for f in fields(GuiSettings)}
    with pytest.raises(SettingsError, match="unknown setting colour"):
        _check_field("colour", "red")
    for name, bad, message in (("engine", "cloud", "engine must be one of local, remote"),
                               ("api_port", 0, r"api_port must be an integer in \[1, 65535\]"),
                               ("top_p", 0.0, r"top_p must be a number in \(0.0, 1.0\]"),
                               ("window_maximized", "yes", "window_maximized must be true or false")):
        with pytest.raises(SettingsError, match=message):
            _check_field(name, bad)


def test_a_models_generation_config_sets_only_the_settings_declared_from_model():
    declared = {s.name for s in SAMPLING_SETTINGS if s.from_model}
    assert declared == {"temperature", "top_k", "top_p", "min_p", "repetition_penalty"}
    config = {s.name: s.low + (s.high - s.low) / 4 if s.kind is float else 3 for s in SAMPLING_SETTINGS if s.kind is not bool
              and s.low is not None and s.name != "seed"}
    model = SamplingSettings.for_model(config)
    for setting in SAMPLING_SETTINGS:
        expected = config[setting.name] if setting.name in declared else setting.default
        assert getattr(model, setting.name) == expected, setting.name


def test_the_decide_api_and_the_history_take_every_decision_setting_a_request_carries(tmp_path):
    from test_remote import FakeServer, chat_answer

    from decider.app.api.protocol import DecideRequest
    from decider.app.history import HistoryStore
    from decider.engine.remote.engine import RemoteConfig, RemoteEngine
    from decider.engine.decisions.types import DecisionRequest

    names = [s.name for s in DECISION_SETTINGS]
    assert set(names) <= {f.name for f in fields(DecisionRequest)} and "max_tokens" not in names  # generation's
    changed = {s.name: (not s.default) if s.kind is bool else s.default - 1 for s in DECISION_SETTINGS}
    changed["score_options"] = False  # not with think
    request = DecideRequest(question="Q?", options=["a", "b"], **changed).to_request(SamplingSettings())
    assert {name: getattr(request, name) for name in names} == changed
    server = FakeServer(lambda h, body: h._send(200, chat_answer("A", {"A": -0.1, "B": -2.5})))
    try:
        plain = DecisionRequest("Q?", ("a", "b"), alternatives=3, reasoning_budget=7)
        result = RemoteEngine(RemoteConfig(server.url, model="m", method="chat")).decide(plain)
    finally:
        server.close()
    store = HistoryStore(tmp_path / "h.sqlite3")
    row = store.get(store.add(plain, result, model="m", device="CPU", source="test"))
    assert {name: row.settings[name] for name in names} == {name: getattr(plain, name) for name in names}


@pytest.mark.parametrize("owner", ["somebody", "llamacpp"])
def test_a_remote_tool_call_carries_the_settings_declared_tool_calls(owner):
    from test_remote import FakeServer

    from decider.engine.remote.engine import RemoteConfig, RemoteEngine
    from decider.engine.constrained.tools import tools_from_openai
    from decider.engine.decisions.types import DecisionRequest

    call = {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "attack", "arguments": "{}"}}]}}]}

    def behaviour(h, body):
        h._send(200, call)

    server = FakeServer(behaviour)
    # this server's /v1/models names its owner (its handler class is its own)
    server.httpd.RequestHandlerClass.do_GET = lambda h: h._send(200, {"object": "list", "data": [
        {"id": "m", "object": "model", "owned_by": owner}]})
    try:
        tools = tools_from_openai([{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
                                   for n in ("attack", "retreat")])
        sampling = SamplingSettings(temperature=0.3, top_k=7, top_p=0.9, seed=11)
        request = DecisionRequest("Q?", ("attack", "retreat"), tools=tools, sampling=sampling)
        result = RemoteEngine(RemoteConfig(server.url, model="m")).decide(request)
    finally:
        server.close()
    assert result.tool_call.name == "attack"
    _, body = next((auth, body) for auth, body in server.requests if "tools" in body)
    declared = [s.name for s in SAMPLING_SETTINGS if s.tool_calls]
    assert declared == ["temperature", "top_p", "seed"]
    assert {name: body[name] for name in SAMPLING_NAMES if name in body} == {name: getattr(sampling, name) for name in declared}
