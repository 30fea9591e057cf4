"""The exact decode step with our int8 kernel (engine/kernels), without it, and llama.cpp q8_0: one process, interleaved.

    python -m bench.w_kernel --model IR_DIR --gguf GGUF --threads 1 --out result.json

One compiled model runs both Decider paths (the kernel's input `decider_kernel_tokens`: 8 = the kernel takes infers of
up to 8 tokens, 0 = the plugin's MatMuls), so the pair differs in the projections alone. Per round, in turn: a decode
step with the kernel, one without, one llama.cpp step (`eval` of one token). Also:
  read rate    one core streaming a 1 GiB buffer (numpy sum over u64 words): the memory bound the kernel is held to
  projections  time inside the kernel's operations per step (weights bytes / time = GB/s), and the rest of the step
  k tokens     a forward over k = 1…8 new tokens after the prompt, both paths, as a multiple of one token's
Run it in an interpreter that has llama_cpp (the bench's tools venv) with the repository importable as `decider`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from .common import finish, stamp, summary

PROMPT = list(range(1000, 1064))


def read_rate_gbs(repeats: int = 3) -> float:
    buffer = np.ones(1 << 30, dtype=np.uint8)
    words = buffer.view(np.uint64)
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        words.sum()
        best = max(best, buffer.nbytes / (time.perf_counter() - started) / 1e9)
    return best


class _OpClock:
    """Time spent in the kernel's operations, and the weight bytes they read (infers with rows only)."""

    def __init__(self):
        from decider.engine.kernels import projection_op

        self.seconds, self.bytes = 0.0, 0
        real = projection_op.Int8Projections.evaluate

        def timed(op, outputs, inputs):
            started = time.perf_counter()
            done = real(op, outputs, inputs)
            if inputs[0].shape[1]:
                self.seconds += time.perf_counter() - started
                self.bytes += sum(m.weights.nbytes for m in op._matrices)
            return done

        projection_op.Int8Projections.evaluate = timed

    def reset(self) -> None:
        self.seconds, self.bytes = 0.0, 0


def decider_runner(model: str, threads: int):
    import openvino as ov

    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.runners.runner import ModelRunner

    os.environ["DECIDER_EXACT_KERNEL"] = "kernel"  # routed and adopted: the bench measures both paths itself
    core = ov.Core()
    core.set_property("CPU", {"INFERENCE_NUM_THREADS": threads})
    return ModelRunner(model, DeviceOptions(device="CPU", exact=True), core=core)


def _states(request) -> dict:
    return {s.name: s.state.data.copy() for s in request.query_state()}


def _restore(request, states: dict) -> None:
    import openvino as ov

    for state in request.query_state():
        state.state = ov.Tensor(states[state.name].copy())


def k_token_forwards(runner, rounds: int) -> dict:
    """ms of a forward over k new tokens after the prompt, kernel and plugin, from the same restored states."""
    from decider.engine.kernels.projection_op import KERNEL_TOKENS

    request = runner.compiled.create_infer_request()
    request.infer({**runner._layout.inputs(np.asarray(PROMPT), 0), KERNEL_TOKENS: np.array([0])})
    after_prompt = _states(request)
    times: dict[str, dict[int, list[float]]] = {"kernel": {}, "plugin": {}}
    for _ in range(rounds + 1):
        for k in range(1, 9):
            for path, limit in (("kernel", 8), ("plugin", 0)):
                _restore(request, after_prompt)
                feed = {**runner._layout.inputs(np.arange(2000, 2000 + k), len(PROMPT)), KERNEL_TOKENS: np.array([limit])}
                started = time.perf_counter()
                request.infer(feed)
                times[path].setdefault(k, []).append((time.perf_counter() - started) * 1e3)
    out = {}
    for path, by_k in times.items():
        medians = {k: statistics.median(v[1:]) for k, v in by_k.items()}
        out[path] = {"ms": medians, "vs_one_token": {k: medians[k] / medians[1] for k in medians}}
    return out


def paired_steps(runner, llm, rounds: int, steps: int, clock: _OpClock) -> dict:
    runner.prefill(PROMPT)
    llm.reset()
    for token in PROMPT:  # one at a time: llama-cpp-python 0.3.36 built on an AMX CPU dies on a batch of 2+ tokens
        llm.eval([token])
    times: dict[str, list[float]] = {"kernel": [], "plugin": [], "llama": []}
    projections: list[float] = []
    gbs: list[float] = []
    token = 5
    for rnd in range(rounds + 1):  # the first round warms every path up and is dropped
        for path in ("kernel", "plugin", "llama"):
            clock.reset()
            started = time.perf_counter()
            for _ in range(steps):
                if path == "llama":
                    llm.eval([token])
                else:
                    runner._layout.kernel_tokens[0] = 8 if path == "kernel" else 0
                    runner.step(token)
            per_step = (time.perf_counter() - started) / steps
            if rnd:
                times[path].append(per_step * 1e3)
                if path == "kernel":
                    projections.append(clock.seconds / steps * 1e3)
                    gbs.append(clock.bytes / clock.seconds / 1e9)
        if rnd:
            print("  " + ", ".join(f"{p} {v[-1]:.1f} ms" for p, v in times.items()), file=sys.stderr, flush=True)
    runner._layout.kernel_tokens[0] = 8
    rest = [t - p for t, p in zip(times["kernel"], projections)]
    return {"step_ms": {p: summary(v) for p, v in times.items()},
            "kernel_vs_llama": summary([a / b for a, b in zip(times["kernel"], times["llama"])]),
            "plugin_vs_llama": summary([a / b for a, b in zip(times["plugin"], times["llama"])]),
            "kernel_vs_plugin": summary([a / b for a, b in zip(times["kernel"], times["plugin"])]),
            "projections_ms": summary(projections), "rest_ms": summary(rest), "projection_gbs": summary(gbs)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    from .w_paired import load_llama

    result = stamp(threads=args.threads, rounds=args.rounds, steps=args.steps, model=args.model, gguf=args.gguf)
    clock = _OpClock()
    runner = decider_runner(args.model, args.threads)
    result["precision"] = runner.precision.label
    result["read_rate_gbs"] = read_rate_gbs()
    result["steps"] = paired_steps(runner, load_llama(args.gguf, args.threads), args.rounds, args.steps, clock)
    result["steps"]["projection_share_of_read_rate"] = result["steps"]["projection_gbs"]["median"] / result["read_rate_gbs"]
    result["k_tokens"] = k_token_forwards(runner, args.rounds)
    finish(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
