"""Think-mode decisions: Decider exact vs Decider fast-reasoning/exact-answer, paired in one process.

    python -m bench.w_think --model DIR --task think [--budgets 128 512] [--rounds 2] --out result.json
    python -m bench.w_think --model DIR --task candidates [--steps 48] --out result.json
    python -m bench.w_think --model DIR --task memory --out result.json

Tasks:
  think       decide() with think on, reasoning budgets 128 and 512, exact (fast_reasoning off) and fast
              reasoning / exact answer, interleaved (the order alternates per round), both cold (state and
              snapshots cleared); the fast twin is compiled before timing (on a CPU where the engine would
              not use one, its CPU candidate is forced, and the result says so). Each fast decision's option
              logprobs are checked against a fresh exact prefill of the very token sequence it answered
              after (max |Δ|, the 1e-5 claim at the real geometry).
  candidates  the fast twin's compile candidates (KV cache u8, int8 dynamic quantisation, f16/bf16 hints):
              one decode step each, interleaved per position with the exact runner on the same tokens
              (teacher-forced from the exact greedy path after a 256-token prompt); step medians, ratios
              to exact, and how often each candidate's greedy token equals exact's.
  memory      peak RSS of a think decision without a twin and with one, each in its own child process,
              against the weights' size on disk.

`measure_think(model, budgets, rounds)` returns the think task's dict, for a bench that puts another
engine's row beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .common import OPTIONS, RESULTS, peak_rss_mib, read_json, summary, write_json

PROMPT_LENGTH = "256"  # the prompt of the measurements (prompts.json's 256-token decision)

# The twin's candidates on CPU, over the exact properties (the engine's: fast_reasoning.fast_properties).
CANDIDATES: dict[str, dict[str, object]] = {
    "kv_u8": {"KV_CACHE_PRECISION": "u8"},
    "dq32": {"DYNAMIC_QUANTIZATION_GROUP_SIZE": "32"},
    "kv_u8+dq32": {"KV_CACHE_PRECISION": "u8", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "32"},
    "f16": {"INFERENCE_PRECISION_HINT": "f16", "KV_CACHE_PRECISION": "f16"},
    "bf16": {"INFERENCE_PRECISION_HINT": "bf16", "KV_CACHE_PRECISION": "bf16"},
}


def _question() -> str:
    prompts = read_json(RESULTS / "prompts.json")
    return prompts["decisions"][PROMPT_LENGTH]["question"]


def _request(question: str, budget: int, fast: bool):
    from decider.engine.decisions.decide import DecisionRequest
    from decider.engine.core.settings import SamplingSettings

    # Greedy without penalties: plain argmax, the sampling a peer engine runs the same way, and the
    # answer's logprobs are the model's alone (comparable with a plain prefill).
    greedy = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0, seed=0)
    return DecisionRequest(question, OPTIONS, think=True, reasoning_budget=budget, fast_reasoning=fast, sampling=greedy)


def _cold(runner) -> None:
    from decider.engine.runners.fast_reasoning import twin_of

    for r in (runner, twin_of(runner)):
        if r is not None:
            r.reset()
            r.clear_snapshots()


def _exactness(model: str, runner, result) -> float:
    """max |Δ| between the decision's option logprobs and a fresh exact runner's prefill of the very token
    sequence it answered after (the exact runner's history: prompt + reasoning + answer prefix)."""
    from decider.engine.decisions.prompt import letter_ids
    from decider.engine.core.logprobs import Distribution
    from decider.engine.runners.runner import ModelRunner

    reference = ModelRunner(model)
    want = Distribution(reference.prefill(list(runner.history))).logprobs(letter_ids(runner.tokenizer, len(OPTIONS)))
    got = np.array([o.logprob for o in result.options])
    return float(np.abs(got - want).max())


def _force_twin(runner) -> bool:
    """Where the engine would give this device no twin (an AVX2-only CPU), force its CPU candidate so the
    row measures the fast path anyway; True when forced."""
    from decider.engine.runners.fast_reasoning import PROPERTIES_ENV, fast_properties
    from decider.engine.compile.precision import cpu_properties

    if fast_properties(runner) is not None:
        return False
    os.environ[PROPERTIES_ENV] = json.dumps(cpu_properties(exact=False))  # f32 arithmetic, u8 KV, int8 activations
    return True


def measure_think(model: str, budgets=(128, 512), rounds: int = 2, check: bool = True, save=None) -> dict:
    """Think-mode decisions, exact vs fast reasoning / exact answer, interleaved; the dict BENCHMARKS.md's
    "Think-mode decisions" section is made from (a peer engine's row can be put beside it)."""
    from decider.engine.decisions.decide import decide
    from decider.engine.runners.fast_reasoning import reasoner_for
    from decider.engine.runners.runner import ModelRunner

    question = _question()
    runner = ModelRunner(model)
    forced = _force_twin(runner)
    started = time.perf_counter()
    reasoner = reasoner_for(runner, True)  # the twin compiled before any timing (a user pays it once)
    twin_compile_s = time.perf_counter() - started
    out = {"twin_compile_s": twin_compile_s, "twin_precision": reasoner.precision, "twin_forced": forced, "budgets": {}}
    for budget in budgets:
        rows = {"exact": [], "fast": []}
        for r in range(rounds):
            order = ("exact", "fast") if r % 2 == 0 else ("fast", "exact")
            for mode in order:
                _cold(runner)
                t0 = time.perf_counter()
                result = decide(runner, _request(question, budget, mode == "fast"))
                total = time.perf_counter() - t0
                row = {"total_s": total, "timings": result.timings, "usage": result.usage,
                       "reasoning_precision": result.reasoning_precision,
                       "logprobs": [o.logprob for o in result.options]}
                if mode == "fast" and check and r == 0:
                    row["max_abs_delta_vs_exact_prefill"] = _exactness(model, runner, result)
                rows[mode].append(row)
                out["budgets"][str(budget)] = {"rows": rows}
                if save is not None:  # a long run cut short keeps its finished rows
                    save(out)
                print(f"budget {budget} round {r} {mode}: {total:.1f} s "
                      f"(completion {result.usage['completion_tokens']})", flush=True)
        exact = [row["total_s"] for row in rows["exact"]]
        fast = [row["total_s"] for row in rows["fast"]]
        out["budgets"][str(budget)] = {
            "exact_s": summary(exact), "fast_s": summary(fast),
            "ratio_fast_over_exact": summary([f / e for f, e in zip(fast, exact)]),
            "rows": rows,
        }
    return out


def _teacher_forced(runner, twins: dict, prompt: list[int], steps: int) -> dict:
    times = {name: [] for name in ["exact", *twins]}
    agree = {name: 0 for name in twins}
    drift = {name: [] for name in twins}
    logits = runner.prefill(prompt)
    states = runner.export_state()
    for twin in twins.values():  # each twin starts from the exact prompt state, as in a decision
        twin.clear_snapshots()
        twin.adopt(prompt, states, logits)
        twin.prefill(prompt)
    token = int(np.argmax(logits))
    for position in range(steps):
        names = list(times)
        names = names if position % 2 == 0 else names[::-1]  # alternate who runs first
        step_logits = {}
        for name in names:
            r = runner if name == "exact" else twins[name]
            t0 = time.perf_counter()
            step_logits[name] = r.step(token)
            times[name].append(time.perf_counter() - t0)
        exact_logits = step_logits["exact"]
        best = int(np.argmax(exact_logits))
        lse = np.logaddexp.reduce(exact_logits)
        for name in twins:
            fast_logits = step_logits[name]
            agree[name] += int(np.argmax(fast_logits)) == best
            drift[name].append(abs((fast_logits[best] - np.logaddexp.reduce(fast_logits)) - (exact_logits[best] - lse)))
        token = best
    exact_median = float(np.median(times["exact"]))
    return {
        name: {
            "step_ms": summary([1000 * t for t in values]),
            "ratio_to_exact": float(np.median(values)) / exact_median,
            **({"greedy_agreement": agree[name] / steps, "max_logprob_drift": float(max(drift[name]))} if name in twins else {}),
        }
        for name, values in times.items()
    }


def task_candidates(args) -> dict:
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.runners.runner import ModelRunner

    prompts = read_json(RESULTS / "prompts.json")
    prompt = list(prompts["decisions"][PROMPT_LENGTH]["ids"])
    runner = ModelRunner(args.model)
    fast = DeviceOptions(device=runner.device, exact=False)
    exact_props = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}
    names = args.candidates or list(CANDIDATES)
    twins, compiled = {}, {}
    for name in names:
        try:
            twin = runner.twin(fast, {**exact_props, **CANDIDATES[name]})
        except Exception as exc:  # a candidate the plugin refuses is a result, not a crash
            compiled[name] = f"refused: {exc}"
            continue
        twins[name] = twin
        compiled[name] = {p: str(twin.compiled.get_property(p)) for p in exact_props}
    return {"compiled": compiled, "steps": _teacher_forced(runner, twins, prompt, args.steps)}


def _memory_child(model: str, fast: bool, budget: int) -> dict:
    from decider.engine.decisions.decide import decide
    from decider.engine.runners.runner import ModelRunner

    runner = ModelRunner(model)
    if fast:
        _force_twin(runner)
    loaded = peak_rss_mib()
    decide(runner, _request(_question(), budget, fast))
    return {"peak_rss_mib": peak_rss_mib(), "peak_after_load_mib": loaded}


def task_memory(args) -> dict:
    weights = sum(p.stat().st_size for p in Path(args.model).glob("openvino_*model.bin")) / 2**20
    out = {"weights_on_disk_mib": weights}
    for mode in ("exact", "fast"):
        child = subprocess.run(
            [sys.executable, "-m", "bench.w_think", "--model", args.model, "--task", "memory-child",
             "--budgets", str(args.memory_budget), *(["--fast"] if mode == "fast" else [])],
            capture_output=True, text=True, check=True,
        )
        out[mode] = json.loads(child.stdout.strip().splitlines()[-1])
    out["extra_peak_mib"] = out["fast"]["peak_rss_mib"] - out["exact"]["peak_rss_mib"]
    out["extra_over_weights"] = out["extra_peak_mib"] / weights
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--task", choices=("think", "candidates", "memory", "memory-child"), default="think")
    parser.add_argument("--budgets", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--candidates", nargs="*")
    parser.add_argument("--memory-budget", type=int, default=32)
    parser.add_argument("--fast", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.task == "memory-child":
        print(json.dumps(_memory_child(args.model, args.fast, args.budgets[0])))
        return
    if args.task == "think":
        result = measure_think(args.model, tuple(args.budgets), args.rounds,
                               save=(lambda partial: write_json(args.out, partial)) if args.out else None)
    elif args.task == "candidates":
        result = task_candidates(args)
    else:
        result = task_memory(args)
    result["task"] = args.task
    if args.out:
        write_json(args.out, result)
    print(json.dumps({k: v for k, v in result.items() if k != "budgets"}, indent=1, default=str)[:4000])


if __name__ == "__main__":
    main()
