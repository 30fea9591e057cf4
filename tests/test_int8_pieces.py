"""The exact compile's int8 projections in integer pieces (engine/graphs/int8_pieces.py): against float64 per
projection, within the exact bound on a real export, the plan's choice and the label's words."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

from support.models import model_dir
from decider.engine.compile.devices import DeviceOptions
from decider.engine.compile.plan import INTEGER_PIECES, PROJECTIONS_ENV, WIDENED, Host
from decider.engine.compile.planner import plan_compile
from decider.engine.compile.precision import cpu_capabilities
from decider.engine.core.logprobs import log_softmax
from decider.engine.graphs import int8_pieces
from decider.engine.graphs.int8_pieces import DESCRIPTION, rewrite_int8_projections
from decider.engine.runners.runner import ModelRunner

INT8 = model_dir("qwen35-text-int8")
HAS_VNNI = "VNNI" in cpu_capabilities(ov.Core())
needs_vnni = pytest.mark.skipif(not HAS_VNNI, reason="no int8 dot-product instruction on this CPU: the plan widens")
EXACT = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}
# A projection's error relative to the largest output, against float64: x̂ is x to max|x|·2⁻³¹ and the sums are exact
# integers, so what is left is f32 rounding in the pieces' combination (measured 3e-8 – 1.8e-7 on the cases below).
# The plugin's widened f32 path on the same rows: 3e-8 – 1.3e-6 (its serial f32 sums grow with K and the tokens).
PROJECTION_TOLERANCE = 3e-7
# The int8 fixture's log-probabilities against the widened exact compile: measured 1.1e-5 – 1.7e-5 (the widened
# path's own f32 sums, amplified by random weights with std 0.15); "exactness unchanged" (#35) is 5e-5.
LOGPROB_TOLERANCE = 5e-5


def _exported_projection(weights: np.ndarray, zero_point: np.ndarray | None, scale: np.ndarray, columns: int) -> ov.Model:
    """x [1, T, K] → one Linear in optimum-intel's int8 layout: u8 (or i8) → f16, − zero point, × f16 scale, → f32."""
    x = ops.parameter([1, -1, columns], np.float32, name="x")
    w = ops.convert(ops.constant(weights), np.float16)
    if zero_point is not None:
        w = ops.subtract(w, ops.convert(ops.constant(zero_point.astype(np.uint8).reshape(-1, 1)), np.float16))
    w = ops.convert(ops.multiply(w, ops.constant(scale.astype(np.float16).reshape(-1, 1))), np.float32)
    return ov.Model([ops.matmul(x, w, False, True)], [x])


def _reference(weights, zero_point, scale, x) -> np.ndarray:
    zp = 0.0 if zero_point is None else zero_point.astype(np.float64).reshape(-1, 1)
    dequantised = (weights.astype(np.float64) - zp) * scale.astype(np.float16).astype(np.float64).reshape(-1, 1)
    return x.astype(np.float64) @ dequantised.T


def _product(model: ov.Model, x: np.ndarray) -> np.ndarray:
    return ov.Core().compile_model(model, "CPU", EXACT)({"x": x})[0][0].astype(np.float64)


def _case(rows: int, columns: int, signed: bool, tokens: int, seed: int):
    rng = np.random.default_rng(seed)
    if signed:
        weights, zero_point = rng.integers(-128, 128, (rows, columns)).astype(np.int8), None
    else:
        weights, zero_point = rng.integers(0, 256, (rows, columns)).astype(np.uint8), rng.integers(60, 200, rows)
    scale = rng.random(rows) * 0.01 + 1e-4
    # activations spanning e^±6, with one outlier channel far above the rest, as hidden states carry
    x = rng.standard_normal((1, tokens, columns)) * np.exp(rng.uniform(-6, 6, (1, tokens, columns)))
    x[..., columns // 3] *= 300.0
    return weights, zero_point, scale, x.astype(np.float32)


@needs_vnni
@pytest.mark.parametrize("rows, columns, signed", [(300, 1024, False), (37, 130, True), (5, 3, False), (1000, 3584, False)])
@pytest.mark.parametrize("tokens", [1, 3, 8, 40])
def test_a_projection_in_pieces_matches_float64_as_closely_as_f32(rows, columns, signed, tokens):
    weights, zero_point, scale, x = _case(rows, columns, signed, tokens, rows + tokens)
    model = _exported_projection(weights, zero_point, scale, columns)
    assert rewrite_int8_projections(model) == 1
    want = _reference(weights, zero_point, scale, x)[0]
    got = _product(model, x)
    assert got.shape == want.shape
    assert np.abs(got - want).max() / np.abs(want).max() < PROJECTION_TOLERANCE


@needs_vnni
def test_the_fourth_piece_is_what_keeps_small_activations(monkeypatch):
    """The bound can fail: three pieces (24 bits below the outlier) lose the small elements' bits."""
    weights, zero_point, scale, x = _case(300, 1024, False, 3, 7)
    want = _reference(weights, zero_point, scale, x)[0]
    monkeypatch.setattr(int8_pieces, "PIECES", 3)
    model = _exported_projection(weights, zero_point, scale, 1024)
    rewrite_int8_projections(model)
    assert np.abs(_product(model, x) - want).max() / np.abs(want).max() > 3 * PROJECTION_TOLERANCE


@needs_vnni
def test_zero_activations_give_zeros_and_the_int8_kernel_runs():
    weights, zero_point, scale, _ = _case(64, 256, False, 1, 3)
    model = _exported_projection(weights, zero_point, scale, 256)
    rewrite_int8_projections(model)
    compiled = ov.Core().compile_model(model, "CPU", EXACT)
    assert not np.any(compiled({"x": np.zeros((1, 2, 256), np.float32)})[0])
    kinds = {(n.get_rt_info()["layerType"].astype(str), n.get_rt_info()["runtimePrecision"].astype(str))
             for n in compiled.get_runtime_model().get_ordered_ops()}
    assert ("FullyConnected", "i8") in kinds  # the plugin's int8 FullyConnected, not a widened one


def test_a_projection_shared_by_several_readers_is_one_product_split_back():
    """q/k/v-like siblings reading the same activations: one FullyConnected, outputs split in the readers' order."""
    rng = np.random.default_rng(5)
    x = ops.parameter([1, -1, 64], np.float32, name="x")
    outs, parts = [], []
    for rows in (16, 48, 8):
        w = rng.integers(0, 256, (rows, 64)).astype(np.uint8)
        zp, sc = rng.integers(100, 150, rows), rng.random(rows) * 0.01 + 1e-3
        parts.append((w, zp, sc))
        m = _exported_projection(w, zp, sc, 64)
        weights = m.get_results()[0].input_value(0).get_node().input_value(1)
        outs.append(ops.matmul(x, weights, False, True))
    model = ov.Model(outs, [x])
    assert rewrite_int8_projections(model) == 3
    products = [n for n in model.get_ordered_ops()  # the pieces' own MatMul (a constant 4×4 on their axis) aside
                if n.get_type_name() == "MatMul" and n.input_value(0).get_node().get_type_name() != "Constant"]
    assert len(products) == 1
    if not HAS_VNNI:
        return
    xs = rng.standard_normal((1, 2, 64)).astype(np.float32)
    got = ov.Core().compile_model(model, "CPU", EXACT)({"x": xs})
    for i, (w, zp, sc) in enumerate(parts):
        want = _reference(w, zp, sc, xs)[0]
        assert np.abs(got[i][0] - want).max() / np.abs(want).max() < PROJECTION_TOLERANCE


def test_the_plan_uses_pieces_only_for_exact_cpu_compiles_with_int8_dot_products(monkeypatch):
    monkeypatch.delenv(PROJECTIONS_ENV, raising=False)
    exact, fast = DeviceOptions(device="CPU", exact=True), DeviceOptions(device="CPU", exact=False)
    amx, vnni, avx2 = Host(("FP32", "INT8", "VNNI", "AMX_INT8")), Host(("FP32", "INT8", "VNNI")), Host(("FP32", "INT8"))
    plan = plan_compile(exact, amx, path="dynamic")
    assert plan.integer_pieces and plan.int8_projections.value == INTEGER_PIECES
    assert "int8 projections: integer pieces" in "\n".join(plan.describe())
    # VNNI without AMX: the pieces where each inference thread streams enough weights (they measured faster there),
    # widened below that and where the share is unknown, pieces where asked for
    assert plan_compile(exact, vnni, path="dynamic").int8_projections.value == WIDENED
    small, large = 754_615_338, 1_884_513_322  # the 0.8B and 2B int8 exports' weights files, in bytes
    two = plan_compile(exact, replace(vnni, threads=2), path="dynamic", weight_bytes=small).int8_projections
    assert two.value == WIDENED and "360 MiB of weights per thread (2 threads)" in two.reason
    assert plan_compile(exact, replace(vnni, threads=1), path="dynamic", weight_bytes=small).integer_pieces
    assert "one thread" in plan_compile(exact, replace(vnni, threads=1), path="dynamic").int8_projections.reason
    two_large = plan_compile(exact, replace(vnni, threads=2), path="dynamic", weight_bytes=large).int8_projections
    assert two_large.value == INTEGER_PIECES and "899 MiB of weights per thread" in two_large.reason
    assert not plan_compile(exact, replace(vnni, threads=8), path="dynamic", weight_bytes=large).integer_pieces
    assert not plan_compile(exact, replace(avx2, threads=1), path="dynamic", weight_bytes=large).integer_pieces
    monkeypatch.setenv(PROJECTIONS_ENV, "pieces")
    assert plan_compile(exact, vnni, path="dynamic").integer_pieces
    assert not plan_compile(exact, avx2, path="dynamic").integer_pieces  # never without int8 dot products
    monkeypatch.delenv(PROJECTIONS_ENV)
    without = plan_compile(exact, avx2, path="dynamic")
    assert not without.integer_pieces and without.int8_projections.value == WIDENED
    assert "saturation" in without.int8_projections.reason
    assert plan_compile(fast, vnni, path="dynamic").int8_projections is None  # reduced compiles have their own kernels
    assert plan_compile(DeviceOptions(device="GPU", exact=True), vnni, path="dynamic").int8_projections is None
    monkeypatch.setenv(PROJECTIONS_ENV, "widened")
    assert plan_compile(exact, amx, path="dynamic").int8_projections.value == WIDENED


def test_the_host_says_how_many_threads_an_inference_runs_on():
    from decider.engine.compile.measurements import read_host

    core = ov.Core()
    assert read_host(core).threads >= 1  # unset: every core the process may use, as the plugin does
    core.set_property("CPU", {"INFERENCE_NUM_THREADS": 1})
    assert read_host(core).threads == 1


def _runner(monkeypatch, mode: str, exact: bool = True) -> ModelRunner:
    monkeypatch.setenv(PROJECTIONS_ENV, mode)
    return ModelRunner(INT8, DeviceOptions(device="CPU", exact=exact))


def _infers(runner: ModelRunner) -> list[np.ndarray]:
    """A prompt chunk, one-token steps, and a 4-token verify-shaped chunk."""
    out = [runner.prefill(list(range(100, 140)))]
    out += [runner.step(t) for t in (5, 6, 7)]
    out.append(runner.prefill(list(range(100, 140)) + [5, 6, 7, 9, 10, 11, 12]))
    return out


@needs_vnni
def test_the_int8_fixture_stays_within_the_exact_bound_and_says_what_ran(monkeypatch):
    pieces, widened = _runner(monkeypatch, "pieces"), _runner(monkeypatch, "widened")
    assert pieces.int8_pieces == 32 and widened.int8_pieces == 0
    gaps = [np.abs(log_softmax(a) - log_softmax(b)).max() for a, b in zip(_infers(pieces), _infers(widened))]
    assert max(gaps) < LOGPROB_TOLERANCE
    assert min(gaps) > 0  # the pieces really computed them: the widened path alone agrees with itself to the bit
    assert pieces.precision.exact and pieces.precision.label == f"f32; {DESCRIPTION}"
    assert widened.precision.label == "f32"
    fast = _runner(monkeypatch, "pieces", exact=False)
    assert fast.int8_pieces == 0 and DESCRIPTION not in fast.precision.label


@needs_vnni
def test_a_reduced_twin_of_a_pieces_runner_compiles_the_export_as_it_is(monkeypatch):
    parent = _runner(monkeypatch, "pieces")
    twin = parent.twin(DeviceOptions(device="CPU", exact=False), {"INFERENCE_PRECISION_HINT": "bf16"})
    assert twin.int8_pieces == 0 and DESCRIPTION not in twin.precision.label
    exact_twin = parent.twin(DeviceOptions(device="CPU", exact=True), {"PERFORMANCE_HINT": "LATENCY"})
    assert exact_twin.int8_pieces == parent.int8_pieces
    np.testing.assert_array_equal(exact_twin.prefill([100, 101, 102]), parent.prefill([100, 101, 102]))


def test_a_table_lookup_of_int8_rows_gives_the_same_values_and_no_f32_table():
    """An embedding in the export's int8 layout beside a rewritten projection: the lookup's rows are the same values
    as the export's, and the compiled model holds no f32 copy of the table (the low-precision pass folds one where the
    lookup decompresses the whole table)."""
    rng = np.random.default_rng(11)
    rows, columns = 4096, 256
    table, zp, sc = rng.integers(0, 256, (rows, columns)).astype(np.uint8), rng.integers(90, 160, rows), rng.random(rows) * 0.01 + 1e-3
    decompress = _exported_projection(table, zp, sc, columns).get_results()[0].input_value(0).get_node().input_value(1)
    ids = ops.parameter([1, -1], np.int64, name="ids")
    looked_up = ops.gather(decompress, ids, ops.constant(np.int64(0)))
    w, wzp, wsc = rng.integers(0, 256, (32, columns)).astype(np.uint8), rng.integers(90, 160, 32), rng.random(32) * 0.01
    projection = _exported_projection(w, wzp, wsc, columns).get_results()[0].input_value(0).get_node().input_value(1)
    model = ov.Model([looked_up, ops.matmul(looked_up, projection, False, True)], [ids])
    feed = {"ids": np.array([[3, 4000, 17, 3]])}
    before = ov.Core().compile_model(model.clone(), "CPU", EXACT)(feed)[0]
    assert rewrite_int8_projections(model) == 1
    compiled = ov.Core().compile_model(model, "CPU", EXACT)
    np.testing.assert_array_equal(compiled(feed)[0], before)
    big_f32 = [n for n in compiled.get_runtime_model().get_ordered_ops() for o in n.outputs()
               if o.get_element_type() == ov.Type.f32 and o.get_partial_shape().is_static
               and np.prod(list(o.get_partial_shape().to_shape()) or [1]) >= rows * columns]
    assert not big_f32
