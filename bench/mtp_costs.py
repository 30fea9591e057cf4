"""What MTP drafting costs at a geometry (issue #36): one plain step, one draft step of the MTP head (whole
vocabulary and trimmed), a verify of k = 2..5 tokens with its rollback, and the tokens per second MTP drafting would
give as a function of the per-draft acceptance.

    python -m bench.mtp_costs --model ~/.cache/decider-bench/models/qwen35-0.8b/ov-int8 \
        --checkpoint ~/.cache/decider-bench/models/qwen35-0.8b/hf --out mtp-costs.json [--rounds 8] [--trim 32768]

The bench's checkpoints carry no `mtp.*` tensors: a seeded random head at the checkpoint's real geometry is built
(modelkit/mtp_weights.py → engine/graphs/mtp_graph.py, f16 as `decider convert` stores it) into a folder beside the export
(links to its files plus openvino_mtp_model.xml). Random weights cost what trained ones cost; their acceptance means
nothing, so speed is projected from the measured costs:

    a round of k drafts yields (1 − a^(k+1)) / (1 − a) tokens (a: the chance each draft is kept, independently)
    and costs k draft steps + a verify of k + 1 tokens + a rollback when a draft is rejected (1 − a^k),

relative to a plain step. The anchors' reported acceptance (0.65 pooled, Qwen3.5 MTP) is marked as a projection.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from .common import finish, log, stamp, random_prompt

WINDOW = 16  # engine/generation/mtp_drafts.WINDOW: positions the head attends over per draft step


def head_folder(model: Path, checkpoint: Path, seed: int = 36) -> Path:
    """`model`'s files linked into `<model>-mtp` plus a random MTP head at the checkpoint's geometry."""
    import openvino as ov

    from decider.engine.model.folder import MTP_IR
    from decider.engine.graphs.mtp_graph import build_mtp_model
    from modelkit.mtp_weights import random_mtp_tensors

    out = model.parent / f"{model.name}-mtp"
    if (out / MTP_IR).is_file():
        return out
    out.mkdir(exist_ok=True)
    for path in model.iterdir():
        if path.is_file() and not (out / path.name).exists():
            (out / path.name).symlink_to(path.resolve())
    config = json.loads((checkpoint / "config.json").read_text())
    config = config.get("text_config", config)
    weights = {k[len("mtp."):]: v for k, v in random_mtp_tensors(config, seed).items()}
    ov.save_model(build_mtp_model(weights, config), out / MTP_IR, compress_to_fp16=True)
    return out


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def measure(folder: Path, rounds: int, trim: int) -> dict:
    import numpy as np

    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.runners.mtp_head import load_head
    from decider.engine.compile.planner import compile_properties
    from decider.engine.compile.precision import cpu_capabilities, draft_properties
    from decider.engine.graphs.logits import slice_to_counted_positions
    from decider.engine.runners.runner import ModelRunner

    started = time.perf_counter()
    runner = ModelRunner(folder, DeviceOptions(device="CPU", exact=True))
    load_s = time.perf_counter() - started
    assert runner.mtp is not None, runner.notices
    # the export as read, its head sliced as the runner's is (the runner lets its edited model go after compiling); both
    # heads in the arithmetic the runner drafts in (engine/compile/precision.draft_properties)
    model = runner._read(runner._core, runner.folder.language_ir)
    slice_to_counted_positions(model)
    properties = draft_properties(compile_properties("CPU", runner.options), cpu_capabilities(runner._core))
    full = load_head(runner._core, runner.folder.mtp_ir, model, None, "CPU", properties, runner.vocab_size)
    trimmed = load_head(runner._core, runner.folder.mtp_ir, model, None, "CPU", properties, runner.vocab_size,
                        np.arange(min(trim, runner.vocab_size)))
    prompt = random_prompt(runner.vocab_size, 256)
    runner.prefill(prompt)
    runner.step(11)
    hidden = runner.hidden_rows(1)[0]
    window = (np.arange(300, 300 + WINDOW), np.repeat(hidden[None], WINDOW, 0), np.arange(250, 250 + WINDOW))
    times: dict[str, list[float]] = {}

    def timed(name: str, fn) -> None:
        begin = time.perf_counter()
        fn()
        times.setdefault(name, []).append(time.perf_counter() - begin)

    def verify(n: int) -> None:
        runner.verify(list(range(200, 200 + n)), n)
        runner.rewind()

    def rollback(n: int) -> None:  # of a verify of n tokens (on the compile such verifies run on)
        runner.verify(list(range(300, 300 + n)), n)
        begin = time.perf_counter()
        runner.rewind()
        times.setdefault("rollback", []).append(time.perf_counter() - begin)

    for _ in range(rounds):
        for _ in range(3):
            timed("step", lambda: runner.step(11))
            timed("draft step", lambda: full.step(*window))
            timed(f"draft step trimmed {trim}", lambda: trimmed.step(*window))
    for n in (2, 3, 4, 5):
        runner.prepare_verify(n)  # as a drafted loop of n - 1 drafts does: the verifies' own compile, where planned
        for _ in range(rounds):
            # the last of three: a drafted loop verifies at one width back to back (no step between, the state
            # stays where the verifies run); the first of a width on the dynamic compile also prepares its shape
            for _ in range(2):
                verify(n)
            timed(f"verify{n}", lambda n=n: runner.verify(list(range(200, 200 + n)), n))
            runner.rewind()  # timed on its own below: the projection adds it where a draft is rejected
            rollback(n)
    medians = {name: _median(v) for name, v in times.items()}
    return {"medians_s": medians, "ratio_to_step": {k: v / medians["step"] for k, v in medians.items()},
            "projected": {"full vocabulary": projected(medians, "draft step"),
                          f"trimmed to {trim}": projected(medians, f"draft step trimmed {trim}")},
            "load_s": load_s, "rounds": rounds, "precision": runner.precision.label, "kernel": runner.kernel_note,
            "draft_arithmetic": full.inference}


def projected(medians: dict[str, float], draft: str) -> dict[str, float]:
    """Tokens per second relative to plain steps for k MTP drafts, each kept with probability a (see the doc)."""
    step = medians["step"]
    out = {}
    for k in (1, 2, 3, 4):
        for a in (0.3, 0.5, 0.65, 0.8, 0.9):
            tokens = (1 - a ** (k + 1)) / (1 - a)
            cost = (k * medians[draft] + medians[f"verify{k + 1}"] + (1 - a ** k) * medians["rollback"]) / step
            out[f"k={k} a={a}"] = tokens / cost
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.mtp_costs", description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--checkpoint", type=Path, required=True, help="the HF checkpoint (its config: the geometry)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--trim", type=int, default=32768, help="ids of the trimmed draft head (the first N)")
    args = parser.parse_args()
    result = stamp(model=str(args.model), rounds=args.rounds)
    folder = head_folder(args.model.expanduser(), args.checkpoint.expanduser())
    result.update(measure(folder, args.rounds, args.trim))
    finish(args.out, result)
    for name, ratio in result["ratio_to_step"].items():
        log(f"{name:28s} {result['medians_s'][name] * 1000:8.2f} ms  ×{ratio:.3f} a step")
    for kind, table in result["projected"].items():
        best = max(table, key=lambda key: table[key] if key.endswith("a=0.65") else 0)
        log(f"{kind}: at acceptance 0.65 (PROJECTION) best {best}: ×{table[best]:.2f} plain tokens/s; "
            + ", ".join(f"{key} ×{value:.2f}" for key, value in table.items() if key.startswith("k=3")))
    log(f"load average before {result['load_before']:.2f}, after {result['load_after']:.2f}")


if __name__ == "__main__":
    main()
