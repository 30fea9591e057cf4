"""Decider and llama.cpp q8_0 in one process, interleaved: decode speed and think-mode decisions.

    python -m bench.w_paired --model IR_DIR --gguf GGUF --prompts prompts.json --task decode|think --out result.json

decode  a `--tokens`-token think generation from the same prompt ids with the same sampling (Qwen3.5's
        recommendation: temperature 0.7, top-k 20, top-p 0.8, presence 1.5, frequency 1.0 over the last 64
        tokens), each engine drawing with its own sampler: Decider exact, Decider fast (`exact=False`) and
        llama.cpp (llama-cpp-python's `generate`, its native sampler chain); the exact compile's peers: `widened`
        (int8 weights widened to f32), `shared` (one-token steps on the runner's own compile) and `kernel` (our int8
        kernel, engine/kernels, for the few-token infers). Rounds alternate the order;
        the time from the first token to the last gives tokens/s and the step; ratios are per round.
think   a think-mode decision with `--reasoning` tokens of reasoning (the budget spent, the block closed
        by force): Decider exact (`decide()`, think on), and llama.cpp generating the same number of tokens
        from the same prompt ids with the same sampling, then evaluating the same forced close and reading
        the answer position's logits (float64 log-softmax over the real vocabulary, the option letters).
        Where the engine has fast reasoning (DecisionRequest.fast_reasoning), Decider's
        fast-reasoning/exact-answer decision runs as a third engine.
Peak RSS is not separable in one process: the bench's own per-engine jobs (rss) give it.

--threads N runs both engines on N threads (default: every core). On a machine other work keeps busy, a
descheduled thread stalls every join of the others — llama.cpp joins its threads after every graph node
and degraded to ~5 s a step beside OpenVINO's ~0.7 s on a 2-core machine at load 20 — so a loaded run uses
one thread each: the same work per token, no joins.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
import sys
import time
from pathlib import Path
from unittest.mock import patch

import numpy as np

from .common import finish, read_json, stamp, summary


def decider_runner(model: str, device: str, exact: bool, threads: int, widened: bool = False, shared_steps: bool = False,
                   verify_graph: str | None = None, kernel: bool = False, kernel_mode: str | None = None):
    """widened: the exact compile with int8 weights widened to f32 (the plugin's path before integer pieces);
    shared_steps: one-token steps on the runner's own compile (before engine/graphs/one_token.py); verify_graph:
    DECIDER_VERIFY_GRAPH's value for this runner ("" the plan's default, "snapshot", "shared"); kernel: our int8
    kernel routed and adopted for few-token infers (DECIDER_EXACT_KERNEL=kernel, engine/kernels); kernel_mode: another
    DECIDER_EXACT_KERNEL value ("native": our native operation on the one-token steps without timing it, "plugin":
    neither kernel)."""
    import openvino as ov

    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.compile.plan import PROJECTIONS_ENV, STEP_GRAPH_ENV, VERIFY_GRAPH_ENV
    from decider.engine.runners.runner import ModelRunner

    core = ov.Core()
    if device.upper().startswith("CPU"):
        core.set_property("CPU", {"INFERENCE_NUM_THREADS": threads})
    # the plan reads the switch when the runner is built
    env = {**({PROJECTIONS_ENV: "widened"} if widened else {}), **({STEP_GRAPH_ENV: "shared"} if shared_steps else {}),
           **({VERIFY_GRAPH_ENV: verify_graph} if verify_graph is not None else {}),
           **({"DECIDER_EXACT_KERNEL": "kernel"} if kernel else {}),
           **({"DECIDER_EXACT_KERNEL": kernel_mode} if kernel_mode else {})}
    with patch.dict(os.environ, env):
        return ModelRunner(model, DeviceOptions(device=device, exact=exact), core=core)


def _sampling():
    from decider.engine.core.settings import SamplingSettings

    return SamplingSettings(seed=0)  # Qwen3.5's recommendation, as a user has it


def _llama_kwargs(sampling) -> dict:
    return dict(top_k=sampling.top_k, top_p=sampling.top_p, min_p=sampling.min_p, temp=sampling.temperature,
                repeat_penalty=sampling.repetition_penalty, frequency_penalty=sampling.frequency_penalty,
                presence_penalty=sampling.presence_penalty)


def load_llama(gguf: str, threads: int, seed: int = 0):
    from llama_cpp import Llama

    # last_n_tokens_size: the penalty window, as Decider's (64)
    return Llama(model_path=gguf, n_ctx=4096, n_batch=2048, n_ubatch=512, n_threads=threads, n_threads_batch=threads,
                 logits_all=False, verbose=False, seed=seed, last_n_tokens_size=64)


def feed_one_by_one(llm, ids: list[int]) -> None:
    """Evaluate `ids` a token at a time: llama-cpp-python 0.3.36 built on an AMX CPU dies (SIGSEGV in
    llama_decode) on a batch of 2+ tokens. generate(ids, reset=True) then finds all but the last token already
    evaluated (its longest-prefix reuse) and feeds only that one."""
    for token in ids:
        llm.eval([token])


def llama_generate(llm, ids: list[int], tokens: int, sampling) -> tuple[list[int], float]:
    """(tokens drawn, seconds from the first draw to the last): prefill excluded, as for Decider."""
    llm.reset()
    feed_one_by_one(llm, ids[:-1])
    out: list[int] = []
    first = None
    generator = llm.generate(ids, reset=True, **_llama_kwargs(sampling))
    for token in generator:
        out.append(int(token))
        if first is None:
            first = time.perf_counter()
        if len(out) == tokens:
            break
    generator.close()
    return out, time.perf_counter() - first


def decider_generate(runner, ids: list[int], tokens: int, sampling, draft: str = "none") -> tuple[list[int], float]:
    """The tokens and the seconds from the first to the last; `draft` (#36): none, lookup, mtp or auto, as a request's
    setting picks its drafter (the runner's forwards counted in runner.stats: tokens per weight read)."""
    from decider.engine.generation.drafter_choice import make_drafter
    from decider.engine.generation.generate import generate_step, make_rng
    from decider.engine.generation.processors import make_processors
    from decider.engine.generation.sampling import make_sampler

    runner.reset()
    runner.clear_snapshots()
    out: list[int] = []
    first = None
    # no stop ids: like llama.cpp's generate, the generation runs its length whatever the random weights draw
    drafter = make_drafter(draft, "the bench model", getattr(runner, "mtp", None), runner.auto_states)
    for step in generate_step(runner, ids, make_sampler(sampling, make_rng(sampling.seed)), max_tokens=tokens,
                              processors=make_processors(sampling), drafter=drafter):
        out.append(step.token_id)
        if first is None:
            first = time.perf_counter()
    return out, time.perf_counter() - first


def task_decode(args, prompts) -> dict:
    sampling = _sampling()
    ids = list(prompts["think"]["ids"])
    loaders = {
        "exact": lambda: decider_runner(args.model, args.device, True, args.threads),
        "widened": lambda: decider_runner(args.model, args.device, True, args.threads, widened=True),
        "shared": lambda: decider_runner(args.model, args.device, True, args.threads, shared_steps=True),
        "kernel": lambda: decider_runner(args.model, args.device, True, args.threads, kernel=True),
        "native": lambda: decider_runner(args.model, args.device, True, args.threads, kernel_mode="native"),
        "plugin": lambda: decider_runner(args.model, args.device, True, args.threads, kernel_mode="plugin"),
        "fast": lambda: decider_runner(args.model, args.device, False, args.threads),
        "llama": lambda: load_llama(args.gguf, args.threads),
    }
    engines = {name: load() for name, load in loaders.items() if name in args.engines or name == "llama"}
    for draft in (d for d in args.drafts if d != "none"):  # drafted decoding (#36) on the exact runner itself
        engines[f"exact+{draft}"] = engines["exact"]
    peers = [name for name in engines if name != "llama"]
    times: dict[str, list[float]] = {name: [] for name in engines}
    drawn: dict[str, int] = {}
    forwards: dict[str, list[int]] = {name: [] for name in peers}
    order = list(engines)
    for rnd in range(args.repeats + 1):  # the first round warms kernels and is dropped
        for name in (order if rnd % 2 == 0 else order[::-1]):
            engine = engines[name]
            if name == "llama":
                tokens, seconds = llama_generate(engine, ids, args.tokens, sampling)
            else:
                before = engine.stats.forwards
                tokens, seconds = decider_generate(engine, ids, args.tokens, sampling, name.partition("+")[2] or "none")
                forwards[name].append(engine.stats.forwards - before)
            drawn[name] = len(tokens)
            if rnd:
                times[name].append(seconds / (len(tokens) - 1))
        if rnd:
            print("  " + ", ".join(f"{n} {times[n][-1] * 1e3:.1f} ms/step" for n in order), file=sys.stderr, flush=True)
    out = {"tokens": args.tokens, "prompt_tokens": len(ids), "drawn": drawn, "threads": args.threads,
           "sampling": {k: getattr(sampling, k) for k in ("temperature", "top_k", "top_p", "min_p", "repetition_penalty",
                                                          "frequency_penalty", "presence_penalty")},
           "step_ms": {n: summary([t * 1e3 for t in v]) for n, v in times.items()},
           "tokens_per_s": {n: summary([1 / t for t in v]) for n, v in times.items()},
           "ratio_vs_llama": {n: summary([a / b for a, b in zip(times[n], times["llama"])]) for n in peers},
           "labels": {n: engines[n].precision.label for n in peers},
           # tokens per weight read: the prompt's forward included, the first (warm-up) round's too
           "tokens_per_forward": {n: summary([args.tokens / f for f in forwards[n] if f]) for n in peers},
           "native_steps": {n: getattr(engines[n], "native_note", "") for n in peers},
           "steps": {n: engines[n].plan.step_graph.value for n in peers}}
    out["weight_bytes"] = sum(f.stat().st_size for f in Path(args.model).glob("openvino_model.bin"))
    out["gguf_bytes"] = Path(args.gguf).stat().st_size
    return out


def llama_think_decision(llm, ids: list[int], reasoning: int, forced: list[int], letters: list[int], vocab: int, sampling) -> dict:
    """llama.cpp: the prompt, `reasoning` drawn tokens (the last one not yet fed, as in Decider), then the
    last draw and the forced close in one eval, and the answer position's logits."""
    from .w_llama import last_logits

    llm.reset()
    feed_one_by_one(llm, ids[:-1])
    drawn: list[int] = []
    generator = llm.generate(ids, reset=True, **_llama_kwargs(sampling))
    for token in generator:
        drawn.append(int(token))
        if len(drawn) == reasoning:
            break
    generator.close()
    feed_one_by_one(llm, [drawn[-1], *forced])
    x = last_logits(llm)[:vocab].astype(np.float64)
    logprobs = x - (x.max() + np.log(np.exp(x - x.max()).sum()))
    return {"reasoning_tokens": len(drawn), "logprobs": logprobs[letters].tolist()}


def _fast_reasoning(runner):
    """Decider's fast-reasoning/exact-answer decision, where the engine has it (DecisionRequest's
    fast_reasoning): the fast compilation is made before any timing, as a user pays it once."""
    import dataclasses

    from decider.engine.decisions.decide import DecisionRequest

    if "fast_reasoning" not in {f.name for f in dataclasses.fields(DecisionRequest)}:
        return None
    try:
        from decider.engine.runners.fast_reasoning import reasoner_for  # type: ignore[import-not-found]

        reasoner_for(runner, True)
    except ImportError:
        pass
    # explicit both ways: fast reasoning may be the think-mode default
    return lambda request, on: dataclasses.replace(request, fast_reasoning=on)


def task_think(args, prompts) -> dict:
    from decider.engine.model.chat_template import close_think
    from decider.engine.decisions.decide import DecisionRequest, decide
    from decider.engine.decisions.prompt import build_decision_prompt, letter_ids
    sampling = _sampling()
    runner = decider_runner(args.model, args.device, True, args.threads)
    item = prompts["decisions"]["64"]
    options = list(prompts["options"])
    prompt = build_decision_prompt(runner.tokenizer, item["question"], options, think=True)
    letters = letter_ids(runner.tokenizer, len(options))
    forced = close_think(runner.tokenizer)
    llm = load_llama(args.gguf, args.threads)
    fast = _fast_reasoning(runner)
    out: dict = {"prompt_tokens": len(prompt.ids), "threads": args.threads,
                 "fast_reasoning": "measured" if fast else "not in this engine yet (DecisionRequest has no fast_reasoning)"}
    for budget in args.reasoning:
        request = DecisionRequest(item["question"], tuple(options), think=True, reasoning_budget=budget, sampling=sampling)
        drafted = [f"exact+{d}" for d in args.drafts if d != "none"]  # drafted reasoning (#36), the same request
        engines = ["exact", *drafted, "llama"] + (["fast"] if fast else [])
        times: dict[str, list[float]] = {n: [] for n in engines}
        details: dict[str, dict] = {}
        for rnd in range(args.repeats + (1 if args.repeats > 1 else 0)):
            for name in (engines if rnd % 2 == 0 else engines[::-1]):
                started = time.perf_counter()
                if name == "llama":
                    details[name] = llama_think_decision(llm, list(prompt.ids), budget, forced, letters, runner.tokenizer.size, sampling)
                else:
                    runner.reset()
                    runner.clear_snapshots()
                    asked = (replace(request, sampling=replace(sampling, draft=name.split("+")[1])) if "+" in name
                             else fast(request, name == "fast") if fast else request)
                    forwards = runner.stats.forwards
                    result = decide(runner, asked)
                    details[name] = {"completion_tokens": result.usage.get("completion_tokens"), "reasoning_chars": len(result.reasoning or ""),
                                     "forwards": runner.stats.forwards - forwards,  # tokens per weight read: tokens / forwards
                                     "logprobs": [o.logprob for o in result.options],
                                     "reasoning_precision": getattr(result, "reasoning_precision", "exact")}
                if rnd or args.repeats <= 1:
                    times[name].append(time.perf_counter() - started)
            if times["llama"]:
                print(f"  {budget}: " + ", ".join(f"{n} {times[n][-1]:.2f} s" for n in engines), file=sys.stderr, flush=True)
        out[str(budget)] = {
            "seconds": {n: summary(v) for n, v in times.items()},
            "ratio_vs_llama": {n: summary([a / b for a, b in zip(times[n], times["llama"])]) for n in engines if n != "llama"},
            "details": details,
        }
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_paired")
    parser.add_argument("--model", required=True)
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--task", required=True, choices=("decode", "think"))
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--reasoning", default="128,512")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--engines", type=lambda text: text.split(","), default=["exact", "widened", "shared", "fast", "llama"],
                        help="decode: which of exact,widened,shared,kernel,fast,llama to load (llama is the ratios' peer: "
                             "always kept); fewer fit a larger model in memory")
    parser.add_argument("--drafts", type=lambda text: text.split(","), default=["none"],
                        help="think and decode: also reason / generate with these drafters (lookup,mtp,auto; mtp and "
                             "auto's head need a model folder with openvino_mtp_model.xml), each as the engine exact+DRAFT")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    args.reasoning = [int(x) for x in args.reasoning.split(",") if x]
    prompts = read_json(args.prompts)
    result = stamp(model=args.model)
    result.update({"decode": task_decode, "think": task_think}[args.task](args, prompts))
    finish(Path(args.out), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
