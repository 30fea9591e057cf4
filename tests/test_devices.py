import pytest

from pathlib import Path

from decider.engine.compile.devices import DeviceOptions, choose_device, device_caps
from decider.engine.compile.planner import compile_properties, static_compile_properties
from decider.engine.core.errors import DeviceError, SettingsError


def test_auto_prefers_npu_then_gpu_then_cpu():
    assert choose_device("AUTO", ["CPU", "GPU.0", "NPU"]) == "NPU"
    assert choose_device("auto", ["CPU", "GPU.0", "GPU.1"]) == "GPU"
    assert choose_device("AUTO", ["CPU"]) == "CPU"


def test_an_unavailable_device_is_a_clear_error():
    with pytest.raises(DeviceError, match="NPU is not available; OpenVINO sees: CPU"):
        choose_device("NPU", ["CPU"])
    with pytest.raises(SettingsError, match="device must be one of"):
        DeviceOptions(device="TPU")


def test_cpu_is_exact_by_default_and_can_opt_out():
    exact = compile_properties("CPU", DeviceOptions())
    assert exact["INFERENCE_PRECISION_HINT"] == "f32"
    assert exact["KV_CACHE_PRECISION"] == "f32"
    assert exact["DYNAMIC_QUANTIZATION_GROUP_SIZE"] == "0"
    # Fast mode is spelled out too (never the plugin's default, which differs by CPU): the CPU's fastest
    # floating-point arithmetic among those it reports, a u8 KV cache, int8 activations.
    for capabilities, inference in ((("FP32", "INT8"), "f32"), (("FP32", "BF16"), "bf16"), (("FP32", "FP16"), "f16")):
        fast = compile_properties("CPU", DeviceOptions(exact=False), capabilities)
        assert fast["INFERENCE_PRECISION_HINT"] == inference and fast["KV_CACHE_PRECISION"] == "u8"
        assert fast["DYNAMIC_QUANTIZATION_GROUP_SIZE"] == "32"
    gpu = compile_properties("GPU", DeviceOptions(exact=False))
    assert gpu["INFERENCE_PRECISION_HINT"] == "f16" and gpu["KV_CACHE_PRECISION"] == "f16"


def test_npu_uses_npuw_llm_with_an_explicit_prompt_limit(tmp_path):
    props = compile_properties("NPU", DeviceOptions(npu_max_prompt_len=2048, cache_dir=tmp_path))
    assert props["NPU_USE_NPUW"] == "YES" and props["NPUW_LLM"] == "YES"
    assert props["NPUW_LLM_MAX_PROMPT_LEN"] == 2048
    assert props["NPUW_LLM_MIN_RESPONSE_LEN"] == 128
    assert props["NPUW_LLM_BATCH_DIM"] == 0 and props["NPUW_LLM_SEQ_LEN_DIM"] == 2
    assert Path(props["CACHE_DIR"]).parent == tmp_path  # a subfolder per property set (engine/compile/planner.py)
    assert "INFERENCE_PRECISION_HINT" not in props


def test_npu_degrades_to_no_snapshots_and_a_static_limit():
    caps = device_caps("NPU", DeviceOptions(npu_max_prompt_len=512))
    assert not caps.snapshots and not caps.prefix_reuse
    assert caps.max_prompt_len == 512 and caps.max_total_len == 512 + 128
    cpu = device_caps("CPU", DeviceOptions())
    assert cpu.snapshots and cpu.prefix_reuse and cpu.max_prompt_len is None


def test_npu_prompt_limit_is_validated():
    with pytest.raises(SettingsError, match="npu_max_prompt_len"):
        DeviceOptions(npu_max_prompt_len=0)


# ----- the NPU testing override, execution paths and the fallback chain -----

import openvino as ov  # noqa: E402

from support.models import model_dir  # noqa: E402
from decider.engine.compile.devices import path_for, visible_devices  # noqa: E402
from decider.engine.runners.choice import open_runner  # noqa: E402


def test_the_npuw_override_makes_the_npu_usable_and_reaches_the_plugin(monkeypatch, tmp_path):
    monkeypatch.delenv("DECIDER_NPUW_DEVICES", raising=False)
    assert visible_devices(["CPU"]) == ["CPU"]
    assert "NPUW_DEVICES" not in static_compile_properties("NPU", DeviceOptions())
    monkeypatch.setenv("DECIDER_NPUW_DEVICES", "CPU")
    assert visible_devices(["CPU"]) == ["CPU", "NPU"]
    assert visible_devices(["CPU", "NPU"]) == ["CPU", "NPU"]
    props = static_compile_properties("NPU", DeviceOptions(cache_dir=tmp_path))
    assert props["NPUW_DEVICES"] == "CPU" and props["NPU_USE_NPUW"] == "YES" and "NPUW_LLM" not in props
    assert Path(props["CACHE_DIR"]).parent == tmp_path
    assert compile_properties("NPU", DeviceOptions())["NPUW_DEVICES"] == "CPU"
    assert static_compile_properties("CPU", DeviceOptions()) == compile_properties("CPU", DeviceOptions())


def test_static_shapes_are_the_npu_default_and_paths_can_be_chosen():
    assert path_for("NPU", DeviceOptions()) == "static"
    assert path_for("CPU", DeviceOptions()) == path_for("GPU.1", DeviceOptions()) == "dynamic"
    assert path_for("NPU", DeviceOptions(path="npuw_llm")) == "npuw_llm"
    assert path_for("CPU", DeviceOptions(path="static")) == "static"
    with pytest.raises(SettingsError, match="execution path must be one of"):
        DeviceOptions(path="fastest")
    with pytest.raises(SettingsError, match="static_chunks"):
        DeviceOptions(static_chunks=(64, 8))


class _NpuCompileFails:
    """An OpenVINO core that lists an NPU whose compile fails: how a laptop without Qwen3.5 NPU support behaves."""

    def __init__(self):
        self._core = ov.Core()
        self.available_devices = ["CPU", "NPU"]
        self.attempts: list[str] = []

    def read_model(self, *args):
        return self._core.read_model(*args)

    def get_property(self, *args):
        return self._core.get_property(*args)

    def set_property(self, *args):
        return self._core.set_property(*args)

    def compile_model(self, model, device, properties=None):
        self.attempts.append(device)
        if device.startswith("NPU"):
            raise RuntimeError("Exception from src/plugins/intel_npu: forced compile failure\nmore detail")
        return self._core.compile_model(model, device, properties or {})


def test_auto_falls_back_to_the_cpu_with_a_notice_when_the_npu_compile_fails():
    core = _NpuCompileFails()
    runner = open_runner(model_dir("qwen35-text"), DeviceOptions(), core)
    assert core.attempts[0] == "NPU" and core.attempts[-1] == "CPU"
    assert runner.device == "CPU" and runner.execution_path == "dynamic"
    assert len(runner.notices) == 1
    assert "NPU could not run the model" in runner.notices[0] and "forced compile failure" in runner.notices[0]
    assert "trying CPU" in runner.notices[0]
    assert runner.prefill([1, 2, 3]).shape == (runner.vocab_size,)


def test_an_explicit_npu_that_fails_is_an_error_not_a_silent_fallback():
    with pytest.raises(DeviceError, match="NPU could not compile openvino_model.xml .*forced compile failure"):
        open_runner(model_dir("qwen35-text"), DeviceOptions(device="NPU"), _NpuCompileFails())


def test_auto_without_an_npu_uses_the_cpu_silently(monkeypatch):
    monkeypatch.delenv("DECIDER_NPUW_DEVICES", raising=False)
    runner = open_runner(model_dir("qwen35-text"), DeviceOptions())
    assert runner.device in ("CPU", "GPU") and runner.notices == []


def test_npuw_llm_is_detected_by_trying_and_the_static_path_takes_over(monkeypatch):
    # A real failure with OpenVINO 2026.4: NPUW_LLM cannot reshape Qwen3.5 (the KV-head expand). A release
    # that supports it runs the pipeline instead, without a notice.
    monkeypatch.setenv("DECIDER_NPUW_DEVICES", "CPU")
    runner = open_runner(model_dir("qwen35-text"), DeviceOptions(device="NPU", path="npuw_llm", static_chunks=(16, 1)))
    assert runner.device == "NPU"
    if ov.get_version().startswith("2026.4"):
        assert runner.execution_path == "static"
    if runner.execution_path == "static":
        assert len(runner.notices) == 1 and "using the static-shape path on NPU" in runner.notices[0]
        assert "Broadcast" in runner.notices[0] or "could not compile" in runner.notices[0]
    else:
        assert runner.execution_path == "npuw_llm" and runner.notices == []


def test_doctor_names_the_device_path_and_the_fallback(monkeypatch):
    import decider.engine.runners.choice as runner_choice
    from decider.app.doctor import run_doctor

    real = runner_choice.open_runner
    monkeypatch.setattr(runner_choice, "open_runner", lambda path, options: real(path, options, _NpuCompileFails()))
    report = run_doctor(model_dir("qwen35-text"), DeviceOptions(), compile=True)
    text = report.render()
    assert report.ok, text
    assert "! fallback: NPU could not run the model" in text and "forced compile failure" in text
    assert "✓ compiled on CPU (dynamic path) in " in text


def test_cli_prints_the_fallback_notice_on_stderr(monkeypatch, capsys):
    import decider.app.service
    from decider.app.cli import main

    monkeypatch.setattr(decider.app.service, "open_runner", lambda path, options: open_runner(path, options, _NpuCompileFails()))
    code = main(["complete", "--model", str(model_dir("qwen35-text")), "--prompt", "Once", "--max-tokens", "2", "--temperature", "0"])
    captured = capsys.readouterr()
    assert code == 0
    assert "decider: notice: NPU could not run the model" in captured.err
    assert "Traceback" not in captured.err
