"""The `draft` setting (none | lookup | auto | mtp) on every surface, and what a drafted decision answers:
the bars after drafted reasoning are an exact prefill's of the same tokens."""

from __future__ import annotations

import dataclasses

import numpy as np
import openai
import pytest

from support.models import ROOT, model_dir
from decider.app.api.server import ApiServer
from decider.app.service import EngineService
from decider.engine.decisions.decide import DecisionRequest, decide
from decider.engine.decisions.prompt import build_decision_prompt, letter_ids
from decider.engine.compile.devices import DeviceOptions
from decider.engine.core.errors import SettingsError
from decider.engine.generation.generate import GenerationRequest, generate
from decider.engine.core.logprobs import Distribution
from decider.engine.runners.runner import ModelRunner
from decider.engine.core.settings import SETTINGS, SamplingSettings

DEMO = ROOT / "resources" / "demo-model"
QUESTION = "The bridge is out. Which way should the caravan go?"
OPTIONS = ("North pass", "River ford", "Wait")


def test_the_setting_is_declared_once_with_none_as_default():
    assert SETTINGS["draft"].choices == ("none", "lookup", "auto", "mtp")
    assert SamplingSettings().draft == "none"
    assert SamplingSettings(draft="auto").draft == "auto"
    with pytest.raises(SettingsError, match="draft must be one of none, lookup, auto, mtp"):
        SamplingSettings(draft="fast")
    # how the engine computes, not what: a remote server never receives it
    assert "draft" not in SamplingSettings(draft="lookup").request_fields("vllm")


def test_cli_gui_and_api_carry_it():
    from pydantic import ValidationError

    from decider.app.api.protocol import ChatCompletionRequest, DecideRequest
    from decider.app.cli import build_parser, decision_request
    from decider.app.preferences import GuiSettings

    parser = build_parser()
    args = parser.parse_args(["ask", "Q?", "--option", "a", "--option", "b", "--draft", "lookup"])
    assert decision_request(args, SamplingSettings()).sampling.draft == "lookup"
    assert parser.parse_args(["chat", "--message", "x", "--draft", "auto"]).draft == "auto"
    with pytest.raises(SystemExit):
        parser.parse_args(["chat", "--message", "x", "--draft", "fast"])
    decided = DecideRequest(question="Q?", options=["a", "b"], draft="auto").to_request(SamplingSettings())
    assert decided.sampling.draft == "auto"
    with pytest.raises(SettingsError, match="draft"):
        DecideRequest(question="Q?", options=["a", "b"], draft="fast").to_request(SamplingSettings())
    with pytest.raises((SettingsError, ValidationError)):
        DecideRequest(question="Q?", options=["a", "b"], draft=3).to_request(SamplingSettings())
    assert "draft" in ChatCompletionRequest.model_fields
    settings = GuiSettings().with_changes(draft="lookup")
    assert settings.sampling().draft == "lookup"
    assert GuiSettings.from_dict(settings.to_dict())[0] == settings
    kept, warnings = GuiSettings.from_dict({**settings.to_dict(), "draft": "fast"})
    assert kept.draft == "none" and any("draft" in w for w in warnings)


def test_the_settings_form_offers_the_choices(qtbot):
    pytest.importorskip("PySide6")
    from decider.app.gui_ports import settings_rules
    from decider.app.preferences import GuiSettings
    from decider.ui.settings_panel import SettingsPanel

    panel = SettingsPanel(GuiSettings(draft="auto"), settings_rules())
    qtbot.addWidget(panel)
    box = panel.fields["draft"]
    assert [box.itemData(i) for i in range(box.count())] == ["none", "lookup", "auto", "mtp"]
    assert box.currentData() == "auto"
    box.setCurrentIndex(1)
    assert panel.settings.draft == "lookup"


def test_mtp_says_plainly_it_is_not_available():
    runner = ModelRunner(model_dir("qwen35-text"))  # an export without openvino_mtp_model.xml
    request = GenerationRequest(tuple(runner.tokenizer.encode_text("Hello")), SamplingSettings(draft="mtp"), max_tokens=4)
    with pytest.raises(SettingsError, match="draft mtp is not available for .*no MTP head"):
        generate(runner, request)


@pytest.mark.parametrize("temperature", [0.0, 0.3], ids=["greedy", "sampled"])
def test_the_answer_after_drafted_reasoning_equals_an_exact_prefill_of_the_same_tokens(temperature, monkeypatch):
    from test_speculative import ModelDrafts, Oracle

    folder = model_dir("qwen35-text")  # random weights: it reasons to the budget (the demo model stops at once)
    runner = ModelRunner(folder, DeviceOptions(device="CPU", exact=True))
    letters = letter_ids(runner.tokenizer, len(OPTIONS))
    prompt = build_decision_prompt(runner.tokenizer, QUESTION, list(OPTIONS), think=True)
    sampling = SamplingSettings(temperature=temperature, top_k=3, frequency_penalty=0.5, presence_penalty=0.0, seed=5)
    request = DecisionRequest(QUESTION, OPTIONS, think=True, reasoning_budget=60, sampling=sampling, fast_reasoning=False)
    decide(runner, dataclasses.replace(request, sampling=sampling.with_changes(temperature=0.0)))
    plain = list(runner.history)
    # A random model's text seldom repeats, so lookup would draft little: greedy gets the plain reasoning as drafts,
    # every third one wrong, sampled a second runner's argmax; kept drafts and rollbacks mid-reasoning either way.
    oracle = Oracle(plain[len(prompt.ids):], len(prompt.ids)) if temperature == 0.0 else ModelDrafts(folder)
    monkeypatch.setattr("decider.engine.decisions.decide.make_drafter", lambda *_: oracle)
    runner.reset()
    runner.clear_snapshots()
    forwards = runner.stats.forwards
    result = decide(runner, dataclasses.replace(request, sampling=sampling.with_changes(draft="lookup")))
    sequence = list(runner.history)  # prompt + the reasoning kept + the answer prefix
    assert sequence[: len(prompt.ids)] == prompt.ids and len(sequence) - len(prompt.ids) > 30
    assert oracle.kept > 0 and oracle.drafted > oracle.kept
    if temperature == 0.0:
        assert sequence == plain and runner.stats.forwards - forwards < len(sequence) - len(prompt.ids)
    got = np.array([o.logprob for o in result.options])
    want = Distribution(ModelRunner(folder, DeviceOptions(device="CPU", exact=True)).prefill(sequence)).logprobs(letters)
    assert np.abs(got - want).max() < 1e-5


def test_greedy_chat_through_the_api_is_the_same_text_with_drafts():
    service = EngineService(DEMO, DeviceOptions(device="CPU"))
    server = ApiServer(service, "127.0.0.1", 0)
    server.start()
    try:
        client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=60)

        def chat(**extra):
            answer = client.chat.completions.create(
                model="decider", messages=[{"role": "user", "content": "Count: one two three one two three one two"}],
                temperature=0, max_tokens=48, logprobs=True, top_logprobs=2, extra_body=extra)
            return answer.choices[0]

        plain, drafted = chat(), chat(draft="lookup")
        assert drafted.message.content == plain.message.content and plain.message.content
        assert [t.token for t in drafted.logprobs.content] == [t.token for t in plain.logprobs.content]
        assert max(abs(a.logprob - b.logprob) for a, b in zip(plain.logprobs.content, drafted.logprobs.content)) < 1e-4
        with pytest.raises(openai.BadRequestError) as refused:
            chat(draft="fast")
        assert "draft" in str(refused.value)
    finally:
        server.stop()
