"""The MTP head's OpenVINO graph (engine/mtp_graph.py) against a float64 numpy reference of the layer, on the
fixtures' seeded random `mtp.*` tensors, read by our own safetensors reader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import openvino as ov
import pytest

from decider.engine.errors import ModelError
from decider.engine.mtp_graph import build_mtp_model
from decider.engine.safetensors_file import checkpoint_tensors, read_tensors, write_tensors

from support.mtp_reference import mtp_forward

CHECKPOINTS = Path(__file__).parent / "fixtures" / "checkpoints"
EXACT = {"INFERENCE_PRECISION_HINT": "f32"}


def _head(name: str) -> tuple[dict, dict]:
    config = json.loads((CHECKPOINTS / name / "config.json").read_text())
    tensors = checkpoint_tensors(CHECKPOINTS / name, "mtp.")
    return {k[len("mtp."):]: v for k, v in tensors.items()}, config.get("text_config", config)


def test_safetensors_round_trip_and_bf16(tmp_path):
    tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1, -2], dtype=np.int64),
               "c": np.float16([0.5, -3.0])}
    write_tensors(tmp_path / "x.safetensors", tensors)
    back = read_tensors(tmp_path / "x.safetensors")
    assert set(back) == set(tensors)
    for name, array in tensors.items():
        assert back[name].dtype == array.dtype and np.array_equal(back[name], array)
    # bf16: the high half of a float32; our reader widens it exactly
    values = np.float32([1.5, -0.15625, 3.0e38])
    raw = (values.view(np.uint32) >> 16).astype("<u2").tobytes()
    header = json.dumps({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, len(raw)]}}).encode()
    (tmp_path / "bf.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + raw)
    widened = read_tensors(tmp_path / "bf.safetensors")["w"]
    assert np.array_equal(widened, (values.view(np.uint32) & 0xFFFF0000).view(np.float32))


def test_damaged_safetensors_is_a_model_error(tmp_path):
    (tmp_path / "bad.safetensors").write_bytes((10).to_bytes(8, "little") + b"{not json}")
    with pytest.raises(ModelError):
        read_tensors(tmp_path / "bad.safetensors")


@pytest.mark.parametrize("name", ["qwen35-text", "qwen35-vl"])
def test_graph_matches_float64_reference(name):
    weights, config = _head(name)
    assert weights, "the fixture checkpoint carries mtp.* tensors (tools/make_fixtures.py --mtp-only)"
    compiled = ov.Core().compile_model(build_mtp_model(weights, config), "CPU", EXACT)
    rng = np.random.default_rng(3)
    size = int(config["hidden_size"])
    embeds, hidden = rng.standard_normal((7, size)), rng.standard_normal((7, size)) * 3
    positions = np.arange(40, 47)
    got = compiled({"inputs_embeds": embeds[None].astype(np.float32), "hidden_states": hidden[None].astype(np.float32),
                    "position_ids": positions[None]})[0][0]
    want = mtp_forward(weights, config, embeds, hidden, positions.astype(np.float64))
    assert np.max(np.abs(got - want)) < 2e-4
    # causal: a later position never changes an earlier one's output; RoPE: a shifted position does
    short = compiled({"inputs_embeds": embeds[None, :3].astype(np.float32),
                      "hidden_states": hidden[None, :3].astype(np.float32), "position_ids": positions[None, :3]})[0][0]
    assert np.max(np.abs(short - got[:3])) < 1e-5
    # RoPE is relative: the same shift everywhere changes nothing, a gap before the last position changes it
    shifted = compiled({"inputs_embeds": embeds[None].astype(np.float32),
                        "hidden_states": hidden[None].astype(np.float32), "position_ids": positions[None] + 5})[0][0]
    assert np.max(np.abs(shifted - got)) < 1e-5
    gap = positions.copy()
    gap[-1] += 5
    moved = compiled({"inputs_embeds": embeds[None].astype(np.float32), "hidden_states": hidden[None].astype(np.float32),
                      "position_ids": gap[None]})[0][0]
    assert np.max(np.abs(moved[:-1] - got[:-1])) < 1e-5 and np.max(np.abs(moved[-1] - got[-1])) > 1e-3
    assert np.max(np.abs(moved[-1] - mtp_forward(weights, config, embeds, hidden, gap.astype(np.float64))[-1])) < 2e-4


def test_missing_tensor_is_named():
    weights, config = _head("qwen35-text")
    weights.pop("layers.0.mlp.up_proj.weight")
    with pytest.raises(ModelError, match="up_proj"):
        build_mtp_model(weights, config)


def test_convert_keeps_the_mtp_head(tmp_path, monkeypatch):
    """`decider convert` writes openvino_mtp_model.xml from the checkpoint's mtp.* tensors (optimum stubbed by a copy
    of the fixture export); its graph is the head's, with f16 weights."""
    from decider.app import convert as convert_module
    from decider.engine.model_folder import inspect_folder
    from support.models import model_dir

    def fake_exporter(command, log):
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        for path in model_dir("qwen35-text").iterdir():
            (out / path.name).write_bytes(path.read_bytes())

    monkeypatch.setattr(convert_module, "optimum_available", lambda: True)
    monkeypatch.setattr(convert_module, "_run_exporter", fake_exporter)
    lines: list[str] = []
    convert_module.convert(CHECKPOINTS / "qwen35-text", tmp_path / "out", "fp16", log=lines.append, run_decision=False)
    folder = inspect_folder(tmp_path / "out")
    assert folder.mtp_ir is not None and any("MTP head" in line for line in lines)
    weights, config = _head("qwen35-text")
    saved = ov.Core().compile_model(folder.mtp_ir, "CPU", EXACT)
    rng = np.random.default_rng(5)
    feed = {"inputs_embeds": rng.standard_normal((1, 4, 64)).astype(np.float32),
            "hidden_states": rng.standard_normal((1, 4, 64)).astype(np.float32), "position_ids": np.arange(4)[None]}
    want = mtp_forward(weights, config, feed["inputs_embeds"][0], feed["hidden_states"][0], np.arange(4.0))
    assert np.max(np.abs(saved(feed)[0][0] - want)) < 2e-2  # f16 weights


def test_a_checkpoint_without_mtp_tensors_exports_no_head(tmp_path):
    from decider.app.mtp_export import export_mtp

    assert export_mtp(CHECKPOINTS / "qwen35-moe-text", tmp_path) is None
    assert not list(tmp_path.iterdir())
