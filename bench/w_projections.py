"""The decode step under each way the CPU plugin can run the weight projections, round-robin in one process.

    python -m bench.w_projections --model IR_DIR [--model IR_DIR2 …] --out result.json [--variants exact,dq32,…]
                                  [--threads 1] [--rounds 12] [--prompt 64] [--steps 10]

What #30 asks of item 1's projections — "at the decompression kernel's best (weight layout, group size, threads)" — as
one measurement: every (IR, compile variant) pair is compiled once with the engine's decode graph (last-position
head, one-token DeltaNet path), then each round prefills the same prompt on every request and times `--steps` decode
steps on each, the order reversed every other round so a busy machine's drift falls on all. Reported per variant:
the median step, the median of its per-round ratios to the first IR's exact compile, the largest |Δ logit| of its last
step against that one (drift: exact variants have 0), and the FullyConnected kernels its runtime model names (an int8
kernel shows as such only where the plugin names it; dynamic quantisation runs inside `brgemm_avx512_f32` here, which
is why the drift column is the proof that it ran). A second IR (say, a symmetric int8 export of the same weights) is
a weight-layout variant: it is another model, so its drift is the export's, not the kernel's.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from .common import finish, stamp, summary
from .w_decode_graph import STEP_TOKEN, decode_model, step_feed


def _precision(hint: str, kv: str, group: int) -> dict[str, object]:
    return {"INFERENCE_PRECISION_HINT": hint, "KV_CACHE_PRECISION": kv, "DYNAMIC_QUANTIZATION_GROUP_SIZE": str(group)}


# Each variant's precision spelled out (no plugin default is measured). dqN: f32 activations quantised to int8 on the
# fly in groups of N (the plugin's int8 VNNI path for u8/i8 weights; N must be a multiple of 16 and divide the
# weights' own group); bf16: bf16 arithmetic, the u8 weights widened to bf16.
VARIANTS: dict[str, dict[str, object]] = {
    "exact": _precision("f32", "f32", 0),
    "dq32": _precision("f32", "f32", 32),
    "dq128": _precision("f32", "f32", 128),
    "dq1024": _precision("f32", "f32", 1024),
    "bf16": _precision("bf16", "f32", 0),
    "bf16-dq32-u8kv": _precision("bf16", "u8", 32),
}


def measure(folders: list[Path], variants: list[str], threads: int, rounds: int, prompt: int, steps: int) -> dict:
    import openvino as ov

    from decider.engine.compile.precision import fully_connected_kernels

    core = ov.Core()
    runs = {}
    labels = [f.name if [g.name for g in folders].count(f.name) == 1 else f"{f.name}#{i}" for i, f in enumerate(folders)]
    for folder, label in zip(folders, labels):
        for variant in variants:
            name = f"{label}/{variant}"
            model, _ = decode_model(folder / "openvino_model.xml", rewrite=True)
            compiled = core.compile_model(model, "CPU", {**VARIANTS[variant], "INFERENCE_NUM_THREADS": threads,
                                                         "PERFORMANCE_HINT": "LATENCY"})
            runs[name] = (compiled, compiled.create_infer_request(), {p.get_any_name() for p in compiled.inputs})
    ids = [1000 + i for i in range(prompt)]
    times: dict[str, list[float]] = defaultdict(list)
    last: dict[str, np.ndarray] = {}
    names = list(runs)
    for round_ in range(rounds):
        for name in (names if round_ % 2 == 0 else names[::-1]):
            _, request, inputs = runs[name]
            request.reset_state()
            request.infer(step_feed(inputs, ids, 0))
            step_ms = []
            for i in range(steps):
                started = time.perf_counter()
                request.infer(step_feed(inputs, [STEP_TOKEN], prompt + i))
                step_ms.append((time.perf_counter() - started) * 1e3)
            times[name].append(float(np.median(step_ms[2:] or step_ms)))  # the first steps build one-token kernels
            last[name] = request.get_tensor("logits").data[0, -1].copy()
    base = names[0]
    return {name: {"step_ms": summary(times[name]),
                   "ratio_to_exact": summary([a / b for a, b in zip(times[name], times[base])]),
                   "drift_max_abs_logit": float(np.max(np.abs(last[name] - last[base]))),
                   "fully_connected_kernels": list(fully_connected_kernels(runs[name][0]))}
            for name in names}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_projections")
    parser.add_argument("--model", action="append", required=True,
                        help="an optimum-intel text export; repeat for weight-layout variants (the first is the baseline)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, from {', '.join(VARIANTS)}")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or variants[0] != "exact":
        parser.error(f"variants come from {', '.join(VARIANTS)} and start with exact (got {args.variants})")
    out = stamp(models=args.model, threads=args.threads, rounds=args.rounds, prompt_tokens=args.prompt,
                steps_per_round=args.steps)
    out["variants"] = measure([Path(m) for m in args.model], variants, args.threads, args.rounds, args.prompt, args.steps)
    for name, row in out["variants"].items():
        print(f"  {name:34s} {row['step_ms']['median']:6.1f} ms  ×{row['ratio_to_exact']['median']:.3f}  "
              f"drift {row['drift_max_abs_logit']:.2g}  {','.join(row['fully_connected_kernels'])}", file=sys.stderr)
    finish(Path(args.out), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
