"""What kind of server answers, and which of the exact methods it supports, found from what it answers.

Kinds: Decider's own server (it has /v1/decide: the decision runs there, exactly), vLLM, llama.cpp's
servers (llama-server and llama-cpp-python), OpenVINO Model Server, or unknown. The kind names the
server; what it can do is probed, because versions and flags differ: a raw /v1/completions with
logprobs lets Decider render the prompt itself and read each option letter exactly, whatever the server.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .http import JsonClient, RemoteError, RemoteHTTPError

KINDS = ("decider", "vllm", "llama.cpp", "ovms", "unknown")

# A server error while probing is retried after these pauses (seconds) before it reaches the user: a vLLM
# engine still warming up, or restarting, answers 500 for a moment.
RETRY_PAUSES = (0.5, 2.0)

# /v1/models' owned_by → kind (each server's own spelling)
_OWNERS = {"decider": "decider", "vllm": "vllm", "llamacpp": "llama.cpp", "ovms": "ovms"}


@dataclass(frozen=True)
class ServerProfile:
    kind: str
    models: list[str]
    decide: bool  # /v1/decide (Decider's own server)
    completions: bool  # /v1/completions takes a raw prompt and returns its answer's logprobs
    notes: list[str] = field(default_factory=list)


def model_entries(client: JsonClient, api: str) -> list[dict]:
    data = client.call("GET", f"{api}/models").get("data")
    if not isinstance(data, list):
        raise RemoteError(f"{client.root}{api}/models: no 'data' list in the answer")
    return [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]


def kind_of(entries: list[dict]) -> str:
    for entry in entries:
        owner = str(entry.get("owned_by", "")).strip().lower()
        if owner in _OWNERS:
            return _OWNERS[owner]
        if owner == "me" and "permissions" in entry:  # llama-cpp-python's server spells it so
            return "llama.cpp"
        if isinstance(entry.get("meta"), dict) and "n_vocab" in entry["meta"]:  # llama-server
            return "llama.cpp"
    return "unknown"


def _probe_completions(client: JsonClient, api: str, model: str) -> tuple[bool, str | None]:
    """(raw completions with logprobs, why not): one tiny raw completion asking for its token's logprobs."""
    body = {"model": model, "prompt": "Hello", "max_tokens": 1, "logprobs": 1, "temperature": 0}
    for pause in (*RETRY_PAUSES, None):
        try:
            answer = client.call("POST", f"{api}/completions", body)
            break
        except RemoteHTTPError as exc:
            # 401, and a server error (5xx: the server failed, it did not answer the question) are errors,
            # not a capability: taken as "no completions", they sent every later decision to chat. A 5xx is
            # retried; if it persists the decision fails and the next one probes again.
            if exc.status >= 500 and pause is not None:
                time.sleep(pause)
                continue
            if exc.status == 401 or exc.status >= 500:
                raise RemoteError(f"probing {client.root}{api}/completions failed, try again: {exc}") from None
            return False, f"no usable /completions ({exc})"
    try:
        choice = answer["choices"][0]
        ok = isinstance(choice["text"], str) and isinstance(choice["logprobs"]["token_logprobs"], list)
    except (KeyError, IndexError, TypeError):
        ok = False
    return (True, None) if ok else (False, "/completions did not answer a text completion with logprobs")


def probe(client: JsonClient, api: str, model: str | None = None) -> ServerProfile:
    entries = model_entries(client, api)
    models = [m["id"] for m in entries]
    kind = kind_of(entries)
    notes: list[str] = []
    if kind == "decider":
        return ServerProfile(kind, models, decide=True, completions=True)
    if not models and model is None:
        raise RemoteError(f"{client.root} serves no model")
    completions, why = _probe_completions(client, api, model or models[0])
    if why:
        notes.append(why)
    return ServerProfile(kind, models, decide=False, completions=completions, notes=notes)
