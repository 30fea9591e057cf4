"""OpenVINO GenAI `LLMPipeline` vs Decider on the same IR and device, one process, interleaved.

    python -m bench.w_genai --model DIR --prompts prompts.json --mode exact|fast --out result.json

mode exact: every engine compiles with Decider's exact properties (f32 inference, f32 KV cache, no
dynamic quantisation) — the same arithmetic; mode fast: Decider `exact=False` and GenAI's defaults.
GenAI gets the same token ids (an ov.Tensor, so no tokenizer or detokenizer time) and generates one
token; Decider runs `decide()` (tokenize, template, one forward, constrained draw, full logprobs).
Also run alone (`--only ENGINE --repeats 1`) for an engine's peak RSS.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from .common import peak_rss_mib, read_json, summary, write_json


def exact_properties(device: str) -> dict:
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.compile.planner import compile_properties

    return compile_properties(device, DeviceOptions(device=device, exact=True))


def make_genai(model: str, device: str, backend: str, mode: str):
    import openvino_genai as ov_genai

    props = dict(exact_properties(device)) if mode == "exact" else {}
    if backend == "sdpa":
        props["ATTENTION_BACKEND"] = "SDPA"
    else:
        scheduler = ov_genai.SchedulerConfig()
        scheduler.enable_prefix_caching = False  # every request must compute its whole prompt
        props["scheduler_config"] = scheduler
        props["ATTENTION_BACKEND"] = "PA"
    pipe = ov_genai.LLMPipeline(model, device, **props)
    config = pipe.get_generation_config()
    config.max_new_tokens = 1
    config.do_sample = False
    config.ignore_eos = True

    def run(ids: list[int]) -> int:
        import openvino as ov

        result = pipe.generate(ov.Tensor(np.asarray([ids], dtype=np.int64)), config)
        return int(result.tokens[0][0])

    return run


def make_decider(model: str, device: str, mode: str, prompts: dict, length: int):
    from decider.engine.decisions.decide import DecisionRequest, decide
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.runners.runner import ModelRunner
    from decider.engine.core.settings import SamplingSettings

    runner = ModelRunner(model, DeviceOptions(device=device, exact=mode == "exact"))
    item = prompts["decisions"][str(length)]
    request = DecisionRequest(item["question"], tuple(prompts["options"]), sampling=SamplingSettings(temperature=0.0, seed=0))

    def run(ids: list[int]):
        runner.reset()
        runner.clear_snapshots()
        result = decide(runner, request)
        assert result.usage["prefill_tokens"] == len(ids)
        return result.choice_index

    def bare(ids: list[int]):
        """The same forward without Decider around it: reset_state + infer on Decider's request."""
        feed = runner._layout.inputs(np.asarray(ids, dtype=np.int64), 0)
        runner._request.reset_state()
        runner.history = []
        runner._request.infer(feed)
        return int(np.argmax(runner._request.get_tensor("logits").data[0, -1]))

    return run, bare


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_genai")
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--mode", default="exact", choices=("exact", "fast"))
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--only", choices=("decider", "sdpa", "pa"))
    parser.add_argument("--engines", default="decider,sdpa,pa", help="which engines run interleaved (comma-separated)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    prompts = read_json(args.prompts)
    ids = prompts["decisions"][str(args.length)]["ids"]
    names = [args.only] if args.only else [e for e in args.engines.split(",") if e in ("decider", "sdpa", "pa")]
    engines, load_s, errors = {}, {}, {}
    for name in names:
        started = time.perf_counter()
        try:
            if name == "decider":
                engines["decider"], bare = make_decider(args.model, args.device, args.mode, prompts, args.length)
                if not args.only:
                    engines["infer"] = bare
            else:
                engines[name] = make_genai(args.model, args.device, name, args.mode)
        except Exception as exc:  # record why an engine cannot run, keep measuring the others
            errors[name] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            print(f"  {name}: {errors[name]}", file=sys.stderr, flush=True)
            continue
        load_s[name] = time.perf_counter() - started
    times = {name: [] for name in engines}
    tokens = {}
    order = list(engines)
    for rep in range(args.repeats + (0 if args.only else 1)):
        for name in (order if rep % 2 == 0 else order[::-1]):
            started = time.perf_counter()
            tokens[name] = engines[name](ids)
            elapsed = time.perf_counter() - started
            if rep or args.only:
                times[name].append(elapsed)
        if rep or args.only:
            print("  " + ", ".join(f"{n} {times[n][-1]:.3f} s" for n in order), file=sys.stderr, flush=True)
    out = {"mode": args.mode, "length": args.length, "load_s": load_s, "errors": errors,
           "seconds": {n: summary(t) for n, t in times.items() if t}, "peak_rss_mib": peak_rss_mib()}
    if "decider" in times:
        out["ratio"] = {n: summary([d / o for d, o in zip(times["decider"], times[n])]) for n in times if n != "decider"}
    if "infer" in times:  # the bare forward against GenAI: what the graph/compile costs, without Decider's Python
        out["infer_ratio"] = {n: summary([d / o for d, o in zip(times["infer"], times[n])]) for n in ("sdpa", "pa") if n in times}
    write_json(Path(args.out), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
