"""Generation: a generator that yields one step at a time, and the assembly of its steps into text.

`generate_step` is the loop every front end shares. The limit is checked before each draw, so
max_tokens=N costs exactly N draws and N-1 decode forwards (max_tokens=1: the prefill and nothing
else). Each decode forward starts before its step is handed out, so the step's logprobs and whatever
the consumer does with it overlap the device's work; a consumer that stops early waits for that one
forward (its state stays consistent with the history). Each step runs the request's logits processors
(engine/generation/processors.py), hands what they leave to the request's sampler (engine/generation/sampling.py's
make_sampler: the loop never reads the sampling settings) and tells the processors about a token only
when it is kept as generated text: a stop token, a forced token or a draw that is thrown away never
enters the penalty window.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import Cancelled, ContextLimitError, SettingsError
from .logit_bias import check_logit_bias
from ..core.logprobs import MAX_TOP_LOGPROBS, Alternative, Distribution, TokenLogprob
from .processors import LogitsProcessor, Penalties, accept, check_order, make_processors, run_processors
from .drafter_choice import make_drafter
from .drafts import PromptLookup
from .sampling import Chain, Greedy, Sampler, make_sampler
from .speculative import drafted_loop
from .step import Step
from ..core.settings import SamplingSettings
from ..constrained.structured import ResponseFormat, grammar_mask

if TYPE_CHECKING:  # the runner (and openvino) only for annotations: the dataclasses stay importable by the UI
    from ..runners.base import RunnerBase as ModelRunner  # any runner: dynamic or static shapes
    from ..model.vision_tokens import Item


def make_rng(seed: int | None) -> np.random.Generator:
    return np.random.default_rng(seed)


def generate_step(
    runner: ModelRunner,
    prompt_ids: Sequence[Item],
    sampling: SamplingSettings | Sampler,
    rng: np.random.Generator | None = None,
    *,
    max_tokens: int,
    processors: Sequence[LogitsProcessor] | None = None,
    allowed: Sequence[int] | np.ndarray | None = None,
    window: deque[int] | None = None,
    drafter: PromptLookup | None = None,
    **loop: Any,
) -> Generator[Step, None, None]:
    """The loop (`step_loop`) for one request, built the way mlx-lm's stream_generate builds its sampler and
    processors from keyword arguments: `sampling` is either settings — the sampler is make_sampler(settings,
    rng), the processors make_processors(settings, allowed=…) with penalties over `window` (a caller's deque,
    to read or continue the penalty window) — or a sampler already made, run with `processors` as given
    (none: the model's logits as they are). drafter: draft tokens and verify them in one exact forward
    (engine/generation/speculative.py) where the runner can; None, or a runner that cannot, decodes plainly. The
    remaining keywords are step_loop's."""
    if isinstance(sampling, SamplingSettings):
        if processors is not None:
            raise TypeError("with settings, generate_step makes the processors: pass allowed=/window=, or a sampler")
        sampler: Sampler = make_sampler(sampling, rng if rng is not None else make_rng(sampling.seed))
        processors = make_processors(sampling, allowed=allowed, penalties=Penalties.for_sampling(sampling, window))
    elif rng is not None or allowed is not None or window is not None:
        raise TypeError("a sampler carries its own generator; give its processors as processors=")
    else:
        sampler = sampling
    if drafter is not None and runner.verifies and isinstance(sampler, (Greedy, Chain)):
        return drafted_loop(runner, prompt_ids, sampler, drafter, max_tokens=max_tokens, processors=processors or (), **loop)
    return step_loop(runner, prompt_ids, sampler, max_tokens=max_tokens, processors=processors or (), **loop)


def step_loop(
    runner: ModelRunner,
    prompt_ids: Sequence[Item],
    sampler: Sampler,
    *,
    max_tokens: int,
    processors: Sequence[LogitsProcessor] = (),
    stop_ids: frozenset[int] = frozenset(),
    checkpoints: Sequence[int] = (),
    top_logprobs: int | None = None,
    end_ids: frozenset[int] = frozenset(),
    should_stop: Callable[[], bool] | None = None,
) -> Generator[Step, None, None]:  # a consumer that stops early closes it (the forward ahead settles)
    """Prefill, then draw up to max_tokens tokens, feeding each kept token back.

    sampler: make_sampler(settings, rng), the draw. processors: the request's logits processors
    (make_processors builds them; none: the model's logits as they are); a caller that generates in
    phases passes the same ones on so earlier kept tokens still count. top_logprobs None: no capture;
    N ≥ 0: the draw's logprob plus N alternatives. stop_ids end the turn and are not kept; end_ids end
    this phase but are kept (accepted) text, e.g. the model's own </think> before the answer.
    """
    check_order(processors)
    logits = runner.prefill(prompt_ids, checkpoints)
    drawn = 0
    while drawn < max_tokens:
        if should_stop is not None and should_stop():
            raise Cancelled("generation cancelled")
        penalized, scored, drawn_from = run_processors(processors, logits)
        distribution = Distribution(scored)  # lazy: its logsumexp is computed only if logprobs are asked for
        token = sampler(distribution if drawn_from is scored else Distribution(drawn_from))
        drawn += 1
        stop = token in stop_ids  # a stop token ends the turn: never fed, never text, never in the window
        feeding = not stop and token not in end_ids and drawn < max_tokens
        if not stop:
            accept(processors, token)
            # a processor that is complete (a grammar whose JSON value is closed) ends the generation
            # here, before another forward is started for a token that could only be the end of turn
            feeding = feeding and not any(p.finished for p in processors)
        if feeding:
            try:
                # The device computes the next logits while this step's logprobs are taken and the step
                # is handed out (on NPU/GPU that host work then costs no time at all).
                runner.start_step(token)
            except ContextLimitError:
                feeding = False
        entry = distribution.entry(token, top_logprobs) if top_logprobs is not None else None
        try:
            yield Step(token, entry, penalized)
        except GeneratorExit:
            runner.settle()  # a consumer that stops here leaves state and history in step
            raise
        if not feeding:
            return
        logits = runner.finish_step()


# ----- assembling steps into a completion -----


@dataclass(frozen=True)
class ContentToken:
    """One token of the visible text with its logprob entry (OpenAI's logprobs.content[i])."""

    token_id: int
    token: str
    bytes: bytes
    logprob: float
    top: tuple[Alternative, ...]
    text_offset: int  # where its text starts in the content


@dataclass
class Delta:
    """What one step added: reasoning text, content text and the entries of the content tokens."""

    reasoning: str = ""
    content: str = ""
    logprobs: list[ContentToken] = field(default_factory=list)


@dataclass
class Completion:
    prompt_tokens: int
    content: str = ""
    reasoning: str | None = None
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[ContentToken] | None = None
    finish_reason: str = "length"
    # What made a "stop": the stop string matched, or None for an end of turn or a finished JSON value
    # (vLLM's field): a client handing a reasoning back needs to know whether `</think>` or the turn ended it.
    stop_reason: str | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def completion_tokens(self) -> int:
        return len(self.token_ids)


@dataclass(frozen=True)
class GenerationRequest:
    prompt_ids: tuple[Item, ...]  # token ids, and image tokens where a chat has pictures
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    max_tokens: int = 256
    think: bool = False  # the prompt opened a think block: text up to </think> is reasoning
    top_logprobs: int | None = None  # None: no logprobs
    stop: tuple[str, ...] = ()
    checkpoints: tuple[int, ...] = ()
    allowed: tuple[int, ...] | None = None  # constrain every draw to these ids (logprobs renormalise over them)
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias): added after the penalties; logprobs include it
    response_format: ResponseFormat | None = None  # JSON output: restricts the draw only, ends when the value is complete
    # List a generated end of turn's entry last (legacy completions: every token in usage has one, and a
    # scoring client counts on it); chat's logprobs.content stays one entry per content token.
    end_of_turn_entry: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or self.max_tokens < 1:
            raise SettingsError(f"max_tokens must be an integer ≥ 1 (got {self.max_tokens!r})")
        if self.top_logprobs is not None and not 0 <= self.top_logprobs <= MAX_TOP_LOGPROBS:
            raise SettingsError(f"top_logprobs must be in 0..{MAX_TOP_LOGPROBS} (got {self.top_logprobs!r})")
        if len(self.stop) > 4 or any(not isinstance(s, str) or not s for s in self.stop):
            raise SettingsError("stop takes up to 4 non-empty strings")
        object.__setattr__(self, "logit_bias", check_logit_bias(self.logit_bias))


class _Assembler:
    """Routes tokens to reasoning or content and keeps content entries aligned with content text."""

    def __init__(self, runner: ModelRunner, request: GenerationRequest, completion: Completion):
        self.tokenizer = runner.tokenizer
        self.request = request
        self.completion = completion
        self.in_reasoning = request.think and self.tokenizer.think_close is not None
        self.after_think = False
        self.reasoning_stream = self.tokenizer.stream()
        self.content_stream = self.tokenizer.stream()
        self.held = ""  # content text held back because it may be the start of a stop string
        self.held_entries: list[ContentToken] = []
        self.end_entry: ContentToken | None = None  # a generated end of turn: counted in the usage, so listed last
        self.stopped = False
        if self.in_reasoning:
            completion.reasoning = ""
        if request.top_logprobs is not None:
            completion.logprobs = []

    def _entry(self, token: int, entry: TokenLogprob, offset: int) -> ContentToken:
        tok = self.tokenizer
        alternatives = tuple(
            Alternative(tok.token_text(a.token_id), a.token_id, a.logprob, tok.token_bytes(a.token_id))
            for a in entry.top
        )
        return ContentToken(token, tok.token_text(token), tok.token_bytes(token), entry.logprob, alternatives, offset)

    def add(self, step: Step) -> Delta:
        delta = Delta()
        token = step.token_id
        if token in self.tokenizer.stop_ids:
            # No text, but a generated token: a scoring client (lm-eval reads token_logprobs[ctxlen:-1])
            # needs its entry, as usage.completion_tokens counts it. Its offset is fixed when the text is.
            if step.entry is not None and self.request.end_of_turn_entry:
                self.end_entry = self._entry(token, step.entry, 0)
            return delta
        if self.in_reasoning:
            if token == self.tokenizer.think_close:
                self.in_reasoning = False
                self.after_think = True
                delta.reasoning = self.reasoning_stream.flush()
                self.completion.reasoning = ((self.completion.reasoning or "") + delta.reasoning).strip("\n")
                return delta
            delta.reasoning = self.reasoning_stream.push(token)
            self.completion.reasoning = (self.completion.reasoning or "") + delta.reasoning  # "" since the block opened
            return delta
        text = self.content_stream.push(token)
        if self.after_think:
            if not text.strip("\n"):
                return delta  # the blank line after </think>: formatting, never part of the answer
            self.after_think = False
            text = text.lstrip("\n")
        offset = len(self.completion.content) + len(self.held)
        if step.entry is not None:
            self.held_entries.append(self._entry(token, step.entry, offset))
        self.held += text
        return self._release(delta)

    def _release(self, delta: Delta, final: bool = False) -> Delta:
        held = self.held
        found = [(i, s) for i, s in ((held.find(s), s) for s in self.request.stop) if i >= 0]
        cut, matched = min(found) if found else (-1, None)
        if cut >= 0:
            held = held[:cut]
            self.stopped = True
            self.completion.stop_reason = matched
            ready, self.held = held, ""
        elif final or not self.request.stop:
            ready, self.held = held, ""
        else:
            # Hold back the longest tail that could still grow into a stop string.
            keep = max((k for s in self.request.stop for k in range(1, len(s)) if held.endswith(s[:k])), default=0)
            ready, self.held = held[: len(held) - keep], held[len(held) - keep :]
        # An entry goes out with the text it starts; a token still completing a character waits.
        boundary = len(self.completion.content) + len(ready)
        if final and not self.stopped:
            count = len(self.held_entries)
        else:
            count = sum(1 for e in self.held_entries if e.text_offset < boundary)
        entries, self.held_entries = self.held_entries[:count], self.held_entries[count:]
        if self.stopped:
            self.held_entries = []
        self.completion.content += ready
        delta.content += ready
        if self.completion.logprobs is not None:
            self.completion.logprobs.extend(entries)
            delta.logprobs.extend(entries)
        return delta

    def finish(self) -> Delta:
        delta = Delta()
        if self.in_reasoning:
            tail = self.reasoning_stream.flush()
            self.completion.reasoning = (self.completion.reasoning or "") + tail
            delta.reasoning = tail
        else:
            self.held += self.content_stream.flush()
        delta = self._release(delta, final=True)
        if self.end_entry is not None and self.completion.logprobs is not None and not self.stopped:
            end = replace(self.end_entry, text_offset=len(self.completion.content))  # it adds no text
            self.completion.logprobs.append(end)
            delta.logprobs.append(end)
        return delta


def stream_generation(
    runner: ModelRunner,
    request: GenerationRequest,
    rng: np.random.Generator | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[tuple[Delta, Completion]]:
    """Yield (delta, completion so far) per step; the last completion carries finish_reason and timings."""
    rng = rng if rng is not None else make_rng(request.sampling.seed)
    completion = Completion(prompt_tokens=len(request.prompt_ids))
    assembler = _Assembler(runner, request, completion)
    grammar = grammar_mask(request.response_format, runner.tokenizer) if request.response_format is not None else None
    drafter = make_drafter(request.sampling.draft, runner.folder.name, runner.mtp, runner.auto_states)
    started = time.perf_counter()
    first_token_at = None
    steps = generate_step(
        runner,
        request.prompt_ids,
        make_sampler(request.sampling, rng),
        max_tokens=request.max_tokens,
        stop_ids=runner.tokenizer.stop_ids,
        checkpoints=request.checkpoints,
        top_logprobs=request.top_logprobs,
        processors=make_processors(request.sampling, allowed=request.allowed, logit_bias=request.logit_bias, grammar=grammar),
        should_stop=should_stop,
        drafter=drafter,
    )
    try:
        for step in steps:
            if first_token_at is None:
                first_token_at = time.perf_counter()
            completion.token_ids.append(step.token_id)
            if step.token_id in runner.tokenizer.stop_ids or (grammar is not None and grammar.finished):
                completion.finish_reason = "stop"
            delta = assembler.add(step)
            if assembler.stopped:
                completion.finish_reason = "stop"
                yield delta, completion
                break
            yield delta, completion
    finally:
        steps.close()  # a step started ahead completes now, not whenever the generator is collected
    delta = assembler.finish()
    if assembler.stopped:  # a stop string completed only by the last, flushed bytes
        completion.finish_reason = "stop"
    ended = time.perf_counter()
    completion.timings = {
        "prefill_s": (first_token_at or ended) - started,
        "total_s": ended - started,
    }
    yield delta, completion


def generate(
    runner: ModelRunner,
    request: GenerationRequest,
    rng: np.random.Generator | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Completion:
    completion: Completion | None = None
    for _, completion in stream_generation(runner, request, rng, should_stop):
        pass
    if completion is None:  # the stream always ends on the finished completion
        raise RuntimeError("the generation ended without a completion")
    return completion
