"""The one-token DeltaNet path (engine/graphs/decode.py): prefill unchanged, decode steps on the new path, same numbers."""

from unittest import mock

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

from support.models import model_dir
from decider.engine.graphs import decode as decode_graph
from decider.engine.runners import runner as runner_module
from decider.engine.graphs.decode import one_token_deltanet
from decider.engine.compile.devices import DeviceOptions
from decider.engine.compile.planner import compile_properties
from decider.engine.graphs.logits import slice_to_last_position
from decider.engine.core.logprobs import log_softmax
from decider.engine.model.folder import inspect_folder
from decider.engine.runners.runner import ModelRunner

EXACT = compile_properties("CPU", DeviceOptions(device="CPU", exact=True))
PROMPT = list(range(100, 140))
STEPS = 48
# The fused kernel and the matrix-vector path sum in different orders: per layer their outputs and states agree to
# ~2 ulp (6e-8 on |o| ≈ 0.2), which these random fixtures (weights drawn with std 0.15) amplify over 48 greedy steps
# to at most 2.8e-5 in the log-probabilities (measured, text and vision-language). The exporter's own unfused Loop
# is as far from the fused kernel (1.8e-5 over 30 steps), and both stay within 2.8e-5 of transformers in float64
# (tests/test_parity.py holds 1e-4).
TOLERANCE = 5e-5


def _linear_layers(name: str) -> int:
    return inspect_folder(model_dir(name)).text_config["layer_types"].count("linear_attention")


def _greedy(runner: ModelRunner) -> tuple[np.ndarray, list[np.ndarray]]:
    prefill = runner.prefill(PROMPT)
    rows, logits = [], prefill
    for _ in range(STEPS):
        logits = runner.step(int(np.argmax(logits)))
        rows.append(logits)
    return prefill, rows


@pytest.mark.parametrize("name", ["qwen35-text", "qwen35-vl"])
def test_decode_steps_match_the_fused_kernel_and_prefill_is_bit_identical(name, monkeypatch):
    # chunks of 2…8 tokens take the few-token path otherwise (tests/test_few_tokens.py): here every chunk longer than one
    # token runs the fused kernel, so the prefill must be bit-identical
    monkeypatch.setattr(decode_graph, "FEW_TOKENS", 1)
    with mock.patch.object(runner_module, "one_token_deltanet", lambda model: 0):
        plain = ModelRunner(model_dir(name))
    rewritten = ModelRunner(model_dir(name))
    plain_prefill, plain_steps = _greedy(plain)
    prefill, steps = _greedy(rewritten)
    assert np.array_equal(prefill, plain_prefill)  # a chunk still runs the fused kernel, exactly as exported
    worst = max(float(np.max(np.abs(log_softmax(a) - log_softmax(b)))) for a, b in zip(steps, plain_steps))
    assert [int(np.argmax(s)) for s in steps] == [int(np.argmax(s)) for s in plain_steps]
    assert 0.0 < worst < TOLERANCE, worst  # > 0: the steps really ran the other arithmetic


def test_one_token_and_few_token_infers_give_the_fused_kernel_no_rows():
    model = slice_to_last_position(ov.Core().read_model(model_dir("qwen35-text") / "openvino_model.xml"))
    layers = [decode_graph._match(op) for op in model.get_ordered_ops() if op.get_type_name() == "Loop"]
    assert len(layers) == _linear_layers("qwen35-text")
    assert one_token_deltanet(model) == len(layers)
    # What the fused kernel hands on (its output, [rows, heads, tokens, Dv]), as extra model outputs.
    model.add_results([ops.result(layer.o_out.output(0)) for layer in layers])
    compiled = ov.Core().compile_model(model, "CPU", EXACT)
    kinds = [op.get_rt_info()["layerType"].astype(str) for op in compiled.get_runtime_model().get_ordered_ops()]
    assert kinds.count("GatedDeltaNet") == len(layers)  # the plugin still fuses every Loop for prefill chunks
    request = compiled.create_infer_request()

    def run(ids, past):
        request.infer({"input_ids": np.asarray([ids]), "attention_mask": np.ones((1, past + len(ids)), np.int64),
                       "position_ids": np.arange(past, past + len(ids))[None], "beam_idx": np.zeros(1, np.int32)})
        return [request.get_output_tensor(i + 1).shape for i in range(len(layers))]

    assert all(shape[0] == 1 and shape[2] == len(PROMPT) for shape in run(PROMPT, 0))
    assert all(shape[0] == 0 for shape in run([PROMPT[0]], len(PROMPT)))  # one token: the kernel gets no rows
    few = decode_graph.FEW_TOKENS
    assert all(shape[0] == 0 for shape in run(PROMPT[:4], len(PROMPT) + 1))  # 2…8 tokens: the few-token path's
    assert all(shape[0] == 1 and shape[2] == few + 1 for shape in run(PROMPT[: few + 1], len(PROMPT) + 5))


def test_the_rewrite_applies_once_and_leaves_other_loops_alone():
    model = ov.Core().read_model(model_dir("qwen35-moe-text") / "openvino_model.xml")
    assert one_token_deltanet(model) == _linear_layers("qwen35-moe-text")
    assert one_token_deltanet(model) == 0  # already rewritten: nothing matches again
    # A Loop laid out otherwise (here its k is q, not an l2-normalised k) is not the exporter's DeltaNet: left alone.
    counter = ov.Core().read_model(model_dir("qwen35-text") / "openvino_model.xml")
    for op in counter.get_ordered_ops():
        if op.get_type_name() == "Loop":
            op.input(3).replace_source_output(op.input_value(2))  # k := q: not the l2-normalised k the match needs
    assert one_token_deltanet(counter) == 0


def test_the_deltanet_states_are_read_without_the_beam_reorder_and_the_kv_caches_keep_it():
    model = ov.Core().read_model(model_dir("qwen35-text") / "openvino_model.xml")

    def reordered(model) -> dict[str, int]:
        """How many states of each kind reach their readers through Gather(state, beam_idx)."""
        kinds = {"fixed": 0, "kv": 0}
        for op in model.get_ordered_ops():
            if op.get_type_name() == "ReadValue" and any(t.get_node().get_type_name() == "Gather"
                                                         for t in op.output(0).get_target_inputs()):
                kinds["kv" if op.get_output_partial_shape(0).is_dynamic and
                      not all(d.is_static for d in list(op.get_output_partial_shape(0))[1:]) else "fixed"] += 1
        return kinds

    layer_types = inspect_folder(model_dir("qwen35-text")).text_config["layer_types"]
    linear, full = layer_types.count("linear_attention"), layer_types.count("full_attention")
    assert reordered(model) == {"fixed": 2 * linear, "kv": 2 * full}  # as exported: recurrent + conv; key + value
    one_token_deltanet(model)
    assert reordered(model) == {"fixed": 0, "kv": 2 * full}
    compiled = ov.Core().compile_model(model, "CPU", EXACT)
    kinds = [op.get_rt_info()["layerType"].astype(str) for op in compiled.get_runtime_model().get_ordered_ops()]
    assert kinds.count("ScaledDotProductAttention") == full  # the plugin still folds the KV reorder into attention
    assert kinds.count("GatedDeltaNet") == linear
