"""One-token decode steps on a compile of their own (engine/graphs/one_token.py, engine/runners/step_request.py): the
graph's shapes, the plan's choice, and a conversation that moves its state between the two compiles and back giving
the logits the runner's own compile gives."""

from __future__ import annotations

import numpy as np
import openvino as ov
import pytest

from support.conversations import every_move
from support.models import model_dir
from decider.engine.compile.devices import DeviceOptions
from decider.engine.compile.plan import FIXED_WIDTH, ONE_TOKEN, SHARED, STEP_GRAPH_ENV, VERIFY_GRAPH_ENV, Host
from decider.engine.compile.planner import plan_compile
from decider.engine.core.logprobs import log_softmax
from decider.engine.graphs.one_token import one_token_graph
from decider.engine.runners.runner import ModelRunner

# Two compiles of the same graph pick their kernels for their own shapes (one token, or any): their logits agree to
# f32 rounding, measured 7e-6 (int8 fixture) and 1.3e-5 (vision fixture) over 20 steps; decisions are unchanged.
LOGPROB_TOLERANCE = 5e-5
DRAFTED_TOLERANCE = 1e-4


def test_the_step_graph_fixes_every_shape_but_the_caches_length():
    model = ov.Core().read_model(model_dir("qwen35-text") / "openvino_model.xml")
    step = one_token_graph(model)
    shapes = {p.get_any_name(): p.get_partial_shape() for p in step.inputs}
    assert shapes["input_ids"] == ov.PartialShape([1, 1]) and shapes["beam_idx"] == ov.PartialShape([1])
    assert shapes["position_ids"].is_static and shapes["attention_mask"][0] == 1 and shapes["attention_mask"][1].is_dynamic
    assert all(v.get_info().data_shape[0] == 1 for v in step.get_variables())
    # the runner's graph is left as it was: a copy is fixed
    assert {p.get_any_name(): p.get_partial_shape() for p in model.inputs}["input_ids"].is_dynamic


def test_the_step_graph_keeps_only_the_step_path_of_the_routed_graph():
    """Fixed at one token, the fused DeltaNet kernel's path and the exported conv windows have no rows: their merges
    with the step path are dropped and the empty path leaves the graph (each merge copied a whole state a step)."""
    from decider.engine.graphs.decode import one_token_deltanet
    from decider.engine.graphs.logits import slice_to_last_position

    model = ov.Core().read_model(model_dir("qwen35-text-int8") / "openvino_model.xml")
    slice_to_last_position(model)
    layers = one_token_deltanet(model)
    count = lambda m, kind: sum(op.get_type_name() == kind for op in m.get_ordered_ops())
    step = one_token_graph(model)
    assert layers and count(model, "Loop") == layers and count(step, "Loop") == 0
    assert count(step, "GroupConvolution") == count(model, "GroupConvolution") // 2  # the shift's conv, not the window's
    # every merge went: four per layer (the layer's output and state, the conv window's output and state)
    assert count(model, "Concat") - count(step, "Concat") >= 4 * layers


def test_the_plan_gives_cpu_steps_a_compile_of_their_own_unless_asked(monkeypatch):
    monkeypatch.delenv(STEP_GRAPH_ENV, raising=False)
    host, cpu = Host(("FP32",)), DeviceOptions(device="CPU", exact=True)
    plan = plan_compile(cpu, host, path="dynamic")
    assert plan.one_token_steps and plan.step_graph.value == ONE_TOKEN
    assert f"decode steps: {ONE_TOKEN}" in "\n".join(plan.describe())
    assert plan_compile(DeviceOptions(device="CPU", exact=False), host, path="dynamic").one_token_steps
    assert plan_compile(DeviceOptions(device="GPU"), host, path="dynamic").step_graph is None
    assert plan_compile(cpu, host, path="static").step_graph is None
    twin = plan_compile(cpu, host, path="dynamic", overrides={"PERFORMANCE_HINT": "LATENCY"})
    assert twin.step_graph.value == SHARED and "twin" in twin.step_graph.reason  # it holds the weights twice already
    monkeypatch.setenv(STEP_GRAPH_ENV, "shared")
    assert plan_compile(cpu, host, path="dynamic").step_graph.value == SHARED


def _runner(monkeypatch, name: str, shared: bool) -> ModelRunner:
    for env in (STEP_GRAPH_ENV, VERIFY_GRAPH_ENV):
        if shared:
            monkeypatch.setenv(env, "shared")
        else:
            monkeypatch.delenv(env, raising=False)
    return ModelRunner(model_dir(name), DeviceOptions(device="CPU", exact=True))


@pytest.mark.parametrize("name", ["qwen35-text-int8", "qwen35-vl", "qwen35-moe-text"])
def test_a_conversation_moving_between_the_compiles_gives_the_runners_own_logits(monkeypatch, name):
    mine, shared = _runner(monkeypatch, name, shared=False), _runner(monkeypatch, name, shared=True)
    assert mine.plan.one_token_steps and len(mine.compiles) == 2 and len(shared.compiles) == 1
    got, want = every_move(mine), every_move(shared)
    gaps = [float(np.abs(log_softmax(a) - log_softmax(b)).max()) for a, b in zip(got, want)]
    assert max(gaps) < LOGPROB_TOLERANCE
    assert mine._stepper is not None and mine._stepper.live  # the last steps ran on the step compile
    mine.export_state()
    assert not mine._stepper.live  # ... and the state came back for a snapshot


def test_a_state_left_behind_is_caught(monkeypatch):
    """The check above can fail: steps that do not take the state along compute from an empty one."""
    mine, shared = _runner(monkeypatch, "qwen35-text-int8", shared=False), _runner(monkeypatch, "qwen35-text-int8", shared=True)
    assert mine._stepper is not None
    monkeypatch.setattr(mine._stepper, "take", lambda main: mine._stepper.request)
    got, want = every_move(mine), every_move(shared)
    assert max(float(np.abs(log_softmax(a) - log_softmax(b)).max()) for a, b in zip(got, want)) > 1e-2


def _then(runner: ModelRunner, keep: int, tokens: list[int]) -> list[np.ndarray]:
    """Roll the last verify back to its first `keep` tokens, then verify `tokens` (after the kept ones the state lacks,
    where the runner restores a snapshot): the rows of `tokens`."""
    lost = runner.rewind(keep=keep)
    return list(runner.verify(lost + tokens, len(tokens)))


def _drafted_conversation(runner: ModelRunner) -> list[np.ndarray]:
    """A drafted loop's moves: verifies at the drafts' width back to back (kept whole, in part, or none), a plain step
    between, a verify of another width (the runner's compile), a prompt that reuses a snapshot."""
    prompt = list(range(30, 70))
    runner.prepare_verify(4)
    out = [runner.prefill(prompt, checkpoints=[len(prompt)])]
    out += list(runner.verify([5, 6, 7, 8], 4))
    out += _then(runner, 0, [5, 6, 9, 10])
    out += _then(runner, 2, [22, 23])  # two kept: the next forward commits them first (or feeds them again)
    out += list(runner.verify([24, 25, 26, 27], 4))  # kept whole
    out.append(runner.step(11))
    out += list(runner.verify([12, 13, 14, 15], 4))
    lost = runner.rewind(keep=3)  # then a step: the state leaves the verify compile with three tokens pending
    out.append([runner.step(t) for t in lost + [31]][-1])
    out += list(runner.verify([12, 13, 14, 15], 4))
    runner.rewind()
    out += list(runner.verify([12, 13, 16], 3))  # another width: the runner's own compile
    runner.rewind()
    out += [runner.step(t) for t in (12, 17)]
    out.append(runner.prefill(prompt + [40, 41]))
    out += list(runner.verify([18, 19, 20, 21], 4))
    return out


@pytest.mark.parametrize("name", ["qwen35-text-int8", "qwen35-vl"])
def test_verifies_at_the_drafts_width_run_on_their_own_compile_and_give_the_runners_logits(monkeypatch, name):
    mine, shared = _runner(monkeypatch, name, shared=False), _runner(monkeypatch, name, shared=True)
    assert mine.plan.own_verifies and mine.plan.verify_graph.value == FIXED_WIDTH and not shared.plan.own_verifies
    assert len(mine.compiles) == 2  # no verify compile until a request drafts
    got, want = _drafted_conversation(mine), _drafted_conversation(shared)
    assert len(mine.compiles) == 3 and len(shared.compiles) == 1
    gaps = [float(np.abs(log_softmax(a) - log_softmax(b)).max()) for a, b in zip(got, want)]
    # Three compiles' kernels (one token, four, any) sum in their own orders along a conversation that keeps verifies:
    # measured 2e-5 (int8 fixture) and 6.0e-5 (the vision fixture, whose random weights amplify the most); both
    # compiles stay within tests/test_parity.py's 1e-4 of transformers in float64, drafted generation included.
    assert max(gaps) < DRAFTED_TOLERANCE
    assert mine._verifier is not None and mine._verifier.live  # the last verify ran there and kept the state
    assert mine._last is mine._verifier.request


def test_the_verify_compile_commits_only_the_tokens_kept(monkeypatch):
    """The check above can fail on the lazy commits too: a rollback the verify compile is not told of (its whole chunk
    committed) gives other logits; without it, both runners' histories also agree."""
    from decider.engine.runners.lazy_verify import LazyVerifyRequest

    mine, shared = _runner(monkeypatch, "qwen35-text-int8", shared=False), _runner(monkeypatch, "qwen35-text-int8", shared=True)
    mine.prepare_verify(4)
    assert isinstance(mine._verifier, LazyVerifyRequest) and mine.plan.lazy_commits
    mine.prefill(list(range(30, 70)))
    mine.verify([5, 6, 7, 8], 4)
    assert mine.rewind(keep=2) == [] and mine.history[-2:] == [5, 6]  # held: nothing to feed again
    monkeypatch.setattr(LazyVerifyRequest, "keep", lambda self, count: None)
    got, want = _drafted_conversation(mine), _drafted_conversation(shared)
    assert max(float(np.abs(log_softmax(a) - log_softmax(b)).max()) for a, b in zip(got, want)) > 1e-2


def test_a_verify_compile_left_without_the_state_is_caught(monkeypatch):
    mine, shared = _runner(monkeypatch, "qwen35-text-int8", shared=False), _runner(monkeypatch, "qwen35-text-int8", shared=True)
    mine.prepare_verify(4)
    assert mine._verifier is not None
    verifier = mine._verifier
    # live, yet the state never copied in
    monkeypatch.setattr(verifier, "take", lambda main: (setattr(verifier, "live", True), verifier.request)[1])
    got, want = _drafted_conversation(mine), _drafted_conversation(shared)
    assert max(float(np.abs(log_softmax(a) - log_softmax(b)).max()) for a, b in zip(got, want)) > 1e-2
