"""Our native int8 operation (engine/kernels/native_op.py, native/int8_projection.cpp): the committed library built from
the committed source, its products bit for bit the JIT kernel's and as close to float64, the one-token step graph
rewritten, and the runner that adopts it for its steps — within the exact tolerance, the label and doctor saying so,
the plugin's path where it cannot run or measured slower."""

from __future__ import annotations

import json
import shutil

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

from support.conversations import every_move
from support.models import model_dir
from decider.engine.compile.devices import DeviceOptions
from decider.engine.core.logprobs import log_softmax
from decider.engine.graphs.int8_weights import Int8Weights, int8_weights
from decider.engine.graphs.one_token import one_token_graph
from decider.engine.graphs.decode import one_token_deltanet
from decider.engine.kernels import adoption, kernel_jit, native_deltanet, native_op, native_steps
from decider.engine.runners.runner import ModelRunner

INT8 = model_dir("qwen35-text-int8")
needs_native = pytest.mark.skipif(native_op.unavailable() is not None, reason=f"native kernel: {native_op.unavailable()}")
# Every instruction set of the operation; those this CPU does not run are skipped (AVX-512 VNNI: on an AVX2-only CPU)
ISAS = [pytest.param(name, marks=pytest.mark.skipif(not native_op.runs_here(name), reason=f"this CPU does not run {name}"))
        for name in native_op.ISAS]
# As the JIT kernel's (tests/test_exact_kernel.py): exact sums, x̂ within max|x|·2⁻²⁶, one rounding to f32.
PROJECTION_TOLERANCE = 2e-7
LOGPROB_TOLERANCE = 5e-5  # "exactness unchanged" (#35); measured 6e-6 – 1.3e-5 on the int8 fixture


def _stamp() -> dict:
    return json.loads(native_op.STAMP.read_text(encoding="utf-8"))


def test_the_committed_library_is_built_from_the_committed_source():
    """Editing int8_projection.cpp or CMakeLists.txt without rebuilding (tools/build_native_kernels.py) fails here, on
    any machine: the stamp names the sources' hash the library was built from."""
    assert native_op.LIBRARY.is_file() and native_op.LIBRARY.stat().st_size > 0
    assert _stamp()["source_sha256"] == native_op.source_hash()
    assert _stamp()["platform"] == "linux-x86_64" and _stamp()["openvino"]


def _projection(weights, zero_point, scale, threads: int = 1, isa: str = "avx2") -> ov.CompiledModel:
    x = ops.parameter([1, -1, weights.shape[1]], np.float32)
    node = native_op.projection(x.output(0), [_part(weights, zero_point, scale)], isa)
    return ov.Core().compile_model(ov.Model([node.output(0)], [x]), "CPU", {"INFERENCE_NUM_THREADS": threads})


def _part(weights, zero_point, scale) -> Int8Weights:
    rows = weights.shape[0]
    return Int8Weights(weights, np.broadcast_to(np.asarray(zero_point, np.float64), (rows,)),
                       np.broadcast_to(np.asarray(scale, np.float64), (rows,)))


def _reference(weights, zero_point, scale, x):
    dequantised = (weights.astype(np.float64) - np.asarray(zero_point, np.float64).reshape(-1, 1)) * scale.reshape(-1, 1)
    return x.astype(np.float64) @ dequantised.T


def _case(rows, columns, dtype, tokens, seed):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    weights = rng.integers(info.min, info.max + 1, size=(rows, columns)).astype(dtype)
    zero_point = rng.integers(0, 256, rows).astype(np.float64) if dtype == np.uint8 else np.zeros(rows)
    scale = rng.random(rows) * 0.01 + 1e-4
    x = (rng.standard_normal((tokens, columns)) * np.exp(rng.uniform(-6, 6, (tokens, columns)))).astype(np.float32)
    return weights, zero_point, scale, x


@needs_native
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("rows, columns, dtype", [(300, 1024, np.uint8), (37, 130, np.int8), (16, 64, np.uint8), (5, 3, np.uint8)])
@pytest.mark.parametrize("tokens", [1, 2, 3, 5, 8, 11])
def test_products_match_float64_and_the_jit_kernel_bit_for_bit(rows, columns, dtype, tokens, isa):
    weights, zero_point, scale, x = _case(rows, columns, dtype, tokens, rows * 31 + tokens)
    got = _projection(weights, zero_point, scale, isa=isa).create_infer_request().infer({0: x[None]})[0][0]
    want = _reference(weights, zero_point, scale, x)
    assert got.shape == (tokens, rows) and got.dtype == np.float32
    assert np.abs(got - want).max() / np.abs(want).max() < PROJECTION_TOLERANCE
    if kernel_jit.unavailable() is None:  # the same arithmetic as the JIT kernel's on the same instruction set
        from decider.engine.kernels.int8_matvec import Int8Matrix

        jit = Int8Matrix(weights, zero_point, scale, kernel_jit.compiled(native_op.ISAS[isa].arithmetic))
        np.testing.assert_array_equal(got, np.concatenate([jit @ x[i : i + 8] for i in range(0, tokens, 8)]))
    wrong = _projection(weights, zero_point + 1.0, scale, isa=isa).create_infer_request().infer({0: x[None]})[0][0]
    assert np.abs(wrong - want).max() / np.abs(want).max() > 10 * PROJECTION_TOLERANCE  # the check can fail


@needs_native
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("threads", [1, 2])
def test_projections_of_the_same_activations_in_one_operation_give_each_its_own_bits(isa, threads):
    """q, k, v… as one operation (one matrix, one split of x, an output each): every output equals its projection
    run alone, bit for bit, whatever the parts' sizes (cut inside a group of four rows, a part of one row)."""
    cases = [_case(rows, 1030, np.uint8, 3, rows) for rows in (1026, 1, 16, 7)]  # ≥ 1 MiB: the threads share rows
    x = cases[0][3]
    p = ops.parameter([1, -1, x.shape[1]], np.float32)
    joined = native_op.projection(p.output(0), [_part(w, zp, sc) for w, zp, sc, _ in cases], isa)
    assert len(joined.outputs()) == len(cases)
    compiled = ov.Core().compile_model(ov.Model(joined.outputs(), [p]), "CPU", {"INFERENCE_NUM_THREADS": threads})
    got = compiled.create_infer_request().infer({0: x[None]})
    for i, (w, zp, sc, _) in enumerate(cases):
        alone = _projection(w, zp, sc, isa=isa).create_infer_request().infer({0: x[None]})[0]
        assert got[i].shape == (1, 3, w.shape[0])
        np.testing.assert_array_equal(got[i], alone)


@needs_native
@pytest.mark.skipif(not native_op.runs_here("avx512_vnni"), reason="this CPU does not run AVX-512 VNNI")
def test_the_instruction_sets_differ_and_the_finer_one_is_closer_to_float64():
    """The VNNI kernel's four 8-bit pieces keep x to 2⁻³¹ of max|x|, AVX2's two 16-bit pieces to 2⁻²⁶: two kernels
    that ran the same arithmetic would give the same bits."""
    weights, zero_point, scale, x = _case(512, 3584, np.uint8, 1, 5)
    want = _reference(weights, zero_point, scale, x)
    errors = {isa: float(np.abs(_projection(weights, zero_point, scale, isa=isa).create_infer_request()
                                .infer({0: x[None]})[0][0] - want).max() / np.abs(want).max()) for isa in native_op.ISAS}
    assert 0.0 < errors["avx512_vnni"] < errors["avx2"] < PROJECTION_TOLERANCE


def test_the_instruction_set_is_the_best_this_cpu_runs_unless_asked(monkeypatch):
    monkeypatch.delenv(native_op.ISA_VARIABLE, raising=False)
    best = next(name for name in native_op.ISAS if native_op.runs_here(name)) if native_op.runs_here("avx2") else "avx2"
    assert native_op.isa() == best
    monkeypatch.setenv(native_op.ISA_VARIABLE, "avx2")
    assert native_op.isa() == "avx2"
    monkeypatch.setenv(native_op.ISA_VARIABLE, "sse2")
    with pytest.raises(ValueError, match="not one of avx512_vnni, avx2"):
        native_op.isa()
    assert native_op.description("avx512_vnni").startswith("one-token int8 projections: native AVX-512 VNNI kernel, 31-bit")
    assert native_op.description("avx2").startswith("one-token int8 projections: native AVX2 kernel, 26-bit")


@needs_native
@pytest.mark.parametrize("isa", ISAS)
def test_the_largest_products_sum_exactly(isa):
    """Weights of 255 against activations at the pieces' bounds: int32 lanes near 2³¹ (AVX2), summed in int64."""
    columns = native_op.ISAS["avx2"].arithmetic.max_columns
    weights = np.full((8, columns), 255, np.uint8)
    x = np.full((1, columns), 3.0, np.float32)
    x[0, 1::2] = 3.0 * (1 - 0.5001 / 4096)
    got = _projection(weights, np.zeros(8), np.ones(8), isa=isa).create_infer_request().infer({0: x[None]})[0][0]
    np.testing.assert_allclose(got, _reference(weights, np.zeros(8), np.ones(8), x), rtol=PROJECTION_TOLERANCE)


@needs_native
@pytest.mark.parametrize("isa", ISAS)
def test_rows_shared_between_threads_give_the_same_bits(isa):
    weights, zero_point, scale, x = _case(1030, 1024, np.uint8, 1, 7)  # ≥ 1 MiB: split between the plugin's threads
    one = _projection(weights, zero_point, scale, threads=1, isa=isa).create_infer_request().infer({0: x[None]})[0]
    two = _projection(weights, zero_point, scale, threads=2, isa=isa).create_infer_request().infer({0: x[None]})[0]
    np.testing.assert_array_equal(one, two)
    zeros = _projection(weights, zero_point, scale, isa=isa).create_infer_request().infer({0: np.zeros_like(x)[None]})[0]
    assert not np.any(zeros)


@needs_native
def test_the_step_graph_s_int8_matmuls_are_replaced_and_its_outputs_keep_their_names():
    step = one_token_graph(ov.Core().read_model(INT8 / "openvino_model.xml"))
    names = [{*port.get_names()} for port in step.outputs]
    int8 = [node for node in step.get_ordered_ops() if node.get_type_name() == "MatMul" and int8_weights(node) is not None]
    count, memory = native_op.replace_int8_matmuls(step, native_op.isa())
    assert count == len(int8) > 0 and memory is not None and memory.nbytes >= native_steps.int8_bytes(
        one_token_graph(ov.Core().read_model(INT8 / "openvino_model.xml")))
    assert not [n for n in step.get_ordered_ops() if n.get_type_name() == "MatMul" and int8_weights(n) is not None]
    native = [n for n in step.get_ordered_ops() if n.get_type_name() == native_op.OP_TYPE]
    # one operation per set of activations: a DeltaNet layer's q/k/v, z, a, b and an MLP's gate and up are one each
    sources = {(m.input_value(0).get_node().get_name(), m.input_value(0).get_index()) for m in int8}
    assert len(native) == len(sources) < count and sum(len(n.outputs()) for n in native) == count
    assert [{*port.get_names()} for port in step.outputs] == names


@needs_native
@pytest.mark.parametrize("heads, dk, dv", [(4, 128, 128), (3, 16, 36)])  # 36: rows not a whole number of vectors
def test_the_deltanet_step_matches_float64(heads, dk, dv):
    """One token's Gated DeltaNet update (native_deltanet): o = e·qᵀS + (q·k)·delta and S' = e·S + k ⊗ delta with
    delta = (v − e·kᵀS)·beta, against float64, in f32-grade error; a wrong decay is detected."""
    rng = np.random.default_rng(heads * dk + dv)
    q, k = (rng.standard_normal((1, heads, 1, dk)).astype(np.float32) / np.sqrt(dk) for _ in range(2))
    v = rng.standard_normal((1, heads, 1, dv)).astype(np.float32)
    g = -rng.random((1, heads, 1)).astype(np.float32)
    beta = rng.random((1, heads, 1)).astype(np.float32)
    state = rng.standard_normal((1, heads, dk, dv)).astype(np.float32)
    inputs = [ops.parameter(a.shape, np.float32) for a in (q, k, v, g, beta, state)]
    step = native_op.create(native_deltanet.OP_TYPE, [p.output(0) for p in inputs], {})
    compiled = ov.Core().compile_model(ov.Model(step.outputs(), inputs), "CPU", {"INFERENCE_NUM_THREADS": 1})
    out, new = compiled.create_infer_request().infer([q, k, v, g, beta, state]).values()

    def reference(decay):
        q64, k64, v64, s64 = (a.astype(np.float64)[0, :, 0] if a.ndim == 4 and a.shape[2] == 1 else a.astype(np.float64)[0]
                              for a in (q, k, v, state))
        e = decay[0, :, 0, None]
        delta = (v64 - e * np.einsum("hi,hij->hj", k64, s64)) * beta.astype(np.float64)[0, :, 0, None]
        o = e * np.einsum("hi,hij->hj", q64, s64) + np.sum(q64 * k64, -1, keepdims=True) * delta
        return o, e[:, :, None] * s64 + k64[:, :, None] * delta[:, None, :]

    want_o, want_s = reference(np.exp(g.astype(np.float64)))
    assert out.shape == (1, heads, 1, dv) and new.shape == (1, heads, dk, dv)
    assert np.abs(out[0, :, 0] - want_o).max() / np.abs(want_o).max() < 1e-6
    assert np.abs(new[0] - want_s).max() / np.abs(want_s).max() < 1e-6
    wrong_o, _ = reference(np.exp(g.astype(np.float64) * 1.01))
    assert np.abs(out[0, :, 0] - wrong_o).max() / np.abs(wrong_o).max() > 1e-5  # the check can fail


@needs_native
@pytest.mark.parametrize("channels, kernel", [(96, 4), (7, 3)])
def test_the_conv_shift_step_matches_float64(channels, kernel):
    """One token through a DeltaNet conv window (native_deltanet's ConvShiftStep): the window shifted by one column with
    the token last, and its depthwise conv, in f32-grade error; a window shifted the wrong way is detected."""
    rng = np.random.default_rng(channels + kernel)
    state = rng.standard_normal((1, channels * kernel)).astype(np.float32)
    token = rng.standard_normal((1, channels)).astype(np.float32)
    weights = rng.standard_normal((channels, 1, 1, kernel)).astype(np.float32)
    inputs = [ops.parameter(a.shape, np.float32) for a in (state, token)]
    step = native_op.create(native_deltanet.CONV_OP_TYPE, [*(p.output(0) for p in inputs), ops.constant(weights).output(0)], {})
    compiled = ov.Core().compile_model(ov.Model(step.outputs(), inputs), "CPU", {"INFERENCE_NUM_THREADS": 1})
    shifted, out = compiled.create_infer_request().infer([state, token]).values()
    window = np.concatenate([state.reshape(channels, kernel)[:, 1:], token.reshape(channels, 1)], 1).astype(np.float64)
    want = np.sum(window * weights.reshape(channels, kernel), 1)
    assert shifted.shape == state.shape and np.array_equal(shifted.reshape(channels, kernel), window.astype(np.float32))
    assert out.shape == (1, channels, 1) and np.abs(out.ravel() - want).max() / np.abs(want).max() < 1e-6
    wrong = np.concatenate([token.reshape(channels, 1), state.reshape(channels, kernel)[:, :-1]], 1).astype(np.float64)
    assert np.abs(out.ravel() - np.sum(wrong * weights.reshape(channels, kernel), 1)).max() > 1e-3  # the check can fail


@needs_native
def test_every_deltanet_layer_s_one_token_update_and_conv_shift_are_replaced():
    model = ov.Core().read_model(INT8 / "openvino_model.xml")
    layers = one_token_deltanet(model)
    step = one_token_graph(model)
    assert layers > 0 and native_deltanet.replace_deltanet_steps(step) == layers
    for op_type in (native_deltanet.OP_TYPE, native_deltanet.CONV_OP_TYPE):
        assert sum(n.get_type_name() == op_type for n in step.get_ordered_ops()) == layers
    # the plugin's update and shift left the graph (nothing reads them); before the replacement they were there
    for name in ("/one_token/both", "/conv_shift/shift"):
        assert not [n for n in step.get_ordered_ops() if n.get_friendly_name().endswith(name)]
        assert len([n for n in one_token_graph(model).get_ordered_ops() if n.get_friendly_name().endswith(name)]) == layers


def _runner(monkeypatch, mode: str) -> ModelRunner:
    monkeypatch.setenv("DECIDER_EXACT_KERNEL", mode)
    monkeypatch.setenv("DECIDER_INT8_PROJECTIONS", "widened")  # the plugin's widened path on any CPU (not its pieces)
    return ModelRunner(INT8, DeviceOptions(device="CPU", exact=True))


@needs_native
def test_forced_the_steps_run_it_within_the_exact_bound_and_the_label_says_so(monkeypatch):
    native, plugin = _runner(monkeypatch, "native"), _runner(monkeypatch, "plugin")
    assert native.native_steps and native.native_note == "adopted: DECIDER_EXACT_KERNEL=native"
    assert native.precision.label == f"f32; {native_op.description(native_op.isa())}" and plugin.precision.label == "f32"
    assert not plugin.native_steps and plugin.native_note == "turned off by DECIDER_EXACT_KERNEL=plugin"
    got, want = every_move(native), every_move(plugin)
    gaps = [float(np.abs(log_softmax(a) - log_softmax(b)).max()) for a, b in zip(got, want)]
    assert gaps[0] == 0.0  # the prompt runs the plugin's kernels in both
    assert 0.0 < max(gaps) < LOGPROB_TOLERANCE  # the steps ran our operation (not bit-identical), within the bound
    assert native._stepper.live


@needs_native
def test_where_the_integer_pieces_run_the_prompt_the_native_steps_compete_with_them(monkeypatch, fresh_verdicts):
    """On a CPU with int8 dot products the plan may multiply int8 weights in integer pieces (engine/graphs/int8_pieces.py):
    the native step graph is then built from the IR read again without them and timed against the pieces' steps, and
    the label names both where ours won."""
    from decider.engine.graphs.int8_pieces import DESCRIPTION as PIECES

    monkeypatch.setenv("DECIDER_INT8_PROJECTIONS", "pieces")
    timed = []

    def fixed(compiled, feed, without=None):
        timed.append(any("/native_int8" in n.get_friendly_name() for n in compiled.get_runtime_model().get_ordered_ops()))
        return 1.0, 2.0

    monkeypatch.setattr(adoption, "paired_steps", fixed)
    runner = ModelRunner(INT8, DeviceOptions(device="CPU", exact=True))
    if not runner.int8_pieces:
        pytest.skip(f"the plan does not run integer pieces on this CPU: {runner.plan.int8_projections}")
    assert timed == [True] and runner.native_steps and runner.native_note.startswith("adopted")
    assert runner.precision.label == f"f32; {PIECES}; {native_op.description(native_op.isa())}"
    monkeypatch.setenv("DECIDER_EXACT_KERNEL", "plugin")
    plugin = ModelRunner(INT8, DeviceOptions(device="CPU", exact=True))
    assert plugin.int8_pieces and not plugin.native_steps
    got, want = every_move(runner), every_move(plugin)
    gaps = [float(np.abs(log_softmax(a) - log_softmax(b)).max()) for a, b in zip(got, want)]
    assert gaps[0] == 0.0 and 0.0 < max(gaps) < LOGPROB_TOLERANCE  # the prompt in pieces in both, the steps ours


def test_unforced_a_small_model_keeps_the_plugin_s_steps_and_says_why(monkeypatch):
    monkeypatch.delenv("DECIDER_EXACT_KERNEL", raising=False)
    runner = ModelRunner(INT8, DeviceOptions(device="CPU", exact=True))
    assert not runner.native_steps and native_op.description(native_op.isa()) not in runner.precision.label
    if native_op.unavailable() is None:
        assert "too small for the native kernel to pay" in runner.native_note
    fast = ModelRunner(INT8, DeviceOptions(device="CPU", exact=False))
    assert not fast.native_steps and "native" not in fast.precision.label


@pytest.fixture
def fresh_verdicts(monkeypatch, tmp_path):
    from decider.engine.kernels import verdicts

    monkeypatch.setenv("DECIDER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(verdicts, "_IN_PROCESS", {})
    monkeypatch.delenv("DECIDER_EXACT_KERNEL", raising=False)
    monkeypatch.setenv("DECIDER_INT8_PROJECTIONS", "widened")
    monkeypatch.setattr(native_steps, "MIN_BYTES", 0)  # the fixture counts as large enough to be timed
    return tmp_path / "compiled" / verdicts.CACHE_NAME


@needs_native
@pytest.mark.parametrize("native_wins", [True, False])
def test_unforced_the_steps_are_timed_and_the_verdict_kept(monkeypatch, fresh_verdicts, native_wins):
    from decider.engine.kernels import verdicts

    timed = []

    def fixed(compiled, feed, without=None):
        ours = any("/native_int8" in n.get_friendly_name() for n in compiled.get_runtime_model().get_ordered_ops())
        timed.append((ours, without is not None))
        return (1.0, 2.0) if native_wins else (2.0, 1.0)

    monkeypatch.setattr(adoption, "paired_steps", fixed)
    first = ModelRunner(INT8, DeviceOptions(device="CPU", exact=True))
    assert timed == [(True, True)]  # the native step compile against the plugin's
    assert first.native_steps == native_wins and first.native_note.startswith("adopted" if native_wins else "not adopted")
    assert (native_op.description(native_op.isa()) in first.precision.label) == native_wins
    assert [k for k in json.loads(fresh_verdicts.read_text()) if f"/native-{native_op.isa()}-vs-" in k]
    monkeypatch.setattr(verdicts, "_IN_PROCESS", {})  # a new process: the file alone
    second = ModelRunner(INT8, DeviceOptions(device="CPU", exact=True))
    assert len(timed) == 1 and second.native_steps == native_wins and "before" in second.native_note


@needs_native
def test_a_stale_or_foreign_library_is_refused_with_its_reason(monkeypatch, tmp_path):
    folder = tmp_path / "native"
    shutil.copytree(native_op.FOLDER, folder)
    monkeypatch.setattr(native_op, "FOLDER", folder)
    monkeypatch.setattr(native_op, "LIBRARY", folder / native_op.LIBRARY.name)
    monkeypatch.setattr(native_op, "STAMP", folder / native_op.STAMP.name)
    native_op.unavailable.cache_clear()
    try:
        assert native_op.unavailable() is None
        stamp = _stamp()
        (folder / native_op.STAMP.name).write_text(json.dumps({**stamp, "openvino": "2020.1.0"}))
        native_op.unavailable.cache_clear()
        assert "built for OpenVINO 2020.1.0" in native_op.unavailable()
        (folder / native_op.STAMP.name).write_text(json.dumps(stamp))
        (folder / "int8_projection.cpp").write_text((folder / "int8_projection.cpp").read_text() + "\n// edited\n")
        native_op.unavailable.cache_clear()
        assert "older than its source" in native_op.unavailable()
        (folder / native_op.LIBRARY.name).unlink()
        native_op.unavailable.cache_clear()
        assert "not built" in native_op.unavailable()
    finally:
        native_op.unavailable.cache_clear()


@needs_native
def test_doctor_names_the_native_steps(monkeypatch):
    from decider.app.doctor import run_doctor

    monkeypatch.setenv("DECIDER_EXACT_KERNEL", "native")
    monkeypatch.setenv("DECIDER_INT8_PROJECTIONS", "widened")
    text = run_doctor(INT8, DeviceOptions(device="CPU", exact=True), compile=True).render()
    assert "native int8 kernel (one-token steps): adopted" in text and native_op.description(native_op.isa()) in text
