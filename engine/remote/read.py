"""Reading the option letters' logprobs from a server, each method checked against what comes back.

A reading says per option what its number is: "exact" (the server's full-vocabulary logprob of that
letter at the answer position), "upper" (not listed: at most the list's lowest value) or "estimate"
(a number the server gave that the checks could not confirm). Nothing is labelled exact unless the
answer proves it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..core.logprobs import MAX_TOP_LOGPROBS
from .http import JsonClient, RemoteError, RemoteHTTPError

TOP_LOGPROBS = MAX_TOP_LOGPROBS  # as many alternatives as an OpenAI-compatible server may list
FORCE_BIAS = 100.0  # OpenAI's largest logit_bias: makes the biased letter the greedy draw
TOLERANCE = 1e-4  # two reports of the same logprob (float32 servers) agree within this


@dataclass
class LetterReading:
    method: str  # "decide", "forced letters", "constraint", "top list"
    logprobs: list[float]  # per option: the letter's logprob, or for an "upper" the list's floor
    labels: list[str]  # per option: "exact", "estimate" or "upper"
    alternatives: list[tuple[str, float]]  # the answer position's listed tokens, most likely first
    notes: list[str] = field(default_factory=list)
    bars: list[float] | None = None  # bars a verified renormalising constraint gave directly
    prompt_tokens: int = 0
    completion_tokens: int = 0
    read_tokens: int = 0  # the tokens the server read before the answer, when more than the prompt (reasoning)
    listed: int = TOP_LOGPROBS  # the alternatives asked for and granted (a server may allow fewer, e.g. 5)
    # the server scored text it re-tokenized (a reasoning sent back as text): not the ids it generated, so
    # its numbers are for another sequence than Decider's and no bar is exact or a bound
    retokenized: bool = False


def listed_entries(top: object) -> dict[str, float]:
    """A top-logprobs entry (completions: {text: logprob}; chat: [{token, logprob}]) as text → logprob."""
    listed: dict[str, float] = {}
    items: Iterable[tuple[object, object]]
    if isinstance(top, dict):
        items = top.items()
    elif isinstance(top, list):
        items = ((a.get("token"), a.get("logprob")) for a in top if isinstance(a, dict))
    else:
        items = ()
    for token, logprob in items:
        # Exact text only: " A" is another token than the "A" that starts the answer.
        if isinstance(token, str) and isinstance(logprob, (int, float)) and not isinstance(logprob, bool) and math.isfinite(logprob):
            listed.setdefault(token, float(logprob))
    return listed


def from_list(method: str, listed: dict[str, float], labels: list[str], requested: int, notes: list[str]) -> LetterReading:
    """Letters read off one answer position's top list: listed letters are the server's numbers; a missing
    one is at most the list's floor (an upper bound, never zero)."""
    if not listed:
        raise RemoteError("the server's answer has no top_logprobs entries")
    floor = min(listed.values())
    if len(listed) < requested:
        # fewer entries than asked: alternatives that print alike were merged (or the vocabulary is tiny);
        # a missing letter is still below every listed value, so the floor stays a true bound
        notes.append(f"the server listed {len(listed)} of {requested} alternatives (entries that print alike are merged)")
    values = [listed.get(label, floor) for label in labels]
    kinds = ["exact" if label in listed else "upper" for label in labels]
    ordered = sorted(listed.items(), key=lambda kv: -kv[1])
    return LetterReading(method, values, kinds, ordered, notes)


def completion(client: JsonClient, api: str, body: dict) -> tuple[dict, dict]:
    """POST a raw completion; (the first choice, usage)."""
    answer = client.call("POST", f"{api}/completions", body)
    try:
        choice = answer["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise RemoteError("the server's completion has no choices") from None
    if not isinstance(choice, dict):
        raise RemoteError("the server's completion has no choices")
    return choice, answer.get("usage") or {}


def first_entry(choice: dict) -> tuple[str | None, float | None, object]:
    """(token, its logprob, top list) of a completion's first generated token."""
    logprobs = choice.get("logprobs") or {}
    if not isinstance(logprobs, dict):
        return None, None, None
    tokens, values, tops = logprobs.get("tokens") or [], logprobs.get("token_logprobs") or [], logprobs.get("top_logprobs") or []
    token = tokens[0] if tokens and isinstance(tokens[0], str) else None
    value = values[0] if values and isinstance(values[0], (int, float)) else None
    return token, (None if value is None else float(value)), (tops[0] if tops else None)


def top_of_completion(client: JsonClient, api: str, body: dict, labels: list[str]) -> tuple[LetterReading, dict]:
    """One unconstrained answer token on a raw prompt with the largest top list the server grants."""
    notes: list[str] = []
    for top in (TOP_LOGPROBS, 5):
        try:
            choice, usage = completion(client, api, dict(body, logprobs=top))
            break
        except RemoteHTTPError as exc:
            if exc.status == 401 or top == 5:
                raise
            notes.append(f"the server refused logprobs={top}; asked for 5")
    _, _, entries = first_entry(choice)
    listed = listed_entries(entries)
    if not listed:
        raise RemoteError("the server returned no logprobs for the answer (does it support logprobs?)")
    reading = from_list("top list", listed, labels, top, notes)
    reading.listed = top
    reading.prompt_tokens = int(usage.get("prompt_tokens") or 0)
    reading.completion_tokens = int(usage.get("completion_tokens") or 0)
    return reading, choice


# ----- letter token ids (for logit_bias), through each server's tokenize endpoint -----

def tokenize(client: JsonClient, api: str, model: str, text: str, kind: str) -> list[int] | None:
    """The server's own ids for `text` (special tokens written in it read as in a raw prompt), or None when it
    has no tokenize endpoint."""
    by_kind: dict[str, list[tuple[str, dict[str, object]]]] = {
        "llama.cpp": [("/extras/tokenize", {"model": model, "input": text}), ("/tokenize", {"content": text})],
        "vllm": [("/tokenize", {"model": model, "prompt": text, "add_special_tokens": False})],
    }
    attempts = by_kind.get(kind, [("/tokenize", {"model": model, "prompt": text, "add_special_tokens": False}),
                 ("/extras/tokenize", {"model": model, "input": text}), ("/tokenize", {"content": text})])
    for path, body in attempts:
        try:
            answer = client.call("POST", path, body)
        except RemoteHTTPError as exc:
            if exc.status == 401:
                raise
            continue
        tokens = answer.get("tokens")
        if isinstance(tokens, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            return tokens
    return None


def letter_ids(client: JsonClient, api: str, model: str, labels: list[str], kind: str) -> list[int] | None:
    """Each label's token id, or None when the server has no tokenize endpoint or a label is not one token."""
    encoded = []
    for label in labels:
        tokens = tokenize(client, api, model, label, kind)
        if tokens is None:
            return None
        encoded.append(tokens)
    # a tokenizer that adds a BOS puts the same id first everywhere: drop a prefix all labels share
    while all(len(t) > 1 for t in encoded) and len({t[0] for t in encoded}) == 1:
        encoded = [t[1:] for t in encoded]
    if any(len(t) != 1 for t in encoded) or len({t[0] for t in encoded}) != len(labels):
        return None
    return [t[0] for t in encoded]


class Unverified(Exception):
    """A method's answer failed its check: the caller falls back to a less exact method and says why."""


def forced_letters(client: JsonClient, api: str, body: dict, labels: list[str], ids: list[int],
                   unconstrained: LetterReading) -> LetterReading:
    """Each letter's exact logprob: one greedy answer per letter with logit_bias making that letter the draw;
    the drawn token's own logprob comes back whatever the top list holds. Checked against the unconstrained
    list: a listed letter must come back with the same value and an unlisted one below the list's floor,
    else the server reports biased (not model) logprobs and the method is refused."""
    listed = dict(unconstrained.alternatives)
    floor = min(listed.values())
    values, completion_tokens = [], 0
    for label, token_id in zip(labels, ids):
        forced = dict(body, logprobs=1, temperature=0.0, logit_bias={str(token_id): FORCE_BIAS})
        forced.pop("seed", None)
        choice, usage = completion(client, api, forced)
        completion_tokens += int(usage.get("completion_tokens") or 0)
        token, value, _ = first_entry(choice)
        if token != label or value is None:
            raise Unverified(f"logit_bias did not make {label!r} the answer (the server drew {token!r})")
        if label in listed and abs(value - listed[label]) > TOLERANCE:
            raise Unverified(f"the forced {label!r} came back as {value:.6g}, listed as {listed[label]:.6g}: "
                              "the server reports biased logprobs")
        if label not in listed and value > floor + TOLERANCE:
            raise Unverified(f"the forced {label!r} came back above the list's floor: the server reports biased logprobs")
        values.append(value)
    return LetterReading("forced letters", values, ["exact"] * len(labels), unconstrained.alternatives,
                         list(unconstrained.notes), prompt_tokens=unconstrained.prompt_tokens,
                         completion_tokens=unconstrained.completion_tokens + completion_tokens, listed=unconstrained.listed)


def constrained_bars(listed: dict[str, float], labels: list[str]) -> tuple[list[float] | None, str]:
    """Bars from a constrained answer, when the constraint really renormalised: every letter listed and their
    probabilities summing to 1. Else None and why."""
    if not all(label in listed for label in labels):
        missing = ", ".join(label for label in labels if label not in listed)
        return None, f"the constrained answer did not list {missing}"
    total = sum(math.exp(listed[label]) for label in labels)
    if abs(total - 1.0) > 1e-3:
        return None, f"the constraint did not renormalise (the letters sum to {total:.4f}, not 1)"
    return [math.exp(listed[label]) / total for label in labels], ""
