"""Soak: an evening of varied requests in one process, its memory sampled (run by `python -m bench run`, or alone).

    python -m bench.w_soak --model DIR --variant dynamic|capped|static --requests 2000 --out result.json

Requests mix decisions (50 %), completions (30 %) and chats (20 %) with prompt lengths spread uniformly over
1..--max-len tokens, every one through the engine service the window, the CLI and the API use. RSS (VmRSS)
is sampled every --sample-every requests; every --probe-every requests one fixed decision runs cold (state
and snapshots cleared) and its latency is recorded, so latency drift shows beside memory.

Variants: dynamic (as shipped: the stateful export, prefill chunked into power-of-two lengths so the CPU
plugin sees few input shapes), one-pass (each prompt in one infer, as before that chunking: every new prompt
length is a new shape), capped (one-pass with CPU_RUNTIME_CACHE_CAPACITY=0: no per-shape kernel cache),
static (the static-shape runner on the CPU: a few fixed shapes).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from .common import rss_mib, summary, write_json

WORDS = ("north river scouts report gate tower safe choice road bridge storm trade camp forest wolves guard "
         "supplies horses night enemy ally council gold winter harbor ship").split()
PROBE = ("Scouts report that Retreat is the safe choice. What should we do?", ("Attack", "Retreat", "Trade"))


def _options(variant: str):
    from decider.engine.devices import DeviceOptions

    path = "static" if variant == "static" else "dynamic"
    # The static window must hold the longest request (prompt + answer).
    return DeviceOptions(device="CPU", path=path, runtime_cache_capacity=0 if variant == "capped" else None,
                         npu_max_prompt_len=2048, npu_min_response_len=128)


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _request(service, rng: random.Random, max_len: int):
    from decider.engine.chat_template import Message
    from decider.engine.decide import DecisionRequest
    from decider.engine.settings import SamplingSettings

    greedy = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0)
    kind = rng.choices(("decide", "complete", "chat"), weights=(5, 3, 2))[0]
    length = rng.randint(1, max_len)
    if kind == "decide":
        options = tuple(f"{w} {i}" for i, w in enumerate(rng.sample(WORDS, rng.randint(2, 4))))
        service.decide(DecisionRequest(_text(rng, length) + "?", options, sampling=greedy))
    elif kind == "complete":
        service.run(service.completion_request(_text(rng, length), greedy, rng.randint(1, 8), None))
    else:
        service.run(service.chat_request([Message("user", _text(rng, length))], False, greedy, rng.randint(1, 8), None))
    return kind


def _probe(service) -> float:
    from decider.engine.decide import DecisionRequest
    from decider.engine.settings import SamplingSettings

    service.runner.reset()
    service.runner.clear_snapshots()
    started = time.perf_counter()
    service.decide(DecisionRequest(PROBE[0], PROBE[1], sampling=SamplingSettings(temperature=0.0)))
    return time.perf_counter() - started


def _result(args, service, rss, probes, kinds, started) -> dict:
    at = dict(rss)
    first = at.get(100, rss[min(len(rss) - 1, 1)][1])
    return {
        "variant": args.variant, "requests": rss[-1][0], "planned": args.requests, "max_len": args.max_len, "kinds": kinds,
        "rss_mib": rss, "probe_s": probes, "probe_summary": summary([p for _, p in probes]) if probes else None,
        "rss_after_100_mib": first, "rss_final_mib": rss[-1][1], "growth_after_100_mib": rss[-1][1] - first,
        "wall_s": time.perf_counter() - started, "execution_path": service.runner.execution_path,
    }


def run(args) -> dict:
    from decider.app.service import EngineService

    service = EngineService(args.model, _options(args.variant))
    if args.variant in ("one-pass", "capped"):
        service.runner.prefill_chunk = None  # each prompt segment in one infer, as before the chunked prefill
    rng = random.Random(args.seed)
    rss, probes, kinds = [(0, rss_mib())], [], {"decide": 0, "complete": 0, "chat": 0}
    started = time.perf_counter()
    for i in range(1, args.requests + 1):
        kinds[_request(service, rng, args.max_len)] += 1
        if i % args.sample_every == 0:
            rss.append((i, rss_mib()))
        if i % args.probe_every == 0:
            probes.append((i, _probe(service)))
            print(f"  {i} requests: RSS {rss[-1][1]:.0f} MiB, probe decision {probes[-1][1] * 1e3:.0f} ms", file=sys.stderr, flush=True)
            # Written as it goes: a soak cut short still leaves its curve so far ("requests" says how far).
            write_json(Path(args.out), _result(args, service, rss, probes, kinds, started))
    return _result(args, service, rss, probes, kinds, started)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_soak")
    parser.add_argument("--model", required=True)
    parser.add_argument("--variant", default="dynamic", choices=("dynamic", "one-pass", "capped", "static"))
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--max-len", type=int, default=300, help="longest prompt, in words (300 ≈ 1,000 demo-model tokens)")
    parser.add_argument("--sample-every", type=int, default=10)
    parser.add_argument("--probe-every", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prompts", help=argparse.SUPPRESS)  # accepted for the orchestrator's common arguments
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    write_json(Path(args.out), run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
