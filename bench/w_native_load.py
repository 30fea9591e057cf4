"""What adopting the native int8 kernel costs when a model opens: load time and resident memory of the exact runner,
each in a process of its own.

    python -m bench.w_native_load --model IR_DIR --out result.json [--threads 1] [--repeats 2]

Three ways, in turns (`--repeats` rounds):
  plugin    DECIDER_EXACT_KERNEL=plugin: the plugin's one-token steps only (what a runner compiled before #35's kernel);
  timed     the default with an empty cache folder: both step compiles, timed against each other, the verdict kept;
  cached    the default with the verdict `timed` left: only the winner compiled.
Each child reports its load seconds, its RSS after the load and in use (after a 32-token prompt and four steps: the
plugin's step compile packs its weights at its first infer, ours at load), its peak RSS, the label and the adoption's
note.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import finish, log, stamp, summary

CHILD = r"""
import json, os, resource, sys, time
import openvino as ov
from decider.engine.compile.devices import DeviceOptions
from decider.engine.runners.runner import ModelRunner
core = ov.Core()
core.set_property("CPU", {"INFERENCE_NUM_THREADS": int(sys.argv[2])})
started = time.perf_counter()
runner = ModelRunner(sys.argv[1], DeviceOptions(device="CPU", exact=True), core=core)
load_s = time.perf_counter() - started
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
loaded = rss()
runner.prefill(list(range(1000, 1032)))
for token in range(4):
    runner.step(5 + token)
print(json.dumps({"load_s": load_s, "rss_mib": loaded, "rss_in_use_mib": rss(),
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "label": runner.precision.label, "native": runner.native_note}))
"""


def _child(model: str, threads: int, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, model, str(threads)], capture_output=True, text=True, env=env,
                          timeout=1800)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_native_load")
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    out = stamp(model=args.model, threads=args.threads, repeats=args.repeats)
    runs: dict[str, list[dict]] = {"plugin": [], "timed": [], "cached": []}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache:
            base = {k: v for k, v in os.environ.items() if k != "DECIDER_EXACT_KERNEL"}
            fresh = {**base, "DECIDER_CACHE_DIR": cache}
            runs["plugin"].append(_child(args.model, args.threads, {**fresh, "DECIDER_EXACT_KERNEL": "plugin"}))
            runs["timed"].append(_child(args.model, args.threads, fresh))
            runs["cached"].append(_child(args.model, args.threads, fresh))
    out["runs"] = runs
    out["load_s"] = {way: summary([r["load_s"] for r in rows]) for way, rows in runs.items()}
    out["child_peak_rss_mib"] = {way: summary([r["peak_rss_mib"] for r in rows]) for way, rows in runs.items()}
    out["rss_mib"] = {way: summary([r["rss_mib"] for r in rows]) for way, rows in runs.items()}
    out["rss_in_use_mib"] = {way: summary([r["rss_in_use_mib"] for r in rows]) for way, rows in runs.items()}
    for way, rows in runs.items():
        log(f"{way}: load {out['load_s'][way]['median']:.1f} s, RSS {out['rss_mib'][way]['median']:.0f} MiB, in use "
            f"{out['rss_in_use_mib'][way]['median']:.0f} MiB "
            f"(peak {out['child_peak_rss_mib'][way]['median']:.0f}); {rows[-1]['native']}")
    finish(Path(args.out), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
