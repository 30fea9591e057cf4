"""Decisions: a question and options in, the chosen option and per-option confidence out.

Letter mode (default): one forward. The empty think block is part of the prefill and the answer
letter is drawn from the prefill logits under a constraint to the option letters. Every option's
full-vocabulary logprob is read from the same logits (after penalties, before temperature), so the
bars are the same whether the draw was greedy or sampled.

The chosen option is the one the shown bars favour (the debiased bars when permute ran), so the big
letter and the longest bar never disagree. `sample_choice` keeps the draw as the choice instead (variety
for a game's characters); the result then says it was drawn and which option was most likely.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .chat_template import close_think
from .decision_prompt import LABELS, DecisionPrompt, build_decision_prompt, letter_ids
from .errors import Cancelled, SettingsError
from .fast_reasoning import hand_over, reasoner_for
from .generate import generate_step, make_rng
from .info import EngineInfo
from .logprobs import Alternative, Distribution
from .processors import Penalties, make_processors
from .settings import SETTINGS, SamplingSettings
from .vision_preprocess import check_pixels

if TYPE_CHECKING:  # the runner (and openvino) only for annotations: the dataclasses stay importable by the UI
    from .runner import ModelRunner

MAX_OPTIONS = len(LABELS)
MAX_IMAGES = 8


@dataclass(frozen=True)
class DecisionRequest:
    question: str
    options: tuple[str, ...]
    system: str | None = None
    context: str | None = None
    think: bool = SETTINGS["think"].default
    reasoning_budget: int = SETTINGS["reasoning_budget"].default
    permute: bool = SETTINGS["permute"].default
    score_options: bool = SETTINGS["score_options"].default
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    alternatives: int = SETTINGS["alternatives"].default
    # Pixel arrays ([H, W, 3] uint8 RGB) shown before the context; not compared (arrays have no ==).
    images: tuple[np.ndarray, ...] = field(default=(), compare=False)
    sample_choice: bool = SETTINGS["sample_choice"].default  # draw the choice instead of taking the largest bar
    fast_reasoning: bool = SETTINGS["fast_reasoning"].default  # reasoning from a fast compile; the answer stays exact

    def __post_init__(self) -> None:
        if not isinstance(self.question, str) or not self.question.strip():
            raise SettingsError("the question is empty")
        options = tuple(o.strip() if isinstance(o, str) else o for o in self.options)
        if not options:
            raise SettingsError("no options: give 2 to 10")
        if any(not isinstance(o, str) or not o for o in options):
            raise SettingsError("an option is empty")
        if len(options) == 1:
            raise SettingsError("only one option: give 2 to 10")
        if len(options) > MAX_OPTIONS:
            raise SettingsError(f"{len(options)} options: at most {MAX_OPTIONS}")
        seen = set()
        for option in options:
            if option.casefold() in seen:
                raise SettingsError(f"duplicate option {option!r}")
            seen.add(option.casefold())
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "question", self.question.strip())
        for name in ("system", "context"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise SettingsError(f"{name} must be text")
            object.__setattr__(self, name, value.strip() or None if isinstance(value, str) else None)
        SETTINGS["reasoning_budget"].check(self.reasoning_budget)
        SETTINGS["alternatives"].check(self.alternatives)
        if not isinstance(self.images, (tuple, list)) or len(self.images) > MAX_IMAGES:
            raise SettingsError(f"images: give at most {MAX_IMAGES}")
        object.__setattr__(self, "images", tuple(check_pixels(image) for image in self.images))
        for name in ("think", "permute", "score_options", "sample_choice", "fast_reasoning"):
            SETTINGS[name].check(getattr(self, name))
        if self.think and self.score_options:
            raise SettingsError("word-option scoring reads the answer right after the prompt: turn think off")


@dataclass(frozen=True)
class OptionResult:
    label: str
    text: str
    logprob: float  # full-vocabulary logprob of the option (its letter, or its whole sequence)
    probability: float  # renormalised over the options
    debiased_probability: float | None = None  # averaged over cyclic rotations (permute)
    token_count: int = 1
    normalized_logprob: float | None = None  # per-token mean (word-option scoring)
    bound: str | None = None  # "upper": a remote server did not list it; logprob is the list's floor
    bar: str = "exact"  # what the bar is: "exact", "estimate" (a server's unconfirmed number) or "upper" (a bound)
    low: float | None = None  # the bar's possible range when it is not exact (a server's bounds), else None
    high: float | None = None

    @property
    def shown(self) -> float:
        """The value every surface shows for this option: debiased when permute ran, else the renormalised one."""
        return self.debiased_probability if self.debiased_probability is not None else self.probability


@dataclass
class DecisionResult:
    choice_index: int
    options: list[OptionResult]
    coverage: float
    mode: str  # "letters" or "words"
    reasoning: str | None
    alternatives: list[Alternative]
    timings: dict[str, float]
    usage: dict[str, int]
    history_id: int | None = None  # set by the app when the decision is recorded
    engine: EngineInfo | None = None  # which engine computed it and how exact its logprobs are (set by the service)
    choice_mode: str = "argmax"  # "argmax": the shown bars' favourite; "sampled": drawn (sample_choice)
    uncertain: bool = False  # the bars are bounds/estimates that do not settle which option is most likely
    reasoning_precision: str | None = None  # which precision drew the reasoning tokens (think mode; the service puts it in engine)

    @property
    def choice(self) -> OptionResult:
        return self.options[self.choice_index]

    @property
    def drawn(self) -> bool:
        return self.choice_mode == "sampled"

    @property
    def most_likely_index(self) -> int:
        """The option with the largest shown bar (the first on a tie)."""
        return int(np.argmax([o.shown for o in self.options]))

    @property
    def shown_field(self) -> str:
        """Which OptionResult field the bars show: where two exist, every surface names the one it shows."""
        return "debiased_probability" if any(o.debiased_probability is not None for o in self.options) else "probability"

    def to_dict(self) -> dict:
        likely = self.options[self.most_likely_index]
        return {
            "choice": {
                "label": self.choice.label, "index": self.choice_index, "text": self.choice.text,
                "probability": self.choice.shown, "mode": self.choice_mode, "uncertain": self.uncertain,
                "most_likely": {"label": likely.label, "index": self.most_likely_index, "text": likely.text,
                                "probability": likely.shown},
            },
            "shown": self.shown_field,
            "options": [asdict(o) for o in self.options],
            "coverage": self.coverage,
            "mode": self.mode,
            "reasoning": self.reasoning,
            "alternatives": [a.to_dict() for a in self.alternatives],
            "timings": self.timings,
            "usage": self.usage,
            "history_id": self.history_id,
            "engine": self.engine.to_dict() if self.engine is not None else {},
        }


class _Clock:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._last = self._start = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = self.timings.get(name, 0.0) + (now - self._last)
        self._last = now

    def split(self, first: str, first_seconds: float, rest: str) -> None:
        """Book the time since the last lap as `first_seconds` of `first` and the remainder as `rest`."""
        now = time.perf_counter()
        elapsed = now - self._last
        first_seconds = min(first_seconds, elapsed)
        self.timings[first] = self.timings.get(first, 0.0) + first_seconds
        self.timings[rest] = self.timings.get(rest, 0.0) + elapsed - first_seconds
        self._last = now

    def total(self) -> dict[str, float]:
        self.timings["total_s"] = time.perf_counter() - self._start
        return self.timings


@dataclass
class _LetterRead:
    distribution: Distribution  # unconstrained, full vocabulary
    choice: int  # option index drawn under the letter constraint
    reasoning: str | None
    completion_tokens: int
    reasoning_precision: str | None  # what computed the reasoning tokens (None: no reasoning)


def _read_letters(
    runner: ModelRunner, prompt: DecisionPrompt, request: DecisionRequest, letters: list[int], rng, clock: _Clock,
    should_stop: Callable[[], bool] | None = None,
) -> _LetterRead:
    tokenizer = runner.tokenizer
    sampling = request.sampling
    # One penalty window across both phases: the reasoning's kept tokens count for the answer.
    penalties = Penalties.for_sampling(sampling)
    reasoning = None
    generated: list[int] = []
    if request.think:
        close = frozenset({tokenizer.think_close})
        reasoner = reasoner_for(runner, request.fast_reasoning)
        precision = reasoner.precision
        if reasoner.hands_over(runner):
            # The exact runner stays at the prompt; the twin reasons from a copy of that state.
            hand_over(runner, reasoner.runner, prompt.ids, prompt.checkpoints[:-1])
            clock.lap("prefill_s")
        for step in generate_step(
            reasoner.runner, prompt.ids, sampling, rng, max_tokens=request.reasoning_budget, stop_ids=tokenizer.stop_ids,
            end_ids=close, checkpoints=prompt.checkpoints[:-1], processors=[penalties], should_stop=should_stop,
        ):
            generated.append(step.token_id)
        clock.lap("reasoning_s")
        ended = generated[-1] if generated else None
        body = generated[:-1] if ended in tokenizer.stop_ids | close else generated
        reasoning = tokenizer.decode(body).strip("\n")
        # Closed by the model: the answer follows its blank line (the model's own </think> was kept text,
        # so the loop accepted it). Otherwise (budget spent, or the turn ended inside the block) close it
        # ourselves; forced tokens are never accepted.
        if ended == tokenizer.think_close:
            kept, forced = generated, tokenizer.encode_text("\n\n")
        else:
            kept, forced = body, close_think(tokenizer)
        # After a hand-over this prefills exactly the reasoning produced (+ the answer prefix) on the exact
        # runner's prompt state; otherwise it continues the runner's own reasoning state.
        ids, checkpoints = prompt.ids + kept + forced, ()
        completion_tokens = len(kept) + len(forced) + 1
    else:
        ids, checkpoints = prompt.ids, prompt.checkpoints
        completion_tokens = 1
        precision = None
    # The answer letter: one draw under the letter constraint, from the same loop as any generation.
    processors = make_processors(sampling, allowed=letters, penalties=penalties)
    answer = generate_step(runner, ids, sampling, rng, max_tokens=1, checkpoints=checkpoints, processors=processors)
    step = next(answer)
    answer.close()
    clock.split("prefill_s", runner.stats.last_prefill_s, "sample_s")
    return _LetterRead(Distribution(step.penalized), letters.index(step.token_id), reasoning, completion_tokens, precision)


def _alternatives(tokenizer, distribution: Distribution, count: int) -> list[Alternative]:
    return [Alternative(tokenizer.token_text(a.token_id), a.token_id, a.logprob) for a in distribution.top(count)]


def _softmax(values: np.ndarray) -> np.ndarray:
    shifted = np.exp(values - values.max())
    return shifted / shifted.sum()


def _draw(probabilities: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """One option drawn from shown bars sharpened or softened by the sampling temperature (0: the argmax)."""
    if temperature == 0.0:
        return int(np.argmax(probabilities))
    with np.errstate(divide="ignore"):
        logits = np.log(probabilities) / temperature
    return int(rng.choice(len(probabilities), p=_softmax(logits)))


def decide(
    runner: ModelRunner,
    request: DecisionRequest,
    rng: np.random.Generator | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> DecisionResult:
    """Run one decision. should_stop is polled between reasoning tokens (raises Cancelled)."""
    rng = rng if rng is not None else make_rng(request.sampling.seed)
    if request.score_options:
        return _decide_by_scoring(runner, request, rng, should_stop)
    clock = _Clock()
    tokenizer = runner.tokenizer
    options = list(request.options)
    letters = letter_ids(tokenizer, len(options))
    images = _image_tokens(runner, request)
    prompt = build_decision_prompt(
        tokenizer, request.question, options, system=request.system, context=request.context, think=request.think, images=images
    )
    clock.lap("tokenize_s")
    encodes = runner.vision.stats.encodes if images else 0
    read = _read_letters(runner, prompt, request, letters, rng, clock, should_stop)
    prefill_tokens, reused = runner.stats.last_prefill_tokens, runner.stats.last_prefill_reused
    option_logprobs = read.distribution.logprobs(letters)
    probabilities = _softmax(option_logprobs)
    debiased = None
    if request.permute:
        debiased = _rotation_average(runner, request, letters, probabilities, rng, clock, should_stop)
    shown = probabilities if debiased is None else debiased
    if not request.sample_choice:
        choice = int(np.argmax(shown))
    elif debiased is None:
        choice = read.choice  # the constrained draw at the full sampling settings (top-k, top-p, ...)
    else:  # no single draw saw the debiased bars: draw from them
        choice = _draw(debiased, request.sampling.temperature, rng)
    results = [
        OptionResult(
            label=LABELS[i], text=text, logprob=float(option_logprobs[i]), probability=float(probabilities[i]),
            debiased_probability=None if debiased is None else float(debiased[i]),
        )
        for i, text in enumerate(options)
    ]
    alternatives = _alternatives(tokenizer, read.distribution, request.alternatives)
    usage = {
        "prompt_tokens": len(prompt.ids),
        "prefill_tokens": prefill_tokens,
        "reused_tokens": reused,
        "completion_tokens": read.completion_tokens,
    }
    if images:
        usage["image_tokens"] = sum(len(tokens) for tokens in images)
        usage["images_encoded"] = runner.vision.stats.encodes - encodes  # 0 when the screen was seen before
    return DecisionResult(
        choice_index=choice,
        options=results,
        coverage=float(np.exp(option_logprobs).sum()),
        mode="letters",
        reasoning=read.reasoning,
        alternatives=alternatives,
        timings=clock.total(),
        usage=usage,
        choice_mode="sampled" if request.sample_choice else "argmax",
        reasoning_precision=read.reasoning_precision,
    )


def _image_tokens(runner: ModelRunner, request: DecisionRequest) -> list[tuple]:
    return [tuple(runner.image_tokens(pixels)) for pixels in request.images]


def _rotation_average(
    runner, request: DecisionRequest, letters, first: np.ndarray, rng, clock: _Clock, should_stop=None
) -> np.ndarray:
    """Average each option's probability over the n cyclic orders, so no option keeps one letter's prior."""
    count = len(request.options)
    total = first.copy()
    for shift in range(1, count):
        order = [(i + shift) % count for i in range(count)]  # position j shows option order[j]
        prompt = build_decision_prompt(
            runner.tokenizer, request.question, [request.options[i] for i in order],
            system=request.system, context=request.context, think=request.think, images=_image_tokens(runner, request),
        )
        if should_stop is not None and should_stop():
            raise Cancelled("decision cancelled")
        read = _read_letters(runner, prompt, request, letters, rng, clock, should_stop)
        probabilities = _softmax(read.distribution.logprobs(letters))
        for position, option in enumerate(order):
            total[option] += probabilities[position]
    clock.lap("permute_s")
    return total / count


def _score_sequences(runner: ModelRunner, prompt: DecisionPrompt, sequences: list[list[int]], usage: dict[str, int],
                     should_stop: Callable[[], bool] | None) -> tuple[list[float], Distribution]:
    """Each sequence's summed logprob after the prompt, branching from one state; and the first position's
    distribution (the alternatives)."""
    sums, first = [], None
    for sequence in sequences:
        if should_stop is not None and should_stop():
            raise Cancelled("decision cancelled")
        logits = runner.prefill(prompt.ids, prompt.checkpoints)  # restores the snapshot after the first
        usage["prefill_tokens"] += runner.stats.last_prefill_tokens
        usage["reused_tokens"] += runner.stats.last_prefill_reused
        total = 0.0
        for position, token in enumerate(sequence):
            distribution = Distribution(logits)
            if first is None:
                first = distribution
            total += distribution.logprob(token)
            if position + 1 < len(sequence):
                logits = runner.step(token)
        sums.append(total)
        usage["completion_tokens"] += len(sequence)
    return sums, first


def _decide_by_scoring(runner: ModelRunner, request: DecisionRequest, rng: np.random.Generator,
                       should_stop: Callable[[], bool] | None = None) -> DecisionResult:
    """Score each option's whole token sequence (+ end of turn) after the prompt. With permute, the prompt
    lists the options in every cyclic order and each option's probability is averaged over the orders."""
    clock = _Clock()
    tokenizer = runner.tokenizer
    options = list(request.options)
    count = len(options)
    sequences = [tokenizer.encode_text(text) + [tokenizer.im_end] for text in options]
    usage = {"prompt_tokens": 0, "prefill_tokens": 0, "reused_tokens": 0, "completion_tokens": 0}
    images = _image_tokens(runner, request)
    sums, first, debiased = None, None, None
    for shift in range(count if request.permute else 1):
        order = [(i + shift) % count for i in range(count)]  # position j lists option order[j]
        prompt = build_decision_prompt(tokenizer, request.question, [options[i] for i in order], system=request.system,
                                       context=request.context, words=True, images=images)
        clock.lap("tokenize_s")
        scored, distribution = _score_sequences(runner, prompt, sequences, usage, should_stop)
        clock.lap("score_s" if shift == 0 else "permute_s")
        if sums is None:  # the options in the order given: the raw values
            sums, first = np.array(scored), distribution
            usage["prompt_tokens"] = len(prompt.ids)
        if request.permute:
            debiased = _softmax(np.array(scored)) if debiased is None else debiased + _softmax(np.array(scored))
    probabilities = _softmax(sums)
    if debiased is not None:
        debiased = debiased / count
    shown = probabilities if debiased is None else debiased
    if request.sample_choice:
        choice = _draw(shown, request.sampling.temperature, rng)
    else:
        choice = int(np.argmax(shown))
    results = [
        OptionResult(
            label=LABELS[i], text=text, logprob=float(sums[i]), probability=float(probabilities[i]),
            debiased_probability=None if debiased is None else float(debiased[i]),
            token_count=len(sequences[i]), normalized_logprob=float(sums[i]) / len(sequences[i]),
        )
        for i, text in enumerate(options)
    ]
    return DecisionResult(
        choice_index=choice,
        options=results,
        # The summed probability of the whole option texts: small by nature (each text is many tokens), not a
        # failure; surfaces print it in scientific notation rather than as "0.0 %".
        coverage=float(np.exp(sums).sum()),
        mode="words",
        reasoning=None,
        alternatives=_alternatives(tokenizer, first, request.alternatives),
        timings=clock.total(),
        usage=usage,
        choice_mode="sampled" if request.sample_choice else "argmax",
    )
