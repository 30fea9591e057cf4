"""A peer engine against Decider on the same decision prompts (bench/w_torch.py: transformers, bench/w_llama.py:
llama.cpp): the letter decision read off a peer's last logits, and the interleaved timing loop with the
agreement columns the report shows (bench/report.py: ratio, same choice, max probability / logprob diff)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np

from .common import summary


def letter_decision(logits: np.ndarray, vocab: int, letters: list[int]) -> dict:
    """float64 log-softmax over the real vocabulary (the logits may be padded), the option letters' logprobs,
    their renormalised probabilities and the greedy choice among them."""
    x = logits[:vocab].astype(np.float64)
    logprobs = x - (x.max() + np.log(np.exp(x - x.max()).sum()))
    option = logprobs[letters]
    probabilities = np.exp(option - option.max())
    probabilities /= probabilities.sum()
    return {"choice": int(np.argmax(option)), "probabilities": probabilities.tolist(), "logprobs": option.tolist()}


def decider_decision(runner, question: str, options: list[str]) -> dict:
    """Decider's greedy decision from a cold runner (no state, no snapshots), in letter_decision's terms."""
    from decider.engine.decisions.decide import DecisionRequest, decide
    from decider.engine.core.settings import SamplingSettings

    runner.reset()
    runner.clear_snapshots()
    r = decide(runner, DecisionRequest(question, tuple(options), sampling=SamplingSettings(temperature=0.0, seed=0)))
    return {"choice": r.choice_index, "probabilities": [o.probability for o in r.options], "logprobs": [o.logprob for o in r.options]}


def versus(peer: str, peer_decision: Callable[[list[int]], dict], runner, prompts: dict, length: int, repeats: int,
           warmup: bool) -> dict:
    """`peer` (and Decider when `runner` is given) on the decision prompt of `length`, interleaved in alternating
    order; with `warmup` the first round is not timed. Returns the peer's seconds and decision and, with Decider,
    its own, the time ratio and how far the two agree."""
    item = prompts["decisions"][str(length)]
    engines = [peer] + (["decider"] if runner else [])
    times: dict[str, list[float]] = {name: [] for name in engines}
    results: dict[str, dict] = {}
    for rep in range(repeats + (1 if warmup else 0)):
        for name in (engines if rep % 2 == 0 else engines[::-1]):
            begun = time.perf_counter()
            if name == peer:
                results[peer] = peer_decision(item["ids"])
            else:
                results["decider"] = decider_decision(runner, item["question"], prompts["options"])
            if rep or not warmup:
                times[name].append(time.perf_counter() - begun)
        if times[peer]:
            print(f"  {length}: " + ", ".join(f"{n} {times[n][-1]:.3f} s" for n in engines), file=sys.stderr, flush=True)
    entry = {f"{peer}_s": summary(times[peer]), peer: results[peer]}
    if runner:
        d, p = results["decider"], results[peer]
        entry.update({
            "decider_s": summary(times["decider"]), "decider": d,
            "ratio": summary([a / b for a, b in zip(times["decider"], times[peer])]),
            "same_choice": d["choice"] == p["choice"],
            "max_probability_diff": float(np.max(np.abs(np.array(d["probabilities"]) - p["probabilities"]))),
            "max_logprob_diff": float(np.max(np.abs(np.array(d["logprobs"]) - p["logprobs"]))),
        })
    return entry
