"""EngineInfo: the typed description of an engine, and the JSON shape clients have always read."""

import pytest

from decider.engine.compile.devices import DeviceOptions
from decider.engine.core.info import EngineInfo
from decider.engine.remote.engine import RemoteConfig, RemoteEngine

from support.models import model_dir


def test_local_info_serialises_to_the_dict_clients_read():
    info = EngineInfo(kind="local", model="m", logprobs="exact", constraint="letter mask", device="CPU", execution_path="dynamic")
    assert info.to_dict() == {
        "kind": "local", "model": "m", "device": "CPU", "execution_path": "dynamic", "logprobs": "exact full-vocabulary",
        "constraint": "letter mask",
    }
    assert info.exact and not info.remote and info.bars_text is None
    fast = EngineInfo(kind="local", model="m", logprobs="reduced", constraint="letter mask", device="GPU")
    assert not fast.exact
    assert fast.to_dict()["logprobs"] == "full-vocabulary, reduced precision (fast mode)"
    npu = EngineInfo(kind="local", model="m", logprobs="reduced", reduced_by="f16 on the NPU", constraint="letter mask")
    assert npu.to_dict()["logprobs"] == "full-vocabulary, reduced precision (f16 on the NPU)"
    # what a service fills in: the arithmetic read back from the compiled model, and how a device was emulated
    stated = EngineInfo(kind="local", model="m", logprobs="exact", constraint="letter mask", device="NPU",
                        execution_path="static", precision="f32, NPU emulated on CPU", emulated="NPUW on CPU")
    assert stated.to_dict()["logprobs"] == "exact full-vocabulary (f32, NPU emulated on CPU)"
    assert stated.to_dict()["precision"] == "f32, NPU emulated on CPU" and stated.to_dict()["emulated"] == "NPUW on CPU"


@pytest.mark.parametrize(
    ("constraint", "bars"), [("none", "from the top-20 list"), ("vllm", "renormalised by the server's constraint")]
)
def test_remote_info_serialises_to_the_dict_clients_read(constraint, bars):
    info = RemoteEngine(RemoteConfig("http://gpu:8000/v1", model="big", constraint=constraint)).info()
    assert info.remote and not info.exact and info.device is None
    assert info.to_dict() == {
        "kind": "remote", "url": "http://gpu:8000", "model": "big",
        "logprobs": "server top-20 (not full-vocabulary exact)", "constraint": constraint, "bars": bars,
    }


def test_invalid_info_is_refused():
    with pytest.raises(ValueError, match="kind"):
        EngineInfo(kind="cloud", model=None, logprobs="exact", constraint="letter mask")
    with pytest.raises(ValueError, match="exactness"):
        EngineInfo(kind="local", model=None, logprobs="approximate", constraint="letter mask")
    with pytest.raises(ValueError, match="length"):
        EngineInfo(kind="remote", model=None, logprobs="top_n", constraint="none")


@pytest.mark.parametrize("exact", [True, False])
def test_a_local_service_describes_its_device_and_precision(exact):
    from decider.app.service import EngineService

    service = EngineService(model_dir("qwen35-text"), DeviceOptions(device="CPU", exact=exact))
    info = service.info
    assert (info.kind, info.model, info.device, info.exact) == ("local", "qwen35-text", "CPU", exact)
    assert info.execution_path == "dynamic" and info.constraint == "letter mask"


def test_the_result_view_reads_exactness_from_the_info():
    pytest.importorskip("PySide6")
    from decider.ui.result_view import engine_summary

    exact = EngineInfo(kind="local", model="m", logprobs="exact", constraint="letter mask", device="CPU",
                       execution_path="dynamic", precision="f32")
    fast = EngineInfo(kind="local", model="m", logprobs="reduced", constraint="letter mask", device="CPU",
                      execution_path="dynamic", precision="bf16 inference, u8 KV cache", reduced_by="bf16 inference, u8 KV cache")
    remote = RemoteEngine(RemoteConfig("http://gpu:8000", model="big", constraint="vllm")).info()
    assert engine_summary(exact) == (
        "exact logprobs (f32)", "Computed locally: m on CPU · dynamic path · exact full-vocabulary (f32) logprobs")
    assert engine_summary(fast)[0] == "reduced precision: bf16 inference, u8 KV cache"
    assert "exact" not in engine_summary(fast)[1]
    short, long = engine_summary(remote)
    assert short == "server top-20 logprobs" and "http://gpu:8000 (big)" in long and "answer constraint: vllm" in long
    assert engine_summary(None) == ("", "")
