"""The conv window as a one-token shift (engine/graphs/conv_step.py): the same logits, bit for bit, as the graph without it."""

from pathlib import Path
from unittest import mock

import numpy as np
import openvino as ov
import pytest

from support.models import model_dir
from decider.engine.runners import runner as runner_module
from decider.engine.graphs.conv_step import conv_windows
from decider.engine.graphs.decode import one_token_deltanet
from decider.engine.compile.devices import DeviceOptions
from decider.engine.compile.planner import compile_properties
from decider.engine.graphs.logits import slice_to_last_position
from decider.engine.model.folder import inspect_folder
from decider.engine.runners.prompt_cache import PromptCache
from decider.engine.runners.runner import ModelRunner

DEMO = Path(__file__).resolve().parents[1] / "resources" / "demo-model"
FIXTURES = ["qwen35-text", "qwen35-vl", "qwen35-moe-text", "qwen35-text-int8"]
PROMPT = list(range(100, 140))
CHECKPOINT = 24  # a shared prefix the prompt cache keeps
STEPS = 40


def _folder(name: str) -> Path:
    return DEMO if name == "demo" else model_dir(name)


def _runner(folder: Path, shift: bool, cache: Path) -> ModelRunner:
    """A runner whose graph has (or, as before engine/graphs/conv_step.py, has not) the conv shift."""
    if shift:
        runner = ModelRunner(folder)
    else:
        with mock.patch.object(runner_module, "one_token_deltanet", lambda model: one_token_deltanet(model, shift_conv=False)):
            runner = ModelRunner(folder)
    runner.use_prompt_cache(PromptCache(cache))
    return runner


def _greedy(runner: ModelRunner, logits: np.ndarray, steps: int) -> list[np.ndarray]:
    rows = []
    for _ in range(steps):
        logits = runner.step(int(np.argmax(logits)))
        rows.append(logits)
    return rows


def _session(runner: ModelRunner) -> list[np.ndarray]:
    """Every logits row of: a prefill with a checkpoint, greedy steps, a verify over three tokens and its rollback
    (where the runner verifies), steps after it, then another prompt sharing the checkpoint's prefix (restored)."""
    first = runner.prefill(PROMPT, checkpoints=[CHECKPOINT])
    rows = [first] + _greedy(runner, first, STEPS)
    if runner.verifies:
        drafts = [int(np.argmax(rows[-1])), 7, 11]
        rows.append(runner.verify(drafts, 3))
        runner.rewind()
        rows += _greedy(runner, rows[-2], 8)
    other = runner.prefill(PROMPT[:CHECKPOINT] + [5, 6, 7], checkpoints=[CHECKPOINT])
    assert runner.stats.last_prefill_reused == CHECKPOINT  # the checkpoint's state was restored, not recomputed
    return rows + [other] + _greedy(runner, other, 12)


def _linear_layers(folder: Path) -> int:
    return inspect_folder(folder).text_config["layer_types"].count("linear_attention")


@pytest.mark.parametrize("name", FIXTURES + ["demo"])
def test_steps_with_the_shift_are_bit_identical_to_the_steps_without(name, tmp_path):
    folder = _folder(name)
    if not (folder / "config.json").is_file():
        pytest.skip(f"{folder} is absent")
    plain = _session(_runner(folder, False, tmp_path / "plain"))
    shifted_runner = _runner(folder, True, tmp_path / "shifted")
    shifted = _session(shifted_runner)
    assert len(shifted) == len(plain) > STEPS
    for i, (a, b) in enumerate(zip(plain, shifted)):
        assert np.array_equal(a, b), f"row {i}: max |Δ| {np.max(np.abs(a - b))}"
    # A later process takes the checkpoint from the prompt cache on disk and steps on from it, still bit-identical.
    fresh = _runner(folder, True, tmp_path / "shifted")
    restored = fresh.prefill(PROMPT[:CHECKPOINT] + [5, 6, 7], checkpoints=[CHECKPOINT])
    assert fresh.stats.last_prefill_from_disk == CHECKPOINT
    again = [restored] + _greedy(fresh, restored, 12)
    for a, b in zip(plain[-13:], again):
        assert np.array_equal(a, b)


def test_every_window_is_rewritten_once_and_one_token_infers_give_the_exported_window_no_rows():
    folder = model_dir("qwen35-text")
    model = slice_to_last_position(ov.Core().read_model(folder / "openvino_model.xml"))
    assert len(conv_windows(model)) == _linear_layers(folder)
    one_token_deltanet(model)
    assert conv_windows(model) == []  # rewritten: nothing matches again
    exported = [op for op in model.get_ordered_ops() if op.get_type_name() == "GroupConvolution"
                and op.input_value(0).get_node().get_type_name() == "Concat"]
    assert len(exported) == _linear_layers(folder)
    model.add_results([ov.opset13.result(op.output(0)) for op in exported])
    request = ov.Core().compile_model(model, "CPU", compile_properties("CPU", DeviceOptions(device="CPU", exact=True))
                                      ).create_infer_request()

    def run(ids, past):
        request.infer({"input_ids": np.asarray([ids]), "attention_mask": np.ones((1, past + len(ids)), np.int64),
                       "position_ids": np.arange(past, past + len(ids))[None], "beam_idx": np.zeros(1, np.int32)})
        return [request.get_output_tensor(i + 1).shape for i in range(len(exported))]

    assert all(shape[0] == 1 for shape in run(PROMPT, 0))  # a chunk: the exported window, as exported
    assert all(shape[0] == 0 for shape in run([PROMPT[0]], len(PROMPT)))  # one token: the shift, no exported rows


def test_a_conv_window_laid_out_otherwise_is_left_alone():
    model = ov.Core().read_model(model_dir("qwen35-text") / "openvino_model.xml")
    for op in model.get_ordered_ops():
        if op.get_type_name() == "GroupConvolution":  # the window read as it is, its new state sliced from elsewhere
            window = op.input_value(0).get_node()
            window.input(1).replace_source_output(ov.opset13.transpose(window.input_value(1), np.array([0, 1, 2])).output(0))
    assert conv_windows(model) == []
