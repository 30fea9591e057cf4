"""Where the conversation's state lives when compiles share it: the runner's (prefill chunks, snapshots, verifies of
another width) and its side compiles fixed at one width (engine/graphs/one_token.py): the one-token steps', and the
verifies' once a request drafts (runner.prepare_verify).

Each compile's infer request keeps states of its own. The state is live in exactly one of them; it moves (every
state copied across, once) when another one is next needed: into the step request before the first step after a
prefill, back before the next prefill or snapshot; into the verify request before the first verify of a drafted loop,
where it stays while verifies follow each other (a rollback trims it there). A think decision moves it twice (the
prompt, then the reasoning steps; the forced close, then the answer), not once per token.
"""

from __future__ import annotations

import openvino as ov


def _copy_states(source: ov.InferRequest, target: ov.InferRequest) -> None:
    # get_state returns a copy, set_state copies it in at once (kept, such a tensor is overwritten a few infers later)
    states = {state.name: state.state for state in source.query_state()}
    for state in target.query_state():
        state.state = states[state.name]


class StepRequest:
    """The step compile's infer request, and whether it holds the live state."""

    def __init__(self, compiled: ov.CompiledModel) -> None:
        self.compiled = compiled
        self.inputs = {port.get_any_name() for port in compiled.inputs}
        self.request = compiled.create_infer_request()
        self.live = False
        self.constants_memory: object = None  # what the compile's constants share memory with (native_op's weights), kept alive

    def take(self, main: ov.InferRequest) -> ov.InferRequest:
        """The step request, holding the state (moved from `main` if `main` held it)."""
        if not self.live:
            _copy_states(main, self.request)
            self.live = True
        return self.request

    def forget(self) -> None:
        """The runner's request holds the state now (reset or restored there): nothing to move back."""
        self.live = False

    def give_back(self, main: ov.InferRequest) -> ov.InferRequest:
        """`main`, holding the state (moved back if the step request held it)."""
        if self.live:
            _copy_states(self.request, main)
            self.live = False
        return main
