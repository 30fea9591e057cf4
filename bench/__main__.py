"""Decider benchmarks: `python -m bench all --out BENCHMARKS.md`.

    python -m bench setup                                   # the comparison engines' venv (once)
    python -m bench build  [--sizes 0.8b,2b]                # models (cached in ~/.cache/decider-bench)
    python -m bench run    [--sizes 0.8b,2b] [--only KEY…]  # measurements -> ~/.cache/decider-bench/results
    python -m bench report --out BENCHMARKS.md              # the tables from the stored results
    python -m bench all    --out BENCHMARKS.md              # build + run + report
    python -m bench vision-budgets [--quick]                # capture budget at the 0.8B vision geometry, on a
                                                            # quiet machine (bench/vision_budgets.py)

Every measurement runs in its own child process (its peak RSS is its own, nothing leaks between
engines). Decider-only measurements use this interpreter; those that need torch, transformers,
optimum-intel, openvino-genai or llama-cpp-python use $DECIDER_BENCH_PYTHON (default: the venv that
`python -m bench setup` makes from bench/requirements-tools.txt, else this interpreter).
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .common import (
    FORMATS, GEOMETRIES, HOME, LOGS, REQUIREMENTS, RESULTS, ROOT, TOKENIZER_DIR, VENV, cpu_busy_jiffies,
    decider_python, gguf_path, hf_dir, ir_dir, is_built, log, proc_mib, read_json, tools_python, venv_python, write_json,
)

PROMPTS = RESULTS / "prompts.json"


@dataclass
class Job:
    key: str
    python: str
    module: str
    args: list[str] = field(default_factory=list)
    timeout: float = 3600

    @property
    def path(self) -> Path:
        return RESULTS / (self.key.replace("/", "__") + ".json")


def result_path(key: str) -> Path:
    return RESULTS / (key.replace("/", "__") + ".json")


def _available_mib() -> float:
    available = proc_mib("/proc/meminfo", "MemAvailable")
    return float("inf") if available is None else available


def plan(sizes: list[str], device: str, repeats: int, threads: int | None = None) -> list[Job]:
    dec, tools = decider_python(), tools_python()
    jobs: list[Job] = [Job("machine/limits", dec, "bench.w_limits", ["--repeats", str(max(repeats, 5))])]
    p = ["--prompts", str(PROMPTS), "--device", device]
    slow = max(3, repeats - 2)
    for size in sizes:
        fmts = [f for f in FORMATS if is_built(ir_dir(size, f))]
        if not fmts:
            continue
        main = "int8" if "int8" in fmts else fmts[0]
        big = size != "0.8b"
        r = slow if big else repeats
        for fmt in fmts:
            model = ["--model", str(ir_dir(size, fmt))]
            jobs.append(Job(f"{size}/{fmt}/latency", dec, "bench.w_decider", model + p + ["--task", "latency", "--repeats", str(r)]))
            jobs.append(Job(f"{size}/{fmt}/decode", dec, "bench.w_decider", model + p + ["--task", "decode", "--repeats", str(slow)]))
            jobs.append(Job(f"{size}/{fmt}/rss", dec, "bench.w_decider", model + p + ["--task", "rss"]))
            if fmt == main or not big:
                jobs.append(Job(f"{size}/{fmt}/genai-exact", tools, "bench.w_genai", model + p + ["--mode", "exact", "--repeats", str(r)]))
        model = ["--model", str(ir_dir(size, main))]
        for task, reps in (("fast", r), ("logprobs", r), ("warm", r), ("head", slow)):
            jobs.append(Job(f"{size}/{main}/{task}", dec, "bench.w_decider", model + p + ["--task", task, "--repeats", str(reps)]))
        for variant in ("last", "all"):
            jobs.append(Job(f"{size}/{main}/headmem-{variant}", dec, "bench.w_decider", model + p + ["--task", "headmem", "--variant", variant]))
        jobs.append(Job(f"{size}/{main}/genai-fast", tools, "bench.w_genai", model + p + ["--mode", "fast", "--repeats", str(r)]))
        for engine in ("sdpa", "pa"):
            jobs.append(Job(f"{size}/{main}/rss-genai-{engine}", tools, "bench.w_genai", model + p + ["--only", engine, "--repeats", "1"]))
        if is_built(hf_dir(size)):
            ref = "fp16" if "fp16" in fmts else main
            torch_args = ["--hf", str(hf_dir(size)), "--prompts", str(PROMPTS), "--device", device, "--repeats", str(slow)]
            jobs.append(Job(f"{size}/torch/decision", tools, "bench.w_torch", torch_args + ["--decider-model", str(ir_dir(size, ref))]))
            jobs.append(Job(f"{size}/torch/rss", tools, "bench.w_torch", torch_args[:-1] + ["1"]))
        for kind, ref in (("f16", "fp16"), ("q8_0", "int8")):
            if gguf_path(size, kind).exists():
                llama_args = ["--gguf", str(gguf_path(size, kind)), "--prompts", str(PROMPTS), "--repeats", str(r)]
                decider = ["--decider-model", str(ir_dir(size, ref)), "--device", device] if ref in fmts else []
                jobs.append(Job(f"{size}/llama-{kind}/decision", tools, "bench.w_llama", llama_args + decider))
                jobs.append(Job(f"{size}/llama-{kind}/rss", tools, "bench.w_llama", llama_args[:-1] + ["1", "--decode"]))
        jobs.extend(paired_jobs(size, device, main, fmts, threads))
        if not (is_built(hf_dir(size)) and any(gguf_path(size, k).exists() for k in ("f16", "q8_0"))):
            jobs.append(Job(f"{size}/llama/why", tools, "bench.w_llama", ["--why", "--prompts", str(PROMPTS),
                                                                            "--gguf", str(gguf_path(size, "q8_0"))]))
    return jobs + static_jobs(sizes, device, slow)


def paired_jobs(size: str, device: str, fmt: str, fmts: list[str], threads: int | None = None) -> list[Job]:
    """Issue-level comparisons, each interleaved in one process: decode and think-mode decisions against
    llama.cpp q8_0 (int8 IR and q8_0 GGUF of the same weights), the one-forward decision against GenAI's
    SDPA pipeline, and where a decode step's time goes (per-node counters)."""
    if fmt != "int8" or "int8" not in fmts:
        return []
    dec, tools = decider_python(), tools_python()
    model = ["--model", str(ir_dir(size, fmt)), "--prompts", str(PROMPTS), "--device", device]
    jobs = [Job(f"{size}/paired/profile", dec, "bench.w_profile", model + ["--steps", "32", "--pairs", "40"]),
            Job(f"{size}/paired/forward", tools, "bench.w_genai", model + ["--mode", "exact", "--engines", "decider,sdpa",
                                                                          "--repeats", "3"])]
    gguf = gguf_path(size, "q8_0")
    if gguf.exists():
        paired = model + ["--gguf", str(gguf)] + (["--threads", str(threads)] if threads else [])
        jobs.append(Job(f"{size}/paired/decode", tools, "bench.w_paired", paired + ["--task", "decode", "--repeats", "2"]))
        jobs.append(Job(f"{size}/paired/think", tools, "bench.w_paired", paired + ["--task", "think", "--repeats", "1"],
                        timeout=3 * 3600))
    return jobs[2:] + jobs[:2]  # the llama.cpp pairs first: they are what the targets are about


def static_jobs(sizes: list[str], device: str, repeats: int) -> list[Job]:
    """The static-shape path vs the dynamic one, and the NPU plugin path (where an NPU, or the
    DECIDER_NPUW_DEVICES testing aid, makes it runnable); the demo model's rows need no built model."""
    dec = decider_python()
    npu = device.upper().startswith("NPU") or bool(os.environ.get("DECIDER_NPUW_DEVICES"))
    models = [(f"{size}/{fmt}", ir_dir(size, fmt)) for size in sizes
              for fmt in [next((f for f in ("int8", *FORMATS) if is_built(ir_dir(size, f))), None)] if fmt]
    models.append(("demo", ROOT / "resources" / "demo-model"))
    jobs = []
    for key, folder in models:
        base = ["--model", str(folder), "--prompts", str(PROMPTS), "--repeats", str(repeats)]
        cpu = "CPU" if device.upper().startswith("NPU") else device
        jobs.append(Job(f"{key}/static-paths", dec, "bench.w_static",
                        base + ["--task", "paths", "--device", cpu, "--chunks", "64,8,1", "--chunks", "16,4,1"]))
        jobs.append(Job(f"{key}/prefill-chunks", dec, "bench.w_static",
                        base + ["--task", "chunks", "--device", cpu, "--lengths", "71,263,1031"]))
        if npu:
            jobs.append(Job(f"{key}/static-npu", dec, "bench.w_static", base + ["--task", "npu", "--device", "NPU"]))
        # The soak is long (2,000 requests per variant): only where the machine can afford it.
        for variant in ("dynamic", "one-pass", "capped", "static"):
            jobs.append(Job(f"{key}/soak-{variant}", dec, "bench.soak",
                            ["--mode", "engine", "--model", str(folder), "--variant", variant, "--max-words", "300"],
                            timeout=4 * 3600))
    return jobs


def wait_quiet(max_busy: float, timeout: float) -> dict:
    """Wait until other processes use < max_busy cores (sampled over 5 s while we idle)."""
    started = time.time()
    busy = None
    while True:
        first = cpu_busy_jiffies()
        time.sleep(5)
        second = cpu_busy_jiffies()
        if first is None or second is None:
            return {"busy_cores": None, "waited_s": 0}
        busy = (second[0] - first[0]) / max(second[1] - first[1], 1) * (os.cpu_count() or 1)
        if busy < max_busy or time.time() - started > timeout:
            return {"busy_cores": round(busy, 2), "waited_s": round(time.time() - started, 1), "load": os.getloadavg()}
        log(f"  waiting for a quiet machine: other processes use {busy:.2f} cores (loadavg {os.getloadavg()[0]:.2f})")


def run_job(job: Job, quiet: dict) -> dict:
    LOGS.mkdir(parents=True, exist_ok=True)
    out = job.path
    out.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TRANSFORMERS_VERBOSITY="error", PYTHONWARNINGS="ignore")
    argv = [job.python, "-m", job.module, *job.args, "--out", str(out)]
    before_cpu = cpu_busy_jiffies()
    before_children = os.times()
    started = time.time()
    logfile = LOGS / (job.key.replace("/", "__") + ".log")
    with open(logfile, "w") as fh:
        fh.write(" ".join(argv) + "\n")
        fh.flush()
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.PIPE, text=True)
        for line in proc.stderr:
            fh.write(line)
            if line.startswith("  "):
                print(f"    {line.rstrip()}", flush=True)
        try:
            code = proc.wait(timeout=job.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = "timeout"
    wall = time.time() - started
    after_cpu, after_children = cpu_busy_jiffies(), os.times()
    meta = {"key": job.key, "argv": argv, "wall_s": wall, "exit": code, "quiet_before": quiet, "log": str(logfile),
            "finished": time.strftime("%Y-%m-%d %H:%M:%S")}
    if before_cpu and after_cpu:
        total = (after_cpu[1] - before_cpu[1]) / (os.cpu_count() or 1)  # jiffies per core
        busy = after_cpu[0] - before_cpu[0]
        hz = os.sysconf("SC_CLK_TCK")
        own = ((after_children.children_user + after_children.children_system)
               - (before_children.children_user + before_children.children_system)) * hz
        meta["other_busy_cores"] = round(max(busy - own, 0) / max(total, 1), 2)
    if code == 0 and out.exists():
        data = read_json(out)
    else:
        tail = logfile.read_text(errors="replace").strip().splitlines()[-6:]
        data = {"error": f"exit {code}", "log_tail": tail}
        log(f"  FAILED ({code}): {' | '.join(tail[-2:])}")
    data["_meta"] = meta
    write_json(out, data)
    return data


def cmd_setup(args) -> int:
    """Make the comparison engines' venv (torch CPU, transformers, optimum-intel, GenAI, llama-cpp-python)."""
    if os.environ.get("DECIDER_BENCH_PYTHON"):
        log(f"setup: using $DECIDER_BENCH_PYTHON={os.environ['DECIDER_BENCH_PYTHON']}")
        return 0
    python = venv_python()
    if not python.exists():
        log(f"setup: creating {VENV}")
        code = subprocess.run([sys.executable, "-m", "venv", str(VENV)]).returncode
        if code:
            return code
    log(f"setup: installing {REQUIREMENTS.name} (torch's CPU wheel first; llama-cpp-python compiles for ~10 minutes)")
    for argv in setup_steps(str(python)):
        code = subprocess.run(argv, env=dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 1))).returncode
        if code:
            log(f"setup: failed: {' '.join(argv[1:])}")
            return code
    log("setup: done")
    return 0


def setup_steps(python: str) -> list[list[str]]:
    """The tools venv's installs: the comparison engines, then this project itself (the paired jobs run Decider
    and its peer in the same interpreter: without the package they stopped at `No module named 'decider'`).
    The project goes in without its window and server stacks (Qt, uvicorn…), which no job imports."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    engine_deps = [d for d in project["dependencies"] if not d.lower().startswith(GUI_AND_SERVER)]
    return [
        [python, "-m", "pip", "install", "-q", "--upgrade", "pip"],
        # torch first and alone, so what depends on it does not choose another build
        [python, "-m", "pip", "install", "-q", "torch==2.13.0"],
        [python, "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)],
        [python, "-m", "pip", "install", "-q", *engine_deps],
        [python, "-m", "pip", "install", "-q", "--no-deps", "-e", str(ROOT)],
    ]


GUI_AND_SERVER = ("pyside6", "uvicorn", "starlette", "pydantic")


def cmd_build(args) -> int:
    probe = subprocess.run([tools_python(), "-c", "import torch, transformers, optimum.intel"], capture_output=True)
    if probe.returncode:
        log(f"build: {tools_python()} lacks torch/transformers/optimum-intel: run `python -m bench setup` first "
            "(or point $DECIDER_BENCH_PYTHON at an interpreter that has bench/requirements-tools.txt)")
        return 2
    argv = [tools_python(), "-m", "bench.build", "--sizes", args.sizes, "--formats", args.formats, "--gguf", args.gguf]
    if args.formats_2b:
        argv += ["--formats-2b", args.formats_2b]
    log("build: " + " ".join(argv[1:]))
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TRANSFORMERS_VERBOSITY="error")
    return subprocess.run(argv, cwd=ROOT, env=env).returncode


def ensure_prompts() -> None:
    if not PROMPTS.exists():
        from .prompts import build

        log("prompts: building the decision prompts (64/256/1,024 tokens) with the real tokenizer ...")
        build(TOKENIZER_DIR / "tokenizer.json", PROMPTS)


def cmd_run(args) -> int:
    ensure_prompts()
    sizes = [s for s in args.sizes.split(",") if s]
    jobs = plan(sizes, args.device, args.repeats, args.threads)
    if args.only:
        jobs = [j for j in jobs if any(fnmatch.fnmatch(j.key, pattern) for pattern in args.only)]
    if args.list:
        for job in jobs:
            print(job.key)
        return 0
    log(f"run: {len(jobs)} measurements (device {args.device}, {args.repeats} repeats; results in {RESULTS})")
    for i, job in enumerate(jobs, 1):
        if args.resume and job.path.exists() and "error" not in read_json(job.path):
            continue
        quiet = wait_quiet(args.max_busy, args.quiet_timeout) if args.max_busy > 0 else {}
        log(f"[{i}/{len(jobs)}] {job.key}")
        run_job(job, quiet)
    return 0


def cmd_report(args) -> int:
    from .report import load_results, render, save_raw

    results = load_results()
    text = render(results, command=args.command_line)
    Path(args.out).write_text(text)
    save_raw(results)
    log(f"report -> {args.out}")
    return 0


def main(argv=None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == ["vision-budgets"]:  # its own options (bench/vision_budgets.py)
        from .vision_budgets import main as vision_budgets

        return vision_budgets(words[1:])
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def common_build(p):
        p.add_argument("--sizes", default="0.8b,2b")
        p.add_argument("--formats", default=",".join(FORMATS))
        p.add_argument("--formats-2b", default=",".join(FORMATS),
                       help="the 2b formats, if fewer (an export of 2b peaks near 20 GB of RAM)")
        p.add_argument("--gguf", default="f16,q8_0")

    def common_run(p, sizes=True):
        if sizes:
            p.add_argument("--sizes", default="0.8b,2b")
        p.add_argument("--device", default="CPU")
        p.add_argument("--repeats", type=int, default=5)
        p.add_argument("--only", nargs="*", help="glob(s) over measurement keys, e.g. '0.8b/int8/*'")
        p.add_argument("--resume", action="store_true", help="keep results that exist and did not fail")
        p.add_argument("--max-busy", type=float, default=0.5,
                       help="before each measurement wait until other processes use fewer cores than this (0: never wait)")
        p.add_argument("--quiet-timeout", type=float, default=600, help="longest wait for a quiet machine, seconds")
        p.add_argument("--list", action="store_true", help="print the measurement keys and exit")
        p.add_argument("--threads", type=int, help="threads of both engines in the paired llama.cpp rows (default: every core; "
                       "1 on a machine other work keeps busy, see bench/w_paired.py)")

    sub.add_parser("setup", help="create the comparison engines' venv")
    b = sub.add_parser("build", help="build the models")
    common_build(b)
    r = sub.add_parser("run", help="run the measurements")
    common_run(r)
    rep = sub.add_parser("report", help="write the report from stored results")
    rep.add_argument("--out", default="BENCHMARKS.md")
    sub.add_parser("vision-budgets", help="capture-to-bars at three pixel budgets, the default they choose "
                   "(`python -m bench vision-budgets --help`)")
    a = sub.add_parser("all", help="build, run, report")
    common_build(a)
    common_run(a, sizes=False)
    a.add_argument("--out", default="BENCHMARKS.md")
    args = parser.parse_args(argv)
    args.command_line = "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.command == "setup":
        return cmd_setup(args)
    if args.command == "build":
        return cmd_build(args)
    if args.command == "run":
        return cmd_run(args)
    if args.command == "report":
        return cmd_report(args)
    code = cmd_setup(args) or cmd_build(args)
    if code:
        return code
    cmd_run(args)
    return cmd_report(args)


if __name__ == "__main__":
    sys.exit(main())
