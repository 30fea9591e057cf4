"""The exact decode step outside the projections, before and after an edit, profiled in one process, interleaved.

    python -m bench.w_step_rest --model IR_DIR --out result.json [--threads 1] [--prompt 256] [--steps 64] [--warm 8]
                                [--variants before,after] [--top 30]

Variants of the one-token step graph (the engine's last-position head, exact compile properties):
  exported  the IR as optimum-intel exports it;
  before    the one-token DeltaNet path without the conv shift (engine/graphs/decode.py as it was before
            engine/graphs/conv_step.py);
  after     the one-token DeltaNet path with the conv shift: what engine/runners/runner.py compiles on the CPU
            where its int8 projections are widened;
  pieces    after, with the int8 projections in integer pieces (engine/graphs/int8_pieces.py): what the runner
            compiles where the plan chooses them. The pieces' own nodes count in "the rest";
  one-token, pieces-one-token
            after / pieces fixed at one token (engine/graphs/one_token.py): what the runner's steps run on;
  one-token-merged, pieces-one-token-merged
            the same keeping the routed graph's empty path and its merges (one_token.py before drop_empty_merges).
  native-one-token
            one-token with our native operations (engine/kernels/native_op.py, native_deltanet.py): what the runner's
            steps run on where it adopted them.

Each variant is compiled twice: once to prefill the prompt (its states are copied over, then it is let go) and once
with PERF_COUNT=YES, which then only ever runs one-token steps (bench/step_profile.py says why the counters must not
see a prefill). The variants step the same tokens in turns (A B, then B A, …) so a busy machine's drift falls on every
variant; each step's logits are compared with the first variant's (bit-identical or not, max |Δ|). A node's time per
step is the growth of its counter total between the end of the warm-up and the last step. The step splits into the
projections (FullyConnected*: the int8 weights) and the rest, which is listed per node type, per kernel and per node.
Each variant's projections are also given as GB/s of their int8 weights, against one core's read rate measured before
and after the run (the larger of the two). The result carries the CPU flags, the thread count and the load average
before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from .common import finish, stamp, summary
from .step_profile import _totals
from .w_decode_graph import _properties, step_feed
from .w_kernel import read_rate_gbs

VARIANTS = ("exported", "before", "after", "pieces", "one-token", "pieces-one-token", "one-token-merged",
            "pieces-one-token-merged", "native-one-token")
ONE_TOKEN_OF = {"one-token": "after", "pieces-one-token": "pieces", "one-token-merged": "after",
                "pieces-one-token-merged": "pieces", "native-one-token": "after"}  # the graph each one-token variant is cut from
_KEEP: list = []  # the native operations' weights, alive as long as the process


def variant_model(ir: Path, variant: str):
    """The IR with the engine's last-position head and the variant's one-token edits."""
    import openvino as ov

    from decider.engine.graphs.decode import one_token_deltanet
    from decider.engine.graphs.logits import slice_to_last_position

    if variant not in VARIANTS:
        raise SystemExit(f"unknown variant {variant!r} (one of {', '.join(VARIANTS)})")
    model = ov.Core().read_model(ir)
    slice_to_last_position(model)
    if variant != "exported":
        one_token_deltanet(model, shift_conv=variant != "before")
    if variant.startswith("pieces"):
        from decider.engine.graphs.int8_pieces import rewrite_int8_projections

        rewrite_int8_projections(model)
    if variant in ONE_TOKEN_OF:
        from decider.engine.graphs.one_token import one_token_graph

        step = one_token_graph(model, drop_merges=not variant.endswith("merged"))
        if variant.startswith("native"):
            from decider.engine.kernels.native_op import isa as native_isa, unavailable
            from decider.engine.kernels.native_steps import native_step_graph

            if unavailable():
                raise SystemExit(f"native-one-token: {unavailable()}")
            weights = native_step_graph(step, native_isa())  # as the runner's native step compile
            if weights is None:
                raise SystemExit("native-one-token: the model has no int8 projections")
            _KEEP.append(weights)
        return step
    return model


def is_projection(node_type: str, name: str = "") -> bool:
    """The nodes that read the int8 weights (FullyConnected, FullyConnectedCompressed, …; our native operation)."""
    return node_type.startswith("FullyConnected") or name.endswith("/native_int8")


def _ordered(table: dict[str, float]) -> dict[str, float]:
    return dict(sorted(table.items(), key=lambda kv: -kv[1]))


def projection_bytes(request) -> int:
    """The int8 weight bytes one step's projections read, from the compiled graph: our native operation's inputs ×
    its outputs' rows, a FullyConnected node's weight input."""
    total = 0
    for node in request.get_compiled_model().get_runtime_model().get_ordered_ops():
        kind = node.get_rt_info()["layerType"].astype(str)
        if not is_projection(kind, node.get_friendly_name()):
            continue
        if node.get_friendly_name().endswith("/native_int8"):
            total += node.input(0).get_partial_shape()[-1].get_length() * sum(
                o.get_partial_shape()[-1].get_length() for o in node.outputs())
        elif node.get_input_size() > 1 and node.input(1).get_partial_shape().is_static:
            weights = node.input(1)
            total += int(np.prod(weights.get_shape())) * weights.get_element_type().size
    return total


def split(per_node: dict[tuple[str, str, str], float], top: int) -> dict:
    """A step's per-node milliseconds as projections vs the rest, the rest per node type, kernel and node."""
    projections = sum(ms for (name, kind, _), ms in per_node.items() if is_projection(kind, name))
    rest = {key: ms for key, ms in per_node.items() if not is_projection(key[1], key[0])}
    by_type: dict[str, float] = defaultdict(float)
    by_kernel: dict[str, float] = defaultdict(float)
    for (_, kind, exec_type), ms in rest.items():
        by_type[kind] += ms
        by_kernel[f"{kind} ({exec_type})"] += ms
    ranked = sorted(rest.items(), key=lambda kv: -kv[1])[:top]
    return {
        "nodes_ms": float(sum(per_node.values())), "projections_ms": float(projections),
        "rest_ms": float(sum(rest.values())), "executed_rest_nodes": sum(1 for ms in rest.values() if ms > 0.0),
        "rest_by_type_ms": _ordered(by_type), "rest_by_kernel_ms": _ordered(by_kernel),
        "rest_top_nodes": [{"name": name, "type": kind, "exec": exec_type, "ms": float(ms)}
                           for (name, kind, exec_type), ms in ranked],
    }


def _profiled_request(core, model, properties: dict, prefill: dict, prompt_model=None):
    """An infer request with PERF_COUNT on, holding the states `prefill` left (run on a compile of its own: of
    `prompt_model` where the profiled model takes one token at a time)."""
    import openvino as ov

    prompt = core.compile_model(prompt_model or model, "CPU", properties).create_infer_request()
    prompt.infer(prefill)
    states = {state.name: state.state.data.copy() for state in prompt.query_state()}
    del prompt
    request = core.compile_model(model, "CPU", {**properties, "PERF_COUNT": "YES"}).create_infer_request()
    for state in request.query_state():
        state.state = ov.Tensor(states[state.name])
    return request


def step_tokens(vocab: int, steps: int) -> list[int]:
    return [(1000 + 7 * i) % vocab for i in range(steps)]


def run(ir: Path, variants: list[str], prompt: list[int], tokens: list[int], threads: int | None, warm: int, top: int) -> dict:
    import openvino as ov

    if len(tokens) <= warm:
        raise SystemExit(f"step at least {warm + 1} times (the first {warm} warm up)")
    core = ov.Core()
    properties = _properties(threads, perf=False)
    requests, names = {}, {}
    for variant in variants:
        model = variant_model(ir, variant)
        names[variant] = {p.get_any_name() for p in model.inputs}
        prompt_model = variant_model(ir, ONE_TOKEN_OF[variant]) if variant in ONE_TOKEN_OF else None
        requests[variant] = _profiled_request(core, model, properties, step_feed(names[variant], prompt, 0), prompt_model)
    # the logits are compared with `before` (what the edit must match bit for bit) where it runs, else the first
    reference = "before" if "before" in variants else variants[0]
    wall: dict[str, list[float]] = {v: [] for v in variants}
    delta: dict[str, list[float]] = {v: [] for v in variants if v != reference}
    warmed: dict[str, dict] = {}
    for i, token in enumerate(tokens):
        logits = {}
        for variant in (variants if i % 2 == 0 else variants[::-1]):
            feed = step_feed(names[variant], [token], len(prompt) + i)
            started = time.perf_counter()
            requests[variant].infer(feed)
            wall[variant].append((time.perf_counter() - started) * 1e3)
            logits[variant] = requests[variant].get_tensor("logits").data[0, -1].copy()
            if i == warm - 1:
                warmed[variant] = _totals(requests[variant], warm)
        for variant in delta:
            delta[variant].append(float(np.max(np.abs(logits[variant] - logits[reference]))))
    out: dict = {"reference": reference, "variants": {}}
    for variant in variants:
        totals = _totals(requests[variant], len(tokens))
        # max(0, …): a node of a few µs can read a growth of -1e-18 (the counters are means × infers, in floats)
        per_node = {key: max(0.0, total - warmed[variant].get(key, 0.0)) / (len(tokens) - warm) for key, total in totals.items()}
        entry = {"step_wall_ms": summary(wall[variant][warm:]), **split(per_node, top)}
        entry["projection_bytes"] = projection_bytes(requests[variant])
        entry["projection_gbs"] = entry["projection_bytes"] / entry["projections_ms"] / 1e6 if entry["projections_ms"] else None
        if variant in delta:
            entry["logits_vs_reference"] = {"bit_identical": max(delta[variant]) == 0.0, "max_abs": max(delta[variant])}
            entry["wall_ratio_vs_reference"] = summary(
                (np.asarray(wall[variant][warm:]) / np.asarray(wall[reference][warm:])).tolist())
        out["variants"][variant] = entry
    return out


def _vocab(model_dir: Path) -> int:
    config = json.loads((model_dir / "config.json").read_text())
    return int(config.get("text_config", config).get("vocab_size") or config["vocab_size"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_step_rest")
    parser.add_argument("--model", required=True, help="an optimum-intel text export (openvino_model.xml inside)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=int, default=1, help="INFERENCE_NUM_THREADS (0: the plugin's default)")
    parser.add_argument("--prompt", type=int, default=256, help="prompt tokens before the steps")
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--warm", type=int, default=8, help="first steps left out (kernels built for one token)")
    parser.add_argument("--variants", default="before,after", help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--top", type=int, default=30, help="nodes of the rest listed per variant")
    args = parser.parse_args(argv)
    folder = Path(args.model)
    vocab = _vocab(folder)
    prompt = [(1000 + i) % vocab for i in range(args.prompt)]
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    out = stamp(model=str(folder), threads=args.threads or "plugin default", prompt_tokens=args.prompt,
                steps=args.steps, warm=args.warm, load_average_before=list(os.getloadavg()))
    rates = [read_rate_gbs()]  # one core's read rate before and after: the machine's memory varies by the minute
    out.update(run(folder / "openvino_model.xml", variants, prompt, step_tokens(vocab, args.steps), args.threads or None,
                   args.warm, args.top))
    out["load_average_after"] = list(os.getloadavg())
    out["read_rate_gbs"] = rates + [read_rate_gbs()]
    for entry in out["variants"].values():
        if entry["projection_gbs"]:
            entry["projection_share_of_read_rate"] = entry["projection_gbs"] / max(out["read_rate_gbs"])
    for variant, entry in out["variants"].items():
        same = entry.get("logits_vs_reference", {}).get("bit_identical")
        verdict = "" if same is None else f"; logits vs {out['reference']}: {'bit-identical' if same else 'differ'}"
        print(f"  {variant}: step {entry['step_wall_ms']['median']:.1f} ms, projections {entry['projections_ms']:.1f} ms "
              f"({entry['projection_gbs'] or 0:.1f} GB/s), rest {entry['rest_ms']:.1f} ms{verdict}", file=sys.stderr, flush=True)
    print(f"  read rate {' / '.join(f'{r:.1f}' for r in out['read_rate_gbs'])} GB/s (before / after)", file=sys.stderr)
    finish(Path(args.out), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
