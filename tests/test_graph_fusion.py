"""Projections that read the same activations fuse into one MatMul, and the logits do not move at all."""

import numpy as np
import openvino as ov
import pytest

from support.models import case, model_dir
from bench.projection_fusion import fuse_parallel_projections
from decider.engine.compile.devices import DeviceOptions
from decider.engine.compile.planner import compile_properties
from decider.engine.graphs.logits import slice_to_last_position

PROMPT = case("dist_ten_options")["prompt_ids"]
EXACT = compile_properties("CPU", DeviceOptions(device="CPU", exact=True))


def _matmuls(model: ov.Model) -> int:
    return sum(1 for op in model.get_ordered_ops() if op.get_type_name() == "MatMul")


def _text_feed(ids, past):
    return {
        "input_ids": np.asarray([ids], dtype=np.int64), "attention_mask": np.ones((1, past + len(ids)), dtype=np.int64),
        "position_ids": np.arange(past, past + len(ids))[None], "beam_idx": np.zeros(1, np.int32),
    }


def _run(model: ov.Model, ids: list[int], steps: list[int]) -> list[np.ndarray]:
    request = ov.Core().compile_model(model, "CPU", EXACT).create_infer_request()
    request.infer(_text_feed(ids, 0))
    rows = [request.get_tensor("logits").data[0, -1].copy()]
    for i, token in enumerate(steps):
        request.infer(_text_feed([token], len(ids) + i))
        rows.append(request.get_tensor("logits").data[0, -1].copy())
    return rows


@pytest.mark.parametrize("name", ["qwen35-text", "qwen35-moe-text"])
def test_fused_projections_give_bit_identical_logits(name):
    core = ov.Core()
    plain = slice_to_last_position(core.read_model(model_dir(name) / "openvino_model.xml"))
    fused = slice_to_last_position(core.read_model(model_dir(name) / "openvino_model.xml"))
    before = _matmuls(fused)
    groups = fuse_parallel_projections(fused)
    # per layer: the DeltaNet's input projections or q/k/v, and the MLP's gate+up (dense models)
    assert groups > 0
    assert _matmuls(fused) < before
    ids = [int(t) for t in PROMPT]
    expected, got = _run(plain, ids, [5, 6, 7]), _run(fused, ids, [5, 6, 7])
    for a, b in zip(expected, got):
        assert np.array_equal(a, b)


def test_every_dense_layer_fuses_its_input_and_mlp_projections():
    model = ov.Core().read_model(model_dir("qwen35-text") / "openvino_model.xml")
    layers = sum(1 for op in model.get_ordered_ops() if op.get_type_name() == "MatMul" and op.get_friendly_name().endswith("mlp.up_proj/aten::linear/MatMul"))
    assert fuse_parallel_projections(model) == 2 * layers  # one mixer group and one MLP group per layer
    names = [op.get_friendly_name() for op in model.get_ordered_ops() if op.get_type_name() == "MatMul"]
    assert not any("mlp.up_proj" in n for n in names)  # up_proj now lives in gate_proj's fused node


def test_a_model_with_nothing_to_fuse_is_left_as_it_is():
    x = ov.opset13.parameter([1, 4, 8], np.float32, name="x")
    w = ov.opset13.constant(np.ones((16, 8), np.float32))
    model = ov.Model([ov.opset13.matmul(x, w, False, True)], [x])
    assert fuse_parallel_projections(model) == 0
    assert _matmuls(model) == 1


def test_projections_of_different_inputs_are_not_fused():
    x = ov.opset13.parameter([1, 4, 8], np.float32, name="x")
    y = ov.opset13.parameter([1, 4, 8], np.float32, name="y")
    first = np.arange(64 * 8, dtype=np.float32).reshape(64, 8) / 100
    third = np.full((96, 8), 2.0, np.float32)
    w1, w2, w3 = (ov.opset13.constant(first), ov.opset13.constant(np.ones((64, 8), np.float32)), ov.opset13.constant(third))
    narrow = ov.opset13.constant(np.ones((16, 8), np.float32))  # too narrow to fuse: other kernels, other sums
    a, b, c, d = (ov.opset13.matmul(x, w1, False, True), ov.opset13.matmul(y, w2, False, True),
                  ov.opset13.matmul(x, w3, False, True), ov.opset13.matmul(x, narrow, False, True))
    model = ov.Model([a, b, c, d], [x, y])
    assert fuse_parallel_projections(model) == 1  # a and c share x; b reads y; d is narrow
    assert _matmuls(model) == 3
    request = ov.Core().compile_model(model, "CPU", EXACT).create_infer_request()
    xs, ys = np.random.default_rng(0).standard_normal((2, 1, 4, 8)).astype(np.float32)
    request.infer({"x": xs, "y": ys})
    np.testing.assert_allclose(request.get_output_tensor(0).data, xs @ first.T, rtol=1e-5)
    np.testing.assert_allclose(request.get_output_tensor(2).data, xs @ third.T, rtol=1e-5)
