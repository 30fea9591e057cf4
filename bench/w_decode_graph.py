"""The decode step with and without the one-token DeltaNet path (engine/graphs/decode.py), paired, and where it goes.

    python -m bench.w_decode_graph --model IR_DIR --out result.json [--prompt 256] [--pairs 40] [--profile-steps 24]
                                   [--threads N] [--earlier OLD_decode_graph.py]

One process, raw OpenVINO on the CPU with the engine's exact compile properties (engine/compile/planner.compile_properties):
the same IR read twice, both with the last-position head, one of them also rewritten by one_token_deltanet. Both
prefill the same prompt, then step one token at a time, interleaved (A B, then B A, …) so a busy machine's drift
falls on both; the ratio is the median of the per-round ratios. Every step's logits are compared (max |Δ|). Then each
variant is compiled again with PERF_COUNT=YES and its steps profiled per node type and per kind (bench/step_profile.py),
which says what the step is made of before and after. Each result carries the CPU flags and the load average.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .common import finish, stamp, summary
from .step_profile import profile_steps

VARIANTS = ("exported", "one-token path")
EARLIER = "earlier one-token path"
STEP_TOKEN = 198
Rewrite = Callable[[object], int]  # one_token_deltanet, or an earlier version of it


def earlier_rewrite(file: Path) -> Rewrite:
    """one_token_deltanet as another copy of engine/graphs/decode.py defines it. Loaded as a module of the engine's
    graphs package, so its relative imports (engine/graphs/conv_step.py, ../core, …) resolve to the engine beside it."""
    spec = importlib.util.spec_from_file_location("decider.engine.graphs._earlier_decode_graph", file)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{file}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module.one_token_deltanet


def decode_model(path: Path, rewrite: bool | Rewrite):
    """The IR with the engine's last-position head, and (rewrite) its one-token DeltaNet path: (model, layers)."""
    import openvino as ov

    from decider.engine.graphs.decode import one_token_deltanet
    from decider.engine.graphs.logits import slice_to_last_position

    model = ov.Core().read_model(path)
    slice_to_last_position(model)
    rewriter = one_token_deltanet if rewrite is True else rewrite or None
    layers = rewriter(model) if rewriter else 0
    return model, layers


def step_feed(names: set[str], ids, past: int) -> dict:
    """One infer's inputs for `ids` after `past` tokens, as the runner feeds them (those the model has)."""
    ids = np.asarray(ids, dtype=np.int64)
    feed = {
        "input_ids": ids[None], "attention_mask": np.ones((1, past + len(ids)), np.int64),
        "position_ids": np.arange(past, past + len(ids))[None], "beam_idx": np.zeros(1, np.int32),
    }
    return {k: v for k, v in feed.items() if k in names}


def _properties(threads: int | None, perf: bool) -> dict:
    import openvino as ov

    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.compile.planner import compile_properties
    from decider.engine.compile.precision import cpu_capabilities

    props = dict(compile_properties("CPU", DeviceOptions(device="CPU", exact=True), cpu_capabilities(ov.Core())))
    if threads:
        props["INFERENCE_NUM_THREADS"] = threads
    if perf:
        props["PERF_COUNT"] = "YES"
    return props


def paired_steps(path: Path, prompt: list[int], pairs: int, threads: int | None, variants: dict[str, bool | Rewrite]) -> dict:
    import openvino as ov

    core = ov.Core()
    requests, names, layers = {}, {}, {}
    for variant, rewrite in variants.items():
        model, layers[variant] = decode_model(path, rewrite)
        compiled = core.compile_model(model, "CPU", _properties(threads, perf=False))
        names[variant] = {p.get_any_name() for p in compiled.inputs}
        requests[variant] = compiled.create_infer_request()
    prefill = {}
    for variant, request in requests.items():
        request.infer(step_feed(names[variant], prompt, 0))
        prefill[variant] = request.get_tensor("logits").data[0, -1].copy()
    order = list(variants)
    times: dict[str, list[float]] = {v: [] for v in order}
    drift: dict[str, list[float]] = {v: [] for v in order[1:]}
    for i in range(pairs):
        logits = {}
        for variant in (order if i % 2 == 0 else order[::-1]):
            feed = step_feed(names[variant], [STEP_TOKEN], len(prompt) + i)
            started = time.perf_counter()
            requests[variant].infer(feed)
            times[variant].append((time.perf_counter() - started) * 1e3)
            logits[variant] = requests[variant].get_tensor("logits").data[0, -1].copy()
        for variant in order[1:]:
            drift[variant].append(float(np.max(np.abs(logits[order[0]] - logits[variant]))))
    warm = slice(4, None)  # the first steps build kernels for the one-token shapes

    def ratio(over: str, under: str) -> dict:
        return summary((np.asarray(times[over][warm]) / np.asarray(times[under][warm])).tolist())

    out = {
        "rewritten_layers": layers[VARIANTS[1]],
        "prefill_max_abs_delta": float(np.max(np.abs(prefill[VARIANTS[0]] - prefill[VARIANTS[1]]))),
        "step_max_abs_delta": max(drift[VARIANTS[1]]),
        "step_ms": {v: summary(times[v][warm]) for v in order},
        "ratio": ratio(VARIANTS[1], VARIANTS[0]),
    }
    if EARLIER in variants:
        out["earlier"] = {"ratio": ratio(EARLIER, VARIANTS[0]), "now_over_earlier": ratio(VARIANTS[1], EARLIER),
                          "step_max_abs_delta": max(drift[EARLIER])}
    return out


def node_profile(path: Path, rewrite: bool | Rewrite, prompt: list[int], steps: int, threads: int | None) -> dict:
    model, _ = decode_model(path, rewrite)
    names = {p.get_any_name() for p in model.inputs}
    return profile_steps(model, "CPU", _properties(threads, perf=False), step_feed(names, prompt, 0),
                         lambda i: step_feed(names, [STEP_TOKEN], len(prompt) + i), steps)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_decode_graph")
    parser.add_argument("--model", required=True, help="an optimum-intel text export (openvino_model.xml inside)")
    parser.add_argument("--prompt", type=int, default=256, help="prompt tokens before the steps")
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--profile-steps", type=int, default=24, help="per-node profile steps per variant (0: none)")
    parser.add_argument("--threads", type=int, default=None, help="INFERENCE_NUM_THREADS (default: the plugin's)")
    parser.add_argument("--earlier", type=Path, default=None,
                        help="another engine/graphs/decode.py whose one-token path joins the rounds (and the profile)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    path = Path(args.model) / "openvino_model.xml"
    prompt = [1000 + i for i in range(args.prompt)]
    variants: dict[str, bool | Rewrite] = {VARIANTS[0]: False, VARIANTS[1]: True}
    if args.earlier is not None:
        variants[EARLIER] = earlier_rewrite(args.earlier)
    out = stamp(model=str(args.model), threads=args.threads or "plugin default", prompt_tokens=args.prompt,
                earlier=str(args.earlier) if args.earlier else None)
    out["paired"] = paired_steps(path, prompt, args.pairs, args.threads, variants)
    paired = out["paired"]
    print(f"  step {paired['step_ms'][VARIANTS[0]]['median']:.1f} → {paired['step_ms'][VARIANTS[1]]['median']:.1f} ms, "
          f"paired ratio {paired['ratio']['median']:.3f}; logits max |Δ| {paired['step_max_abs_delta']:.1e}", file=sys.stderr, flush=True)
    if "earlier" in paired:
        print(f"  now / earlier one-token path: {paired['earlier']['now_over_earlier']['median']:.3f}", file=sys.stderr, flush=True)
    if args.profile_steps:
        out["profile"] = {}
        for variant, rewrite in variants.items():
            out["profile"][variant] = node_profile(path, rewrite, prompt, args.profile_steps, args.threads)
            print(f"  {variant}: " + ", ".join(f"{k} {v:.1f}" for k, v in out["profile"][variant]["by_kind_ms"].items()),
                  file=sys.stderr, flush=True)
    finish(Path(args.out), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
