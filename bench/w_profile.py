"""Where a decode step's time goes: OpenVINO's per-node counters and the host work between steps.

    python -m bench.w_profile --model IR_DIR --prompts prompts.json --out result.json [--steps 48] [--fast]

One process: the runner's compiled model (its last-position head and one-token DeltaNet path), recompiled with
PERF_COUNT=YES (the same properties otherwise), runs the think prompt and then `--steps` one-token infers, profiled
on a request of their own (bench/step_profile.py says why). Every executed node's time per step is summed per node
type (and per kind: the weight-reading FullyConnected/MatMul, the DeltaNet node, state ReadValue/Assign,
conversions, the rest). Beside it the
host work the generation loop does per step on the 248k-wide logits is timed piece by piece
(float64 conversion, penalties, the draw, a top-5 logprob entry, the tokenizer's stream), so the
"neither weights nor arithmetic" part has names and milliseconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from .common import peak_rss_mib, read_json, summary, write_json
from .step_profile import profile_steps
from .w_decode_graph import decode_model


def _graph(runner):
    """The runner's graph (last-position head, one-token DeltaNet path on the CPU, as engine/runners/runner.py compiles it)
    and its compile properties."""
    import openvino as ov

    from decider.engine.compile.planner import compile_properties
    from decider.engine.compile.precision import cpu_capabilities

    model, _ = decode_model(runner.folder.language_ir, rewrite=runner.device.startswith("CPU"))
    return model, dict(compile_properties(runner.device, runner.options, cpu_capabilities(ov.Core())))


def node_profile(runner, ids: list[int], steps: int) -> dict:
    model, props = _graph(runner)
    names = {p.get_any_name() for p in model.inputs}

    def feed(chunk, past: int) -> dict:  # the runner's feed, less the inputs its compile adds (counted head, kernel)
        return {k: v for k, v in runner._layout.inputs(np.asarray(chunk, dtype=np.int64), past).items() if k in names}

    out = profile_steps(model, runner.device, props, feed(ids, 0), lambda i: feed([198], len(ids) + i), steps)
    out["properties"] = {k: str(v) for k, v in props.items()}
    return out


def host_profile(runner, ids: list[int], steps: int) -> dict:
    """The loop's host work per step, each piece timed alone on real logits."""
    from decider.engine.core.logprobs import Distribution
    from decider.engine.generation.processors import Penalties, make_processors, run_processors
    from decider.engine.generation.sampling import make_sampler
    from decider.engine.core.settings import SamplingSettings

    runner.reset()
    runner.clear_snapshots()
    runner.prefill(ids)
    raw = runner._request.get_tensor("logits").data
    vocab = runner.vocab_size
    sampling = SamplingSettings(seed=0)  # Qwen3.5's recommendation: top-k 20, top-p 0.8, penalties on
    processors = make_processors(sampling, penalties=Penalties.for_sampling(sampling))
    sampler = make_sampler(sampling, np.random.default_rng(0))
    stream = runner.tokenizer.stream()
    parts: dict[str, list[float]] = defaultdict(list)
    window = list(ids[-40:])
    for token in window:
        processors[0].accept(int(token))

    def clock(name, fn, *a):
        started = time.perf_counter()
        out = fn(*a)
        parts[name].append((time.perf_counter() - started) * 1e3)
        return out

    for _ in range(steps):
        logits = clock("logits to float64", lambda: raw[0, -1, :vocab].astype(np.float64))
        penalized, scored, drawn = clock("penalties", run_processors, processors, logits)
        token = clock("draw (top-k 20, top-p, temperature)", lambda: sampler(Distribution(drawn)))
        clock("greedy argmax", np.argmax, drawn)
        clock("top-5 logprob entry", lambda: Distribution(scored).entry(token, 5))
        clock("tokenizer stream", stream.push, int(token))
    return {k: summary(v) for k, v in parts.items()}


# Compile variants of the same graph, paired one step at a time against the first (the runner's exact one).
VARIANTS = {
    "exact": ("exact", False, {}),
    "exact, compiled again (control: the pairing's own spread)": ("exact", False, {}),
    "exact, projections fused (bench/projection_fusion.py)": ("exact", True, {}),
    "fast (plugin defaults)": ("fast", False, {}),
    "exact + dynamic quantisation (group 32)": ("exact", False, {"DYNAMIC_QUANTIZATION_GROUP_SIZE": "32"}),
    "exact, 1 thread": ("exact", False, {"INFERENCE_NUM_THREADS": 1}),
}


def variant_steps(model_dir: str, device: str, ids: list[int], pairs: int) -> dict:
    import openvino as ov

    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.compile.planner import compile_properties
    from .projection_fusion import fuse_parallel_projections
    from decider.engine.compile.precision import cpu_capabilities
    from decider.engine.runners.input_layouts import TextLayout

    core = ov.Core()
    requests, execs = {}, {}
    layout = None
    for name, (mode, fuse, extra) in VARIANTS.items():
        model, _ = decode_model(Path(model_dir) / "openvino_model.xml", rewrite=device.startswith("CPU"))
        if fuse:
            fuse_parallel_projections(model)
        props = dict(compile_properties(device, DeviceOptions(device=device, exact=mode == "exact"), cpu_capabilities(core)))
        props.update(extra)
        compiled = core.compile_model(model, device, props)
        layout = layout or TextLayout(compiled)
        requests[name] = compiled.create_infer_request()
        requests[name].infer(layout.inputs(np.asarray(ids, dtype=np.int64), 0))
        runtime = compiled.get_runtime_model()
        # which kernels the projections ran on: dynamic quantisation shows as an int8 activation kernel
        execs[name] = sorted({str(op.get_rt_info()["runtimePrecision"].astype(str)) + "/" + op.get_rt_info()["primitiveType"].astype(str)
                              for op in runtime.get_ordered_ops() if op.get_rt_info()["layerType"].astype(str).startswith("FullyConnected")})
    names = list(requests)
    times: dict[str, list[float]] = {n: [] for n in names}
    for i in range(pairs):
        for name in (names if i % 2 == 0 else names[::-1]):
            feed = layout.inputs(np.asarray([198], dtype=np.int64), len(ids) + i)
            started = time.perf_counter()
            requests[name].infer(feed)
            times[name].append((time.perf_counter() - started) * 1e3)
    warm = slice(4, None)
    base = np.asarray(times[names[0]][warm])
    return {name: {"step_ms": summary(times[name][warm]),
                   "ratio": summary((np.asarray(times[name][warm]) / base).tolist()),
                   "fc_kernels": execs[name], "properties": {k: str(v) for k, v in VARIANTS[name][2].items()}}
            for name in names}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_profile")
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--pairs", type=int, default=60, help="rounds of the paired compile variants (0: none)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.runners.runner import ModelRunner

    prompts = read_json(args.prompts)
    ids = list(prompts["decisions"]["256"]["ids"])
    out = {"prompt_tokens": len(ids), "steps": args.steps}
    for mode in ("exact", "fast"):
        runner = ModelRunner(args.model, DeviceOptions(device=args.device, exact=mode == "exact"))
        out[mode] = node_profile(runner, ids, args.steps)
        print(f"  {mode}: step {out[mode]['step_wall_ms']['median']:.1f} ms; "
              + ", ".join(f"{k} {v:.1f}" for k, v in out[mode]["by_kind_ms"].items()), file=sys.stderr, flush=True)
        if mode == "exact":
            out["host_ms"] = host_profile(runner, ids, args.steps)
        del runner
    if args.pairs:
        out["variants"] = variant_steps(args.model, args.device, ids, args.pairs)
        print("  " + ", ".join(f"{k} {v['ratio']['median']:.3f}" for k, v in out["variants"].items()), file=sys.stderr, flush=True)
    out["peak_rss_mib"] = peak_rss_mib()
    write_json(Path(args.out), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
