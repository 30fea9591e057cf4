"""The capture budget (issue 39 item 3): the pixel budget of each picture, one setting (engine/core/settings.py) that the
CLI, the GUI and the API take; `decider doctor` states capture-to-bars at the default on the model it opens.

The fixture vision model's own preprocessor budget is 4096 to 65536 pixels, at or under the setting's floor, so
the engine tests give it real Qwen3.5's (256² to 4096², preprocessor_config.json of the released checkpoints).
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest

from decider.app.capture_timing import HEIGHT, WIDTH, game_screen
from decider.engine.decisions.decide import decide
from decider.engine.compile.devices import DeviceOptions
from decider.engine.core.errors import SettingsError
from decider.engine.core.settings import SETTINGS, SamplingSettings
from decider.engine.decisions.types import DecisionRequest
from support.models import model_dir

QWEN_MAX_PIXELS = 4096 * 4096
GREEDY = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0)


def test_the_budget_is_one_declared_setting_with_qwens_range():
    setting = SETTINGS["image_pixels"]
    assert setting.range == (256 * 256, 4096 * 4096, True)
    assert DecisionRequest(question="q", options=("a", "b")).image_pixels == setting.default
    for bad in (1000, 4096 * 4096 + 1, 2.5, True):
        with pytest.raises(SettingsError, match="image_pixels"):
            DecisionRequest(question="q", options=("a", "b"), image_pixels=bad)


@pytest.fixture(scope="module")
def qwen_budget_runner():
    from decider.engine.runners.runner import ModelRunner

    runner = ModelRunner(model_dir("qwen35-vl"), DeviceOptions(device="CPU"))
    runner.vision.processor = replace(runner.vision.processor, max_pixels=QWEN_MAX_PIXELS)
    return runner


def ask(runner, budget: int, pixels: np.ndarray):
    request = DecisionRequest(question="What now?", options=("Attack", "Defend", "Retreat"), images=(pixels,),
                              image_pixels=budget, sampling=GREEDY)
    return decide(runner, request)


def test_a_screenshot_above_the_budget_is_scaled_into_it(qwen_budget_runner):
    runner, screen = qwen_budget_runner, game_screen()
    full = ask(runner, QWEN_MAX_PIXELS, screen)
    assert full.usage["image_tokens"] == 880  # 1280×704 pixels: 40×22 merged tokens, as real Qwen3.5 sees it
    quarter = ask(runner, 512 * 512, screen)
    # aspect kept, inside the budget: 672×384 = 258,048 pixels, 21×12 tokens
    assert quarter.usage["image_tokens"] == 252 and quarter.usage["images_encoded"] == 1
    assert quarter.usage["prompt_tokens"] == full.usage["prompt_tokens"] - (880 - 252)
    assert max(abs(a.logprob - b.logprob) for a, b in zip(full.options, quarter.options)) > 0  # another picture
    again = ask(runner, 512 * 512, screen)  # the same budget: the encoded picture is reused
    assert again.usage["images_encoded"] == 0 and [o.logprob for o in again.options] == [o.logprob for o in quarter.options]
    small = ask(runner, 256 * 256, game_screen(320, 180))  # under the budget: not scaled down (sides rounded to 32s)
    assert small.usage["image_tokens"] == (320 // 32) * (192 // 32)


def test_the_model_budget_caps_the_setting(qwen_budget_runner):
    runner = qwen_budget_runner
    tokens_at = {budget: len(runner.image_tokens(game_screen(), budget)) for budget in (65536, 1 << 19, QWEN_MAX_PIXELS)}
    assert tokens_at[65536] < tokens_at[1 << 19] < tokens_at[QWEN_MAX_PIXELS] == 880
    own = runner.vision.processor
    try:
        runner.vision.processor = replace(own, max_pixels=65536)  # a model whose own budget is smaller
        assert len(runner.image_tokens(game_screen(), QWEN_MAX_PIXELS)) == tokens_at[65536]
    finally:
        runner.vision.processor = own


def test_the_api_takes_the_budget_and_refuses_one_out_of_range():
    from decider.app.api.server import ApiServer
    from decider.app.service import EngineService
    from test_api import assert_error, call
    from test_api_frames import data_url

    server = ApiServer(EngineService(model_dir("qwen35-vl"), DeviceOptions(device="CPU")), "127.0.0.1", 0)
    server.start()
    try:
        body = {"question": "What now?", "options": ["Attack", "Defend"], "images": [data_url(game_screen(320, 180))]}
        status, _, data = call(server.port, "POST", "/v1/decide", {**body, "image_pixels": 1000})
        assert_error(status, data, 400, param="image_pixels")
        status, _, data = call(server.port, "POST", "/v1/decide", {**body, "image_pixels": 65536})
        assert status == 200 and data["usage"]["image_tokens"] > 0
    finally:
        server.stop()


def test_chat_and_its_token_count_take_the_budget():
    """A game may send its screenshot as an OpenAI image_url part: chat completions and /tokenize's chat form take
    the same image_pixels as /v1/decide (absent: the model's own budget), and count the same tokens."""
    from decider.app.api.server import ApiServer
    from decider.app.service import EngineService
    from test_api import assert_error, call
    from test_api_frames import data_url

    service = EngineService(model_dir("qwen35-vl"), DeviceOptions(device="CPU"))
    service.runner.vision.processor = replace(service.runner.vision.processor, max_pixels=QWEN_MAX_PIXELS)  # as real Qwen3.5
    server = ApiServer(service, "127.0.0.1", 0)
    server.start()
    try:
        picture = {"type": "image_url", "image_url": {"url": data_url(game_screen(640, 360))}}
        messages = [{"role": "user", "content": [picture, {"type": "text", "text": "What now?"}]}]
        counts = {}
        for budget in (None, 65536):
            given = {} if budget is None else {"image_pixels": budget}
            status, _, counted = call(server.port, "POST", "/tokenize", {"messages": messages, **given})
            assert status == 200, counted
            status, _, reply = call(server.port, "POST", "/v1/chat/completions",
                                    {"model": "decider", "messages": messages, "max_tokens": 1, **given})
            assert status == 200, reply
            assert reply["usage"]["prompt_tokens"] == counted["count"]
            counts[budget] = counted["count"]
        assert counts[65536] < counts[None]  # 640×360 scaled into 256² pixels: fewer image tokens
        status, _, data = call(server.port, "POST", "/v1/chat/completions",
                               {"model": "decider", "messages": messages, "max_tokens": 1, "image_pixels": 1000})
        assert_error(status, data, 400, param="image_pixels")
        status, _, data = call(server.port, "POST", "/tokenize", {"prompt": "hi", "image_pixels": 65536})
        assert_error(status, data, 400, param="messages")
        # OpenAI's image_url.detail: "low" sees the picture as at most 512×512 pixels, "high"/"auto" as it is
        screen = data_url(game_screen(1280, 720))
        seen = {}
        for detail in ("high", "low"):
            part = {"type": "image_url", "image_url": {"url": screen, "detail": detail}}
            status, _, counted = call(server.port, "POST", "/tokenize", {"messages": [{"role": "user", "content": [part]}]})
            assert status == 200, counted
            seen[detail] = counted["count"]
        assert seen["high"] - seen["low"] == 880 - 252  # 1280×704 → 40×22 tokens; 682×384 → 672×384: 21×12
        part = {"type": "image_url", "image_url": {"url": screen, "detail": "medium"}}
        status, _, data = call(server.port, "POST", "/v1/chat/completions",
                               {"model": "decider", "messages": [{"role": "user", "content": [part]}], "max_tokens": 1})
        assert_error(status, data, 400, param="messages[0].content")
    finally:
        server.stop()


def test_the_cli_flag_and_the_gui_setting_carry_it(tmp_path):
    from decider.app.cli_parser import build_parser
    from decider.app.preferences import GuiSettings
    from decider.ui.decision_controller import build_request

    args = build_parser().parse_args(["ask", "q", "--option", "a", "--option", "b", "--image-pixels", "100000"])
    assert args.image_pixels == 100000
    settings = GuiSettings(image_pixels=131072)
    assert build_request("q", ["a", "b"], settings).image_pixels == 131072
    with pytest.raises(SettingsError, match="image_pixels"):
        settings.with_changes(image_pixels=10)


def test_doctor_states_capture_to_bars_at_the_default_on_the_model_it_runs():
    from decider.app.doctor import run_doctor

    report = run_doctor(model_dir("qwen35-vl"), DeviceOptions(device="CPU"), compile=True)
    [line] = [c.text for c in report.checks if c.text.startswith("capture-to-bars")]
    default = SETTINGS["image_pixels"].default
    assert f"{WIDTH}×{HEIGHT} grab at a budget of {default:,} pixels" in line
    assert "capped by the model's own 65,536" in line and " s for a " in line and "image tokens" in line
    # the load it was measured under, and whether that counts as quiet (app/capture_budget.py)
    assert "measured at load " in line and f" on {os.cpu_count()} vCPUs, other processes using " in line
    assert ("(quiet)" in line) != ("(busy: other work slowed this)" in line)
    text = run_doctor(model_dir("qwen35-text"), DeviceOptions(device="CPU"), compile=True)
    assert any(c.text.startswith("capture-to-bars: this model cannot see images") for c in text.checks)
