"""What a soak sends and reads: the plan, its varied requests, the server's RSS, and the summary of a run.
Shared by the API soak (bench/soak.py) and the window soak (bench/soak_window.py), which import it, not each other."""

from __future__ import annotations

import json
import math
import os
import random
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .common import proc_mib


ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmarks"
WORDS = ("scouts report that the north gate is safe while the river crossing floods and the dragon sleeps "
         "near the old mill where traders wait with bread rice and lamps for the patrol at dawn").split()
OPTIONS = ("Attack", "Retreat", "Trade", "Hide", "Explore", "Wait", "Scout", "Defend")
TARGET_MIB = 150  # RSS after all requests ≤ RSS after the first 100 + this
PROBE = ("Scouts report that Retreat is the safe choice. What should we do?", ("Attack", "Retreat", "Trade"))
# The prefill variants the latency mode compares: (largest chunk, base of the rest's digits); None: one infer.
# "fixed": the split every model used before the chunk length followed the model (engine/runners/prefill_chunks.py).
PREFILL_MODES = {"chunked": "shipped", "fixed": (256, 16), "one-shot": None}


TOOLS = [  # what a game offers a model to call
    {"type": "function", "function": {"name": "attack", "description": "Attack a target.",
                                      "parameters": {"type": "object", "properties": {"target": {"type": "string"}},
                                                     "required": ["target"]}}},
    {"type": "function", "function": {"name": "retreat", "description": "Fall back to the camp."}},
    {"type": "function", "function": {"name": "trade", "description": "Trade goods with the merchants.",
                                      "parameters": {"type": "object", "properties": {
                                          "item": {"type": "string", "enum": ["bread", "rice", "lamps"]},
                                          "count": {"type": "integer"}}, "required": ["item"]}}},
]


@dataclass(frozen=True)
class Plan:
    model: Path
    requests: int = 2000
    max_words: int = 1200
    seed: int = 0
    spread: str = "uniform"  # prompt lengths: "uniform" or "log" (see prompt_words)
    max_tokens: int = 8  # completions and chats answer 1..max_tokens tokens


# ----- the requests -----


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def prompt_words(rng: random.Random, max_words: int, spread: str) -> int:
    """uniform: every length up to max_words equally likely; log: log-uniform (short-tailed, mean ≈ max/ln max),
    for a model too slow to prefill thousands of long prompts — lengths still reach max_words."""
    if spread == "log":
        return max(1, min(max_words, int(math.exp(rng.uniform(0.0, math.log(max_words + 1))))))
    return rng.randint(1, max_words)


def make_request(rng: random.Random, max_words: int, spread: str = "uniform", max_tokens: int = 8) -> tuple[str, dict]:
    """One request of the mix: its API path and JSON body."""
    words = prompt_words(rng, max_words, spread)
    kind = rng.random()
    if kind < 0.5:
        options = rng.sample(OPTIONS, rng.randint(2, 5))
        return "/v1/decide", {"question": text(rng, words) + "?", "options": options, "temperature": 0}
    logprobs = rng.random() < 0.5
    if kind < 0.75:
        body = {"model": "decider", "prompt": text(rng, words), "max_tokens": rng.randint(1, max_tokens), "temperature": 0}
        if logprobs:
            body["logprobs"] = rng.randint(0, 5)
        return "/v1/completions", body
    body = {"model": "decider", "messages": [{"role": "user", "content": text(rng, words)}],
            "max_tokens": rng.randint(1, max_tokens), "temperature": 0}
    if logprobs:
        body.update(logprobs=True, top_logprobs=rng.randint(0, 5))
    if kind < 0.85:  # functions offered: the call constrained by its schema, its probabilities computed
        body.update(tools=TOOLS, tool_choice=rng.choice(["auto", "required", "none"]),
                    max_tokens=rng.randint(max_tokens, 4 * max_tokens))
    elif kind < 0.9:  # several draws from one prefill, answered whole
        body.update(n=rng.randint(2, 4), temperature=1.0, seed=rng.randint(0, 1000))
    return "/v1/chat/completions", body


# ----- api: through `decider serve` -----


def rss_of(pid: int) -> float:
    rss = proc_mib(f"/proc/{pid}/status", "VmRSS")
    if rss is None:
        raise RuntimeError(f"no VmRSS for process {pid}")
    return rss


def decider_path() -> str:
    """PYTHONPATH for the server: the folder holding the `decider` this process imports (a checkout's link
    or site-packages), so the server runs the code under test."""
    import decider

    parent = str(Path(decider.__file__).parent.parent)  # not resolved: a link to a checkout stays the link
    return os.pathsep.join([parent] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict) -> tuple[int, int | None]:
    """The reply's status and, when it says, how many prompt tokens the server computed over."""
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=1800) as reply:
            payload = reply.read()
            status = reply.status
    except urllib.error.HTTPError as exc:
        return exc.code, None
    try:
        return status, json.loads(payload).get("usage", {}).get("prompt_tokens")
    except (ValueError, AttributeError):
        return status, None


def summarise(plan: Plan, samples: list, statuses: dict, mode: str = "api") -> dict:
    """A run so far (checkpoints) or whole; `mode` names the front end its requests went through."""
    first100 = samples[min(99, len(samples) - 1)]["rss_mib"]
    last = samples[-1]["rss_mib"]
    tokens = sorted(s["prompt_tokens"] for s in samples if s.get("prompt_tokens"))
    return {"model": str(plan.model), "requests": plan.requests, "done": len(samples), "max_words": plan.max_words,
            "seed": plan.seed, "spread": plan.spread, "max_tokens": plan.max_tokens, "statuses": statuses,
            "prompt_tokens": {"median": tokens[len(tokens) // 2], "max": tokens[-1], "n": len(tokens)} if tokens else None,
            "rss_after_first": samples[0]["rss_mib"], "rss_after_100": first100,
            "rss_last": last, "growth_after_100_mib": last - first100, "target_met": last <= first100 + TARGET_MIB,
            "wall_s": samples[-1]["t"], "mode": mode, "samples": samples}
