"""What a forward of k = 1…8 tokens costs the exact runner (a verify of a token and its drafts, issue #35 item 3 /
#36) on a compile fixed at k (the runner's prepare_verify, as a drafted loop has it), on the runner's dynamic compile
with its few-token DeltaNet path (engine/graphs/few_tokens.py), and on that compile without the path (every chunk of
two tokens or more through the plugin's fused kernel, as before); against a one-token step; paired, interleaved, in
one process.

    python -m bench.w_few_tokens --model IR_DIR --out result.json [--threads 1] [--prompt 256] [--rounds 6]

The runners are the engine's own (ModelRunner, the compile plan as the app has it: `plan` in the result); the dynamic
ones with DECIDER_VERIFY_GRAPH=shared, the path off with FEW_TOKENS = 1. Per k (the fixed-width runner compiles at k
first) and per round, each runner (in turns, the order alternating)
runs verify(k tokens) and rewind() three times: `forward` is the last verify call (its state snapshot included, as a
drafted loop pays it; the first of a new width also prepares the dynamic graph's kernels for it, which a drafted loop,
verifying at one width, pays once), `rewind` the last rollback. `step` is a one-token step on the step compile (the third of three in a row: the first
after a verify moves the state). The logits of every verify are compared between the runners.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from unittest.mock import patch

import numpy as np

from .common import finish, log, stamp, summary

WIDTHS = tuple(range(1, 9))


def _runner(model: str, threads: int, few: bool, own_verifies: bool):
    import openvino as ov

    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.compile.plan import VERIFY_GRAPH_ENV
    from decider.engine.graphs import decode
    from decider.engine.runners.runner import ModelRunner

    core = ov.Core()
    if threads:
        core.set_property("CPU", {"INFERENCE_NUM_THREADS": threads})
    kept = decode.FEW_TOKENS
    decode.FEW_TOKENS = kept if few else 1  # read when the runner edits its graph
    try:
        # the plugin's projections in every compile: the step each forward is held against is the plugin's too (the
        # native operation, which a 0.8B runner may adopt for its steps, never runs verifies)
        env = {"DECIDER_EXACT_KERNEL": "plugin", **({} if own_verifies else {VERIFY_GRAPH_ENV: "shared"})}
        with patch.dict(os.environ, env):  # the plan and the native kernel's adoption read them here
            return ModelRunner(model, DeviceOptions(device="CPU", exact=True), core=core)
    finally:
        decode.FEW_TOKENS = kept


RUNNERS = {"fixed-width compile": (True, True), "few-token path": (True, False), "fused kernel": (False, False)}


def run(model: str, threads: int, prompt_tokens: int, rounds: int, names=tuple(RUNNERS)) -> dict:
    from decider.engine.core.logprobs import log_softmax

    runners = {name: _runner(model, threads, *RUNNERS[name]) for name in names}
    vocab = next(iter(runners.values())).vocab_size  # ids past it would read zero rows: every path alike
    for runner in runners.values():
        runner.prefill([(1000 + i) % vocab for i in range(prompt_tokens)])
    times: dict[str, dict[str, list[float]]] = {name: {} for name in runners}
    gaps: list[float] = []
    for k in WIDTHS:
        for runner in runners.values():
            runner.prepare_verify(k)  # the fixed-width runner compiles its verifies at k (the others: nothing)
        for r in range(rounds):
            order = list(runners) if r % 2 == 0 else list(runners)[::-1]
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
            first, *others = rows.values()
            gaps += [float(np.abs(log_softmax(first) - log_softmax(other)).max()) for other in others]
    for r in range(rounds):
        for name in (list(runners) if r % 2 == 0 else list(runners)[::-1]):
            runner = runners[name]
            for i in range(3):
                started = time.perf_counter()
                runner.step(11 + i)
                elapsed = (time.perf_counter() - started) * 1e3
            times[name].setdefault("step", []).append(elapsed)
    out: dict = {"plan": next(iter(runners.values())).plan.describe(), "logprob_gap_max": max(gaps, default=None),
                 "runners": {}}
    for name, table in times.items():
        medians = {key: summary(values) for key, values in table.items()}
        step = medians["step"]["median"]
        out["runners"][name] = {"ms": medians,
                                "forward_vs_step": {k: medians[f"forward{k}"]["median"] / step for k in WIDTHS}}
    ms = {name: entry["ms"] for name, entry in out["runners"].items()}
    for key, (a, b) in {"few_vs_fused": ("few-token path", "fused kernel"),
                        "fixed_vs_few": ("fixed-width compile", "few-token path")}.items():
        if a in ms and b in ms:
            out[key] = {k: ms[a][f"forward{k}"]["median"] / ms[b][f"forward{k}"]["median"] for k in WIDTHS}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_few_tokens")
    parser.add_argument("--model", required=True, help="an optimum-intel text export")
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=int, default=1, help="INFERENCE_NUM_THREADS (0: the plugin's default)")
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--runners", default=",".join(RUNNERS),
                        help="comma-separated, of: " + ", ".join(RUNNERS) + " (at 2 threads several runners in one process "
                        "slow each other's steps: one per process there)")
    args = parser.parse_args(argv)
    out = stamp(model=args.model, threads=args.threads or "plugin default", prompt_tokens=args.prompt, rounds=args.rounds)
    names = tuple(name.strip() for name in args.runners.split(",") if name.strip())
    if not names or any(name not in RUNNERS for name in names):
        parser.error(f"--runners: some of {', '.join(RUNNERS)}")
    out.update(run(args.model, args.threads, args.prompt, args.rounds, names))
    for name, entry in out["runners"].items():
        ratios = ", ".join(f"k={k} {r:.2f}" for k, r in entry["forward_vs_step"].items())
        log(f"{name}: step {entry['ms']['step']['median']:.1f} ms; forward / step: {ratios}")
    for key in ("fixed_vs_few", "few_vs_fused"):
        if key in out:
            log(key.replace("_vs_", " / ") + ": " + ", ".join(f"k={k} {r:.2f}" for k, r in out[key].items()))
    if out["logprob_gap_max"] is not None:
        log(f"logprobs differ between the runners by at most {out['logprob_gap_max']:.1e}")
    finish(Path(args.out), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
