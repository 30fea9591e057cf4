"""Decider measurements on one compiled model (run as a child process by `python -m bench run`).

    python -m bench.w_decider --model DIR --prompts prompts.json --task TASK --repeats N --out result.json

Tasks (each a separate process, so its peak RSS is its own):
  latency   decide() vs a bare infer() of the same ids on the same compiled model, at 64/256/1024 tokens,
            interleaved pairs, state reset before each; also the decision itself (for agreement checks)
  fast      decide() exact (f32) vs fast (plugin-chosen precision) at 256 tokens, interleaved
  logprobs  generate() with top_logprobs None vs 5 (64-token prompt, N greedy tokens), interleaved
  warm      decide() with a shared 1,000-token context: cold (state and snapshots cleared) vs warm
            (a different question after the context snapshot exists), interleaved
  decode    a 128-token think generation: decode tokens/s, and the bare one-token infer() for comparison
  head      the last-position head (Decider's graph) vs the unmodified all-position head, 1,024 tokens,
            both compiled in this process, interleaved
  headmem   one 1,024-token forward on only one of the two graphs (--variant last|all): peak RSS
  rss       load + one 256-token decision: Decider's peak RSS
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

import numpy as np

from .common import peak_rss_mib, read_json, rss_mib, summary, task_parser, write_json


def _runner(model: str, device: str, exact: bool = True):
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.runners.runner import ModelRunner

    started = time.perf_counter()
    runner = ModelRunner(model, DeviceOptions(device=device, exact=exact))
    return runner, time.perf_counter() - started


def _cold(runner) -> None:
    runner.reset()
    runner.clear_snapshots()


def _request(question: str, options, context: str | None = None):
    from decider.engine.decisions.decide import DecisionRequest
    from decider.engine.core.settings import SamplingSettings

    return DecisionRequest(question, tuple(options), context=context, sampling=SamplingSettings(temperature=0.0, seed=0))


def _bare_infer(runner, ids: list[int]) -> float:
    """Exactly the forward Decider's prefill runs for this prompt: same compiled model, same feed."""
    feed = runner._layout.inputs(np.asarray(ids, dtype=np.int64), 0)
    runner._request.reset_state()
    runner.history = []
    started = time.perf_counter()
    runner._request.infer(feed)
    return time.perf_counter() - started


def _decision_summary(result) -> dict:
    return {
        "choice": result.choice_index,
        "probabilities": [o.probability for o in result.options],
        "logprobs": [o.logprob for o in result.options],
    }


def task_latency(args, prompts) -> dict:
    from decider.engine.decisions.decide import decide

    runner, load_s = _runner(args.model, args.device)
    forward_s = _time_forwards(runner)
    out = {"load_s": load_s, "lengths": {}}
    for length in args.lengths:
        item = prompts["decisions"][str(length)]
        request = _request(item["question"], prompts["options"])
        decide_s, infer_s, ratios, parts, direct = [], [], [], [], []
        result = None
        for rep in range(args.repeats + 1):  # the first pair warms caches and is dropped
            order = ("infer", "decide") if rep % 2 == 0 else ("decide", "infer")
            times = {}
            for which in order:
                if which == "infer":
                    times["infer"] = _bare_infer(runner, item["ids"])
                else:
                    _cold(runner)
                    forward_s.clear()
                    started = time.perf_counter()
                    result = decide(runner, request)
                    times["decide"] = time.perf_counter() - started
                    inside = sum(forward_s)
            assert result.usage["prefill_tokens"] == length, result.usage
            if rep == 0:
                continue
            decide_s.append(times["decide"])
            infer_s.append(times["infer"])
            ratios.append(times["decide"] / times["infer"])
            direct.append(times["decide"] / inside)  # everything decide() does around its own infer() calls
            parts.append(dict(result.timings))
            print(f"  {length} tokens: decide {times['decide']:.3f} s, infer {times['infer']:.3f} s", file=sys.stderr, flush=True)
        out["lengths"][str(length)] = {
            "decide_s": summary(decide_s),
            "infer_s": summary(infer_s),
            "ratio": summary(ratios),
            "overhead_ms": summary([(d - i) * 1e3 for d, i in zip(decide_s, infer_s)]),
            "direct_ratio": summary(direct),
            "parts": {k: float(np.median([p.get(k, 0.0) for p in parts])) for k in parts[0]},
            "decision": _decision_summary(result),
        }
    out["peak_rss_mib"] = peak_rss_mib()
    return out


def _time_forwards(runner) -> list[float]:
    """Record the wall time of each infer() the runner makes (a list the caller clears per decision)."""
    times: list[float] = []
    forward = runner._run

    def timed(ids, past):
        started = time.perf_counter()
        try:
            return forward(ids, past)
        finally:
            times.append(time.perf_counter() - started)

    runner._run = timed
    return times


def task_fast(args, prompts) -> dict:
    from decider.engine.decisions.decide import decide

    exact, _ = _runner(args.model, args.device, exact=True)
    fast, _ = _runner(args.model, args.device, exact=False)
    item = prompts["decisions"]["256"]
    request = _request(item["question"], prompts["options"])
    times = {"exact": [], "fast": []}
    results = {}
    for rep in range(args.repeats + 1):
        for name, runner in ((("exact", exact), ("fast", fast)) if rep % 2 == 0 else (("fast", fast), ("exact", exact))):
            _cold(runner)
            started = time.perf_counter()
            results[name] = decide(runner, request)
            if rep:
                times[name].append(time.perf_counter() - started)
    ratios = [f / e for f, e in zip(times["fast"], times["exact"])]
    drift = float(np.max(np.abs(np.array([o.logprob for o in results["fast"].options]) - [o.logprob for o in results["exact"].options])))
    return {
        "exact_s": summary(times["exact"]), "fast_s": summary(times["fast"]), "ratio": summary(ratios),
        "max_logprob_drift": drift, "same_choice": results["fast"].choice_index == results["exact"].choice_index,
        "fast_precision": str(fast._request.get_compiled_model().get_property("INFERENCE_PRECISION_HINT")),
        "exact_precision": str(exact._request.get_compiled_model().get_property("INFERENCE_PRECISION_HINT")),
    }


def task_logprobs(args, prompts) -> dict:
    from decider.engine.generation.generate import GenerationRequest
    from decider.engine.core.settings import SamplingSettings

    runner, _ = _runner(args.model, args.device)
    ids = tuple(prompts["decisions"]["64"]["ids"])
    sampling = SamplingSettings(temperature=0.0, seed=0)  # Qwen3.5's penalties stay on, as a user has them
    requests = {
        "off": GenerationRequest(ids, sampling, max_tokens=args.tokens, top_logprobs=None),
        "on": GenerationRequest(ids, sampling, max_tokens=args.tokens, top_logprobs=5),
    }
    # Many short generations, alternating: this VM drifts by several % over seconds, so long runs
    # compared one after the other measure the drift, not the 1 % in question.
    pairs = max(args.repeats * 3, 12)
    total = {"off": [], "on": []}
    pooled = {"off": [], "on": []}  # every decode step of every measured generation
    medians = {"off": [], "on": []}
    tokens = {}
    for rep in range(pairs + 1):
        for name in (("off", "on") if rep % 2 == 0 else ("on", "off")):
            completion, elapsed, steps = _timed_generation(runner, requests[name])
            tokens[name] = completion.token_ids
            if rep:
                total[name].append(elapsed)
                pooled[name] += steps
                medians[name].append(float(np.median(steps)))
    print(f"  median step off {np.median(pooled['off']) * 1e3:.2f} ms, on {np.median(pooled['on']) * 1e3:.2f} ms "
          f"({len(pooled['on'])} steps each)", file=sys.stderr, flush=True)
    assert tokens["on"] == tokens["off"], "logprobs changed the generated tokens"
    # The host work `top_logprobs` adds (one float64 logsumexp, the top 5), timed on its own: the engine
    # does it while the device computes the next token, so it shows in the step only where the host and
    # the device share the same cores (CPU).
    direct_ms = _host_logprob_cost(runner, ids, sampling, args.tokens, args.repeats)
    return {
        "generated_tokens": len(tokens["on"]),
        "generations": pairs,
        "prompt_tokens": len(ids),
        "off_s": summary(total["off"]), "on_s": summary(total["on"]),
        "ratio": summary([a / b for a, b in zip(total["on"], total["off"])]),
        "step_off_ms": summary([t * 1e3 for t in medians["off"]]), "step_on_ms": summary([t * 1e3 for t in medians["on"]]),
        "step_ratio": summary([a / b for a, b in zip(medians["on"], medians["off"])]),
        "pooled_step_ratio": float(np.median(pooled["on"]) / np.median(pooled["off"])),
        "direct_cost_ms": summary(direct_ms),
    }


def _timed_generation(runner, request):
    """generate() through its streaming form: the whole time and each decode step's (yield to yield)."""
    from decider.engine.generation.generate import stream_generation

    _cold(runner)
    started = last = time.perf_counter()
    steps = []
    for _, completion in stream_generation(runner, request):
        now = time.perf_counter()
        steps.append(now - last)
        last = now
    # the first interval holds the prefill, the last the final flush after the generation ended
    return completion, time.perf_counter() - started, steps[1:-1]


def _host_logprob_cost(runner, ids, sampling, tokens: int, repeats: int) -> list[float]:
    """Per generation: the median time of one top-5 logprob entry on the step's logits, in ms."""
    from decider.engine.generation.generate import generate_step, make_rng
    from decider.engine.core.logprobs import Distribution
    from decider.engine.generation.processors import make_processors
    from decider.engine.generation.sampling import make_sampler

    costs = []
    for _ in range(repeats):
        _cold(runner)
        entry_ms = []
        for step in generate_step(runner, ids, make_sampler(sampling, make_rng(0)), max_tokens=tokens,
                                  processors=make_processors(sampling)):
            started = time.perf_counter()
            Distribution(step.penalized).entry(step.token_id, 5)
            entry_ms.append((time.perf_counter() - started) * 1e3)
        costs.append(float(np.median(entry_ms)))
    return costs


def task_warm(args, prompts) -> dict:
    from decider.engine.decisions.decide import decide

    runner, _ = _runner(args.model, args.device)
    context = prompts["context"]["text"]
    questions = [w["question"] for w in prompts["warm"]]
    cold_s, warm_s, ratios, reused, computed = [], [], [], [], []
    cold_prefill, warm_prefill = [], []
    for rep in range(args.repeats + 1):
        # cold: nothing cached; warm: the same context, a different question
        _cold(runner)
        started = time.perf_counter()
        cold = decide(runner, _request(questions[(2 * rep) % len(questions)], prompts["options"], context))
        c = time.perf_counter() - started
        started = time.perf_counter()
        warm = decide(runner, _request(questions[(2 * rep + 1) % len(questions)], prompts["options"], context))
        w = time.perf_counter() - started
        assert warm.usage["reused_tokens"] > 0, warm.usage
        if rep:
            cold_s.append(c)
            warm_s.append(w)
            ratios.append(w / c)
            reused.append(warm.usage["reused_tokens"])
            computed.append(warm.usage["prefill_tokens"])
            cold_prefill.append(cold.usage["prefill_tokens"])
            warm_prefill.append(warm.timings)
            print(f"  cold {c:.3f} s ({cold.usage['prefill_tokens']} tok), warm {w:.3f} s "
                  f"({warm.usage['prefill_tokens']} computed, {warm.usage['reused_tokens']} reused)", file=sys.stderr, flush=True)
    return {
        "cold_s": summary(cold_s), "warm_s": summary(warm_s), "ratio": summary(ratios),
        "cold_tokens": int(np.median(cold_prefill)), "warm_computed_tokens": int(np.median(computed)),
        "warm_reused_tokens": int(np.median(reused)),
        "warm_parts": {k: float(np.median([t.get(k, 0.0) for t in warm_prefill])) for k in warm_prefill[0]},
    }


def task_decode(args, prompts) -> dict:
    from decider.engine.generation.generate import GenerationRequest, generate
    from decider.engine.core.settings import SamplingSettings

    runner, _ = _runner(args.model, args.device)
    ids = tuple(prompts["think"]["ids"])
    request = GenerationRequest(ids, SamplingSettings(temperature=0.0, seed=0), max_tokens=prompts["think"]["max_tokens"], think=True)
    rates, steps, counts = [], [], []
    for rep in range(args.repeats + 1):
        _cold(runner)
        completion = generate(runner, request)
        n = completion.completion_tokens
        decode_s = completion.timings["total_s"] - completion.timings["prefill_s"]
        if rep:
            rates.append((n - 1) / decode_s)
            steps.append(decode_s / (n - 1) * 1e3)
            counts.append(n)
            print(f"  {n} tokens, {rates[-1]:.2f} tok/s", file=sys.stderr, flush=True)
    # the bare decode step: one-token infer() on the same request after the same prompt
    _cold(runner)
    runner.prefill(list(ids))
    past = len(ids)
    bare = []
    for i in range(min(64, prompts["think"]["max_tokens"])):
        feed = runner._layout.inputs(np.asarray([198], dtype=np.int64), past + i)
        started = time.perf_counter()
        runner._request.infer(feed)
        bare.append((time.perf_counter() - started) * 1e3)
    return {
        "tokens_per_s": summary(rates), "step_ms": summary(steps), "generated": counts,
        "bare_step_ms": summary(bare[4:]), "prompt_tokens": len(ids),
        "step_overhead_ms": float(np.median(steps) - np.median(bare[4:])),
    }


def _unmodified(runner, model_dir: str, device: str):
    import openvino as ov

    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.compile.planner import compile_properties

    core = ov.Core()
    model = core.read_model(runner.folder.language_ir)
    compiled = core.compile_model(model, device, compile_properties(device, DeviceOptions(device=device, exact=True)))
    return compiled.create_infer_request()


def task_head(args, prompts) -> dict:
    runner, _ = _runner(args.model, args.device)
    full = _unmodified(runner, args.model, args.device)
    ids = prompts["decisions"]["1024"]["ids"]
    feed = runner._layout.inputs(np.asarray(ids, dtype=np.int64), 0)
    times = {"last": [], "all": []}
    for rep in range(args.repeats + 1):
        for name in (("last", "all") if rep % 2 == 0 else ("all", "last")):
            request = runner._request if name == "last" else full
            request.reset_state()
            started = time.perf_counter()
            request.infer(feed)
            logits = request.get_tensor("logits").data[0, -1]  # what a caller reads
            elapsed = time.perf_counter() - started
            if rep:
                times[name].append(elapsed)
        if rep:
            print(f"  last {times['last'][-1]:.3f} s, all {times['all'][-1]:.3f} s", file=sys.stderr, flush=True)
    last_logits = runner._request.get_tensor("logits").data[0, -1].copy()
    return {
        "last_s": summary(times["last"]), "all_s": summary(times["all"]),
        "ratio": summary([a / b for a, b in zip(times["last"], times["all"])]),
        "max_abs_diff": float(np.max(np.abs(last_logits - logits))),
        "all_output_mib": float(full.get_tensor("logits").data.nbytes / 2**20),
        "tokens": len(ids),
    }


def task_headmem(args, prompts) -> dict:
    import openvino as ov

    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.compile.planner import compile_properties
    from decider.engine.graphs.logits import slice_to_last_position
    from decider.engine.model.folder import inspect_folder

    folder = inspect_folder(args.model)
    core = ov.Core()
    model = core.read_model(folder.language_ir)
    if args.variant == "last":
        slice_to_last_position(model)
    compiled = core.compile_model(model, args.device, compile_properties(args.device, DeviceOptions(device=args.device)))
    request = compiled.create_infer_request()
    ids = np.asarray(prompts["decisions"]["1024"]["ids"], dtype=np.int64)
    feed = {"input_ids": ids[None], "attention_mask": np.ones((1, len(ids)), np.int64),
            "position_ids": np.arange(len(ids), dtype=np.int64)[None], "beam_idx": np.zeros(1, np.int32)}
    gc.collect()
    before_peak, before = peak_rss_mib(), rss_mib()
    started = time.perf_counter()
    request.infer(feed)
    elapsed = time.perf_counter() - started
    return {"variant": args.variant, "seconds": elapsed, "rss_after_compile_mib": before,
            "peak_after_compile_mib": before_peak, "peak_rss_mib": peak_rss_mib(),
            "output_mib": float(request.get_tensor("logits").data.nbytes / 2**20)}


def task_rss(args, prompts) -> dict:
    from decider.engine.decisions.decide import decide

    runner, load_s = _runner(args.model, args.device)
    item = prompts["decisions"]["256"]
    started = time.perf_counter()
    decide(runner, _request(item["question"], prompts["options"]))
    return {"load_s": load_s, "first_decision_s": time.perf_counter() - started, "peak_rss_mib": peak_rss_mib(),
            "rss_mib": rss_mib()}


TASKS = {"latency": task_latency, "fast": task_fast, "logprobs": task_logprobs, "warm": task_warm,
         "decode": task_decode, "head": task_head, "headmem": task_headmem, "rss": task_rss}


def main(argv=None) -> int:
    parser = task_parser("python -m bench.w_decider", TASKS, lengths="64,256,1024")
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--tokens", type=int, default=24, help="generated tokens per generation in the logprobs task")
    parser.add_argument("--variant", default="last", choices=("last", "all"))
    args = parser.parse_args(argv)
    args.lengths = [int(x) for x in args.lengths.split(",") if x]
    prompts = read_json(args.prompts)
    result = TASKS[args.task](args, prompts)
    result.setdefault("peak_rss_mib", peak_rss_mib())
    write_json(Path(args.out), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
