"""Speculative decoding (engine/generation/speculative.py): drafts off vs prompt lookup vs auto, paired in one process.

    python -m bench.w_draft --model DIR --out result.json [--tokens 256] [--rounds 3] [--temperature 0]
                            [--drafts none lookup auto mtp]   (mtp, and auto's head: a folder with openvino_mtp_model.xml)
    python -m bench.w_draft --model DIR --out result.json --task costs [--rounds 12]

Task `costs` (any geometry, e.g. 0.8B): after a 256-token prompt, interleaved per round: a one-token step; a
verify of n = 2..5 tokens then its rollback (the same shape every time); a step and a verify of 4 alternating
(what decoding with drafts does: the CPU plugin re-prepares a dynamic-shape graph when the shape changes); the
rollback alone (DeltaNet state copy + KV trim). Medians, ratios to the step, and the projected speed-up
E[tokens per round] / (cost of a round / step) for per-draft acceptance 0.4–0.9 with 1–4 drafts: a projection
from measured costs, not a measured speed-up.

Each round generates the same continuation of each prompt once per draft mode, in an order that rotates per round
(a busy machine's drift falls on every mode), cold (state and snapshots cleared). The prompts are think-mode
decision prompts (the model reasons from `<think>`), one per question below. Reasoning normally ends at the end
of turn or `</think>`; here it runs to `--tokens` (stop tokens are generated, not obeyed) so every mode times the
same number of tokens. Per mode: tokens per second (median over rounds of the total over prompts), forwards,
acceptance (kept drafts / drafted), tokens per forward (tokens per weight read), and the ratio of tokens per
second to drafts off in the same round. Greedy (temperature 0): every mode's tokens are checked equal to drafts
off's (`identical`).

The speed ratio depends on the cost of a forward over k tokens relative to one: on a tiny model (the demo:
hidden 64) every forward costs about the same whatever k, so its ratios are tokens-per-forward bounds, not the
0.8B geometry's (where 4 tokens cost 1.55× one step on a CPU: see BENCHMARKS.md / the notes).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from .common import finish, stamp, summary, random_prompt

QUESTIONS = (
    ("The bridge is out. Which way should the caravan go?", ("North pass", "River ford", "Wait")),
    ("Scouts report a camp ahead. What should the patrol do?", ("Attack", "Retreat", "Trade")),
    ("The well is dry. What should the village do first?", ("Dig deeper", "Move", "Ration water", "Pray")),
)


def _prompts(runner) -> list[list[int]]:
    from decider.engine.decisions.prompt import build_decision_prompt

    return [list(build_decision_prompt(runner.tokenizer, q, list(o), think=True).ids) for q, o in QUESTIONS]


def _generate(runner, prompt: list[int], draft: str, tokens: int, temperature: float) -> dict:
    from decider.engine.generation.drafter_choice import make_drafter
    from decider.engine.generation.generate import generate_step, make_rng
    from decider.engine.core.settings import SamplingSettings

    runner.reset()
    runner.clear_snapshots()
    sampling = SamplingSettings(temperature=temperature, seed=1, draft=draft)
    drafter = make_drafter(draft, head=runner.mtp, states=runner.auto_states)  # kept across requests, as the app does
    forwards = runner.stats.forwards
    started = time.perf_counter()
    ids = [s.token_id for s in generate_step(runner, prompt, sampling, make_rng(1), max_tokens=tokens, drafter=drafter)]
    seconds = time.perf_counter() - started
    return {"ids": ids, "seconds": seconds, "forwards": runner.stats.forwards - forwards,
            "drafted": drafter.drafted if drafter else 0, "kept": drafter.kept if drafter else 0}


def measure(model: str, drafts: list[str], tokens: int, rounds: int, temperature: float) -> dict:
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.runners.runner import ModelRunner

    runner = ModelRunner(model, DeviceOptions(device="CPU", exact=True))
    prompts = _prompts(runner)
    for prompt in prompts:  # warm-up: first-infer costs stay out of the timing
        _generate(runner, prompt, "none", 8, temperature)
    if any(draft != "none" for draft in drafts):  # and the verify compile the first drafted request makes
        from decider.engine.generation.drafts import MAX_DRAFT

        runner.prepare_verify(MAX_DRAFT + 1)
    per_round: dict[str, list[dict]] = {d: [] for d in drafts}
    identical = {d: True for d in drafts}
    for r in range(rounds):
        order = drafts[r % len(drafts):] + drafts[: r % len(drafts)]
        runs: dict[str, list[dict]] = {d: [] for d in drafts}
        for prompt in prompts:
            for draft in order:
                runs[draft].append(_generate(runner, prompt, draft, tokens, temperature))
        for draft in drafts:
            total = {k: sum(run[k] for run in runs[draft]) for k in ("seconds", "forwards", "drafted", "kept")}
            total["tokens"] = sum(len(run["ids"]) for run in runs[draft])
            per_round[draft].append(total)
            if temperature == 0.0 and [run["ids"] for run in runs[draft]] != [run["ids"] for run in runs[drafts[0]]]:
                identical[draft] = False
    rows = {}
    for draft in drafts:
        totals = per_round[draft]
        base = per_round[drafts[0]]
        rows[draft] = {
            "tokens_per_s": summary([t["tokens"] / t["seconds"] for t in totals]),
            "ratio_to_first": summary([(t["tokens"] / t["seconds"]) / (b["tokens"] / b["seconds"]) for t, b in zip(totals, base)]),
            "tokens_per_forward": totals[-1]["tokens"] / max(totals[-1]["forwards"], 1),
            "acceptance": totals[-1]["kept"] / totals[-1]["drafted"] if totals[-1]["drafted"] else None,
            "drafted": totals[-1]["drafted"], "kept": totals[-1]["kept"], "tokens": totals[-1]["tokens"],
            "identical_to_first": identical[draft] if temperature == 0.0 else None,
        }
    return {"rows": rows, "baseline": drafts[0]}


def _costs(model: str, rounds: int) -> dict:
    import numpy as np

    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.runners.runner import ModelRunner

    runner = ModelRunner(model, DeviceOptions(device="CPU", exact=True))
    prompt = random_prompt(runner.vocab_size, 256)
    runner.prefill(prompt)
    runner.step(11)
    times: dict[str, list[float]] = {}

    def timed(name: str, fn) -> None:
        started = time.perf_counter()
        fn()
        times.setdefault(name, []).append(time.perf_counter() - started)

    def verify(n: int) -> None:
        runner.verify(list(range(200, 200 + n)), n)
        runner.rewind()

    def mark_and_rewind() -> None:
        runner.verify([11], 1)
        started = time.perf_counter()
        runner.rewind()
        times.setdefault("rollback", []).append(time.perf_counter() - started)

    for _ in range(rounds):
        for _ in range(3):
            timed("step", lambda: runner.step(11))
        for n in (2, 3, 4, 5):
            for _ in range(3):
                timed(f"verify{n}", lambda n=n: verify(n))
        for _ in range(3):
            timed("alternating step", lambda: runner.step(11))
            timed("alternating verify4", lambda: verify(4))
        mark_and_rewind()
    medians = {name: float(np.median(v)) for name, v in times.items()}
    return {"medians_s": medians, "ratio_to_step": {k: v / medians["step"] for k, v in medians.items()},
            "projected_speedup": projected(medians), "rounds": rounds, "kernel": runner.kernel_note,
            "precision": runner.precision.label}


def projected(medians: dict[str, float]) -> dict[str, float]:
    """Tokens per second relative to plain steps for k drafts each kept with probability a (independently): a
    round yields (1 − a^(k+1)) / (1 − a) tokens and costs a verify of k + 1 tokens plus, when a draft is rejected
    (1 − a^k), a rollback. A projection from measured costs, not a measurement."""
    step, rollback = medians["step"], medians["rollback"]
    projection = {}
    for drafts in (1, 2, 3, 4):
        for alpha in (0.4, 0.5, 0.65, 0.8, 0.9):
            tokens = (1 - alpha ** (drafts + 1)) / (1 - alpha)
            cost = (medians[f"verify{drafts + 1}"] + (1 - alpha ** drafts) * rollback) / step
            projection[f"k={drafts} a={alpha}"] = tokens / cost
    return projection


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.w_draft", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--drafts", nargs="+", default=["none", "lookup", "auto"])
    parser.add_argument("--task", choices=("decode", "costs"), default="decode")
    args = parser.parse_args()
    result = stamp(model=args.model, tokens=args.tokens, rounds=args.rounds, temperature=args.temperature)
    if args.task == "costs":
        result.update(_costs(args.model, args.rounds))
        finish(args.out, result)
        for name, ratio in result["ratio_to_step"].items():
            print(f"{name:22s} {result['medians_s'][name] * 1000:8.2f} ms  ×{ratio:.2f} a step")
        print({k: round(v, 2) for k, v in result["projected_speedup"].items()})
        return
    result.update(measure(args.model, args.drafts, args.tokens, args.rounds, args.temperature))
    finish(args.out, result)
    for draft, row in result["rows"].items():
        print(f"{draft:7s} {row['tokens_per_s']['median']:8.1f} tok/s  ×{row['ratio_to_first']['median']:.2f}  "
              f"{row['tokens_per_forward']:.2f} tok/forward  acceptance {row['acceptance']}  identical {row['identical_to_first']}")


if __name__ == "__main__":
    main()
