"""The static-shape path against the dynamic one (run as a child process by `python -m bench run`, or alone).

    python -m bench.w_static --model DIR --task paths [--chunks 64,8,1 --chunks 16,4,1] --out result.json
    python -m bench.w_static --model DIR --task npu --device NPU --out result.json

Tasks:
  paths  on --device (default CPU): the dynamic runner and the static runner (one per --chunks set, all over
         the same KV window) compiled in this process; prefill at --lengths tokens and the decode step,
         each static/dynamic pair interleaved (the order alternates) and reported as a ratio; compile times;
         the largest |Δ logprob| between the two as a sanity check.
  chunks the dynamic runner's chunked prefill (chunk lengths from a fixed set, as shipped) against one infer per prompt,
         interleaved pairs at --lengths (lengths with many binary digits show the price).
  npu    the static runner on --device (NPU; on a machine without one set DECIDER_NPUW_DEVICES=CPU): compile
         with an empty CACHE_DIR (cold) and again from it (cached), the first decision after load, prefill
         and decode timings, each interleaved with the CPU's dynamic runner for a ratio.

Prompts are token ids cycled from the prompts file's decisions (or 1..N on a fixture without one).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .common import peak_rss_mib, read_json, summary, task_parser, write_json


def _options(device: str, chunks: tuple[int, ...] | None = None, cache_dir: Path | None = None, path: str = "auto"):
    from decider.engine.compile.devices import DEFAULT_STATIC_CHUNKS, DeviceOptions

    return DeviceOptions(device=device, static_chunks=chunks or DEFAULT_STATIC_CHUNKS, cache_dir=cache_dir, path=path)


def _ids(prompts: dict | None, length: int, vocab: int) -> list[int]:
    source = []
    if prompts:
        source = prompts["decisions"][max(prompts["decisions"], key=lambda k: len(prompts["decisions"][k]["ids"]))]["ids"]
    source = source or list(range(1, 2048))
    return [int(source[i % len(source)]) % vocab for i in range(length)]


def _prefill_s(runner, ids) -> tuple[float, np.ndarray]:
    runner.reset()
    runner.clear_snapshots()
    started = time.perf_counter()
    logits = runner.prefill(ids)
    return time.perf_counter() - started, logits


def _steps_s(runner, ids, steps: int) -> list[float]:
    runner.reset()
    runner.prefill(ids)
    times = []
    for token in ids[:steps]:
        started = time.perf_counter()
        runner.step(token)
        times.append(time.perf_counter() - started)
    return times


def _pairs(a, b, measure, repeats: int) -> tuple[list[float], list[float]]:
    """Interleaved measurements of two runners, alternating which goes first; the first pair warms up."""
    times_a, times_b = [], []
    for rep in range(repeats + 1):
        order = (("a", a), ("b", b)) if rep % 2 == 0 else (("b", b), ("a", a))
        got = {name: measure(runner) for name, runner in order}
        if rep:
            times_a.append(got["a"])
            times_b.append(got["b"])
    return times_a, times_b


def _compare(static, dynamic, prompts, lengths, repeats, steps) -> dict:
    from decider.engine.core.logprobs import log_softmax

    out = {"prefill": {}, "decode_step": {}}
    for length in lengths:
        ids = _ids(prompts, length, dynamic.vocab_size)
        s, d = _pairs(static, dynamic, lambda r: _prefill_s(r, ids)[0], repeats)
        out["prefill"][str(length)] = {"static_s": summary(s), "dynamic_s": summary(d), "ratio": summary([x / y for x, y in zip(s, d)])}
        print(f"  prefill {length}: static {np.median(s):.3f} s, dynamic {np.median(d):.3f} s", file=sys.stderr, flush=True)
    ids = _ids(prompts, max(steps, 64), dynamic.vocab_size)
    s, d = _pairs(static, dynamic, lambda r: float(np.median(_steps_s(r, ids[:64], steps))), repeats)
    out["decode_step"] = {"static_s": summary(s), "dynamic_s": summary(d), "ratio": summary([x / y for x, y in zip(s, d)])}
    print(f"  decode step: static {np.median(s) * 1e3:.1f} ms, dynamic {np.median(d) * 1e3:.1f} ms", file=sys.stderr, flush=True)
    ids = _ids(prompts, lengths[0], dynamic.vocab_size)
    out["max_abs_dlogprob"] = float(np.max(np.abs(log_softmax(_prefill_s(static, ids)[1]) - log_softmax(_prefill_s(dynamic, ids)[1]))))
    return out


def task_paths(args, prompts) -> dict:
    from decider.engine.runners.runner import ModelRunner
    from decider.engine.runners.static import StaticRunner

    dynamic = ModelRunner(args.model, _options(args.device))
    out = {"device": args.device, "dynamic_compile_s": dynamic.stats.compile_s, "chunks": {}}
    for chunks in args.chunks:
        static = StaticRunner(args.model, _options(args.device, chunks))
        key = ",".join(map(str, chunks))
        print(f"  chunks {key}: compiled in {static.stats.compile_s:.1f} s (window {static.window})", file=sys.stderr, flush=True)
        out["chunks"][key] = {"compile_s": static.stats.compile_s, "window": static.window,
                              **_compare(static, dynamic, prompts, args.lengths, args.repeats, args.steps)}
        del static
    out["peak_rss_mib"] = peak_rss_mib()
    return out


def task_npu(args, prompts) -> dict:
    from decider.engine.decisions.decide import DecisionRequest, decide
    from decider.engine.runners.runner import ModelRunner
    from decider.engine.core.settings import SamplingSettings
    from decider.engine.runners.static import StaticRunner

    out: dict = {"device": args.device, "npuw_devices": os.environ.get("DECIDER_NPUW_DEVICES") or None}
    with tempfile.TemporaryDirectory(prefix="decider-npu-cache-") as cache:
        loads = {}
        for kind in ("cold", "cached"):
            started = time.perf_counter()
            runner = StaticRunner(args.model, _options(args.device, args.chunks[0], Path(cache)))
            request = DecisionRequest("Scouts report that Retreat is the safe choice. What should we do?",
                                      ("Attack", "Retreat", "Trade"), sampling=SamplingSettings(temperature=0.0))
            loaded = time.perf_counter()
            result = decide(runner, request)
            done = time.perf_counter()
            loads[kind] = {"compile_s": runner.stats.compile_s, "load_s": loaded - started,
                           "first_decision_s": done - loaded, "load_to_decision_s": done - started,
                           "choice": result.choice_index}
            print(f"  {kind}: compile {runner.stats.compile_s:.1f} s, first decision {done - loaded:.3f} s", file=sys.stderr, flush=True)
            if kind == "cold":
                del runner
        out["load"] = loads
    dynamic = ModelRunner(args.model, _options("CPU"))
    out["chunks"] = ",".join(map(str, args.chunks[0]))
    out["vs_cpu_dynamic"] = _compare(runner, dynamic, prompts, args.lengths, args.repeats, args.steps)
    out["peak_rss_mib"] = peak_rss_mib()
    return out


def task_chunks(args, prompts) -> dict:
    """The dynamic runner's chunked prefill (chunk lengths from a fixed set, as shipped) against one infer per prompt,
    at lengths that need several chunks: the price of bounded memory."""
    from decider.engine.runners.prefill_chunks import chunk_sizes
    from decider.engine.runners.runner import ModelRunner

    chunked = ModelRunner(args.model, _options(args.device))
    one = ModelRunner(args.model, _options(args.device))
    one.prefill_chunk = None  # one infer per prompt segment

    out = {"device": args.device, "prefill": {}}
    for length in args.lengths:
        ids = _ids(prompts, length, one.vocab_size)
        c, o = _pairs(chunked, one, lambda r: _prefill_s(r, ids)[0], args.repeats)
        out["prefill"][str(length)] = {"chunks": chunk_sizes(length, chunked.prefill_chunk, chunked.prefill_base), "bounded_s": summary(c), "one_s": summary(o),
                                       "ratio": summary([x / y for x, y in zip(c, o)])}
        print(f"  prefill {length} ({len(chunk_sizes(length, chunked.prefill_chunk, chunked.prefill_base))} chunks): chunked {np.median(c):.3f} s, one infer {np.median(o):.3f} s",
              file=sys.stderr, flush=True)
    return out


TASKS = {"paths": task_paths, "npu": task_npu, "chunks": task_chunks}


def main(argv=None) -> int:
    parser = task_parser("python -m bench.w_static", TASKS, lengths="64,256")
    parser.add_argument("--prompts", help="the bench prompts file (token ids); without it, ids 1..N")
    parser.add_argument("--steps", type=int, default=16, help="decode steps per decode measurement")
    parser.add_argument("--chunks", action="append", help="static chunk sizes, e.g. 64,8,1 (repeatable)")
    args = parser.parse_args(argv)
    args.lengths = [int(x) for x in args.lengths.split(",")]
    args.chunks = [tuple(int(x) for x in c.split(",")) for c in (args.chunks or ["64,8,1"])]
    prompts = read_json(Path(args.prompts)) if args.prompts else None
    result = TASKS[args.task](args, prompts)
    result["args"] = {k: v for k, v in vars(args).items() if k != "out"}
    write_json(Path(args.out), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
