"""Cold start of the one-folder download against the installed package, measured in the same run:
`python -m bench.cold_start [--bundle DIR/decider] [--runs 7]`.

Each run starts a new process with an empty environment (a fresh HOME, so no settings, history or compiled-model
cache; PATH=/usr/bin:/bin) and times launch to a decision on the bundled demo model, two ways:
  ask     `decider ask --json` until it exits with the decision printed;
  window  `decider gui --screenshot` (offscreen Qt) until the window with the decision drawn is saved (both sides
          wait the same 0.4 s before the grab, app/gui.py).
The installed package is this checkout run by this interpreter (`from decider.app.cli import main`, as the
`decider` entry point does). The two alternate run by run after one unmeasured warm-up each (the files in the
page cache for both), and the ratio of the medians is what counts. Without --bundle, one is built first with
`python -m tools.bundle` into a temporary folder (about a minute).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "Scouts report that Trade is the safe choice. What should we do?"
OPTIONS = ("Attack", "Trade", "Hide")
INSTALLED_MAIN = "import sys; from decider.app.cli import main; sys.exit(main())"
CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_int8")


def cpu_flags() -> list[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return [flag for flag in CPU_FLAGS if flag in flags]


def decision_args(kind: str, shot: Path) -> list[str]:
    options = [a for option in OPTIONS for a in ("--option", option)]
    if kind == "ask":
        return ["ask", "--json", QUESTION, *options]
    return ["gui", "--question", QUESTION, *options, "--screenshot", str(shot)]


def launch(side: str, kind: str, bundle: Path, link: Path, scratch: Path) -> tuple[float, float]:
    """Seconds from launch to the decision (the process's exit with it printed or drawn), and the CPU seconds the
    process used on the way (user + system: what the wall time is made of on an idle machine, and steadier than it
    on a busy one)."""
    home = Path(tempfile.mkdtemp(prefix="home-", dir=scratch))
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    if kind == "window":
        env["QT_QPA_PLATFORM"] = "offscreen"
    if side == "bundle":
        command = [str(bundle)]
    else:
        command = [sys.executable, "-c", INSTALLED_MAIN]
        env["PYTHONPATH"] = str(link)
    shot = home / "window.png"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([*command, *decision_args(kind, shot)], cwd=home, env=env, capture_output=True, text=True,
                          timeout=600)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if done.returncode != 0:
        raise SystemExit(f"cold_start: {side} {kind} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    if kind == "ask" and json.loads(done.stdout)["choice"]["text"] != "Trade":
        raise SystemExit(f"cold_start: {side} decided {done.stdout[:200]} (the demo model answers Trade)")
    if kind == "window" and not shot.is_file():
        raise SystemExit(f"cold_start: {side} saved no window picture")
    return seconds, cpu


def build_bundle(scratch: Path) -> tuple[Path, float]:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tools.bundle", "--out", str(scratch / "dist")], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    return next((scratch / "dist").glob("decider-*-linux-x86_64")) / "decider", seconds


Times = dict[str, dict[str, list[tuple[float, float]]]]  # kind -> side -> (wall s, CPU s) per run


def measure(bundle: Path, link: Path, scratch: Path, runs: int, kinds: list[str]) -> Times:
    times: Times = {kind: {"bundle": [], "installed": []} for kind in kinds}
    for kind in kinds:
        for side in ("bundle", "installed"):
            launch(side, kind, bundle, link, scratch)  # warm-up: the files in the page cache, not measured
        for run in range(runs):
            order = ("bundle", "installed") if run % 2 == 0 else ("installed", "bundle")
            for side in order:
                times[kind][side].append(launch(side, kind, bundle, link, scratch))
    return times


def _row(sides: dict[str, list[tuple[float, float]]]) -> dict:
    row: dict = {"runs": len(sides["bundle"])}
    for index, what in enumerate(("wall", "cpu")):
        medians = {side: statistics.median(run[index] for run in runs) for side, runs in sides.items()}
        row[f"{what}_bundle_median_s"] = round(medians["bundle"], 3)
        row[f"{what}_installed_median_s"] = round(medians["installed"], 3)
        row[f"{what}_ratio"] = round(medians["bundle"] / medians["installed"], 3)
    for side, runs in sides.items():
        row[f"{side}_wall_s"] = [round(run[0], 3) for run in runs]
    return row


def report(times: Times, build_s: float | None, bundle: Path) -> dict:
    folder = bundle.parent
    archives = list(folder.parent.glob(f"{folder.name}.tar.gz"))
    return {
        "cpu": platform.processor() or platform.machine(), "cpu_flags": cpu_flags(), "cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()], "python": platform.python_version(),
        "build_s": None if build_s is None else round(build_s, 1),
        "folder_mib": round(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
                            / 2**20),
        "archive_mib": round(archives[0].stat().st_size / 2**20) if archives else None,
        "cold_start": {kind: _row(sides) for kind, sides in times.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, help="the bundle's executable (default: build one now)")
    parser.add_argument("--runs", type=int, default=7, help="measured launches per side and kind (default 7)")
    parser.add_argument("--kinds", default="ask,window", help="ask, window or both (default)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="decider-cold-") as tmp:
        scratch = Path(tmp)
        link = scratch / "checkout"
        link.mkdir()
        (link / "decider").symlink_to(ROOT, target_is_directory=True)  # the repository root is the package
        build_s = None
        bundle = args.bundle.resolve() if args.bundle else None
        if bundle is None:
            bundle, build_s = build_bundle(scratch)
        result = report(measure(bundle, link, scratch, args.runs, args.kinds.split(",")), build_s, bundle)
    print(json.dumps(result, indent=1))
    for kind, row in result["cold_start"].items():
        for what in ("wall", "cpu"):
            print(f"{kind:7s} {what:4s} bundle {row[f'{what}_bundle_median_s']:.3f} s · installed "
                  f"{row[f'{what}_installed_median_s']:.3f} s · ratio {row[f'{what}_ratio']:.3f} (median of {row['runs']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
