"""Drafts for speculative decoding: prompt lookup (the `draft` setting's choice: engine/generation/drafter_choice.py).

Prompt lookup proposes the tokens that followed the most recent earlier occurrence of the text's last n tokens
(the longest n from MAX_NGRAM down to MIN_NGRAM that occurred before), in the prompt or in what was generated
so far. It costs a dictionary lookup per step. Its draft is a point mass (q = 1 on the proposed token): the
verifier (engine/generation/speculative.py) accepts it with the exact model's probability, so the distribution the text
is drawn from is the exact model's whatever the drafts are.

`auto` is lookup's drafts, and where the export kept an MTP head the head's when lookup has none
(engine/generation/mtp_drafts.AutoMtp), pausing a source for AUTO_RETRY tokens (doubling while probes keep failing)
whenever its drafts are measured not to pay (`gated`): mostly rejected, or its verify rounds yielding fewer tokens
per second than plain steps (a verify of k drafts costs more than a one-token step: at 0.8B on a CPU 4 tokens
1.3×; on a tiny model a multi-token forward costs several steps). What auto measured (AutoState, per source) is
kept on the runner for its next request. The timing makes auto's choice depend on the machine: a seed
repeats greedy text under auto, but sampled text only under `none` or `lookup` (drafting changes which random
numbers a draw uses, never the distribution).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..model.vision_tokens import Item

MAX_NGRAM = 3
MIN_NGRAM = 2
MAX_DRAFT = 3  # drafts per verify: 4 tokens a forward, where the CPU's k-token forward is still cheap
AUTO_PROBE = 12  # auto judges its drafts after this many
AUTO_MIN_ACCEPTANCE = 0.4  # and keeps drafting only while at least this share of them was kept
AUTO_MIN_STEPS = 4  # plain steps timed before auto compares their speed with its verify rounds'
AUTO_RETRY = 32  # tokens auto decodes plainly before it drafts again after a probe that did not pay
AUTO_RETRY_MAX = 1024  # ... doubled after each such probe up to this (a passing probe starts again at AUTO_RETRY)
# A probe whose first AUTO_EARLY drafts were all rejected ends there: on the 0.8B geometry with drafts that never
# match (bench/w_draft, 2026-12-05 quiet), a 12-draft probe every 32 tokens made auto 0.77x plain decoding.
AUTO_EARLY = 4


class PromptLookup:
    """N-gram drafts from the text so far. Feed it the prompt (`start`), then every kept token (`push`)."""

    def __init__(self, max_ngram: int = MAX_NGRAM, min_ngram: int = MIN_NGRAM, max_draft: int = MAX_DRAFT) -> None:
        if not 1 <= min_ngram <= max_ngram or max_draft < 1:
            raise ValueError("need 1 ≤ min_ngram ≤ max_ngram and max_draft ≥ 1")
        self.max_ngram, self.min_ngram, self.max_draft = max_ngram, min_ngram, max_draft
        self.tokens: list[int] = []
        # n-gram → where its latest occurrence ended (exclusive), over the occurrences ending before the last token
        self._ends: dict[tuple[int, ...], int] = {}
        self._next: dict[int, int] = {}  # token → the token after its latest occurrence that has one
        self.drafted = 0  # drafts proposed and verified in this request
        self.kept = 0  # of them, kept

    def start(self, prompt: Sequence[Item]) -> None:
        self.tokens, self._ends, self._next = [], {}, {}
        for item in prompt:
            self.push(item if isinstance(item, int) else -1)  # an image position never matches a draft

    def push(self, token: int) -> None:
        end = len(self.tokens)
        for n in range(self.min_ngram, self.max_ngram + 1):
            if end >= n:
                self._ends[tuple(self.tokens[end - n : end])] = end
        if end:
            self._next[self.tokens[end - 1]] = int(token)
        self.tokens.append(int(token))

    def propose(self, limit: int) -> list[int]:
        """Up to min(limit, max_draft) tokens that may follow the text so far; [] when nothing matches."""
        limit = min(limit, self.max_draft)
        if limit <= 0:
            return []
        tokens = self.tokens
        for n in range(self.max_ngram, self.min_ngram - 1, -1):
            end = self._ends.get(tuple(tokens[-n:])) if len(tokens) >= n else None
            if end is not None:
                draft = tokens[end : end + limit]
                cut = next((i for i, t in enumerate(draft) if t < 0), len(draft))
                return draft[:cut]
        return []

    def fill(self, drafts: list[int], count: int) -> list[int]:
        """`drafts` padded to `count` tokens: a verify forward of a fixed width (the CPU plugin re-prepares its
        graph for every new shape, measured about half a step on the demo model). The pads follow the last token's
        latest continuation (a one-token match), else repeat it: a pad is kept only as often as the model draws it."""
        padded = list(drafts[: max(count, 0)])
        while len(padded) < count:
            last = padded[-1] if padded else self.tokens[-1]
            follower = self._next.get(last, last)
            padded.append(follower if follower >= 0 else last)
        return padded

    def record(self, drafted: int, kept: int) -> None:
        self.drafted += drafted
        self.kept += kept

    def timed(self, drafted: bool, tokens: int, seconds: float) -> None:
        """A forward's wall time and the tokens it yielded (drafted: a verify round; else a plain step)."""

    wants_hidden = False  # the exact model's hidden states are handed to `seen` (the MTP head's drafts)

    def attach(self, sampler: object) -> None:
        """The request's sampler (a drafter that draws from a distribution shapes it by the sampler's stages)."""

    def seen(self, hidden) -> None:
        """The exact model's last hidden state before the token just pushed (only where wants_hidden)."""

    def q(self, index: int):
        """The distribution draft `index` was drawn from; None: a point mass (every lookup draft)."""
        return None


@dataclass
class AutoState:
    """What auto has measured on one runner, kept across its requests (the runner's `auto_states`): whether drafting
    is paused and for how long, the recent drafts' acceptance, the speeds of plain steps and verify rounds. Why across
    requests: a model and machine on which drafting does not pay (a tiny model, where a verify round costs several
    steps; a head whose drafts are rejected) made every request probe again, where the doubling pauses keep one long
    request near 1.0x (bench/w_draft, tenth pass: at 0.8B with a random head auto went 0.86x → 0.99x plain decoding)."""

    off: bool = False
    idle: int = 0  # tokens decoded plainly since drafting paused
    window: list[int] = field(default_factory=lambda: [0, 0])  # drafted, kept: recent drafts (halved as it grows)
    rates: dict[bool, list[float]] = field(default_factory=lambda: {True: [0, 0.0], False: [0, 0.0]})  # drafted? → [tokens, seconds]
    steps: int = 0  # plain steps timed
    retry: int = AUTO_RETRY  # plain tokens before the next probe (doubles while probes fail)


def gated(state: AutoState, propose: Callable[[], list[int]]) -> list[int]:
    """`propose()`'s drafts unless `state` says drafting does not pay now: paused, or just judged (after AUTO_PROBE
    drafts, or AUTO_EARLY all rejected) mostly rejected or slower than plain steps. A pause ends with a probe after
    `retry` tokens; a probe that fails too doubles the next pause (probes cost verify rounds)."""
    if state.off:
        state.idle += 1
        if state.idle < state.retry:
            return []
        state.retry = min(2 * state.retry, AUTO_RETRY_MAX)
        state.off, state.idle, state.window, state.rates[True] = False, 0, [0, 0], [0, 0.0]
    drafted, kept = state.window
    if drafted >= AUTO_PROBE:
        (drafted_tokens, drafted_s), (plain_tokens, plain_s) = state.rates[True], state.rates[False]
        slower = state.steps >= AUTO_MIN_STEPS and drafted_tokens * plain_s < plain_tokens * drafted_s
        state.off = kept < AUTO_MIN_ACCEPTANCE * drafted or slower
        if not state.off:
            state.retry = AUTO_RETRY
        if drafted >= 4 * AUTO_PROBE:
            state.window = [drafted // 2, kept // 2]
    elif drafted >= AUTO_EARLY and kept == 0:
        state.off = True
    return [] if state.off else propose()


class AutoLookup(PromptLookup):
    """Prompt lookup that pauses drafting while it is measured not to pay, and tries again after AUTO_RETRY tokens
    (a text often starts repeating itself only after a while). `state`: the runner's AutoState for lookup (a request
    then starts where the runner's last one left off); None: this request's own."""

    def __init__(self, *args, state: AutoState | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.state = state if state is not None else AutoState()
        self._round = self.state  # the state whose drafts the round in flight verifies

    @property
    def off(self) -> bool:
        return self.state.off

    def states(self) -> tuple[AutoState, ...]:
        """Every source's state (a plain step's speed is every source's yardstick)."""
        return (self.state,)

    def record(self, drafted: int, kept: int) -> None:
        super().record(drafted, kept)
        self._round.window[0] += drafted
        self._round.window[1] += kept

    def timed(self, drafted: bool, tokens: int, seconds: float) -> None:
        for state in (self._round,) if drafted else self.states():
            state.rates[drafted][0] += tokens
            state.rates[drafted][1] += seconds
            state.steps += not drafted

    def propose(self, limit: int) -> list[int]:
        self._round = self.state
        return gated(self.state, lambda: PromptLookup.propose(self, limit))
