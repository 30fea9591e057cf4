"""Drafts from the checkpoint's MTP head (engine/runners/mtp_head.py), in the drafts interface of engine/generation/drafts.py.

The head reads, for each position p, the embedding of token p and the exact model's last hidden state at p − 1,
and guesses token p + 1. Every token the exact model keeps comes with that hidden state (the runner's last_hidden
output of the forward that drew it: `seen`), so the drafter holds a window of (token, hidden, position) for the
latest WINDOW positions. A draft of k tokens runs the head k times: over the window, then over the window plus the
drafts so far, each draft fed with the head's own output state as its hidden (as vLLM chains its MTP steps).

Each draft is drawn from q, the head's distribution after the request's sampler stages (top-k, top-p, min-p,
temperature; greedy: its argmax), and q goes with it to the verifier (sampling.verify_distribution: accept with
min(1, p/q), else draw from the normalised max(0, p − q)): the kept text is distributed exactly as plain decoding's
whatever the head proposes. A drafted token is told to the penalties only once the exact model kept it
(engine/generation/speculative.py), so a rejected draft never enters a penalty window. Pads that fill a verify forward to
its fixed width are point masses (PromptLookup.fill), verified as such.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from .drafts import AUTO_MIN_STEPS, MAX_DRAFT, AutoLookup, AutoState, PromptLookup, gated
from ..core.logprobs import Distribution
from ..runners.mtp_head import MtpHead
from .sampling import Candidates, Chain, draw
from ..model.vision_tokens import Item

WINDOW = 16  # positions of exact hidden states the head attends over (its layer is recomputed over them per step)
# Drafts per verify: as many as lookup's, so every drafter verifies at one width and one verify compile serves them
# all (engine/runners/runner.prepare_verify compiles again for another width: alternating `lookup` and `mtp` requests
# measured 0.40x plain decoding on the demo). Each costs a head step: ~0.12x a plain step at 0.8B int8 right after a
# verify (bf16 head over 32,768 ids; ~0.07x back to back: engine/runners/mtp_head.py). Measured with the head's real
# steps in the loop at per-draft acceptance 0.65 (bench/w_acceptance.py, tenth pass): 2 drafts 1.34x plain, 3 drafts
# 1.22x at one thread (rounds overlapping: 1.14-1.42 / 1.20-1.31), 1.14x / 1.15x at two; at 0.8, 1.44x / 1.59x.
MTP_MAX_DRAFT = MAX_DRAFT


class MtpDrafts(PromptLookup):
    """Drafts from the MTP head; PromptLookup's bookkeeping (the text so far) pads a forward to its width."""

    wants_hidden = True

    def __init__(self, head: MtpHead, max_draft: int = MTP_MAX_DRAFT, window: int = WINDOW) -> None:
        super().__init__(max_draft=max_draft)
        self.head, self.window = head, window
        self._seen: deque[tuple[int, np.ndarray, int]] = deque(maxlen=window)  # (token, hidden before it, position)
        self._q: list[Candidates | None] = []
        self.sampler: object = None

    def attach(self, sampler: object) -> None:
        """The request's sampler: its stages shape q, its generator draws the drafts (greedy: argmax, no draw)."""
        self.sampler = sampler

    def start(self, prompt: Sequence[Item]) -> None:
        super().start(prompt)
        self._seen.clear()

    def seen(self, hidden: np.ndarray | None) -> None:
        """The exact model's hidden state at the position before the token just pushed (None: not known)."""
        if hidden is None:
            self._seen.clear()  # a gap: the window restarts from the next known position
            return
        self._seen.append((self.tokens[-1], hidden, len(self.tokens) - 1))

    def q(self, index: int) -> Candidates | None:
        """The distribution draft `index` was drawn from (None: a pad, a point mass)."""
        return self._q[index] if index < len(self._q) else None

    def _pick(self, logits: np.ndarray) -> tuple[int, Candidates | None]:
        if isinstance(self.sampler, Chain):
            q = self.sampler.candidates(Distribution(logits))
            return draw(q, self.sampler.draw.rng), q
        return int(np.argmax(logits)), None

    def propose(self, limit: int) -> list[int]:
        limit = min(limit, self.max_draft)
        self._q = []
        if limit <= 0 or not self._seen or self._seen[-1][2] != len(self.tokens) - 1:
            return []  # no exact hidden state for the latest token (a restored prompt): a plain step first
        ids = [entry[0] for entry in self._seen]
        hidden = [entry[1] for entry in self._seen]
        positions = [entry[2] for entry in self._seen]
        drafts: list[int] = []
        for _ in range(limit):
            logits, state = self.head.step(np.array(ids), np.stack(hidden), np.array(positions))
            token, q = self._pick(logits)
            drafts.append(token)
            self._q.append(q)
            ids.append(token)
            hidden.append(state)
            positions.append(positions[-1] + 1)
        return drafts


class AutoMtp(AutoLookup, MtpDrafts):
    """`--draft auto` where the export has an MTP head: lookup's drafts where the text repeats (free: a dictionary
    lookup, point masses), else the head's (a head step each), each source paused on its own whenever its rounds
    (draft steps included) are measured slower than plain steps or its drafts mostly rejected (drafts.gated), so a
    head that does not pay on this model and machine leaves lookup's drafts on. Measured on the demo (bench/w_draft,
    tenth pass): lookup 1.21–1.24x plain, the head 0.44–0.46x; judged together, as before, auto ran 0.95x.
    `state` / `head_state`: the runner's AutoStates for lookup and for the head (drafter_choice.make_drafter)."""

    def __init__(self, head: MtpHead, state: AutoState | None = None, head_state: AutoState | None = None) -> None:
        super().__init__(head, state=state)
        self.head_state = head_state if head_state is not None else AutoState()

    @property
    def off(self) -> bool:
        """The head's drafts are paused (lookup's pause: `state.off`)."""
        return self.head_state.off

    def states(self) -> tuple[AutoState, ...]:
        return (self.state, self.head_state)

    def propose(self, limit: int) -> list[int]:
        # The head always has a draft, so plain steps would never be timed and auto could not compare: the runner's
        # first few tokens under auto are plain steps (measured on the demo: without them auto ran its head at 0.48x
        # plain decoding's tokens per second, the head's rounds never compared with a step).
        if self.head_state.steps < AUTO_MIN_STEPS:
            return []
        drafts = super().propose(limit)  # lookup's, where the text repeats and lookup is not paused
        if drafts:
            self._q = []  # point masses
            return drafts
        self._round = self.head_state
        return gated(self.head_state, lambda: MtpDrafts.propose(self, limit))
