"""The decode step with and without the one-token DeltaNet path (engine/decode_graph.py), paired, and where it goes.

    python -m bench.w_decode_graph --model IR_DIR --out result.json [--prompt 256] [--pairs 40] [--profile-steps 24]
                                   [--threads N]

One process, raw OpenVINO on the CPU with the engine's exact compile properties (engine/devices.compile_properties):
the same IR read twice, both with the last-position head, one of them also rewritten by one_token_deltanet. Both
prefill the same prompt, then step one token at a time, interleaved (A B, then B A, …) so a busy machine's drift
falls on both; the ratio is the median of the per-round ratios. Every step's logits are compared (max |Δ|). Then each
variant is compiled again with PERF_COUNT=YES and its steps profiled per node type and per kind (bench/step_profile.py),
which says what the step is made of before and after. Each result carries the CPU flags and the load average.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from .common import finish, stamp, summary
from .step_profile import profile_steps

VARIANTS = ("exported", "one-token path")
STEP_TOKEN = 198


def decode_model(path: Path, rewrite: bool):
    """The IR with the engine's last-position head, and (rewrite) its one-token DeltaNet path: (model, layers)."""
    import openvino as ov

    from decider.engine.decode_graph import one_token_deltanet
    from decider.engine.graph import slice_to_last_position

    model = ov.Core().read_model(path)
    slice_to_last_position(model)
    layers = one_token_deltanet(model) if rewrite else 0
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

    from decider.engine.devices import DeviceOptions, compile_properties
    from decider.engine.precision import cpu_capabilities

    props = dict(compile_properties("CPU", DeviceOptions(device="CPU", exact=True), cpu_capabilities(ov.Core())))
    if threads:
        props["INFERENCE_NUM_THREADS"] = threads
    if perf:
        props["PERF_COUNT"] = "YES"
    return props


def paired_steps(path: Path, prompt: list[int], pairs: int, threads: int | None) -> dict:
    import openvino as ov

    core = ov.Core()
    requests, names, layers = {}, {}, {}
    for variant in VARIANTS:
        model, layers[variant] = decode_model(path, variant != VARIANTS[0])
        compiled = core.compile_model(model, "CPU", _properties(threads, perf=False))
        names[variant] = {p.get_any_name() for p in compiled.inputs}
        requests[variant] = compiled.create_infer_request()
    prefill = {}
    for variant, request in requests.items():
        request.infer(step_feed(names[variant], prompt, 0))
        prefill[variant] = request.get_tensor("logits").data[0, -1].copy()
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    drift = []
    for i in range(pairs):
        logits = {}
        for variant in (VARIANTS if i % 2 == 0 else VARIANTS[::-1]):
            feed = step_feed(names[variant], [STEP_TOKEN], len(prompt) + i)
            started = time.perf_counter()
            requests[variant].infer(feed)
            times[variant].append((time.perf_counter() - started) * 1e3)
            logits[variant] = requests[variant].get_tensor("logits").data[0, -1].copy()
        drift.append(float(np.max(np.abs(logits[VARIANTS[0]] - logits[VARIANTS[1]]))))
    warm = slice(4, None)  # the first steps build kernels for the one-token shapes
    base = np.asarray(times[VARIANTS[0]][warm])
    return {
        "rewritten_layers": layers[VARIANTS[1]],
        "prefill_max_abs_delta": float(np.max(np.abs(prefill[VARIANTS[0]] - prefill[VARIANTS[1]]))),
        "step_max_abs_delta": max(drift),
        "step_ms": {v: summary(times[v][warm]) for v in VARIANTS},
        "ratio": summary((np.asarray(times[VARIANTS[1]][warm]) / base).tolist()),
    }


def node_profile(path: Path, rewrite: bool, prompt: list[int], steps: int, threads: int | None) -> dict:
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
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    path = Path(args.model) / "openvino_model.xml"
    prompt = [1000 + i for i in range(args.prompt)]
    out = stamp(model=str(args.model), threads=args.threads or "plugin default", prompt_tokens=args.prompt)
    out["paired"] = paired_steps(path, prompt, args.pairs, args.threads)
    paired = out["paired"]
    print(f"  step {paired['step_ms'][VARIANTS[0]]['median']:.1f} → {paired['step_ms'][VARIANTS[1]]['median']:.1f} ms, "
          f"paired ratio {paired['ratio']['median']:.3f}; logits max |Δ| {paired['step_max_abs_delta']:.1e}", file=sys.stderr, flush=True)
    if args.profile_steps:
        out["profile"] = {}
        for variant in VARIANTS:
            out["profile"][variant] = node_profile(path, variant != VARIANTS[0], prompt, args.profile_steps, args.threads)
            print(f"  {variant}: " + ", ".join(f"{k} {v:.1f}" for k, v in out["profile"][variant]["by_kind_ms"].items()),
                  file=sys.stderr, flush=True)
    finish(Path(args.out), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
