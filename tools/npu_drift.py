"""How far the NPU plugin path drifts from CPU f32, on the fixtures and the demo model.

    DECIDER_NPUW_DEVICES=CPU python tools/npu_drift.py [--items 50]

Two NPU-plugin configurations (NPUW running its partitions on the CPU), each against the CPU's dynamic
runner in f32: Decider's (NPUW_F16IC=NO: f32 between partitions) and NPUW's default f16 interconnect
(NPUW_F16IC=YES), which rounds every activation crossing a partition boundary to f16 — the closest this
machine comes to an NPU's f16 arithmetic. With f16 interconnects only the one-token variant creates an
infer request (OpenVINO 2026.4.1), so that configuration prefills token by token. Reported: the largest
|Δ logprob| and |Δ logit| over a 73-token prompt and 8 steps, and on the demo model whether the held-out
decisions agree.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from decider.engine.runners import static as static_runner  # noqa: E402
from decider.engine.decisions.decide import DecisionRequest, decide  # noqa: E402
from decider.engine.compile.devices import DeviceOptions  # noqa: E402
from decider.engine.core.logprobs import log_softmax  # noqa: E402
from decider.engine.runners.runner import ModelRunner  # noqa: E402
from decider.engine.core.settings import SamplingSettings  # noqa: E402

FOLDERS = [ROOT / "tests/fixtures/models" / n for n in ("qwen35-text", "qwen35-moe-text", "qwen35-vl")] + [ROOT / "resources/demo-model"]


def _static(folder: Path, f16ic: bool):
    """The static runner on the NPU with NPUW_F16IC as asked: its compile plan with that one setting changed."""
    import openvino as ov

    from decider.engine.compile.plan import Property
    from decider.engine.model.folder import inspect_folder
    from decider.engine.compile.planner import plan_for

    chunks = (1,) if f16ic else (16, 4, 1)
    options = DeviceOptions(device="NPU", static_chunks=chunks, npu_max_prompt_len=112, npu_min_response_len=16)
    core = ov.Core()
    plan = plan_for(inspect_folder(folder), options, core, static=True)
    f16 = Property("NPUW_F16IC", "YES" if f16ic else "NO", "tools/npu_drift.py compares both")
    language = replace(plan.language, settings=tuple(f16 if s.name == f16.name else s for s in plan.language.settings))
    return static_runner.StaticRunner(folder, core=core, plan=replace(plan, language=language))


def _trace(runner, prompt):
    runner.reset()
    runner.clear_snapshots()
    logits = [runner.prefill(prompt)]
    for _ in range(8):
        logits.append(runner.step(int(np.argmax(logits[-1]))))
    return np.array(logits)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=50, help="demo model held-out items to compare")
    args = parser.parse_args()
    if not os.environ.get("DECIDER_NPUW_DEVICES"):
        print("set DECIDER_NPUW_DEVICES=CPU (or run on a machine with an NPU)", file=sys.stderr)
        return 2
    import demo_tasks

    # the fixtures' data, read as data: a tool imports nothing from tests/
    cases = json.loads((ROOT / "tests" / "fixtures" / "reference" / "qwen35-text.json").read_text())["cases"]
    prompt_ids = next(c for c in cases if c["name"] == "dist_ten_options")["prompt_ids"]
    report = {}
    for folder in FOLDERS:
        cpu = ModelRunner(folder, DeviceOptions(device="CPU"))
        prompt = [t % cpu.vocab_size for t in prompt_ids]
        want = _trace(cpu, prompt)
        for f16ic in (False, True):
            npu = _static(folder, f16ic)
            got = _trace(npu, prompt)
            entry = {
                "max_abs_dlogprob": float(np.max(np.abs(np.apply_along_axis(log_softmax, 1, got) - np.apply_along_axis(log_softmax, 1, want)))),
                "max_abs_dlogit": float(np.max(np.abs(got - want))),
                "greedy_tokens_equal": bool(np.array_equal(got.argmax(1), want.argmax(1))),
            }
            if folder.name == "demo-model":
                items = demo_tasks.heldout_items(7_2028, {"retrieval": args.items // 2, "category": args.items - args.items // 2})
                greedy = SamplingSettings(temperature=0.0)
                same, worst = 0, 0.0
                for item in items:
                    request = DecisionRequest(item.question, item.options, sampling=greedy)
                    a, b = decide(cpu, request), decide(npu, request)
                    same += a.choice_index == b.choice_index
                    worst = max(worst, *(abs(x.probability - y.probability) for x, y in zip(a.options, b.options)))
                entry["heldout_same_choice"] = f"{same}/{len(items)}"
                entry["heldout_max_abs_dprobability"] = worst
            key = f"{folder.name} NPUW_F16IC={'YES' if f16ic else 'NO'}"
            report[key] = entry
            print(key, json.dumps(entry), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
