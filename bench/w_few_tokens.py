"""What a forward of k = 1…8 tokens costs the exact runner (a verify of a token and its drafts, issue #35 item 3 /
#36), with its few-token DeltaNet path (engine/graphs/few_tokens.py) and without it (every chunk of two tokens or
more through the plugin's fused kernel, as before), against a one-token step; paired, interleaved, in one process.

    python -m bench.w_few_tokens --model IR_DIR --out result.json [--threads 1] [--prompt 256] [--rounds 6]

Both runners are the engine's own (ModelRunner, the compile plan as the app has it: `plan` in the result); the path
off is the same graph edit with FEW_TOKENS = 1. Per round and per k, each runner (in turns, the order alternating)
runs verify(k tokens) and rewind() three times: `forward` is the last verify call (its state snapshot included, as a
drafted loop pays it; the first of a new width also prepares the dynamic graph's kernels for it, which a drafted loop,
verifying at one width, pays once), `rewind` the last rollback. `step` is a one-token step on the step compile (the third of three in a row: the first
after a verify moves the state). The logits of every verify are compared between the two paths.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from .common import finish, log, stamp, summary

WIDTHS = tuple(range(1, 9))


def _runner(model: str, threads: int, few: bool):
    import openvino as ov

    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.graphs import decode
    from decider.engine.runners.runner import ModelRunner

    core = ov.Core()
    if threads:
        core.set_property("CPU", {"INFERENCE_NUM_THREADS": threads})
    kept = decode.FEW_TOKENS
    decode.FEW_TOKENS = kept if few else 1  # read when the runner edits its graph
    try:
        return ModelRunner(model, DeviceOptions(device="CPU", exact=True), core=core)
    finally:
        decode.FEW_TOKENS = kept


def run(model: str, threads: int, prompt_tokens: int, rounds: int) -> dict:
    from decider.engine.core.logprobs import log_softmax

    runners = {"few-token path": _runner(model, threads, True), "fused kernel": _runner(model, threads, False)}
    vocab = next(iter(runners.values())).vocab_size  # ids past it would read zero rows: every path alike
    for runner in runners.values():
        runner.prefill([(1000 + i) % vocab for i in range(prompt_tokens)])
    times: dict[str, dict[str, list[float]]] = {name: {} for name in runners}
    gaps: list[float] = []
    for r in range(rounds):
        order = list(runners) if r % 2 == 0 else list(runners)[::-1]
        for k in WIDTHS:
            ids = [(2000 + 7 * i + r) % vocab for i in range(k)]
            rows = {}
            for name in order:
                runner = runners[name]
                for _ in range(3):  # the last of three: a drafted loop verifies at one width, its shape prepared
                    started = time.perf_counter()
                    rows[name] = runner.verify(ids, k)
                    verified = time.perf_counter()
                    runner.rewind()
                times[name].setdefault(f"forward{k}", []).append((verified - started) * 1e3)
                times[name].setdefault(f"rewind{k}", []).append((time.perf_counter() - verified) * 1e3)
            first, second = rows.values()
            gaps.append(float(np.abs(log_softmax(first) - log_softmax(second)).max()))
        for name in order:
            runner = runners[name]
            for i in range(3):
                started = time.perf_counter()
                runner.step(11 + i)
                elapsed = (time.perf_counter() - started) * 1e3
            times[name].setdefault("step", []).append(elapsed)
    out: dict = {"plan": next(iter(runners.values())).plan.describe(), "logprob_gap_max": max(gaps), "runners": {}}
    for name, table in times.items():
        medians = {key: summary(values) for key, values in table.items()}
        step = medians["step"]["median"]
        out["runners"][name] = {"ms": medians,
                                "forward_vs_step": {k: medians[f"forward{k}"]["median"] / step for k in WIDTHS}}
    few, fused = (out["runners"][name]["ms"] for name in runners)
    out["few_vs_fused"] = {k: few[f"forward{k}"]["median"] / fused[f"forward{k}"]["median"] for k in WIDTHS}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_few_tokens")
    parser.add_argument("--model", required=True, help="an optimum-intel text export")
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=int, default=1, help="INFERENCE_NUM_THREADS (0: the plugin's default)")
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    out = stamp(model=args.model, threads=args.threads or "plugin default", prompt_tokens=args.prompt, rounds=args.rounds)
    out.update(run(args.model, args.threads, args.prompt, args.rounds))
    for name, entry in out["runners"].items():
        ratios = ", ".join(f"k={k} {r:.2f}" for k, r in entry["forward_vs_step"].items())
        log(f"{name}: step {entry['ms']['step']['median']:.1f} ms; forward / step: {ratios}")
    log("few / fused: " + ", ".join(f"k={k} {r:.2f}" for k, r in out["few_vs_fused"].items())
        + f"; logprobs differ by at most {out['logprob_gap_max']:.1e}")
    finish(Path(args.out), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
