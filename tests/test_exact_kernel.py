"""Our int8 kernel (engine/kernels): integer-exact dot products against float64, the routing in the graph, and the
runner that adopts it — prompt chunks unchanged, few-token infers within the exact tolerance, the label saying so."""

from __future__ import annotations

import numpy as np
import openvino as ov
import pytest

from support.models import model_dir
from decider.engine.compile.devices import DeviceOptions
from decider.engine.kernels import adoption, kernel_ir, kernel_jit
from decider.engine.kernels.int8_matvec import Int8Matrix
from decider.engine.graphs.int8_weights import int8_weights
from decider.engine.kernels.projection_op import KERNEL_TOKENS, route_int8_projections
from decider.engine.core.logprobs import log_softmax
from decider.engine.runners.runner import ModelRunner

INT8 = model_dir("qwen35-text-int8")
needs_kernel = pytest.mark.skipif(kernel_jit.unavailable() is not None, reason=f"kernel unavailable: {kernel_jit.unavailable()}")
# Every instruction set this CPU runs (a VNNI CPU runs the AVX2 kernel too): each is tested where it can run.
RUNNABLE = [isa for isa in kernel_ir.ISAS if kernel_jit.unavailable() is None and kernel_jit.runs_here(isa)]
# A projection's relative error against float64: the sums are exact, so what is left is x̂'s distance from x and the
# result's one rounding to f32. Measured on activations spanning e^±6 (where an f32 dot product is off by 1e-7 –
# 7e-7): 2e-8 – 5e-8 with VNNI's 31-bit pieces, 2e-8 – 1.1e-7 with AVX2's 26-bit ones. The bound leaves 2x.
PROJECTION_TOLERANCE = 2e-7
# Few-token infers of the int8 fixture, kernel vs the plugin's exact compile: measured 1.0e-5 – 2.2e-5 in the
# log-probabilities (the plugin's f32 sums, amplified by random weights drawn with std 0.15); the bound for
# "exactness unchanged" (#35) is 5e-5.
LOGPROB_TOLERANCE = 5e-5


@pytest.mark.parametrize("isa, cpu, instruction", [(kernel_ir.VNNI_512, "sapphirerapids", "vpdpbusd"),
                                                    (kernel_ir.VNNI_256, "alderlake", "vpdpbusd"),
                                                    (kernel_ir.AVX2, "haswell", "vpmaddwd")])
def test_the_module_is_valid_llvm_ir_for_every_instruction_set(isa, cpu, instruction):
    """Checked on any CPU: the IR parses and compiles for its target even where this host cannot run it."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = llvm.parse_assembly(kernel_ir.module_ir(isa))
    module.verify()
    machine = llvm.Target.from_default_triple().create_target_machine(cpu=cpu, opt=2)
    assert instruction in machine.emit_assembly(module)


def test_the_pieces_cannot_overflow_their_sums():
    """What makes the integer sums exact, per instruction set: a pair (vpmaddwd) or four (vpdpbusd) of the largest
    products per int32 lane and iteration, over max_columns columns, stays below 2³¹ (the lanes are then summed in
    int64: test_the_largest_products_sum_exactly passes 2³¹ there)."""
    for isa in kernel_ir.ISAS:
        per_lane = (4 if isa.vnni else 2) * 255 * isa.bound
        iterations = isa.max_columns // (isa.width // 32 * (4 if isa.vnni else 2))
        assert per_lane * iterations < 2**31, isa.name
        assert isa.bound < 2 ** (8 if isa.vnni else 16 - 1)  # a piece fits its s8 or s16 lane
    assert "26-bit" in kernel_ir.AVX2.description and "31-bit" in kernel_ir.VNNI_512.description


def _reference(weights, zero_point, scale, x):
    dequantised = (weights.astype(np.float64) - np.asarray(zero_point, np.float64).reshape(-1, 1)) * scale.reshape(-1, 1)
    return x.astype(np.float64) @ dequantised.T


@pytest.mark.parametrize("isa", RUNNABLE, ids=lambda isa: isa.name)
@pytest.mark.parametrize("rows, columns, dtype", [(300, 1024, np.uint8), (37, 130, np.int8), (16, 64, np.uint8), (5, 3, np.uint8)])
@pytest.mark.parametrize("tokens", [1, 2, 3, 4, 5, 8])
def test_products_match_float64_as_closely_as_f32(rows, columns, dtype, tokens, isa):
    rng = np.random.default_rng(rows * 31 + tokens)
    info = np.iinfo(dtype)
    weights = rng.integers(info.min, info.max + 1, size=(rows, columns)).astype(dtype)
    zero_point = rng.integers(0, 256, rows).astype(np.float64) if dtype == np.uint8 else np.zeros(rows)
    scale = rng.random(rows) * 0.01 + 1e-4
    # activations spanning e^±6, as hidden states after a norm do
    x = (rng.standard_normal((tokens, columns)) * np.exp(rng.uniform(-6, 6, (tokens, columns)))).astype(np.float32)
    matrix = Int8Matrix(weights, zero_point, scale, kernel_jit.compiled(isa))
    got, want = matrix @ x, _reference(weights, zero_point, scale, x)
    assert got.shape == (tokens, rows) and got.dtype == np.float32
    assert np.abs(got - want).max() / np.abs(want).max() < PROJECTION_TOLERANCE
    # and the check can fail: a zero point off by one row's worth is seen
    wrong = Int8Matrix(weights, zero_point + 1.0, scale, kernel_jit.compiled(isa))
    assert np.abs((wrong @ x) - want).max() / np.abs(want).max() > 10 * PROJECTION_TOLERANCE


@pytest.mark.parametrize("isa", RUNNABLE, ids=lambda isa: isa.name)
def test_the_largest_products_sum_exactly(isa):
    """Weights of 255 (zero point 0) against activations all at their largest: every product and piece at its bound,
    where a 16-bit sum would saturate. y = 255·scale·Σx̂, exactly as float64 gives it."""
    columns = 4096
    weights = np.full((8, columns), 255, np.uint8)
    x = np.full((1, columns), 3.0, np.float32)  # the first piece at its bound
    x[0, 1::2] = 3.0 * (1 - 0.5001 / isa.bound)  # the first piece one below it, the second close to its bound
    matrix = Int8Matrix(weights, np.zeros(8), np.ones(8), kernel_jit.compiled(isa))
    want = _reference(weights, np.zeros(8), np.ones(8), x)
    np.testing.assert_allclose(matrix @ x, want, rtol=PROJECTION_TOLERANCE)


@pytest.mark.parametrize("isa", RUNNABLE, ids=lambda isa: isa.name)
def test_zero_activations_give_zero_and_rows_are_split_at_any_point(isa):
    rng = np.random.default_rng(3)
    weights = rng.integers(0, 256, size=(70, 200)).astype(np.uint8)
    matrix = Int8Matrix(weights, rng.integers(0, 256, 70), rng.random(70), kernel_jit.compiled(isa))
    assert not np.any(matrix @ np.zeros((2, 200), np.float32))
    x = rng.standard_normal((3, 200)).astype(np.float32)
    whole = matrix @ x
    parts = np.full_like(whole, np.nan)
    pieces, coef = matrix.pieces(x)
    for start, stop in ((0, 13), (13, 14), (14, 70)):  # a remainder smaller than a block, one row, the rest
        matrix.product_into(parts, pieces, coef, start, stop)
    np.testing.assert_array_equal(parts, whole)
    one = x[:1]  # one token: blocks of 4 rows, started off a packed group's boundary and ending inside one
    whole_one, parts_one = matrix @ one, np.full((1, 70), np.nan, np.float32)
    pieces, coef = matrix.pieces(one)
    for start, stop in ((0, 6), (6, 15), (15, 70)):
        matrix.product_into(parts_one, pieces, coef, start, stop)
    np.testing.assert_array_equal(parts_one, whole_one)
    plain = Int8Matrix(weights, matrix.zero_point, matrix.scale, kernel_jit.compiled(isa), pack=False)
    np.testing.assert_array_equal(plain @ one, whole_one)  # the packed layout changes where rows live, not their sums


def test_the_int8_export_s_projections_are_recognised_and_the_rest_left_alone():
    model = ov.Core().read_model(INT8 / "openvino_model.xml")
    matmuls = [n for n in model.get_ordered_ops() if n.get_type_name() == "MatMul"]
    found = [n for n in matmuls if int8_weights(n) is not None]
    # every Linear of the fixture (4 layers' projections and the head), not the rotary embedding's MatMul
    assert len(found) == len(matmuls) - 1
    assert all("rotary" not in n.get_friendly_name() for n in found)
    weights = int8_weights(found[0])
    assert weights.weights.dtype == np.uint8 and weights.scale.shape == (weights.weights.shape[0],)
    fp32 = ov.Core().read_model(model_dir("qwen35-text") / "openvino_model.xml")
    assert not any(int8_weights(n) for n in fp32.get_ordered_ops() if n.get_type_name() == "MatMul")


@needs_kernel
def test_routing_adds_one_input_and_one_operation_per_shared_activation():
    model = ov.Core().read_model(INT8 / "openvino_model.xml")
    routed = route_int8_projections(model, kernel_jit.compiled())
    ours = [n for n in model.get_ordered_ops() if n.get_type_name() == "Int8Projections"]
    assert routed == sum(n.get_output_size() for n in ours) == 32
    assert len(ours) < routed  # q/k/v, the DeltaNet inputs and gate/up share their activations' pieces
    assert KERNEL_TOKENS in {p.get_any_name() for p in model.inputs}


def _runner(monkeypatch, mode: str) -> ModelRunner:
    monkeypatch.setenv("DECIDER_EXACT_KERNEL", mode)
    monkeypatch.setenv("DECIDER_INT8_PROJECTIONS", "widened")  # "plugin": the plugin's widened f32 path, the kernel's peer
    kernel_jit.unavailable.cache_clear()
    try:
        return ModelRunner(INT8, DeviceOptions(device="CPU", exact=True))
    finally:
        kernel_jit.unavailable.cache_clear()


def _infers(runner: ModelRunner) -> list[np.ndarray]:
    """A prompt chunk, one-token steps, and few-token chunks of 3 and 8 tokens (the verifier's shape)."""
    out = [runner.prefill(list(range(100, 140)))]
    out += [runner.step(t) for t in (5, 6, 7)]
    ids = list(range(100, 140)) + [5, 6, 7]
    for extra in ([9, 10, 11], [12] * 8):
        ids += extra
        out.append(runner.prefill(ids))
    return out


@needs_kernel
def test_prompt_chunks_run_the_plugin_s_kernels_bit_for_bit():
    """On the exported graph (logits at every position): a 20-token chunk gets the plugin's MatMuls, to the bit; the
    one-token infer after it gets the kernel (close, not identical)."""
    core = ov.Core()
    compiled = []
    for route in (False, True):
        model = core.read_model(INT8 / "openvino_model.xml")
        if route:
            route_int8_projections(model, kernel_jit.compiled())
        compiled.append(core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32",
                                                          "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}))
    requests = [c.create_infer_request() for c in compiled]
    past, logits = 0, []
    for ids in (list(range(100, 120)), [5]):
        feed = {"input_ids": np.array([ids]), "attention_mask": np.ones((1, past + len(ids)), np.int64),
                "position_ids": np.arange(past, past + len(ids))[None], "beam_idx": np.zeros(1, np.int32)}
        logits.append([r.infer({**feed, **({KERNEL_TOKENS: np.array([8])} if i else {})})["logits"].copy()
                       for i, r in enumerate(requests)])
        past += len(ids)
    np.testing.assert_array_equal(*logits[0])
    gap = np.abs(log_softmax(logits[1][0][0, -1].astype(np.float64)) - log_softmax(logits[1][1][0, -1].astype(np.float64))).max()
    assert 0 < gap < LOGPROB_TOLERANCE


@needs_kernel
def test_few_token_infers_stay_within_the_exact_bound(monkeypatch):
    """Through the runner (the last-position head is one token: the kernel takes it after a prompt chunk too)."""
    kernel, plugin = _runner(monkeypatch, "kernel"), _runner(monkeypatch, "plugin")
    assert kernel.kernel_plan.routed == 32 and kernel._layout.kernel_tokens[0] == kernel_jit.MAX_TOKENS
    assert plugin.kernel_plan.routed == 0 and "DECIDER_EXACT_KERNEL=plugin" in plugin.kernel_plan.reason
    gaps = [np.abs(log_softmax(a) - log_softmax(b)).max() for a, b in zip(_infers(kernel), _infers(plugin))]
    assert max(gaps) < LOGPROB_TOLERANCE
    assert min(gaps) > 0  # the kernel really computed them (a plugin-only run would agree to the bit)


@needs_kernel
def test_the_label_names_the_kernel_only_where_it_runs(monkeypatch):
    kernel = _runner(monkeypatch, "kernel")
    assert kernel.precision.exact and kernel.precision.label.startswith("f32; ")
    description = kernel_jit.compiled().isa.description
    assert description in kernel.precision.label and kernel.kernel_plan.description == description
    assert _runner(monkeypatch, "plugin").precision.label == "f32"
    fast = ModelRunner(INT8, DeviceOptions(device="CPU", exact=False))
    assert fast.kernel_plan.routed == 0 and "kernel" not in fast.precision.label


@pytest.fixture
def fresh_verdicts(monkeypatch, tmp_path):
    """No adoption measured before: an empty cache folder and nothing remembered in this process."""
    from decider.engine.kernels import verdicts

    monkeypatch.setenv("DECIDER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(verdicts, "_IN_PROCESS", {})
    monkeypatch.setenv("DECIDER_EXACT_KERNEL", "auto")
    return tmp_path / "compiled" / verdicts.CACHE_NAME


@needs_kernel
def test_adoption_measures_both_paths_on_the_runner_s_own_model(monkeypatch, fresh_verdicts):
    """Unforced, the runner times one-token infers both ways and keeps what was faster; the note says which and why."""
    timed = []
    real = adoption.paired_steps

    def spy(compiled, feed, without=None):
        timed.append(real(compiled, feed, without))
        return timed[-1]

    monkeypatch.setattr(adoption, "paired_steps", spy)
    runner = ModelRunner(INT8, DeviceOptions(device="CPU", exact=True))
    (kernel_ms, plugin_ms), = timed
    adopted = runner._layout.kernel_tokens[0] == kernel_jit.MAX_TOKENS
    assert adopted == (kernel_ms < plugin_ms)
    assert runner.kernel_note.startswith("adopted" if adopted else "not adopted")
    assert (kernel_jit.compiled().isa.description in runner.precision.label) == adopted


def test_unasked_the_kernel_is_off_and_says_how_to_ask(monkeypatch):
    monkeypatch.delenv("DECIDER_EXACT_KERNEL", raising=False)
    runner = ModelRunner(INT8, DeviceOptions(device="CPU", exact=True))
    assert runner.kernel_plan.routed == 0 and "DECIDER_EXACT_KERNEL=auto" in runner.kernel_note
    assert KERNEL_TOKENS not in {p.get_any_name() for p in runner.compiled.inputs}
    assert "kernel" not in runner.precision.label  # the plugin's path (in integer pieces where VNNI is: test_int8_pieces)


def test_where_the_kernel_cannot_run_the_plugin_path_stays_and_says_why(monkeypatch):
    monkeypatch.setenv("DECIDER_EXACT_KERNEL", "auto")
    monkeypatch.setenv("DECIDER_INT8_PROJECTIONS", "widened")
    monkeypatch.setattr(kernel_jit, "unavailable", lambda: "this CPU has neither VNNI nor AVX2 (test)")
    runner = ModelRunner(INT8, DeviceOptions(device="CPU", exact=True))
    assert runner.kernel_plan.routed == 0 and runner.kernel_note == "this CPU has neither VNNI nor AVX2 (test)"
    assert KERNEL_TOKENS not in {p.get_any_name() for p in runner.compiled.inputs}
    assert runner.precision.label == "f32"



@needs_kernel
@pytest.mark.parametrize("threads", [2, 3])
def test_rows_shared_between_threads_give_the_same_bits(threads):
    from decider.engine.kernels.row_split import MIN_SPLIT_BYTES, RowSplit

    rng = np.random.default_rng(threads)
    matrices = [Int8Matrix(rng.integers(0, 256, size=(rows, 1024)).astype(np.uint8), rng.integers(0, 256, rows),
                           rng.random(rows), kernel_jit.compiled()) for rows in (1030, 3, 517)]
    assert sum(m.weights.nbytes for m in matrices) >= MIN_SPLIT_BYTES  # large enough to be split
    x = rng.standard_normal((2, 1024)).astype(np.float32)
    pieces, coef = matrices[0].pieces(x)
    split = RowSplit()
    split.set_threads(threads)
    outs = [np.full((2, m.rows), np.nan, np.float32) for m in matrices]
    split.products(list(zip(matrices, outs)), pieces, coef)
    for matrix, out in zip(matrices, outs):
        np.testing.assert_array_equal(out, matrix @ x)


@needs_kernel
def test_doctor_names_the_path_that_ran(monkeypatch):
    from decider.app.doctor import run_doctor

    monkeypatch.setenv("DECIDER_EXACT_KERNEL", "kernel")
    text = run_doctor(INT8, DeviceOptions(device="CPU", exact=True), compile=True).render()
    assert kernel_jit.compiled().isa.description in text and "exact int8 kernel (few-token infers): adopted" in text
    monkeypatch.setenv("DECIDER_EXACT_KERNEL", "plugin")
    kernel_jit.unavailable.cache_clear()
    try:
        text = run_doctor(INT8, DeviceOptions(device="CPU", exact=True), compile=True).render()
    finally:
        kernel_jit.unavailable.cache_clear()
    assert kernel_jit.compiled().isa.description not in text and "turned off by DECIDER_EXACT_KERNEL=plugin" in text


@needs_kernel
def test_a_decision_s_engine_names_the_kernel(tmp_path):
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "DECIDER_EXACT_KERNEL": "kernel", "DECIDER_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "decider.app.cli", "ask", "--model", str(INT8), "--device", "CPU",
                           "Pick one.", "--option", "A", "--option", "B", "--json"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    engine = json.loads(done.stdout)["engine"]
    assert kernel_jit.compiled().isa.description in engine["precision"] and engine["logprobs"].startswith("exact full-vocabulary")


@needs_kernel
@pytest.mark.parametrize("kernel_wins", [True, False])
def test_a_measured_verdict_is_kept_and_the_next_runner_compiles_only_the_winner(monkeypatch, fresh_verdicts, kernel_wins):
    import json

    from decider.engine.kernels import verdicts

    timed = []

    def fixed(compiled, feed, without=None):
        timed.append(1)
        return (1.0, 2.0) if kernel_wins else (2.0, 1.0)

    monkeypatch.setattr(adoption, "paired_steps", fixed)
    first = ModelRunner(INT8, DeviceOptions(device="CPU", exact=True))
    assert timed == [1] and first.kernel_plan.routed == 32
    assert list(json.loads(fresh_verdicts.read_text()).values()) == [kernel_wins]
    monkeypatch.setattr(verdicts, "_IN_PROCESS", {})  # a new process: the file alone
    second = ModelRunner(INT8, DeviceOptions(device="CPU", exact=True))
    assert timed == [1]  # not timed again
    if kernel_wins:
        assert second._layout.kernel_tokens[0] == kernel_jit.MAX_TOKENS and "before" in second.kernel_note
    else:  # the plugin's graph as exported: no routing, no kernel input
        assert second.kernel_plan.routed == 0 and "slower" in second.kernel_note
        assert KERNEL_TOKENS not in {p.get_any_name() for p in second.compiled.inputs}
    fresh_verdicts.write_text("[not an object")  # a damaged file is a miss: measured again
    monkeypatch.setattr(verdicts, "_IN_PROCESS", {})
    ModelRunner(INT8, DeviceOptions(device="CPU", exact=True))
    assert timed == [1, 1]


@needs_kernel
def test_the_kernel_is_timed_against_the_one_token_steps_and_where_it_loses_they_step(monkeypatch, fresh_verdicts):
    """The plugin's side of the comparison is what the runner runs without the kernel — its one-token step compile, not
    the routed graph with the kernel off (which carries the routing's cost) — and where the kernel loses, those steps
    are the runner's, giving what an unrouted runner gives, to the bit."""
    monkeypatch.setenv("DECIDER_INT8_PROJECTIONS", "widened")
    against = []

    def kernel_loses(compiled, feed, without=None):
        against.append(without)
        return 2.0, 1.0

    monkeypatch.setattr(adoption, "paired_steps", kernel_loses)
    runner = ModelRunner(INT8, DeviceOptions(device="CPU", exact=True))
    assert runner.plan.one_token_steps and runner.kernel_plan.routed == 32
    (without,) = against
    assert without is not None and KERNEL_TOKENS not in {p.get_any_name() for p in without.inputs}
    assert runner._stepper is not None and runner._stepper.compiled is without
    assert runner.kernel_note.startswith("not adopted") and "the one-token steps" in runner.kernel_note
    monkeypatch.setenv("DECIDER_EXACT_KERNEL", "plugin")
    plain = ModelRunner(INT8, DeviceOptions(device="CPU", exact=True))
    for r in (runner, plain):
        r.prefill(list(range(100, 140)))
    for token in (5, 6, 7):
        np.testing.assert_array_equal(runner.step(token), plain.step(token))
