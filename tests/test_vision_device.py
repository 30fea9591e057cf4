"""Which device runs the vision encoder: the setting (DeviceOptions.vision_device, CLI, GUI settings), static
shapes for the NPU (checked through the NPU plugin with NPUW on the CPU) and the fallbacks."""

import json

import numpy as np
import openvino as ov
import pytest

from support.models import REFERENCE, model_dir
from decider.engine.compile.devices import DEFAULT_VISION_DEVICE, DeviceOptions
from decider.engine.compile.planner import compile_properties
from decider.engine.core.errors import ModelError, SettingsError
from decider.engine.core.logprobs import log_softmax
from decider.engine.model.folder import inspect_folder
from decider.engine.vision.encoder import VisionEncoder
from test_vision import CASES, chat_prompt, load

TOLERANCE = 1e-4
FIXTURE = model_dir("qwen35-vl")
FIXTURE_BUDGET = 256 * 256  # the fixture's preprocessor_config.json: 64² to 256² pixels


@pytest.fixture(scope="module")
def folder():
    return inspect_folder(FIXTURE)


@pytest.fixture(scope="module")
def core():
    return ov.Core()


def encoder(core, folder, device="CPU", static=None) -> VisionEncoder:
    return VisionEncoder(core, folder.path, folder.vision_config, device, compile_properties(device, DeviceOptions()), static)


def features(enc: VisionEncoder, pixels: np.ndarray) -> np.ndarray:
    return enc.features(enc.tokens(pixels)[0].digest)


# ----- the setting -----
def test_the_vision_device_is_a_device_option():
    assert DeviceOptions().vision_device == DEFAULT_VISION_DEVICE == "CPU"
    assert DeviceOptions(vision_device="npu").vision_device == "NPU"
    for bad in ("TPU", "", 3):
        with pytest.raises(SettingsError, match="vision_device must be one of"):
            DeviceOptions(vision_device=bad)
    with pytest.raises(SettingsError, match="npu_vision_max_pixels"):
        DeviceOptions(npu_vision_max_pixels=10)


def test_cli_flag_and_gui_settings_follow_the_option(tmp_path):
    from decider.app.cli import _device_options, build_parser
    from decider.app.preferences import GuiSettings

    args = build_parser().parse_args(["ask", "--model", str(FIXTURE), "Q?", "--option", "A", "--option", "B", "--vision-device", "npu"])
    assert _device_options(args).vision_device == "NPU"
    args = build_parser().parse_args(["ask", "--model", str(FIXTURE), "Q?", "--option", "A", "--option", "B"])
    assert _device_options(args).vision_device == DEFAULT_VISION_DEVICE
    settings = GuiSettings(vision_device="gpu")
    assert settings.device_options(tmp_path).vision_device == "GPU"
    with pytest.raises(SettingsError, match="vision_device"):
        GuiSettings(vision_device="TPU")


def test_the_cli_refuses_a_vision_device_with_a_remote_engine(capsys):
    from decider.app.cli import main

    code = main(["ask", "--engine", "http://127.0.0.1:9/v1", "--vision-device", "NPU", "Q?", "--option", "A", "--option", "B"])
    captured = capsys.readouterr()
    assert code != 0 and "--vision-device" in captured.err and "Traceback" not in captured.err


# ----- static shapes -----
@pytest.mark.parametrize("name", ["wide_96x64", "tall_64x128", "screen_640x360", "square_64x64"])
def test_static_shapes_give_the_dynamic_encoders_features(core, folder, name):
    dynamic, static = encoder(core, folder), encoder(core, folder, static=FIXTURE_BUDGET)
    assert static.static_patches == FIXTURE_BUDGET // 16**2
    pixels = load(name)
    want = features(dynamic, pixels)
    got = features(static, pixels)
    assert got.shape == want.shape
    # Padding is masked out as keys and dropped from the output: the real rows are the dynamic encoder's.
    assert np.max(np.abs(got - want)) < 1e-5


def test_a_smaller_static_budget_scales_images_into_it(core, folder):
    small = encoder(core, folder, static=128 * 128)
    tokens = small.tokens(load("screen_640x360"))
    assert len(tokens) <= 128 * 128 // 32**2 and small.processor.max_pixels == 128 * 128
    assert features(small, load("screen_640x360")).shape[0] == len(tokens)
    with pytest.raises(ModelError, match="holds no"):
        encoder(core, folder, static=16 * 16)


@pytest.fixture
def npuw_on_cpu(monkeypatch):
    monkeypatch.setenv("DECIDER_NPUW_DEVICES", "CPU")


def test_the_npu_vision_encoder_through_the_npu_plugin(npuw_on_cpu, folder):
    """The whole prompt with the encoder on the NPU plugin (NPUW running on the CPU) against transformers float64."""
    from decider.engine.runners.runner import ModelRunner

    runner = ModelRunner(FIXTURE, DeviceOptions(device="CPU", vision_device="NPU", npu_vision_max_pixels=FIXTURE_BUDGET))
    assert runner.vision.device == "NPU" and runner.vision.static_patches == FIXTURE_BUDGET // 16**2
    worst = 0.0
    for name in ("wide_96x64", "screen_640x360"):
        case = next(c for c in CASES.values() if c["images"] == [name])
        runner.reset()
        got = log_softmax(runner.prefill(chat_prompt(runner, case).ids))
        worst = max(worst, float(np.max(np.abs(got - np.array(case["logprobs"])))))
    print(f"\nvision encoder on the NPU plugin (NPUW on CPU): max |Δ logprob| vs transformers float64 = {worst:.2e}")
    assert worst < TOLERANCE


# ----- fallbacks -----
def test_auto_falls_back_to_the_cpu_with_a_notice(npuw_on_cpu, core, folder, monkeypatch):
    from decider.engine.vision import device as vision_device

    real = vision_device.VisionEncoder

    def failing_on_npu(core, path, config, device, properties, static):
        if device == "NPU":  # an NPU driver that cannot compile the encoder
            raise ModelError("openvino_vision_embeddings_model.xml: cannot compile on NPU (driver says no)")
        return real(core, path, config, device, properties, static)

    monkeypatch.setattr(vision_device, "VisionEncoder", failing_on_npu)
    notices: list[str] = []
    enc = vision_device.open_vision_encoder(core, folder, DeviceOptions(vision_device="AUTO"), notices)
    assert enc.device == "CPU" and enc.static_patches is None
    assert len(notices) == 1 and "could not run on NPU" in notices[0] and "driver says no" in notices[0]
    with pytest.raises(ModelError, match="driver says no"):
        vision_device.open_vision_encoder(core, folder, DeviceOptions(vision_device="NPU"), [])


def test_an_absent_vision_device_is_a_clear_error(monkeypatch, core, folder):
    from decider.engine.core.errors import DeviceError
    from decider.engine.vision.device import open_vision_encoder

    monkeypatch.delenv("DECIDER_NPUW_DEVICES", raising=False)
    if "GPU" in core.available_devices:
        pytest.skip("this machine has a GPU")
    with pytest.raises(DeviceError, match="GPU is not available"):
        open_vision_encoder(core, folder, DeviceOptions(vision_device="GPU"), [])
