"""Lazy commits of a verify's tokens (engine/graphs/lazy_commit.py, engine/runners/lazy_verify.py): the state after
any prefix of a chunk, formed in the graph and on the host from the chunk's K, Δ and G, against the token-by-token
recurrence in float64; the conv window after a prefix; a verify graph left as it is where a state's parts are not
found. (A conversation with partial keeps against the runner's own compile: tests/test_one_token_steps.py.)"""

from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

from support.models import model_dir
from test_few_tokens import DK, DV, H, _inputs, _recurrence
from decider.engine.graphs.decode import one_token_deltanet
from decider.engine.graphs.few_tokens import few_tokens
from decider.engine.graphs.lazy_commit import KEPT, NEXT, _conv_committed, _recurrent_committed, commit_lazily
from decider.engine.graphs.logits import slice_to_counted_positions
from decider.engine.graphs.one_token import fixed_width_graph
from decider.engine.runners.lazy_verify import _conv, _recurrent

WIDTH = 4


def _chunk_parts(q, k, v, g, beta, state) -> tuple[np.ndarray, np.ndarray]:
    """(Δ, G) of the chunk, from the few-token graph."""
    shapes = [[1, H, WIDTH, DK], [1, H, WIDTH, DK], [1, H, WIDTH, DV], [1, H, WIDTH], [1, H, WIDTH], [1, H, DK, DV]]
    params = [ops.parameter(shape, np.float32) for shape in shapes]
    chunk = few_tokens(*params)
    model = ov.Model([chunk.deltas.output(0), chunk.cumulative.output(0)], params)
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    deltas, cumulative = compiled([q, k, v, g, beta, state]).values()
    return deltas, cumulative


def _committed_in_graph(state, keys, deltas, cumulative, kept: int) -> np.ndarray:
    params = [ops.parameter(x.shape, np.float32) for x in (state, keys, deltas, cumulative)]
    count = ops.parameter([1], ov.Type.i64)
    out = _recurrent_committed(params[0].output(0), params[1:], count, WIDTH)
    model = ov.Model([out.output(0)], [*params, count])
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled([state, keys, deltas, cumulative, np.array([kept])])[0]


@pytest.mark.parametrize("kept", range(WIDTH + 1))
def test_the_state_after_any_prefix_of_the_chunk_is_the_recurrences(kept):
    for seed in range(3):
        q, k, v, g, beta, state = _inputs(WIDTH, seed)
        deltas, cumulative = _chunk_parts(q, k, v, g, beta, state)
        _, want = _recurrence(q[:, :, :kept], k[:, :, :kept], v[:, :, :kept], g[:, :, :kept], beta[:, :, :kept], state)
        scale = np.abs(want).max()
        in_graph = _committed_in_graph(state, k, deltas, cumulative, kept)[0]
        on_host = _recurrent(state, [k, deltas, cumulative], kept)[0] if kept else state[0]
        assert np.abs(in_graph - want).max() <= 2e-6 * scale  # f32 grade, as the chunk form itself
        assert np.abs(on_host - want).max() <= 2e-6 * scale
        if kept < WIDTH:  # the check can fail: one token more is another state
            _, further = _recurrence(*(x[:, :, : kept + 1] for x in (q, k, v, g, beta)), state)
            assert np.abs(in_graph - further).max() > 1e-3 * scale


@pytest.mark.parametrize("kept", range(WIDTH + 1))
def test_the_conv_window_after_a_prefix_is_its_last_columns(kept):
    rng = np.random.default_rng(kept)
    window, chunk = rng.standard_normal((1, 6, 4)).astype(np.float32), rng.standard_normal((1, 6, WIDTH)).astype(np.float32)
    want = np.concatenate([window, chunk[:, :, :kept]], axis=2)[:, :, -4:]  # the window a token-by-token shift leaves
    params = [ops.parameter(x.shape, np.float32) for x in (window, chunk)]
    count = ops.parameter([1], ov.Type.i64)
    model = ov.Model([_conv_committed(params[0].output(0), [params[1]], count).output(0)], [*params, count])
    got = ov.Core().compile_model(model, "CPU")([window, chunk, np.array([kept])])[0]
    assert np.array_equal(got, want) and np.array_equal(_conv(window, [chunk], kept), want)


def _verify_graph(name: str) -> ov.Model:
    model = ov.Core().read_model(model_dir(name) / "openvino_model.xml")
    slice_to_counted_positions(model)
    one_token_deltanet(model)
    return fixed_width_graph(model, WIDTH)


def test_every_deltanet_state_of_the_verify_graph_is_pending():
    graph = _verify_graph("qwen35-text-int8")
    fixed = [v.get_info().variable_id for v in graph.get_variables() if v.get_info().data_shape.is_static]
    pending = commit_lazily(graph, WIDTH)
    assert sorted(p.variable_id for p in pending) == sorted(fixed) and {p.kind for p in pending} == {"recurrent", "conv"}
    inputs = {port.get_any_name() for port in graph.inputs}
    outputs = {name for port in graph.outputs for name in port.get_names()}
    names = [name for p in pending for name in p.inputs]
    assert KEPT in inputs and set(names) <= inputs and {name + NEXT for name in names} <= outputs
    # no state is written from this forward's chunk: each Assign reads the committed previous one
    assigns = [op for op in graph.get_ordered_ops() if op.get_type_name() == "Assign" and op.get_variable_id() in fixed]
    assert all(op.input_value(0).get_node().get_type_name() in ("Add", "Gather") for op in assigns)


def test_a_graph_without_the_parts_is_left_as_it_is():
    graph = _verify_graph("qwen35-text-int8")
    for op in graph.get_ordered_ops():
        if op.get_friendly_name().endswith("/pending/chunk"):
            op.set_friendly_name("renamed")  # one conv window's chunk can no longer be found
            break
    before = len(graph.get_ordered_ops())
    assert commit_lazily(graph, WIDTH) == [] and len(graph.get_ordered_ops()) == before
    assert KEPT not in {port.get_any_name() for port in graph.inputs}
