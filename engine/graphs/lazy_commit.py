"""Verify forwards that commit their tokens to the DeltaNet states one forward later, once it is known how many
were kept: a rejected draft then costs no snapshot, no restore and no replay.

A drafted loop verifies a token and its drafts in one forward of fixed width W (engine/graphs/one_token.py's
fixed_width_graph, the few-token path of engine/graphs/few_tokens.py). Which of the W tokens are kept is known only
after the forward, from its logits. Committing all W and undoing the rejected ones means a copy of every recurrent
and conv state before each verify (~20 MB at 0.8B) and a restore after a rejection, and the kept tokens then had to be
fed again. The recurrent state after any prefix of the chunk is cheap to form from what the chunk computed anyway
(few_tokens.py: with G = cumsum(g) over the chunk and Δ its deltas)

    S_n = e^(G_n)·S_0 + K[:n]ᵀ·(e^(G_n − G[:n]) ⊙ Δ[:n])        (S_W is the chunk's own S_T)

and the conv window after n tokens is columns n…n+K−1 of [window before; the chunk's inputs]. So the verify graph
does not write S_T: its state variables keep the state before the chunk, and it hands the chunk's K, Δ, G and conv
inputs out (`…/pending/…/next`, ~16 KB a layer). The next forward takes them back in with the count n kept (KEPT)
and forms S_n first — one read and one write of each state, the pass that wrote S_T before — then runs its own chunk
from S_n. n = 0 with zeros is the identity (the first verify after the state moved in). The full-attention caches are
trimmed as before (engine/runners/runner.py), and where the state leaves the verify compile the pending chunk is
committed on the host (engine/runners/lazy_verify.py): the same formula in f32.

The parts are found by name: decode.py and conv_step.py tag the few-token path's K, Δ, G and the conv window's chunk
with the state variable they belong to (tag()). A graph in which any DeltaNet state lacks its tags, or has them with
a shape not fixed at W, is left as it is (verifies then snapshot and restore).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import openvino as ov
import openvino.opset13 as ops

from .building import i64, is_op

KEPT = "lazy_commit.kept"  # [1] i64: how many of the previous forward's tokens to commit before this forward's
NEXT = "/next"  # an output's name: the pending part's input name and this
RECURRENT_PARTS = ("keys", "deltas", "cumulative")  # [1,H,W,Dk], [1,H,W,Dv], [1,H,W]
CONV_PARTS = ("chunk",)  # [1,C,W]


def pending_name(variable_id: str, part: str) -> str:
    return f"{variable_id}/pending/{part}"


def tag(node: ov.Node, variable_id: str, part: str) -> None:
    """Name `node` as `part` of the pending chunk of `variable_id`'s state (found again by commit_lazily)."""
    node.set_friendly_name(pending_name(variable_id, part))


def variable_of(output: ov.Output) -> str | None:
    """The state variable `output` reads, where it is a ReadValue's."""
    node = output.get_node()
    return node.get_variable_id() if is_op(node, "ReadValue") else None


@dataclass(frozen=True)
class PendingState:
    """One DeltaNet state of a lazy verify graph: its variable and the names of its pending parts' inputs."""

    variable_id: str
    kind: str  # "recurrent" or "conv"
    inputs: tuple[str, ...]  # pending_name(variable_id, part) for each part, in RECURRENT_PARTS / CONV_PARTS order


def _static(output: ov.Output) -> list[int] | None:
    shape = output.get_partial_shape()
    return [d.get_length() for d in shape] if shape.is_static else None


def _pending_input(step: ov.Model, name: str, like: ov.Output) -> ov.Node:
    parameter = ops.parameter(like.get_partial_shape(), ov.Type.f32, name=name)
    parameter.output(0).get_tensor().set_names({name})
    step.add_parameters([parameter])
    return parameter


def _hand_out(step: ov.Model, output: ov.Output, name: str) -> None:
    result = ops.result(output)
    result.output(0).get_tensor().set_names({name + NEXT})
    step.add_results([result])


def _recurrent_committed(state: ov.Output, parts: list[ov.Node], kept: ov.Node, width: int) -> ov.Node:
    """S_n from the state before the previous chunk and that chunk's K, Δ, G (`parts`; see the module doc)."""
    keys, deltas, cumulative = parts
    heads = cumulative.get_output_partial_shape(0)[1].get_length()
    padded = ops.concat([ops.constant(np.zeros((1, heads, 1), dtype=np.float32)), cumulative], 2)  # G_0 = 0
    reached = ops.gather(padded, kept, i64(2))  # G_n [1,H,1]
    before = ops.convert(ops.less(i64(np.arange(width)), kept), ov.Type.f32)  # the n committed tokens
    weights = ops.multiply(ops.exp(ops.minimum(ops.subtract(reached, cumulative), ops.constant(np.float32(0)))), before)
    last = i64([-1])
    return ops.add(ops.multiply(state, ops.unsqueeze(ops.exp(reached), last)),
                   ops.matmul(keys, ops.multiply(ops.unsqueeze(weights, last), deltas), True, False))


def _conv_committed(state: ov.Output, parts: list[ov.Node], kept: ov.Node) -> ov.Node:
    """The conv window after the previous chunk's first n tokens: columns n…n+K−1 of [window; chunk]."""
    (chunk,) = parts
    kernel = state.get_partial_shape()[2].get_length()
    return ops.gather(ops.concat([state, chunk], 2), ops.add(kept, i64(np.arange(kernel))), i64(2))


def commit_lazily(step: ov.Model, width: int) -> list[PendingState]:
    """Make the fixed-width verify graph `step` commit lazily (see the module doc); return its pending states, or []
    where the graph is left as it is."""
    reads = {op.get_variable_id(): op for op in step.get_ordered_ops() if is_op(op, "ReadValue")}
    assigns = {op.get_variable_id(): op for op in step.get_ordered_ops() if is_op(op, "Assign")}
    named = {op.get_friendly_name(): op for op in step.get_ordered_ops()}
    plan: list[tuple[str, str, list[ov.Node]]] = []
    for variable_id, read in reads.items():
        if _static(read.output(0)) is None:
            continue  # a full-attention cache (it grows): trimmed, never pending
        for kind, parts in (("recurrent", RECURRENT_PARTS), ("conv", CONV_PARTS)):
            nodes = [named[name] for part in parts if (name := pending_name(variable_id, part)) in named]
            if len(nodes) == len(parts):
                break
        else:
            return []  # a fixed-size state whose chunk cannot be found: no lazy commits at all
        sizes = [_static(node.output(0)) for node in nodes]
        if variable_id not in assigns or any(size is None or size[0] != 1 or size[2] != width for size in sizes):
            return []
        plan.append((variable_id, kind, nodes))
    if not plan:
        return []
    kept = ops.parameter([1], ov.Type.i64, name=KEPT)
    kept.output(0).get_tensor().set_names({KEPT})
    step.add_parameters([kept])
    pending = []
    for variable_id, kind, nodes in plan:
        parts = RECURRENT_PARTS if kind == "recurrent" else CONV_PARTS
        names = tuple(pending_name(variable_id, part) for part in parts)
        state = reads[variable_id].output(0)
        readers = list(state.get_target_inputs())
        inputs = [_pending_input(step, name, node.output(0)) for name, node in zip(names, nodes)]
        committed = (_recurrent_committed(state, inputs, kept, width) if kind == "recurrent"
                     else _conv_committed(state, inputs, kept))
        for reader in readers:  # this forward's chunk runs from the committed state ...
            reader.replace_source_output(committed.output(0))
        # ... which is what the variable keeps: this chunk stays pending (its own S_T has no reader left)
        assigns[variable_id].input(0).replace_source_output(committed.output(0))
        for name, node in zip(names, nodes):
            _hand_out(step, node.output(0), name)
        pending.append(PendingState(variable_id, kind, names))
    step.validate_nodes_and_infer_types()
    return pending
