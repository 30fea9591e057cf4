"""The verify compile's request where its graph commits lazily (engine/graphs/lazy_commit.py): the last verify's chunk
kept pending on the host and fed back with the count of its tokens that were kept.

While the state lives here, the DeltaNet state variables hold the state before the last verify's chunk, and `kept`
says how many of that chunk's tokens belong to the conversation: all of them after a verify, fewer after a rollback
(keep()). Before the state moves to another compile the pending tokens are committed here on the host, with the graph's
formula in f32 (commit()); a state moved in has nothing pending.
"""

from __future__ import annotations

import numpy as np
import openvino as ov

from ..graphs.lazy_commit import KEPT, NEXT, PendingState
from .step_request import StepRequest


class LazyVerifyRequest(StepRequest):
    """A StepRequest whose forwards leave their chunk pending (see the module doc)."""

    def __init__(self, compiled: ov.CompiledModel, pending: list[PendingState], width: int) -> None:
        super().__init__(compiled)
        self.width = width
        self.pending = pending
        shapes = {port.get_any_name(): port.get_partial_shape() for port in compiled.inputs}
        names = [name for state in pending for name in state.inputs]
        self._parts = {name: np.zeros(shapes[name].to_shape(), dtype=np.float32) for name in names}
        self._kept = np.zeros(1, dtype=np.int64)  # of the pending chunk's tokens, how many the conversation has
        # Bound once over these arrays (the request reads them in place at each infer): a forward's feed is then the
        # layout's inputs alone, and the pending chunk is copied once, into them, after it (on the demo model, where a
        # forward takes ~1 ms, a feed of fresh tensors each time cost ~0.1 ms a verify).
        for name, array in [(KEPT, self._kept), *self._parts.items()]:
            self.request.set_tensor(name, ov.Tensor(array, shared_memory=True))

    def received(self) -> None:
        """After a forward: its chunk is pending, every token of it kept until keep() says otherwise."""
        for name, part in self._parts.items():
            np.copyto(part, self.request.get_tensor(name + NEXT).data)
        self._kept[0] = self.width

    def keep(self, count: int) -> None:
        """Only the first `count` tokens of the last forward's chunk stay (a rollback of the rest)."""
        if not 0 <= count <= self.width:
            raise ValueError(f"keep must be in 0..{self.width} (got {count})")
        self._kept[0] = count

    def take(self, main: ov.InferRequest) -> ov.InferRequest:
        if not self.live:
            self._clear()
        return super().take(main)

    def forget(self) -> None:
        self._clear()
        super().forget()

    def give_back(self, main: ov.InferRequest) -> ov.InferRequest:
        if self.live:
            self.commit()
        return super().give_back(main)

    def commit(self) -> None:
        """The pending tokens written into the states here (what the next forward's graph would do first)."""
        count = int(self._kept[0])
        if count:
            states = {state.name: state for state in self.request.query_state()}
            for pending in self.pending:
                variable = states[pending.variable_id]
                parts = [self._parts[name] for name in pending.inputs]
                committed = (_recurrent(variable.state.data, parts, count) if pending.kind == "recurrent"
                             else _conv(variable.state.data, parts, count))
                variable.state = ov.Tensor(np.ascontiguousarray(committed, dtype=np.float32))
        self._clear()

    def _clear(self) -> None:
        for part in self._parts.values():
            part.fill(0.0)
        self._kept[0] = 0


def _recurrent(state: np.ndarray, parts: list[np.ndarray], count: int) -> np.ndarray:
    """S_n = e^(G_n)·S_0 + K[:n]ᵀ·(e^(G_n − G[:n]) ⊙ Δ[:n]) (engine/graphs/lazy_commit.py; parts K, Δ, G), in
    f32 as the graph."""
    keys, deltas, cumulative = parts
    reached = cumulative[:, :, count - 1 : count]  # G_n [1,H,1]
    weights = np.exp(np.minimum(reached - cumulative[:, :, :count], np.float32(0)))  # [1,H,n]
    carried = np.matmul(keys[:, :, :count].transpose(0, 1, 3, 2), weights[..., None] * deltas[:, :, :count])
    return state * np.exp(reached)[..., None] + carried


def _conv(state: np.ndarray, parts: list[np.ndarray], count: int) -> np.ndarray:
    """The conv window after the chunk's first n tokens: columns n…n+K−1 of [window; chunk]."""
    (chunk,) = parts
    kernel = state.shape[2]
    return np.concatenate([state, chunk], axis=2)[:, :, count : count + kernel]
