"""The one-token step of every Gated DeltaNet layer as matrix–vector products, beside the fused kernel prefill keeps.

optimum-intel exports each DeltaNet layer's recurrence as a Loop over tokens; the CPU plugin fuses that Loop, with the
l2-normalisation of q and k in front of it, into one GatedDeltaNet node built for sequences: per (head, value column)
it copies a strided column of the state into a buffer, runs the tokens, and copies it back. For one token that is
13.5 ms of a 78 ms decode step at the 0.8B geometry (1 thread, AVX-512; 17 %), several times the ~1 MiB per layer
of state it has to read and write.

For one token the update is two reads and one write of each head's state S[Dk, Dv] (transformers'
torch_recurrent_gated_delta_rule; q and k l2-normalised with the exported eps, q divided by the exported √Dk):

    [qS; kS] = [q; k]ᵀS                 (one MatMul: one read of S)
    delta    = (v − exp(g)·kS)·beta
    S'       = exp(g)·S + k ⊗ delta     (one fused eltwise node: S read once, S' written once)
    o        = exp(g)·qS + (q·k)·delta  (= qᵀS', without reading S' again)

The paths stay in one graph, so one compiled model serves every shape (where the plan gives steps a compile of their
own, engine/graphs/one_token.py cuts the one-token path out of this graph: +847 MiB of repacked weights at 0.8B int8,
bought for a step without the dynamic graph's bookkeeping). The batch rows route the work. For a one-token infer every
input of the fused kernel is cut to zero rows, so it has no work, and the one-token path computes the row; a chunk of
2…FEW_TOKENS tokens (a verify forward, a prompt's short tail) takes a third path, the same update in matrix form over
the chunk (engine/graphs/few_tokens.py); a longer chunk runs exactly as exported (bit-identical logits). The plugin's
fusion needs its Loop, the q/k normalisation in front of it
and the flattening Concat behind it as exported (another reader of the normalised q or k stops it: measured with
OpenVINO 2026.4.1), so the rows are cut before the normalisation and the transposes, and the one-token path reads q
and k before their normalisation and normalises its one token itself.

The one-token path reads the state whole, not cut to its rows (that would copy it every step): the state's single
row broadcasts against the step's none or one. So the rewritten graph takes one sequence (batch 1), which is what
every runner feeds. For the same reason the DeltaNet states are read without the exporter's beam reorder
(Gather(state, beam_idx) on axis 0): with one sequence it is the identity, yet the plugin runs it as a copy of every
layer's recurrent and conv state each step (2.4 ms of a 75 ms step at 0.8B, 1 thread). The KV caches keep theirs: the
plugin folds it into its attention kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import openvino as ov
import openvino.opset13 as ops

from .building import END, cut, first_rows, i64, is_op, merge_rows
from .conv_step import conv_windows, shift_conv_windows, window_input
from .few_tokens import FEW_TOKENS, few_tokens
from .lazy_commit import RECURRENT_PARTS, tag, variable_of

@dataclass(frozen=True)
class _Normalised:
    """q or k as the Loop reads it: l2norm(raw) [B, S, H, D] → head-first [B, H, S, D], q then divided by √D."""

    raw: ov.Output  # before the normalisation, [B, S, H, D]
    eps: ov.Output
    divisor: ov.Output | None  # q's √D (None for k)
    readers: tuple[ov.Input, ...]  # the normalisation's inputs that read raw


@dataclass(frozen=True)
class _Layer:
    loop: ov.Node
    q: _Normalised
    k: _Normalised
    sequences: tuple[ov.Input, ...]  # the transposes' inputs that read v [B,S,H,Dv], g and beta [B,S,H]
    o_out: ov.Node  # the Reshape that hands the layer's output [B, H, S, Dv] on
    state_out: ov.Node  # the Reshape that hands the new state [B, H, Dk, Dv] on


def _only_reader(output: ov.Output) -> ov.Node | None:
    readers = list(output.get_target_inputs())
    return readers[0].get_node() if len(readers) == 1 else None


def _l2_normalised(output: ov.Output) -> tuple[ov.Output, ov.Output, tuple[ov.Input, ...]] | None:
    """(raw, eps, the inputs reading raw) where output = raw * 1/sqrt(sum(raw*raw, -1) + eps), as exported."""
    node = output.get_node()
    if not is_op(node, "Multiply"):
        return None
    for raw_port, norm_port in ((0, 1), (1, 0)):
        raw, rsqrt = node.input_value(raw_port), node.input_value(norm_port).get_node()
        if not (is_op(rsqrt, "Divide") and is_op(rsqrt.input_value(1).get_node(), "Sqrt")):
            continue
        add = rsqrt.input_value(1).get_node().input_value(0).get_node()
        if not is_op(add, "Add"):
            continue
        for sum_port in (0, 1):
            total = add.input_value(sum_port).get_node()
            if is_op(total, "ReduceSum") and is_op(total.input_value(0).get_node(), "Multiply"):
                square = total.input_value(0).get_node()
                if square.input_value(0) == raw and square.input_value(1) == raw:
                    return raw, add.input_value(1 - sum_port), (node.input(raw_port), square.input(0), square.input(1))
    return None


def _transposed(output: ov.Output, order: list[int]) -> ov.Node | None:
    """The Transpose(x, order) node behind output, if that is what it is."""
    node = output.get_node()
    if not is_op(node, "Transpose") or not is_op(node.input_value(1).get_node(), "Constant"):
        return None
    return node if list(node.input_value(1).get_node().get_data().ravel()) == order else None


def _normalised(output: ov.Output, scaled: bool) -> _Normalised | None:
    divisor = None
    if scaled:
        node = output.get_node()
        if not is_op(node, "Divide"):
            return None
        output, divisor = node.input_value(0), node.input_value(1)
        if divisor.get_partial_shape().rank.is_dynamic or divisor.get_partial_shape().rank.get_length() != 0:
            return None
    transpose = _transposed(output, [0, 2, 1, 3])
    found = _l2_normalised(transpose.input_value(0)) if transpose is not None else None
    return _Normalised(found[0], found[1], divisor, found[2]) if found else None


def _flattened_outputs(loop: ov.Node, state: ov.Output) -> tuple[ov.Node, ov.Node] | None:
    """The exporter flattens the Loop's two outputs into one Concat and slices them back out:
    Loop → Reshape(-1) ×2 → Concat → Slice ×2 → Reshape (output [B,H,S,Dv]; state [B,H,Dk,Dv])."""
    first, second = (_only_reader(loop.output(i)) for i in range(2))
    if first is None or second is None or not (is_op(first, "Reshape") and is_op(second, "Reshape")):
        return None
    concat = _only_reader(first.output(0))
    if concat is None or not is_op(concat, "Concat"):
        return None
    shared = _only_reader(second.output(0)) is concat  # (a name of its own: an `is` test would narrow `concat`)
    if not shared:
        return None
    ends = []
    for target in concat.output(0).get_target_inputs():
        piece = target.get_node()
        end = _only_reader(piece.output(0)) if is_op(piece, "Slice") else None
        if end is None or not is_op(end, "Reshape"):
            return None
        ends.append(end)
    if len(ends) != 2:
        return None
    state_shape = state.get_partial_shape()
    ends.sort(key=lambda end: end.get_output_partial_shape(0) == state_shape)
    if ends[0].get_output_partial_shape(0) == state_shape or ends[1].get_output_partial_shape(0) != state_shape:
        return None
    return ends[0], ends[1]


def _match(loop: ov.Node) -> _Layer | None:
    """The exporter's DeltaNet Loop: inputs (trip count, condition, q, k, v, g, beta, state, output buffer)."""
    if loop.get_input_size() != 9 or loop.get_output_size() != 2:
        return None
    if is_op(loop.input_value(7).get_node(), "Slice"):
        return None  # rewritten already: the state reaches the Loop through its rows cut
    q = _normalised(loop.input_value(2), scaled=True)
    k = _normalised(loop.input_value(3), scaled=False)
    found = [_transposed(loop.input_value(4), [0, 2, 1, 3])] + [_transposed(loop.input_value(i), [0, 2, 1]) for i in (5, 6)]
    transposes = [t for t in found if t is not None]
    outputs = _flattened_outputs(loop, loop.input_value(7))
    if q is None or k is None or len(transposes) != 3 or outputs is None:
        return None
    return _Layer(loop, q, k, tuple(t.input(0) for t in transposes), *outputs)


def _last_token(x, rows) -> ov.Output:
    """x [B, S, H(, D)] → its last token for `rows` rows, head-first [rows, H, 1(, D)]. With one token that is the same
    memory order: a Reshape (no copy) where the head dims are static, as exported, else a Transpose."""
    last = ops.slice(x, i64([0, -1]), ops.concat([rows, i64([END])], 0), i64([1, 1]), i64([0, 1]))
    heads = list(x.get_partial_shape())[2:]
    if all(d.is_static for d in heads):
        sizes = [d.get_length() for d in heads]
        return ops.reshape(last, i64([0, sizes[0], 1, *sizes[1:]]), True).output(0)  # 0: the rows as they are
    order = [0, 2, 1, 3] if len(heads) == 2 else [0, 2, 1]
    return ops.transpose(last, i64(order)).output(0)


def _every_token(x, rows) -> ov.Output:
    """x [B, S, H(, D)] → every token for `rows` rows, head-first [rows, H, S(, D)]."""
    rank = x.get_partial_shape().rank.get_length()
    return ops.transpose(first_rows(x, rows), i64([0, 2, 1, 3] if rank == 4 else [0, 2, 1])).output(0)


def _normalise(norm: _Normalised, x: ov.Output) -> ov.Node:
    """x (head-first tokens of norm.raw) normalised as exported."""
    total = ops.reduce_sum(ops.multiply(x, x), i64([-1]), True)
    rsqrt = ops.divide(ops.constant(np.array(1.0, dtype=np.float32)), ops.sqrt(ops.add(total, norm.eps)))
    out = ops.multiply(x, rsqrt)
    return ops.divide(out, norm.divisor) if norm.divisor is not None else out


STEP_PARTS = ("both", "decay", "delta", "out", "state")  # the one-token update's named nodes (`step_name`)


def step_name(variable_id: str, part: str) -> str:
    """The friendly name of `part` of the one-token update of `variable_id`'s state: what our native step finds
    (engine/kernels/native_deltanet.py)."""
    return f"{variable_id}/one_token/{part}"


def _one_token(q, k, v, g, beta, state) -> tuple[ov.Node, ov.Node]:
    """The delta-rule update for one token: q, k [b,H,1,Dk], v [b,H,1,Dv], g, beta [b,H,1], state [1 or b,H,Dk,Dv].

    qᵀS and kᵀS are one MatMul (one read of S); exp(g)·S + k ⊗ delta is one eltwise node (the plugin fuses the
    chain: S read once, S' written once), whose only reader is then the state's merge. (Written per step as in
    transformers, the decay and the outer product as separate nodes cost ~2× the state traffic. o as qᵀS' read S' a
    third time; with that and the transposes now reshapes, the step's nodes outside the projections went 16.6 → 13.9
    ms, 0.8B int8, 1 thread, `bench/w_decode_graph.py --earlier`; decoded logprobs within 2.8e-5 of transformers
    float64 on the fixtures, 2.3e-5 before.)
    """
    last_axis = i64([-1])
    decay = ops.unsqueeze(ops.exp(g), last_axis)  # [b,H,1,1]
    both = ops.matmul(ops.concat([q, k], 2), state, False, False)  # [b,H,2,Dv]: qᵀS and kᵀS, one read of S
    q_s, k_s = (cut(both, i64([i]), i64([i + 1]), 2) for i in (0, 1))
    delta = ops.multiply(ops.subtract(v, ops.multiply(k_s, decay)), ops.unsqueeze(beta, last_axis))
    heads, width = (k.get_output_partial_shape(0)[axis] for axis in (1, 3))
    k_column = (ops.reshape(k, i64([0, heads.get_length(), width.get_length(), 1]), True)  # [b,H,Dk,1], no copy
                if heads.is_static and width.is_static else ops.transpose(k, i64([0, 1, 3, 2])))
    outer = ops.multiply(k_column, delta)  # k ⊗ delta by broadcasting: fuses with the rest
    new_state = ops.add(ops.multiply(state, decay), outer)
    q_k = ops.reduce_sum(ops.multiply(q, k), last_axis, True)  # [b,H,1,1]
    out = ops.add(ops.multiply(q_s, decay), ops.multiply(q_k, delta))
    variable = variable_of(state)
    if variable is not None:
        for node, part in zip((both, decay, delta, out, new_state), STEP_PARTS):
            node.set_friendly_name(step_name(variable, part))
    return out, new_state


@dataclass(frozen=True)
class _Routing:
    """Which rows each path computes, from the infer's [batch, tokens]: one set for every layer."""

    tokens: ov.Node  # [1]
    loop_rows: ov.Node  # the fused kernel's rows: a chunk of more than FEW_TOKENS tokens
    few_rows: ov.Node  # the few-token path's rows (few_tokens.py): 2…FEW_TOKENS tokens
    step_rows: ov.Node  # the one-token path's rows
    sequence_rows: ov.Node  # the exported conv window's rows: more than one token

    @classmethod
    def of(cls, sequence: ov.Output) -> "_Routing":
        """From any [B, S, …] tensor of the infer (every layer's v has the infer's batch and tokens)."""
        shape = ops.shape_of(sequence)
        batch = ops.gather(shape, i64([0]), i64(0))
        tokens = ops.gather(shape, i64([1]), i64(0))
        none = i64([0])
        step_rows = ops.select(ops.equal(tokens, i64([1])), batch, none)
        few = ops.logical_and(ops.greater(tokens, i64([1])), ops.less_equal(tokens, i64([FEW_TOKENS])))
        few_rows = ops.select(few, batch, none)
        sequence_rows = ops.subtract(batch, step_rows)
        return cls(tokens, ops.subtract(sequence_rows, few_rows), few_rows, step_rows, sequence_rows)


def _rewrite(layer: _Layer, routing: _Routing) -> None:
    loop = layer.loop
    state = loop.input_value(7)
    o_readers = list(layer.o_out.output(0).get_target_inputs())
    state_readers = list(layer.state_out.output(0).get_target_inputs())
    tokens, loop_rows, few_rows, step_rows = routing.tokens, routing.loop_rows, routing.few_rows, routing.step_rows
    zero, one = i64([0]), i64([1])

    # Every input of the fused kernel gets loop_rows rows; the sources are cut before the normalisation and the
    # transposes, which the plugin's fusion matches as exported. With no rows it has no work.
    for norm in (layer.q, layer.k):
        cut = first_rows(norm.raw, loop_rows).output(0)
        for reader in norm.readers:
            reader.replace_source_output(cut)
    sources = [reader.get_source_output() for reader in layer.sequences]
    for reader, source in zip(layer.sequences, sources):
        reader.replace_source_output(first_rows(source, loop_rows).output(0))
    loop_state = first_rows(state, loop_rows)
    loop.input(7).replace_source_output(loop_state.output(0))
    # the exporter reshapes the new state to the shape of the state read: now loop_rows rows
    state_shape = layer.state_out.input_value(1)
    layer.state_out.input(1).replace_source_output(ops.shape_of(loop_state, state_shape.get_element_type()).output(0))

    v, g, beta = (_last_token(source, step_rows) for source in sources)
    out, new_state = _one_token(
        _normalise(layer.q, _last_token(layer.q.raw, step_rows)), _normalise(layer.k, _last_token(layer.k.raw, step_rows)),
        v, g, beta,
        # the state whole, not cut to step_rows (a copy of it): its one row broadcasts against the step's rows (none or one)
        state,
    )
    # [step_rows, H, 1, Dv] → [step_rows, H, S, Dv]: the same elements (none for a longer chunk, S = 1 otherwise)
    heads, width = (out.get_output_partial_shape(0)[axis] for axis in (1, 3))
    if heads.is_static and width.is_static:
        head_dim, value_dim = i64([heads.get_length()]), i64([width.get_length()])
    else:
        tail = cut(ops.shape_of(out), i64([1]), i64([END]), 0)
        head_dim, value_dim = cut(tail, zero, one, 0), cut(tail, i64([2]), i64([3]), 0)
    out = ops.reshape(out, ops.concat([step_rows, head_dim, tokens, value_dim], 0), False)
    # 2…FEW_TOKENS tokens (a verify forward, a short chunk): the chunk form, reading the state whole like the step
    few_v, few_g, few_beta = (_every_token(source, few_rows) for source in sources)
    few_k = _normalise(layer.k, _every_token(layer.k.raw, few_rows))
    few = few_tokens(_normalise(layer.q, _every_token(layer.q.raw, few_rows)), few_k, few_v, few_g, few_beta, state)
    variable = variable_of(state)
    if variable is not None:  # what a verify compile keeps pending instead of writing the new state (lazy_commit.py)
        for node, part in zip((few_k, few.deltas, few.cumulative), RECURRENT_PARTS):
            tag(node, variable, part)
    merge_rows(layer.o_out.output(0), [few.out.output(0), out.output(0)], o_readers)
    merge_rows(layer.state_out.output(0), [few.state.output(0), new_state.output(0)], state_readers)


def _drop_state_reorders(model: ov.Model) -> None:
    """Read each fixed-size state (every dimension static but the batch: the DeltaNet recurrent and conv states, not
    the KV caches) without its beam reorder, the identity for one sequence."""
    beams = [p for p in model.get_parameters() if "beam_idx" in p.output(0).get_names()]
    for op in model.get_ordered_ops():
        shape = op.get_output_partial_shape(0) if is_op(op, "ReadValue") else None
        if shape is None or shape.rank.is_dynamic or not all(d.is_static for d in list(shape)[1:]):
            continue
        for target in list(op.output(0).get_target_inputs()):
            gather = target.get_node()
            axis = gather.input_value(2).get_node() if is_op(gather, "Gather") else None
            if (axis is not None and gather.input_value(1).get_node() in beams and is_op(axis, "Constant")
                    and int(axis.get_data().ravel()[0]) == 0):
                for reader in list(gather.output(0).get_target_inputs()):
                    reader.replace_source_output(op.output(0))


def one_token_deltanet(model: ov.Model, shift_conv: bool = True) -> int:
    """Give every exporter DeltaNet Loop of `model` a one-token path (see the module doc), and with `shift_conv` its
    conv window a one-token shift (engine/graphs/conv_step.py; off only to measure without it); return how many Loops.

    A Loop that is not laid out as optimum-intel 2.2 exports it is left as it is, and so is a model with none (its
    states keep their beam reorder too).
    """
    layers = [layer for op in model.get_ordered_ops() if is_op(op, "Loop") and (layer := _match(op)) is not None]
    if not layers:
        return 0
    _drop_state_reorders(model)  # before the rewrite: each Loop then reads its state as the ReadValue gives it
    # The layers' conv windows get a one-token path too: a shift, not the reference kernel's Concat
    # (engine/graphs/conv_step.py). The rows are routed from the first window's input, which precedes every path.
    windows = conv_windows(model) if shift_conv else []
    routing = _Routing.of(window_input(windows[0]) if windows else layers[0].sequences[0].get_source_output())
    for layer in layers:
        _rewrite(layer, routing)
    shift_conv_windows(windows, routing.tokens.output(0), routing.sequence_rows.output(0), routing.step_rows.output(0))
    model.validate_nodes_and_infer_types()
    return len(layers)
