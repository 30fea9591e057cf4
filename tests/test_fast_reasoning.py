"""Fast reasoning, exact answer: think-mode reasoning drawn from a fast twin compile, the answer position
computed exactly on the exact runner for the prompt + the reasoning actually produced."""

import json

import numpy as np
import pytest

from support.models import model_dir
from decider.engine.decisions.decide import DecisionRequest, decide
from decider.engine.decisions.prompt import build_decision_prompt, letter_ids
from decider.engine.compile.devices import DeviceOptions
from decider.engine.runners import fast_reasoning
from decider.engine.core.errors import SettingsError
from decider.engine.compile.precision import fully_connected_kernels, short_type
from decider.engine.runners.fast_reasoning import PROPERTIES_ENV, fast_properties, reasoner_for, release, twin_of
from decider.engine.core.logprobs import Distribution
from decider.engine.runners.runner import ModelRunner
from decider.engine.core.settings import SETTINGS, SamplingSettings

QUESTION = "The bridge is out. Which way should the caravan go?"
OPTIONS = ("North pass", "River ford", "Wait")
# Penalties off: the answer's logprobs are then the model's alone, comparable with a plain prefill.
SAMPLED = SamplingSettings(temperature=0.9, top_k=0, top_p=1.0, frequency_penalty=0.0, presence_penalty=0.0, seed=11)


def _fresh_exact_logprobs(folder: str, ids: list, letters: list[int]) -> np.ndarray:
    """The reference: one exact runner, nothing cached, prefilling the whole token sequence."""
    return Distribution(ModelRunner(folder).prefill(ids)).logprobs(letters)


# This machine's CPU (AVX2 only) gets no twin by default; the mechanism is tested with the u8 KV cache
# candidate forced, which moves the logits measurably (so an answer read on the twin would fail).
FORCED = {"KV_CACHE_PRECISION": "u8", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "32"}


@pytest.fixture(autouse=True)
def _forced_twin(request, monkeypatch):
    if "policy" not in request.node.name:
        monkeypatch.setenv(PROPERTIES_ENV, json.dumps(FORCED))


@pytest.fixture(scope="module")
def runner():
    return ModelRunner(model_dir("qwen35-text"))


def test_fast_reasoning_is_the_declared_default():
    assert SETTINGS["fast_reasoning"].default is True
    assert DecisionRequest("Q?", ("a", "b")).fast_reasoning is True


def test_the_answer_after_fast_reasoning_equals_an_exact_prefill_of_the_same_tokens(runner):
    letters = letter_ids(runner.tokenizer, len(OPTIONS))
    request = DecisionRequest(QUESTION, OPTIONS, think=True, reasoning_budget=40, sampling=SAMPLED)
    forwards = runner.stats.forwards
    result = decide(runner, request)
    twin = twin_of(runner)
    assert twin is not None and twin is not runner
    sequence = list(runner.history)  # prompt + the reasoning produced + the answer prefix
    prompt = build_decision_prompt(runner.tokenizer, QUESTION, list(OPTIONS), think=True)
    reasoned = len(sequence) - len(prompt.ids)
    assert sequence[: len(prompt.ids)] == prompt.ids and reasoned > 10
    # The exact runner ran two forwards (the prompt, then reasoning + answer prefix in one prefill);
    # every reasoning token after the first was a step of the twin.
    assert runner.stats.forwards - forwards == 2
    assert twin.stats.forwards >= reasoned - 4
    got = np.array([o.logprob for o in result.options])
    want = _fresh_exact_logprobs(model_dir("qwen35-text"), sequence, letters)
    assert np.abs(got - want).max() < 1e-5
    # ... and the check can fail: the twin's own answer for the same tokens is measurably different.
    fast = Distribution(twin.prefill(sequence)).logprobs(letters)
    assert np.abs(fast - want).max() > 1e-4
    # The label is what the twin's compiled model reports: never exact, its KV cache u8, its arithmetic the CPU's,
    # and the kernels its FullyConnected layers ran. The fixture's weights are f32, so the requested int8
    # activations never run: neither label claims them (tests/test_precision.py has the int8-weight case).
    assert not twin.precision.exact and "u8 KV cache" in result.reasoning_precision
    assert "int8 activations" not in twin.precision.label and "int8 activations" not in result.reasoning_precision
    ran = fully_connected_kernels(*twin.compiles)
    assert ran and f"(FullyConnected {', '.join(ran)})" in result.reasoning_precision
    inference = short_type(twin.compiled.get_property("INFERENCE_PRECISION_HINT"))
    assert result.reasoning_precision.startswith(f"{inference} inference")


def test_turned_off_the_runner_reasons_itself_and_the_twin_is_released(runner):
    decide(runner, DecisionRequest(QUESTION, OPTIONS, think=True, reasoning_budget=4, sampling=SAMPLED))
    assert twin_of(runner) is not None
    forwards = runner.stats.forwards
    request = DecisionRequest(QUESTION, OPTIONS, think=True, reasoning_budget=8, sampling=SAMPLED, fast_reasoning=False)
    result = decide(runner, request)
    assert twin_of(runner) is None
    assert result.reasoning_precision == "f32"
    assert runner.stats.forwards - forwards >= 8  # the reasoning steps ran here


def test_the_twin_is_compiled_only_when_a_think_decision_needs_it():
    runner = ModelRunner(model_dir("qwen35-text"))
    result = decide(runner, DecisionRequest(QUESTION, OPTIONS, sampling=SAMPLED))
    assert twin_of(runner) is None and result.reasoning_precision is None
    decide(runner, DecisionRequest(QUESTION, OPTIONS, think=True, reasoning_budget=3, sampling=SAMPLED))
    first = twin_of(runner)
    decide(runner, DecisionRequest(QUESTION, OPTIONS, think=True, reasoning_budget=3, sampling=SAMPLED))
    assert first is not None and twin_of(runner) is first  # compiled once, kept
    release(runner)
    assert twin_of(runner) is None


def test_a_runner_already_in_fast_mode_reasons_itself():
    runner = ModelRunner(model_dir("qwen35-text"), DeviceOptions(device="CPU", exact=False))
    reasoner = reasoner_for(runner, True)
    assert reasoner.runner is runner and not reasoner.hands_over(runner)
    assert twin_of(runner) is None


def test_fast_reasoning_with_an_image_keeps_the_answer_exact():
    folder = model_dir("qwen35-vl")
    runner = ModelRunner(folder)
    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 256, size=(64, 96, 3), dtype=np.uint8)
    request = DecisionRequest(QUESTION, OPTIONS, think=True, reasoning_budget=12, sampling=SAMPLED, images=(pixels,))
    result = decide(runner, request)
    assert twin_of(runner) is not None and twin_of(runner).vision is runner.vision
    sequence = list(runner.history)
    letters = letter_ids(runner.tokenizer, len(OPTIONS))
    reference = ModelRunner(folder)
    reference.image_tokens(pixels)  # the reference encodes the same picture (its tokens name it by digest)
    want = Distribution(reference.prefill(sequence)).logprobs(letters)
    got = np.array([o.logprob for o in result.options])
    assert np.abs(got - want).max() < 1e-5


def test_the_engine_info_says_which_precision_reasoned():
    from decider.app.service import EngineService

    service = EngineService(model_dir("qwen35-text"), DeviceOptions(device="CPU"))
    thought = service.decide(DecisionRequest(QUESTION, OPTIONS, think=True, reasoning_budget=3, sampling=SAMPLED))
    twin = twin_of(service.runner)
    assert thought.engine.exact and thought.engine.precision == "f32"
    assert thought.engine.reasoning == fast_reasoning.precision_of(twin) and "u8 KV cache" in thought.engine.reasoning
    assert "FullyConnected" in thought.engine.reasoning  # read back after the reasoning ran
    assert thought.to_dict()["engine"]["reasoning"] == thought.engine.reasoning
    plain = service.decide(DecisionRequest(QUESTION, OPTIONS, sampling=SAMPLED))
    assert plain.engine.reasoning is None and "reasoning" not in plain.to_dict()["engine"]


def test_every_front_end_carries_the_setting():
    from pydantic import ValidationError

    from decider.app.api.errors import from_validation
    from decider.app.api.protocol import DecideRequest
    from decider.app.cli import build_parser
    from decider.app.preferences import GuiSettings
    from decider.ui.decision_controller import build_request

    args = build_parser().parse_args(["ask", "Q?", "--option", "a", "--option", "b", "--no-fast-reasoning"])
    assert args.fast_reasoning is False
    assert build_parser().parse_args(["ask", "Q?"]).fast_reasoning is True

    def parse(body):
        return DecideRequest.model_validate({"question": QUESTION, "options": list(OPTIONS), **body}).to_request(SamplingSettings())

    assert parse({}).fast_reasoning is True and parse({"fast_reasoning": False}).fast_reasoning is False
    with pytest.raises(ValidationError) as caught:
        parse({"fast_reasoning": "no"})
    assert from_validation(caught.value).param == "fast_reasoning"
    assert GuiSettings().fast_reasoning is True
    assert build_request(QUESTION, OPTIONS, GuiSettings(fast_reasoning=False)).fast_reasoning is False


def test_the_settings_form_has_the_checkbox(qtbot):
    pytest.importorskip("PySide6")
    from decider.app.gui_ports import settings_rules
    from decider.app.preferences import GuiSettings
    from decider.ui.settings_panel import SettingsPanel

    panel = SettingsPanel(GuiSettings(fast_reasoning=False), settings_rules())
    qtbot.addWidget(panel)
    assert panel.fields["fast_reasoning"].isChecked() is False
    panel.fields["fast_reasoning"].setChecked(True)
    assert panel.settings.fast_reasoning is True


def test_policy_the_forced_properties_must_be_a_json_object(monkeypatch):
    runner = ModelRunner(model_dir("qwen35-text"))
    monkeypatch.setenv(PROPERTIES_ENV, '["u8"]')
    with pytest.raises(SettingsError, match=PROPERTIES_ENV):
        fast_properties(runner)
    monkeypatch.setenv(PROPERTIES_ENV, json.dumps(FORCED))
    assert fast_properties(runner) == FORCED
