"""Capture-to-bars of a 1280×720 grab at three pixel budgets, Decider (int8) vs transformers fp32, interleaved.

Run by `python -m bench vision-budgets` (bench/vision_budgets.py) in the tools interpreter (torch, transformers);
by hand:

    python -m bench.w_vision_budgets --rounds 3 --out /tmp/rows.json
    python -m bench.w_vision_budgets --quick --out /tmp/rows.json     # the test fixture, in seconds

Budgets: the whole grab (921,600 pixels: 1280×704 after rounding to 32s, 880 image tokens at the real 0.8B
geometry), half (460,800) and a quarter (230,400) of its pixels. Each round runs every budget (in a rotated order)
on both engines (the first engine alternating), every run cold (app/capture_timing.py: state, snapshots and the
encoded-image cache cleared). One warm-up run per engine first, not counted. Rounds stop early when another would
pass --max-seconds (one round always runs).

Per run: capture-to-bars split into preprocess, vision tower, prefill; the option logprobs (Decider vs
transformers on the same prompt ids and the same budget); the 1-minute load before it; the cores other processes
kept busy during it (app/capture_budget.py counts only rows with little of that).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path

from .common import RESULTS, log, peak_rss_mib, stamp, write_json

FULL = 1280 * 720
BUDGETS = {"full": FULL, "half": FULL // 2, "quarter": FULL // 4}
QWEN_MAX_PIXELS = 4096 * 4096  # real Qwen3.5's own budget; the quick fixture is given it (its own is 65,536)


def decider_run(runner, pixels, budget: int) -> dict:
    from decider.app.capture_timing import time_capture

    t = time_capture(runner, budget, pixels)
    return {"capture_to_bars_s": t.seconds, "preprocess_s": t.preprocess_s, "vision_s": t.encode_s,
            "prefill_s": t.prefill_s, "tokens": t.image_tokens, "size": list(t.size), "logprobs": list(t.logprobs),
            "load": t.load, "others_cores": t.others_cores if t.others_cores is not None else float("nan")}


class TorchPeer:
    """transformers fp32 on the prompt ids Decider builds, its image processor given the same budget."""

    def __init__(self, hf: str, runner):
        from .w_vision import Transformers

        self.engine = Transformers(hf)
        self.own = self.engine.processor
        self.runner = runner
        self.letters: list[int] = []

    def run(self, pixels, budget: int) -> dict:
        from decider.app.capture_timing import OPTIONS, QUESTION, _cpu_jiffies, _others_cores
        from decider.engine.decisions.prompt import build_decision_prompt, letter_ids
        from decider.engine.model.vision_tokens import token_ids

        tokenizer = self.runner.tokenizer
        tokens = tuple(self.runner.image_tokens(pixels, budget))
        prompt = build_decision_prompt(tokenizer, QUESTION, list(OPTIONS), think=False, images=[tokens])
        ids = token_ids(prompt.ids, tokenizer.special_id("<|image_pad|>")).tolist()
        letters = letter_ids(tokenizer, len(OPTIONS))
        self.engine.processor = budgeted(self.own, min(budget, self.own.max_pixels))
        cpus, load, before = os.cpu_count() or 1, os.getloadavg()[0], _cpu_jiffies()
        encode, decision = self.engine.decision(pixels, ids, letters, self.runner.vocab_size)
        others = _others_cores(before, _cpu_jiffies(), cpus)
        return {"capture_to_bars_s": decision["seconds"], "preprocess_s": encode["preprocess_s"],
                "vision_s": encode["encoder_s"], "prefill_s": decision["seconds"] - encode["total_s"],
                "tokens": encode["tokens"], "logprobs": decision["logprobs"], "load": load,
                "others_cores": others if others is not None else float("nan")}


def budgeted(processor, max_pixels: int):
    """transformers' image processor with another pixel budget (its size and its max_pixels both say it)."""
    config = processor.to_dict()
    size = {"shortest_edge": processor.min_pixels, "longest_edge": max_pixels}
    return type(processor)(**{**config, "size": size, "min_pixels": processor.min_pixels, "max_pixels": max_pixels})


def _median_row(runs: list[dict]) -> dict:
    keys = ("capture_to_bars_s", "preprocess_s", "vision_s", "prefill_s")
    return {**{key: statistics.median(run[key] for run in runs) for key in keys}, "tokens": runs[0]["tokens"],
            "runs": runs}


def summarise(budgets: dict[str, int], runs: dict[str, dict[str, list[dict]]]) -> list[dict]:
    """One row per budget: medians per engine, transformers over Decider paired run by run, the largest logprob gap."""
    rows = []
    for name, budget in budgets.items():
        row: dict = {"name": name, "budget": budget, "decider": _median_row(runs["decider"][name])}
        peer = runs.get("torch", {}).get(name)
        if peer:
            row["torch"] = _median_row(peer)
            pairs = list(zip(peer, runs["decider"][name]))
            row["torch_over_decider"] = statistics.median(t["capture_to_bars_s"] / d["capture_to_bars_s"] for t, d in pairs)
            row["max_logprob_delta"] = max(abs(a - b) for t, d in pairs for a, b in zip(t["logprobs"], d["logprobs"]))
        rows.append(row)
    return rows


def measure(engines: dict, pixels, budgets: dict[str, int], rounds: int, deadline: float) -> dict:
    """Warm-up, then interleaved rounds until `rounds` or no time for another before `deadline` (a perf_counter
    reading); runs[engine][budget name] = [run, …]."""
    names = list(budgets)
    for engine_name, run in engines.items():
        run(pixels, budgets[names[-1]])  # the first inference after a compile is slower: not counted
        log(f"vision budgets: {engine_name} warmed up")
    runs: dict[str, dict[str, list[dict]]] = {e: {n: [] for n in names} for e in engines}
    for index in range(rounds):
        round_started = time.perf_counter()
        order = names[index % len(names):] + names[:index % len(names)]
        for name in order:
            engine_order = list(engines) if index % 2 == 0 else list(reversed(engines))
            for engine_name in engine_order:
                result = engines[engine_name](pixels, budgets[name])
                runs[engine_name][name].append(result)
                log(f"vision budgets: round {index + 1} {name:>7} {engine_name:>7} {result['capture_to_bars_s']:.2f} s "
                    f"(load {result['load']:.2f}, others {result['others_cores']:.2f} cores)")
        took = time.perf_counter() - round_started
        if index + 1 < rounds and time.perf_counter() + took > deadline:
            log(f"vision budgets: stopping after {index + 1} round(s): another would not end in the time given")
            break
    return runs


def _versions() -> dict:
    import openvino

    out = {"openvino": openvino.__version__}
    try:
        import torch
        import transformers

        out.update(torch=torch.__version__, transformers=transformers.__version__)
    except ImportError:
        pass
    return out


def _cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def main(argv: list[str] | None = None) -> int:
    from .build import VL, VL_FORMAT
    from .common import ROOT, hf_dir, ir_dir

    parser = argparse.ArgumentParser(prog="python -m bench.w_vision_budgets")
    parser.add_argument("--model", default=str(ir_dir(VL, VL_FORMAT)))
    parser.add_argument("--hf", default=str(hf_dir(VL)))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=400,
                        help="this process's time: no round starts that would end past it (one always runs)")
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--quick", action="store_true", help="the test fixture (tests/fixtures), Qwen's budget given")
    parser.add_argument("--out", default=str(RESULTS / "vision-budgets-rows.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.model = str(ROOT / "tests" / "fixtures" / "models" / "qwen35-vl")
        args.hf = str(ROOT / "tests" / "fixtures" / "checkpoints" / "qwen35-vl")
    result = {**stamp(rounds_asked=args.rounds, quick=args.quick), "cpus": os.cpu_count() or 1, "cpu": _cpu_name(),
              "model": args.model, "hf": None if args.no_torch else args.hf, "versions": _versions(),
              "budgets": BUDGETS, "max_seconds": args.max_seconds}
    started = time.perf_counter()
    engines, load_s = load_engines(args, result)
    from decider.app.capture_timing import game_screen

    runs = measure(engines, game_screen(), BUDGETS, args.rounds, started + args.max_seconds)
    result.update(load_s=load_s, rounds=len(runs["decider"]["full"]), rows=summarise(BUDGETS, runs),
                  wall_s=time.perf_counter() - started, load_after=os.getloadavg()[0], peak_rss_mib=peak_rss_mib())
    write_json(Path(args.out), result)
    log(f"vision budgets: -> {args.out}")
    return 0


def load_engines(args, result: dict) -> tuple[dict, dict]:
    """Decider's runner (and transformers beside it), each as a `run(pixels, budget) -> dict`."""
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.runners.runner import ModelRunner

    started = time.perf_counter()
    runner = ModelRunner(args.model, DeviceOptions(device="CPU"))
    load_s = {"decider": time.perf_counter() - started}
    if args.quick:  # the fixture's own budget (65,536) would cap every budget to the same picture
        runner.vision.processor = replace(runner.vision.processor, max_pixels=QWEN_MAX_PIXELS)
    result["model_budget"] = runner.vision.processor.max_pixels
    result["threads"] = {"decider": os.environ.get("OMP_NUM_THREADS") or str(os.cpu_count())}
    engines = {"decider": lambda pixels, budget: decider_run(runner, pixels, budget)}
    if not args.no_torch:
        started = time.perf_counter()
        peer = TorchPeer(args.hf, runner)
        load_s["torch"] = time.perf_counter() - started
        if args.quick:
            peer.own = budgeted(peer.own, QWEN_MAX_PIXELS)
        engines["torch"] = peer.run
    return engines, load_s


if __name__ == "__main__":
    raise SystemExit(main())
