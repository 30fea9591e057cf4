"""Decisions: a question and options in, the chosen option and per-option confidence out.

Letter mode (default): one forward. The empty think block is part of the prefill and the answer
letter is drawn from the prefill logits under a constraint to the option letters. Every option's
full-vocabulary logprob is read from the same logits (before temperature; the penalties' window is empty
at the answer, with or without reasoning), so the bars are the same whether the draw was greedy or sampled.

The chosen option is the one the shown bars favour (the debiased bars when permute ran), so the big
letter and the longest bar never disagree. `sample_choice` keeps the draw as the choice instead (variety
for a game's characters); the result then says it was drawn and which option was most likely.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..core.clock import Clock
from .option_draw import draw_option, softmax
from .prompt import DecisionPrompt, build_decision_prompt, letter_ids
from ..core.errors import Cancelled
from ..runners.fast_reasoning import hand_over, reasoner_for
from ..generation.drafter_choice import make_drafter
from ..generation.generate import generate_step, make_rng
from ..core.logprobs import Alternative, Distribution
from ..model.reasoning_close import close_reasoning

from .types import LABELS, MAX_IMAGES, MAX_OPTIONS, DecisionRequest, DecisionResult, OptionResult

__all__ = ["LABELS", "MAX_IMAGES", "MAX_OPTIONS", "DecisionRequest", "DecisionResult", "OptionResult", "Progress",
           "decide"]

if TYPE_CHECKING:  # the runner (and openvino) only for annotations: the dataclasses stay importable by the UI
    from ..runners.base import RunnerBase as ModelRunner  # any runner: dynamic or static shapes

# progress(done, total): reasoning tokens drawn so far in the decision, and the most it may draw
# (DecisionRequest.reasoning_limit). Apart from should_stop, which only asks whether to stop.
Progress = Callable[[int, int], None]


class _Tally:
    """A decision's reasoning tokens, counted across its option orders and reported after each."""

    def __init__(self, report: Progress | None, total: int) -> None:
        self.report, self.total, self.done = report, total, 0

    def add(self) -> None:
        self.done += 1
        if self.report is not None:
            self.report(self.done, self.total)

@dataclass
class _LetterRead:
    distribution: Distribution  # unconstrained, full vocabulary
    choice: int  # option index drawn under the letter constraint
    reasoning: str | None
    completion_tokens: int
    reasoning_precision: str | None  # what computed the reasoning tokens (None: no reasoning)


def _read_letters(
    runner: ModelRunner, prompt: DecisionPrompt, request: DecisionRequest, letters: list[int], rng, clock: Clock,
    should_stop: Callable[[], bool] | None = None, tally: _Tally | None = None,
) -> _LetterRead:
    tokenizer = runner.tokenizer
    sampling = request.sampling
    # The penalties shape the reasoning only. The answer is read from the model's distribution after it,
    # with an empty window as without reasoning (#776): a reasoning that names option B must not push the
    # bars away from B, and a server reading the answer as a new request (llama.cpp, vLLM) reports it so.
    # One generator across both phases: a seed fixes the reasoning and the letter together.
    reasoning = None
    generated: list[int] = []
    checkpoints: tuple[int, ...]
    if request.think:
        close = frozenset({tokenizer.think_close})
        reasoner = reasoner_for(runner, request.fast_reasoning)
        if reasoner.hands_over(runner):
            # The exact runner stays at the prompt; the twin reasons from a copy of that state.
            hand_over(runner, reasoner.runner, prompt.ids, prompt.checkpoints[:-1])
            clock.lap("prefill_s")
        for step in generate_step(
            reasoner.runner, prompt.ids, sampling, rng, max_tokens=request.reasoning_budget, stop_ids=tokenizer.stop_ids,
            end_ids=close, checkpoints=prompt.checkpoints[:-1], should_stop=should_stop,
            drafter=make_drafter(sampling.draft, runner.folder.name, reasoner.runner.mtp, reasoner.runner.auto_states),
        ):
            generated.append(step.token_id)
            if tally is not None:
                tally.add()
        clock.lap("reasoning_s")
        precision = reasoner.precision  # after the reasoning: the kernels it ran are read back
        ended = generated[-1] if generated else None
        body = generated[:-1] if ended in tokenizer.stop_ids | close else generated
        reasoning = tokenizer.decode(body).strip("\n")
        # Closed by the model (its </think> was kept text, accepted by the loop) or by us (budget spent, or
        # the turn ended inside the block: forced tokens are never accepted), as the chat template writes
        # it and the tokenizer encodes it: the sequence a server handed the same text scores.
        # After a hand-over this prefills exactly the reasoning produced (+ the answer prefix) on the exact
        # runner's prompt state; otherwise it continues the runner's own reasoning state.
        ids, checkpoints = close_reasoning(tokenizer, prompt.ids, body, ended == tokenizer.think_close), ()
        completion_tokens = len(ids) - len(prompt.ids) + 1
    else:
        ids, checkpoints = prompt.ids, prompt.checkpoints
        completion_tokens = 1
        precision = None
    # The answer letter: one draw under the letter constraint, from the same loop as any generation.
    answer = generate_step(runner, ids, sampling, rng, allowed=letters, max_tokens=1, checkpoints=checkpoints)
    step = next(answer)
    answer.close()
    clock.split("prefill_s", runner.stats.last_prefill_s, "sample_s")
    return _LetterRead(step.unmasked, letters.index(step.token_id), reasoning, completion_tokens, precision)


def _alternatives(tokenizer, distribution: Distribution, count: int) -> list[Alternative]:
    return [Alternative(tokenizer.token_text(a.token_id), a.token_id, a.logprob) for a in distribution.top(count)]


def decide(
    runner: ModelRunner,
    request: DecisionRequest,
    rng: np.random.Generator | None = None,
    should_stop: Callable[[], bool] | None = None,
    progress: Progress | None = None,
) -> DecisionResult:
    """Run one decision. should_stop is polled between reasoning tokens (raises Cancelled); progress hears
    (done, total) after each reasoning token."""
    rng = rng if rng is not None else make_rng(request.sampling.seed)
    if request.score_options:
        return _decide_by_scoring(runner, request, rng, should_stop)
    clock = Clock()
    tokenizer = runner.tokenizer
    options = list(request.options)
    letters = letter_ids(tokenizer, len(options))
    images = _image_tokens(runner, request)
    prompt = build_decision_prompt(
        tokenizer, request.question, options, system=request.system, context=request.context, think=request.think, images=images
    )
    clock.lap("tokenize_s")
    encodes = _encodes(runner) if images else 0
    tally = _Tally(progress, request.reasoning_limit)
    read = _read_letters(runner, prompt, request, letters, rng, clock, should_stop, tally)
    prefill_tokens, reused = runner.stats.last_prefill_tokens, runner.stats.last_prefill_reused
    option_logprobs = read.distribution.logprobs(letters)
    probabilities = softmax(option_logprobs)
    debiased = None
    if request.permute:
        debiased = _rotation_average(runner, request, letters, probabilities, rng, clock, should_stop, tally)
    shown = probabilities if debiased is None else debiased
    if not request.sample_choice:
        choice = int(np.argmax(shown))
    elif debiased is None:
        choice = read.choice  # the constrained draw at the full sampling settings (top-k, top-p, ...)
    else:  # no single draw saw the debiased bars: draw from them
        choice = draw_option(debiased, request.sampling.temperature, rng)
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
        usage["images_encoded"] = _encodes(runner) - encodes  # 0 when the screen was seen before
    return DecisionResult.build(
        request, results, choice, mode="letters", coverage=float(np.exp(option_logprobs).sum()), timings=clock.total(),
        usage=usage, reasoning=read.reasoning, alternatives=alternatives, reasoning_precision=read.reasoning_precision,
    )


def _image_tokens(runner: ModelRunner, request: DecisionRequest) -> list[tuple]:
    return [tuple(runner.image_tokens(pixels, request.image_pixels)) for pixels in request.images]


def _encodes(runner: ModelRunner) -> int:
    """Images the runner's vision encoder has encoded so far (a runner without one has encoded none)."""
    return runner.vision.stats.encodes if runner.vision is not None else 0


def _rotation_average(
    runner, request: DecisionRequest, letters, first: np.ndarray, rng, clock: Clock, should_stop=None,
    tally: _Tally | None = None,
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
        read = _read_letters(runner, prompt, request, letters, rng, clock, should_stop, tally)
        probabilities = softmax(read.distribution.logprobs(letters))
        for position, option in enumerate(order):
            total[option] += probabilities[position]
    clock.lap("permute_s")
    return total / count


def _score_sequences(runner: ModelRunner, prompt: DecisionPrompt, sequences: list[list[int]], usage: dict[str, int],
                     should_stop: Callable[[], bool] | None) -> tuple[list[float], Distribution]:
    """Each sequence's summed logprob after the prompt, branching from one state; and the first position's
    distribution (the alternatives)."""
    sums: list[float] = []
    first: Distribution | None = None
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
    if first is None:  # a request has at least two options
        raise ValueError("no option sequences to score")
    return sums, first


def _decide_by_scoring(runner: ModelRunner, request: DecisionRequest, rng: np.random.Generator,
                       should_stop: Callable[[], bool] | None = None) -> DecisionResult:
    """Score each option's whole token sequence (+ end of turn) after the prompt. With permute, the prompt
    lists the options in every cyclic order and each option's probability is averaged over the orders."""
    clock = Clock()
    tokenizer = runner.tokenizer
    options = list(request.options)
    count = len(options)
    sequences = [tokenizer.encode_text(text) + [tokenizer.im_end] for text in options]
    usage = {"prompt_tokens": 0, "prefill_tokens": 0, "reused_tokens": 0, "completion_tokens": 0}
    images = _image_tokens(runner, request)
    sums: np.ndarray | None = None
    first: Distribution | None = None
    debiased: np.ndarray | None = None
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
            debiased = softmax(np.array(scored)) if debiased is None else debiased + softmax(np.array(scored))
    if sums is None or first is None:  # the first order always runs
        raise ValueError("no option order was scored")
    probabilities = softmax(sums)
    if debiased is not None:
        debiased = debiased / count
    shown = probabilities if debiased is None else debiased
    if request.sample_choice:
        choice = draw_option(shown, request.sampling.temperature, rng)
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
    return DecisionResult.build(
        request, results, choice, mode="words",
        # The summed probability of the whole option texts: small by nature (each text is many tokens), not a
        # failure; surfaces print it in scientific notation rather than as "0.0 %".
        coverage=float(np.exp(sums).sum()),
        timings=clock.total(), usage=usage, alternatives=_alternatives(tokenizer, first, request.alternatives),
    )
