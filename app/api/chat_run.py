"""/v1/chat/completions answers known whole: n > 1 draws from one prefill, and tool calls with their probabilities.

Runs in a worker thread holding the engine's queue slot and the service's lock for the whole request: the n
draws and the tool-choice probabilities all start from the same prompt state (a snapshot at the prompt's end,
so the prompt is prefilled once).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from decider.engine.core.errors import Cancelled
from decider.engine.generation.generate import Completion, GenerationRequest, generate
from decider.engine.completions.openai_format import chat_choice
from decider.engine.constrained.tools import choice_probabilities

from .protocol import ChatCompletionRequest


def draws(request: GenerationRequest, n: int) -> list[GenerationRequest]:
    """n requests for the same prompt; with a seed, each draw its own (seed, seed+1, …) so they differ repeatably."""
    seed = request.sampling.seed
    return [request if seed is None or i == 0 else replace(request, sampling=replace(request.sampling, seed=seed + i))
            for i in range(n)]


def run_chat(service, parsed: ChatCompletionRequest, generation: GenerationRequest,
             should_stop: Callable[[], bool]) -> tuple[list[dict], list[Completion]]:
    completions = []
    with service.lock:
        for request in draws(generation, parsed.n or 1):
            if should_stop():
                raise Cancelled("the client left")
            completions.append(generate(service.runner, request, should_stop=should_stop))
        probabilities = None
        if parsed.calls_tools:
            probabilities = choice_probabilities(service.runner, list(generation.prompt_ids), parsed.tools or ())
    choices = [chat_choice(c, i, tools=(parsed.tools or ()) if parsed.calls_tools else (), probabilities=probabilities) for i, c in enumerate(completions)]
    return choices, completions
