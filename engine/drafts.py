"""Drafts for speculative decoding: prompt lookup, and the `draft` setting's choices.

Prompt lookup proposes the tokens that followed the most recent earlier occurrence of the text's last n tokens
(the longest n from MAX_NGRAM down to MIN_NGRAM that occurred before), in the prompt or in what was generated
so far. It costs a dictionary lookup per step. Its draft is a point mass (q = 1 on the proposed token): the
verifier (engine/speculative.py) accepts it with the exact model's probability, so the distribution the text
is drawn from is the exact model's whatever the drafts are.

`auto` is lookup that switches itself off for the rest of a request once its drafts are mostly rejected: a
verify of k drafts costs more than a one-token step (at 0.8B on a CPU 2 tokens 1.39×, 4 tokens 1.55× a step),
so drafts that are rarely kept would make decoding slower than plain.
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import SettingsError
from .vision_tokens import Item

MAX_NGRAM = 3
MIN_NGRAM = 2
MAX_DRAFT = 3  # drafts per verify: 4 tokens a forward, where the CPU's k-token forward is still cheap
AUTO_PROBE = 12  # auto judges its drafts after this many
AUTO_MIN_ACCEPTANCE = 0.4  # and keeps drafting only while at least this share of them was kept


class PromptLookup:
    """N-gram drafts from the text so far. Feed it the prompt (`start`), then every kept token (`push`)."""

    def __init__(self, max_ngram: int = MAX_NGRAM, min_ngram: int = MIN_NGRAM, max_draft: int = MAX_DRAFT) -> None:
        if not 1 <= min_ngram <= max_ngram or max_draft < 1:
            raise ValueError("need 1 ≤ min_ngram ≤ max_ngram and max_draft ≥ 1")
        self.max_ngram, self.min_ngram, self.max_draft = max_ngram, min_ngram, max_draft
        self.tokens: list[int] = []
        # n-gram → where its latest occurrence ended (exclusive), over the occurrences ending before the last token
        self._ends: dict[tuple[int, ...], int] = {}
        self.drafted = 0  # drafts proposed and verified in this request
        self.kept = 0  # of them, kept

    def start(self, prompt: Sequence[Item]) -> None:
        self.tokens, self._ends = [], {}
        for item in prompt:
            self.push(item if isinstance(item, int) else -1)  # an image position never matches a draft

    def push(self, token: int) -> None:
        end = len(self.tokens)
        for n in range(self.min_ngram, self.max_ngram + 1):
            if end >= n:
                self._ends[tuple(self.tokens[end - n : end])] = end
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

    def record(self, drafted: int, kept: int) -> None:
        self.drafted += drafted
        self.kept += kept


class AutoLookup(PromptLookup):
    """Prompt lookup that stops drafting for the request once its acceptance is measured low."""

    def propose(self, limit: int) -> list[int]:
        if self.drafted >= AUTO_PROBE and self.kept < AUTO_MIN_ACCEPTANCE * self.drafted:
            return []
        return super().propose(limit)


def make_drafter(draft: str, model: str = "this model") -> PromptLookup | None:
    """The drafter for a request's `draft` setting; None: plain decoding. SettingsError for `mtp`: no export
    keeps the checkpoint's MTP head yet (`decider convert` drops the `mtp.*` tensors as optimum-intel does)."""
    if draft == "none":
        return None
    if draft == "lookup":
        return PromptLookup()
    if draft == "auto":
        return AutoLookup()
    if draft == "mtp":
        raise SettingsError(f"draft mtp is not available for {model}: its export has no MTP head "
                            "(use --draft lookup or auto)", field="draft")
    raise SettingsError(f"draft must be one of none, lookup, auto, mtp (got {draft!r})", field="draft")
