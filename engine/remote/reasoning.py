"""A server's reasoning, read back: how the think block ended, and whether the text Decider sends back for
the answer makes the server score the ids it generated.

A raw-completions server (llama-cpp-python's, vLLM's) returns the reasoning as text and, for the answer,
is handed prompt + reasoning + close as text, which it re-tokenizes. Neither takes token ids here
(llama-cpp-python 0.3.36's server refuses a list of ints as `prompt`), so the check goes through the
server's own tokenize endpoint: the prompt and the prompt + reasoning are tokenized there, and the
reasoning must come back as exactly as many ids as the server reported generating, after the prompt's
own ids unchanged. That also says how the block ended, which the finish reason alone does not:

  - every generated token is in the text: the budget ran out, or an end of turn the server does not
    count (llama-cpp-python) ended it inside the block;
  - one more token than the text holds: the last one was the stop — the model's `</think>`, or an end of
    turn a server counts (vLLM and Decider's own server say which by `stop_reason`: the string, or null for
    an end-of-turn token; a server that counts its end of turn without saying so fools the check below).
    llama-cpp-python says neither, and an uncounted end of turn after a reasoning the model wrote in one
    id more than its text re-tokenizes to ("\n", "\n" for "\n\n") counts alike: where the reasoning is
    reproducible (greedy, or seeded) it is generated again one token short, which ends on the same text
    only if the last token was the `</think>` the stop string cut.

Without a tokenize endpoint, or when the counts disagree (text that lost bytes, a server tokenizing
another way), the finish reason is taken at its word and the bars after it stay estimates.
"""

from __future__ import annotations

from dataclasses import dataclass

from .http import JsonClient
from .read import completion, tokenize

STOP = "</think>"  # the stop string the reasoning request ends on


@dataclass(frozen=True)
class ServerReasoning:
    text: str  # as the server returned it
    closed: bool  # the model wrote `</think>` itself
    tokens: int  # the completion tokens the server reported
    unverified: str | None  # None: the server scores the ids it generated; else why that is not known


def read_reasoning(client: JsonClient, api: str, model: str, kind: str, body: dict, choice: dict, usage: dict) -> ServerReasoning:
    """body: the reasoning request (its `prompt` the decision prompt, ending in the open think block); choice,
    usage: the server's answer to it."""
    prompt = body["prompt"]
    raw_text = choice.get("text")
    text = raw_text if isinstance(raw_text, str) else ""
    tokens = usage.get("completion_tokens")
    tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None
    said_closed = _closed_by_finish(choice)
    if tokens is None:
        return ServerReasoning(text, said_closed, 0, "the server reported no completion token count to check the reasoning against")
    prompt_ids = tokenize(client, api, model, prompt, kind)
    with_text = tokenize(client, api, model, prompt + text, kind) if prompt_ids is not None else None
    if prompt_ids is None or with_text is None:
        return ServerReasoning(text, said_closed, tokens, "the server has no tokenize endpoint to check the re-tokenized reasoning")
    if with_text[: len(prompt_ids)] != prompt_ids:
        return ServerReasoning(text, said_closed, tokens, "the reasoning's text changed the prompt's own ids when tokenized")
    in_text = len(with_text) - len(prompt_ids)
    finish = choice.get("finish_reason")
    if in_text == tokens and finish in ("length", "stop"):
        return ServerReasoning(text, False, tokens, None)  # budget spent, or an uncounted end of turn
    if in_text == tokens - 1 and finish == "stop":
        if "stop_reason" in choice or tokens == 1:  # the server says what stopped it; or nothing came before the stop
            return ServerReasoning(text, said_closed, tokens, None)
        if not (body.get("temperature") == 0 or "seed" in body):
            return ServerReasoning(text, said_closed, tokens, "the server does not say whether its </think> or an end of "
                                   "turn ended the reasoning, and a sampled reasoning without a seed cannot be checked again")
        again, _ = completion(client, api, dict(body, max_tokens=tokens - 1))
        if again.get("text") == text:  # the last token added no text: the </think> the stop string cut
            return ServerReasoning(text, True, tokens, None)
        return ServerReasoning(text, False, tokens, "an end of turn ended a reasoning the server wrote in one id more "
                               "than its text re-tokenizes to")
    return ServerReasoning(text, said_closed, tokens, f"the reasoning's text tokenizes to {in_text} ids on the server, "
                           f"which reported generating {tokens}")


def _closed_by_finish(choice: dict) -> bool:
    """The finish reason's word: a "stop" is the `</think>` string, unless the server says (vLLM's
    `stop_reason`: null for an end-of-turn token) that something else stopped it."""
    if choice.get("finish_reason") != "stop":
        return False
    return "stop_reason" not in choice or choice["stop_reason"] == STOP
