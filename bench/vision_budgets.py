"""`python -m bench vision-budgets`: the capture budget measured on a quiet machine, and the default it chooses.

    python -m bench vision-budgets                # wait for quiet (≤ 300 s), measure (≤ 8 min), write, render
    python -m bench vision-budgets --quick --out /tmp/vb.json --benchmarks /tmp/B.md   # the test fixture

1. Waits until the 1-minute load is ≤ 0.5 per vCPU (app/capture_budget.py), at most --wait seconds, and records
   the load it saw and whether it got there.
2. The seeing demo's accuracy at the three budgets (tools/demo_vl_budgets.py, run as a script: the benchmarks do
   not import tools/), then capture-to-bars at the 0.8B vision geometry against transformers fp32
   (bench/w_vision_budgets.py, in the tools interpreter), interleaved rounds within what is left of --seconds.
3. Writes ~/.cache/decider-bench/results/vision-budgets.json and the committed copy
   (docs/benchmarks/vision-budgets.json), renders the section into BENCHMARKS.md (bench/report_budgets.py) and
   prints the default the rule chooses beside engine/core/settings.py's. The default is not edited here: the
   maintainer changes IMAGE_PIXELS_DEFAULT to what it prints; tests/test_capture_choice.py fails until they agree.

Both children import *this* checkout as `decider` (a link in a temporary folder first on PYTHONPATH), whatever
checkout an editable install points at.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import RESULTS, ROOT, decider_python, log, tools_python, write_json

TOTAL_S = 480  # the whole measurement (not the wait): issue 39's rows must not cost more than 8 minutes
WAIT_S = 300


def wait_for_quiet(limit: float, poll: float = 5.0) -> dict:
    """Wait (at most `limit` s) for a 1-minute load ≤ 0.5 per vCPU; what was seen, whether it got there."""
    from decider.app.capture_budget import is_quiet_load

    cpus, started = os.cpu_count() or 1, time.monotonic()
    while True:
        load = os.getloadavg()[0]
        quiet = is_quiet_load(load, cpus)
        waited = time.monotonic() - started
        if quiet or waited >= limit:
            return {"quiet": quiet, "load": round(load, 2), "cpus": cpus, "waited_s": round(waited, 1), "limit_s": limit}
        log(f"vision budgets: waiting for a quiet machine (load {load:.2f} on {cpus} vCPUs, {waited:.0f} of {limit:.0f} s)")
        time.sleep(poll)


def scale_factors(budgets: dict[str, int]) -> dict[str, float]:
    """Each budget's linear factor on a 1280×720 grab, after the preprocessor's rounding (real Qwen3.5's floor)."""
    from decider.app.capture_timing import HEIGHT, WIDTH
    from decider.engine.vision.preprocess import ProcessorConfig, target_size

    def area(budget: int) -> int:
        height, width = target_size(HEIGHT, WIDTH, ProcessorConfig(min_pixels=256 * 256, max_pixels=budget))
        return height * width

    full = area(max(budgets.values()))
    return {name: round(math.sqrt(area(budget) / full), 4) for name, budget in budgets.items()}


def _this_checkout(scratch: Path) -> dict[str, str]:
    """`decider` is this checkout, here and in the children (whose environment this returns)."""
    folder = scratch / "link"
    folder.mkdir()
    (folder / "decider").symlink_to(ROOT, target_is_directory=True)
    loaded = sys.modules.get("decider")
    if loaded is None or Path(loaded.__file__ or "").resolve().parent != ROOT.resolve():  # another checkout, or none yet
        sys.path.insert(0, str(folder))
        for name in [m for m in sys.modules if m == "decider" or m.startswith("decider.")]:
            del sys.modules[name]
    path = os.pathsep.join(filter(None, [str(folder), str(ROOT), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                TRANSFORMERS_VERBOSITY="error", PYTHONWARNINGS="ignore")


def _has_torch(python: str, env: dict) -> bool:
    return subprocess.run([python, "-c", "import torch, transformers"], env=env, capture_output=True).returncode == 0


def measure(args, env: dict, scratch: Path) -> dict:
    """The demo's accuracy, then the rows; the merged result."""
    from .w_vision_budgets import BUDGETS

    started = time.monotonic()
    factors = scale_factors(BUDGETS)
    demo_out = scratch / "demo.json"
    scales = ",".join(f"{name}={factor}" for name, factor in factors.items())
    subprocess.run([decider_python(), str(ROOT / "tools" / "demo_vl_budgets.py"), "--scales", scales, "--out",
                    str(demo_out), *(["--quick"] if args.quick else [])], cwd=ROOT, env=env, check=True)
    python = tools_python()
    torch = not args.no_torch and _has_torch(python, env)
    rows_out = scratch / "rows.json"
    left = args.seconds - (time.monotonic() - started) - 15  # writing and rendering after the rows
    subprocess.run([python, "-m", "bench.w_vision_budgets", "--rounds", str(args.rounds), "--max-seconds", f"{left:.0f}",
                    "--out", str(rows_out), *(["--quick"] if args.quick else []), *([] if torch else ["--no-torch"])],
                   cwd=ROOT, env=env, check=True)
    result = json.loads(rows_out.read_text())
    result["demo"] = json.loads(demo_out.read_text())
    result["factors"] = factors
    return result


def render_into(benchmarks: Path, result: dict) -> None:
    from .report_budgets import place, section

    text = benchmarks.read_text() if benchmarks.is_file() else ""
    benchmarks.write_text(place(text, "\n".join(section({"vision-budgets": result}))))


def verdict(result: dict) -> str:
    """What the rule chooses against engine/core/settings.py's default, and what to do about a difference."""
    from decider.app.capture_budget import choose_budget, rows_from_result
    from decider.engine.core.settings import SETTINGS

    default = SETTINGS["image_pixels"].default
    choice = choose_budget(rows_from_result(result))
    if choice is None:
        return f"no row was measured on a quiet machine: the rule chooses nothing (the default stays {default:,})"
    if choice.budget == default:
        return f"the rule keeps the default {default:,} pixels: {choice.reason}"
    return (f"the rule chooses {choice.budget:,} pixels ({choice.reason}); engine/core/settings.py says {default:,}: set "
            f"IMAGE_PIXELS_DEFAULT = {choice.budget} there (tests/test_capture_choice.py fails until it agrees)")


def main(argv: list[str] | None = None) -> int:
    from .report_budgets import COMMITTED

    parser = argparse.ArgumentParser(prog="python -m bench vision-budgets")
    parser.add_argument("--quick", action="store_true", help="the test fixture and a tenth of the demo's scenes")
    parser.add_argument("--rounds", type=int, default=5, help="at most (the time limit stops earlier: one always runs)")
    parser.add_argument("--seconds", type=float, default=TOTAL_S, help="the measurement's time (the wait excluded)")
    parser.add_argument("--wait", type=float, help=f"longest wait for a quiet machine (default {WAIT_S} s; quick: 0)")
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--out", help="the result (default ~/.cache/decider-bench/results/vision-budgets.json)")
    parser.add_argument("--commit-to", help=f"the committed copy (default {COMMITTED.relative_to(ROOT)}; quick: none)")
    parser.add_argument("--benchmarks", help="the report to render into (default BENCHMARKS.md; quick: none)")
    args = parser.parse_args(argv)
    quick = args.quick
    out = Path(args.out or RESULTS / ("vision-budgets-quick.json" if quick else "vision-budgets.json"))
    commit_to = args.commit_to or (None if quick else str(COMMITTED))
    benchmarks = args.benchmarks or (None if quick else str(ROOT / "BENCHMARKS.md"))
    scratch = Path(tempfile.mkdtemp(prefix="vision-budgets-"))
    try:
        env = _this_checkout(scratch)
        quiet = wait_for_quiet(args.wait if args.wait is not None else (0 if quick else WAIT_S))
        log(f"vision budgets: starting at load {quiet['load']:.2f} ({'quiet' if quiet['quiet'] else 'NOT quiet'})")
        started = time.monotonic()
        result = measure(args, env, scratch)
        result.update(quiet_wait=quiet, command_s=round(time.monotonic() - started, 1),
                      command="python -m bench vision-budgets" + (" " + " ".join(argv or sys.argv[2:])).rstrip())
        for path in filter(None, [out, commit_to]):
            write_json(Path(path), result)
        if benchmarks:
            render_into(Path(benchmarks), result)
        log(f"vision budgets: {result['command_s']:.0f} s; -> {out}" + (f", {commit_to}" if commit_to else ""))
        print(verdict(result))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0
