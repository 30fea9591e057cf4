"""/v1/completions as a scoring endpoint: each prompt scored (echo) and/or continued, one choice each.

Runs in a worker thread holding the engine's queue slot. A prompt's logprobs come from the all-position
scorer (engine/runners/scoring.py), its continuation from the ordinary generation loop: the two agree to float
precision (tests/test_scoring.py), so an echoed prompt and its generated tokens read as one sequence.
"""

from __future__ import annotations

from collections.abc import Callable

from decider.engine.completions.echo import echo_prompt
from decider.engine.core.errors import Cancelled
from decider.engine.generation.generate import Completion
from decider.engine.completions.openai_format import completion_choice

from .chat_run import draws
from .protocol import CompletionJob, CompletionRequest

# A padded head's share below this moves no logprob by more than ~1e-6: not worth a field in every reply.
NEGLIGIBLE_PADDED_MASS = 1e-6


def run_completions(
    service, request: CompletionRequest, jobs: list[CompletionJob], should_stop: Callable[[], bool]
) -> tuple[list[dict], list[Completion]]:
    """The choices (in prompt order) and the completions they came from (for the usage)."""
    tokenizer = service.runner.tokenizer
    choices: list[dict] = []
    completions: list[Completion] = []
    for index, job in enumerate(jobs):
        if should_stop():
            raise Cancelled("the client left")
        scores = service.score(job.ids, request.logprobs, request.logprob_normalization) if request.scores_prompt else None
        echoed = echo_prompt(tokenizer, job.ids, scores, job.text) if request.echo else None
        prompt_chars = len(echoed.text if echoed is not None else prompt_text(tokenizer, job))
        # n draws per prompt, the prompt prefilled once (a snapshot at its end), choices in OpenAI's order
        for generation in draws(job.generation, request.n or 1) if job.generation is not None else [None]:
            if generation is not None:
                completion = service.run(generation, should_stop)
            else:  # max_tokens 0: the prompt alone (scored or echoed), nothing generated
                completion = Completion(prompt_tokens=len(job.ids), finish_reason="length")
            choice = completion_choice(completion, len(choices), prompt_chars, logprobs=request.logprobs is not None, echoed=echoed)
            if scores is not None and scores.padded_mass > NEGLIGIBLE_PADDED_MASS:
                # not negligible: the two definitions differ here (a random-weight model's padding rows hold up to half)
                choice["logprobs"]["padded_mass"] = scores.padded_mass
            choices.append(choice)
            completions.append(completion)
    return choices, completions


def completion_answer_size(request: CompletionRequest, jobs: list[CompletionJob]) -> tuple[int, int, int | None]:
    """(choices, the most tokens they can hold together, alternatives per token or None) of a request's answer."""
    n = request.n or 1
    echoed = sum(len(job.ids) for job in jobs) * n if request.echo else 0
    drawn = sum(job.generation.max_tokens for job in jobs if job.generation is not None) * n
    return len(jobs) * n, echoed + drawn, request.logprobs


def prompt_text(tokenizer, job: CompletionJob) -> str:
    """The prompt as text: as sent, or its token ids decoded (text offsets count from its start)."""
    return job.text if job.text is not None else tokenizer.decode(list(job.ids))
