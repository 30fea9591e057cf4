#!/usr/bin/env python
"""Print the engine's parity with transformers on every fixture model: max |Δ logprob| over the
top-5 of each greedy step, over full next-token distributions and over sequence scores.

    python tools/parity_report.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from decider.engine.generation.generate import generate_step, make_rng  # noqa: E402
from decider.engine.core.logprobs import log_softmax  # noqa: E402
from decider.engine.runners.runner import ModelRunner  # noqa: E402
from decider.engine.generation.sampling import make_sampler  # noqa: E402
from decider.engine.core.settings import SamplingSettings  # noqa: E402

GREEDY = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0)


def report(name: str) -> dict:
    ref = json.loads((ROOT / "tests/fixtures/reference" / f"{name}.json").read_text())
    runner = ModelRunner(ROOT / "tests/fixtures/models" / name)
    worst = {"greedy_top5": 0.0, "distribution": 0.0, "sequence": 0.0}
    tokens_identical = True
    for case in ref["cases"]:
        runner.reset()
        if case["kind"] == "greedy":
            steps = generate_step(runner, case["prompt_ids"], make_sampler(GREEDY, make_rng(0)), max_tokens=len(case["steps"]), top_logprobs=5)
            for got, want in zip(steps, case["steps"]):
                tokens_identical &= got.token_id == want["token"]
                for alt, (token, logprob) in zip(got.entry.top, want["top"]):
                    tokens_identical &= alt.token_id == token
                    worst["greedy_top5"] = max(worst["greedy_top5"], abs(alt.logprob - logprob))
        elif case["kind"] == "distribution":
            got = log_softmax(runner.prefill(case["prompt_ids"]))
            worst["distribution"] = max(worst["distribution"], float(np.max(np.abs(got - np.array(case["logprobs"])))))
        elif case["kind"] == "sequence":
            for continuation, want in zip(case["continuations"], case["token_logprobs"]):
                logits = runner.prefill(case["prompt_ids"])
                for i, token in enumerate(continuation):
                    worst["sequence"] = max(worst["sequence"], abs(log_softmax(logits)[token] - want[i]))
                    if i + 1 < len(continuation):
                        logits = runner.step(token)
    return {"model": name, "layout": ref["layout"], "cases": len(ref["cases"]), "tokens_identical": tokens_identical, **worst}


if __name__ == "__main__":
    names = sorted(p.stem for p in (ROOT / "tests/fixtures/reference").glob("*.json"))
    for name in names:
        row = report(name)
        print(f"{row['model']:<18} {row['layout']:<5} cases {row['cases']:>2}  tokens identical: {row['tokens_identical']}  "
              f"max|Δ| greedy top-5 {row['greedy_top5']:.2e}  distribution {row['distribution']:.2e}  sequence {row['sequence']:.2e}")
