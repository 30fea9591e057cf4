"""Speculative decoding that keeps the exact distribution: drafts checked by the exact model in one forward.

The loop has step_loop's contract (engine/generation/generate.py): the same Steps, the same stop / end / max_tokens /
cancel rules, penalties and masks run at every position exactly as plain decoding runs them, and a token is
told to the processors only when it is kept, so a rejected draft never enters a penalty window.

One round: the token just drawn, t, and up to MAX_DRAFT drafts d1..dk (engine/generation/drafts.py) go through one
forward with logits at its last k + 1 positions (runner.verify). Row i, after t d1..di, is processed as a
plain step would process it; the sampler's `verify` then yields this position's token given the draft d(i+1):
greedy keeps it when it is the argmax, sampled decoding keeps it with the exact probability p(d) and otherwise
draws from p without d (engine/generation/sampling.py verify_point_mass), so every yielded token is distributed as a
plain draw from the same logits. The first token that is not the draft ends the round and is the next t; when
every draft is kept, the row after dk draws the next t freely.

A round that did not keep all of its tokens rolls the state back to its last kept token (runner.rewind(keep):
full-attention KV caches trimmed; on the verify compile the DeltaNet states commit only the kept tokens at the next
forward, engine/graphs/lazy_commit.py). Where a runner restores a snapshot instead, the kept tokens are not
replayed on their own: they are fed again at the front of the next round's forward, where a few more tokens cost
little. A round without drafts and nothing to replay is a plain one-token step; a round with any is padded to a fixed width
(MAX_DRAFT + 1 tokens, logits at all of them; drafts.PromptLookup.fill), so the plugin sees two shapes only.

The logits a verify returns are the same model's over the same tokens, computed in one multi-token forward
instead of one-token steps: they agree with a step's to float rounding (measured ~1e-5 on the demo model's
logits), so greedy keeps plain decoding's tokens unless two logits tie that closely.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .drafts import PromptLookup
from ..core.errors import Cancelled, ContextLimitError
from ..core.logprobs import Distribution
from .processors import LogitsProcessor, accept, check_order, run_processors

from .step import Step

if TYPE_CHECKING:
    from ..runners.base import RunnerBase
    from ..model.vision_tokens import Item


class Verifier(Protocol):
    """A sampler that can also take a draft (engine/generation/sampling.py's Greedy and Chain)."""

    def __call__(self, distribution: Distribution) -> int: ...

    def verify(self, distribution: Distribution, draft: int, q=None) -> int: ...


class _Rules:
    """step_loop's rules for one drawn token: what ends the loop, what the processors are told."""

    def __init__(self, processors: Sequence[LogitsProcessor], stop_ids: frozenset[int], end_ids: frozenset[int],
                 max_tokens: int, top_logprobs: int | None) -> None:
        self.processors, self.stop_ids, self.end_ids = processors, stop_ids, end_ids
        self.max_tokens, self.top_logprobs = max_tokens, top_logprobs
        self.drawn = 0

    def draw(self, sampler: Verifier, logits: np.ndarray, draft: int | None, q=None) -> tuple[Step, bool]:
        """(the step at this position, whether the generation ends with it)."""
        penalized, scored, drawn_from = run_processors(self.processors, logits)
        distribution = Distribution(scored)
        final = distribution if drawn_from is scored else Distribution(drawn_from)
        token = sampler(final) if draft is None else sampler.verify(final, draft, q)
        self.drawn += 1
        stop = token in self.stop_ids  # never fed, never text, never in the window
        ends = stop or token in self.end_ids or self.drawn >= self.max_tokens
        if not stop:
            accept(self.processors, token)
            ends = ends or any(p.finished for p in self.processors)
        entry = distribution.entry(token, self.top_logprobs) if self.top_logprobs is not None else None
        return Step(token, entry, penalized), ends


def _verify(runner: RunnerBase, drafter: PromptLookup, fed: list[int], drafts: list[int], room: int,
            ) -> tuple[int, list[int], np.ndarray]:
    """One forward of `fed` and the drafts padded to the drafter's fixed width: (how many tokens came before the drafts,
    the drafts as fed, the rows that check them and the one after)."""
    drafts = drafter.fill(drafts, min(room, drafter.max_draft + 1 - len(fed)))
    width = len(fed) + len(drafts)
    # every position of a full-width forward has logits: one shape for the head too
    positions = width if width == drafter.max_draft + 1 else len(drafts) + 1
    return len(fed), drafts, runner.verify(fed + drafts, positions)[-(len(drafts) + 1):]


def drafted_loop(
    runner: RunnerBase,
    prompt_ids: Sequence[Item],
    sampler: Verifier,
    drafter: PromptLookup,
    *,
    max_tokens: int,
    processors: Sequence[LogitsProcessor] = (),
    stop_ids: frozenset[int] = frozenset(),
    checkpoints: Sequence[int] = (),
    top_logprobs: int | None = None,
    end_ids: frozenset[int] = frozenset(),
    should_stop: Callable[[], bool] | None = None,
) -> Generator[Step, None, None]:
    """step_loop with drafts: the same tokens' distribution, fewer forwards where drafts are kept."""
    check_order(processors)
    rules = _Rules(processors, stop_ids, end_ids, max_tokens, top_logprobs)
    runner.prepare_verify(drafter.max_draft + 1)  # the width _verify pads every forward to
    rows = runner.prefill(prompt_ids, checkpoints)[None, :]
    drafter.start(prompt_ids)
    drafter.attach(sampler)
    drafts: list[int] = []  # rows[i] checks drafts[i]; the row after the last draft draws freely
    real = 0  # of the drafts, how many the drafter proposed (the rest pad the forward to its fixed width)
    pending: list[int] = []  # kept tokens the state lost to a rollback: fed at the front of the next forward
    outstanding = False  # a verify whose tokens are not all settled yet (rewind() undoes it)
    # this round's start (auto compares round speeds); the last forward: a step; the last verify's tokens before its drafts
    started, plain_before, fed = 0.0, False, 0
    try:
        while True:
            hidden = runner.hidden_rows(len(rows)) if drafter.wants_hidden else None  # each row's, for the MTP head
            for i, row in enumerate(rows):
                if should_stop is not None and should_stop():
                    raise Cancelled("generation cancelled")
                draft = drafts[i] if i < len(drafts) else None
                step, ends = rules.draw(sampler, row, draft, drafter.q(i) if draft is not None else None)
                if step.token_id != draft or ends:
                    break
                drafter.push(step.token_id)
                drafter.seen(hidden[i] if hidden is not None else None)
                yield step
            kept = i if draft is not None else len(drafts)
            drafter.record(real, min(real, kept + (draft is not None and step.token_id == draft)))  # pads not counted
            if draft is not None:  # a draft was not kept (or ended the text): back to the last kept token
                pending = runner.rewind(keep=fed + kept)
            if outstanding:  # a verify round: its forward, the tokens it yielded and the rollback
                drafter.timed(True, i + 1, time.perf_counter() - started)
            outstanding = False
            if ends:
                yield step
                return
            token = step.token_id
            drafter.push(token)
            drafter.seen(hidden[i] if hidden is not None else None)
            room = min(runner.context_length - len(runner.history) - len(pending) - 2, max_tokens - rules.drawn - 1)
            started = time.perf_counter()  # a round's cost includes its drafting (the MTP head's steps)
            drafts = drafter.propose(room)
            real = len(drafts)
            try:
                if drafts or pending:
                    fed, drafts, rows = _verify(runner, drafter, pending + [token], drafts, room)
                    real = min(real, len(drafts))
                    outstanding, pending = True, []
                else:
                    runner.start_step(token)  # one token: the plain step, computed while the step is handed out
            except ContextLimitError:
                yield step
                return
            yield step
            if not outstanding:
                rows = runner.finish_step()[None, :]
                if plain_before:  # a step after a step: one after a verify pays for the plugin's change of shape
                    drafter.timed(False, 1, time.perf_counter() - started)
            plain_before = not outstanding
    except BaseException:
        # a consumer that stops (or a cancel) leaves the state holding exactly the history
        if outstanding:
            runner.rewind()
        else:
            runner.settle()
        raise
