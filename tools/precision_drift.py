"""How far each reduced precision moves the bars from exact f32, on the demo model's held-out decisions.

    python tools/precision_drift.py [--items 200] [--json out.json]

Compared, each against the CPU's exact runner (f32 arithmetic, f32 KV cache): `--fast` on this CPU (the
arithmetic engine/compile/precision.py asks for: bf16 or f16 where the CPU has it, a u8 KV cache, int8 activations),
and the NPU plugin's path with NPUW on the CPU in the named mode that emulates the NPU's own f16 arithmetic
(DECIDER_NPUW_PRECISION=f16: the nearest arithmetic this CPU has). Reported per precision: the largest
|Δ logprob| of an option's bar in nats, the median, and how many choices agree. The CPU's ISA flags and the
precision each compiled model reported are part of the result (they decide what "fast" means here).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from decider.engine.decisions.decide import DecisionRequest, decide  # noqa: E402
from decider.engine.compile.devices import DeviceOptions  # noqa: E402
from decider.engine.compile.precision import NPUW_PRECISION_ENV, isa_summary  # noqa: E402
from decider.engine.runners.runner import ModelRunner  # noqa: E402
from decider.engine.core.settings import SamplingSettings  # noqa: E402
from decider.engine.runners.static import StaticRunner  # noqa: E402

DEMO = ROOT / "resources" / "demo-model"
GREEDY = SamplingSettings(temperature=0.0)


def _bars(runner, items) -> list[np.ndarray]:
    out = []
    for item in items:
        result = decide(runner, DecisionRequest(item.question, list(item.options), sampling=GREEDY))
        out.append(np.array([o.logprob for o in result.options]))
    return out


def _compare(name: str, runner, items, exact: list[np.ndarray]) -> dict:
    got = _bars(runner, items)
    drift = np.array([np.max(np.abs(g - e)) for g, e in zip(got, exact)])
    agree = sum(int(np.argmax(g) == np.argmax(e)) for g, e in zip(got, exact))
    row = {
        "precision": runner.precision.label, "device": runner.device, "path": runner.execution_path,
        "max_nats": float(drift.max()), "median_nats": float(np.median(drift)), "agree": agree, "items": len(items),
    }
    print(f"{name:<28} {row['precision']:<58} max {row['max_nats']:.2e}  median {row['median_nats']:.2e}  "
          f"choices {agree}/{len(items)}")
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import demo_tasks

    mix = {"retrieval": 2, "category": 2, "retrieval_none": 1, "category_two": 1}
    total = sum(mix.values())
    items = demo_tasks.heldout_items(24_2026, {k: max(1, args.items * v // total) for k, v in mix.items()})
    exact = ModelRunner(DEMO, DeviceOptions(device="CPU"))
    print(f"CPU flags: {isa_summary()}; exact reference: {exact.precision.label}, {len(items)} held-out items")
    want = _bars(exact, items)
    rows = {"cpu_flags": isa_summary(), "items": len(items)}
    rows["fast"] = _compare("--fast (CPU)", ModelRunner(DEMO, DeviceOptions(device="CPU", exact=False)), items, want)
    os.environ["DECIDER_NPUW_DEVICES"] = "CPU"
    small = dict(static_chunks=(32, 4, 1), npu_max_prompt_len=256, npu_min_response_len=16)
    rows["npu_emulated_f32"] = _compare("NPU emulated (f32)", StaticRunner(DEMO, DeviceOptions(device="NPU", **small)), items, want)
    os.environ[NPUW_PRECISION_ENV] = "f16"
    rows["npu_emulated_f16"] = _compare("NPU emulated (f16 mode)", StaticRunner(DEMO, DeviceOptions(device="NPU", **small)), items, want)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
