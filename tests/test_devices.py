import pytest

from engine.devices import DeviceOptions, choose_device, compile_properties, device_caps
from engine.errors import DeviceError, SettingsError


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
    fast = compile_properties("CPU", DeviceOptions(exact=False))
    assert "INFERENCE_PRECISION_HINT" not in fast and "KV_CACHE_PRECISION" not in fast


def test_npu_uses_npuw_llm_with_an_explicit_prompt_limit(tmp_path):
    props = compile_properties("NPU", DeviceOptions(npu_max_prompt_len=2048, cache_dir=tmp_path))
    assert props["NPU_USE_NPUW"] == "YES" and props["NPUW_LLM"] == "YES"
    assert props["NPUW_LLM_MAX_PROMPT_LEN"] == 2048
    assert props["NPUW_LLM_MIN_RESPONSE_LEN"] == 128
    assert props["NPUW_LLM_BATCH_DIM"] == 0 and props["NPUW_LLM_SEQ_LEN_DIM"] == 2
    assert props["CACHE_DIR"] == str(tmp_path)
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
