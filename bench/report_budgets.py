"""The BENCHMARKS.md section of `python -m bench vision-budgets`: capture-to-bars of a 1280×720 grab at three
pixel budgets at the real 0.8B vision geometry, Decider int8 vs transformers fp32, the seeing demo's accuracy at
the same budgets, and the default budget the rule (app/capture_budget.py) chooses from them.

The committed result is docs/benchmarks/vision-budgets.json; a newer run on this machine
(~/.cache/decider-bench/results/vision-budgets.json, overlaid by bench/report.py's load_results) replaces it.
"""

from __future__ import annotations

import json

from .common import ROOT

HEADING = "## Capture budget at the 0.8B vision geometry, measured (`python -m bench vision-budgets`)"
COMMITTED = ROOT / "docs" / "benchmarks" / "vision-budgets.json"
AFTER = "## Capture budget:"  # the section this one follows (bench/report_capture.py)


def committed() -> dict | None:
    return json.loads(COMMITTED.read_text()) if COMMITTED.is_file() else None


def _s(seconds: float) -> str:
    return f"{seconds * 1e3:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _row(row: dict, cpus: int) -> str:
    from decider.app.capture_budget import OTHERS_PER_CPU

    d, t = row["decider"], row.get("torch")
    others = max(run["others_cores"] for run in d["runs"])
    quiet = "✓" if others <= OTHERS_PER_CPU * cpus else "✗"
    height, width = d["runs"][0]["size"]
    peer = "— | — | —" if t is None else (f"{_s(t['capture_to_bars_s'])} (vision {_s(t['vision_s'])}, prefill "
                                          f"{_s(t['prefill_s'])}) | {row['torch_over_decider']:.2f}× | "
                                          f"{row['max_logprob_delta']:.3f}")
    return (f"| {row['name']} {row['budget']:,} px → {width}×{height} | {d['tokens']} | **{_s(d['capture_to_bars_s'])}** | "
            f"{_s(d['preprocess_s'])} | {_s(d['vision_s'])} | {_s(d['prefill_s'])} | {peer} | "
            f"{others:.2f} {quiet} |")


def _over(r: dict) -> str:
    limit = r.get("max_seconds", 0) + 15 + (r.get("demo") or {}).get("seconds", 0)
    seconds = r.get("command_s", r["wall_s"])
    return "" if seconds <= limit else " (past its time limit: one round always runs, however slow)"


def _demo(demo: dict | None) -> list[str]:
    if not demo:
        return []
    lines = [f"The seeing demo ({demo['model']}, its own budget {demo['model_budget']:,} pixels) on rendered held-out "
             f"scenes shrunk by each budget's linear factor, as the budget shrinks everything on a grabbed screen "
             f"(`tools/demo_vl_budgets.py`: {demo['items']['layouts']} layouts drawn {demo['scene_side']}×"
             f"{demo['scene_side']}, {demo['items']['styles']} held-out styles at their own sizes, which its own budget "
             "caps first where they are larger): accuracy on the scenes with an answer, ECE, largest wrong bar.\n",
             "| budget | factor | layouts | layouts ECE | styles | styles ECE | largest wrong bar |", "|---|---|---|---|---|---|---|"]
    for name, row in demo["budgets"].items():
        lay, sty = row["layouts"], row["styles"]
        lines.append(f"| {name} | ×{row['factor']:.3f} | {lay['accuracy']:.1%} | {lay['ece']:.3f} | {sty['accuracy']:.1%} | "
                     f"{sty['ece']:.3f} | {max(lay['largest_wrong_bar'], sty['largest_wrong_bar']):.3f} |")
    return lines + [""]


def _choice(r: dict) -> str:
    from decider.app.capture_budget import OTHERS_PER_CPU, TARGET_S, choose_budget, rows_from_result

    rule = (f"**The rule** (app/capture_budget.py): the default `image_pixels` is the largest budget whose Decider "
            f"capture-to-bars fits {TARGET_S:g} s here, counting only rows whose every run had other processes at "
            f"≤ {OTHERS_PER_CPU:g} of each vCPU (✓ above); none fitting: Qwen3.5's floor, 256². "
            "tests/test_capture_choice.py holds engine/core/settings.py's default to it on this committed result. ")
    choice = choose_budget(rows_from_result(r))
    if choice is None:
        return rule + ("**This run chooses nothing**: no row was measured on a quiet machine, so the default stays "
                       "where the estimate in the section above put it until a quiet run replaces this one.\n")
    return rule + f"**This run's choice: {choice.budget:,} pixels** — {choice.reason}.\n"


def section(results: dict) -> list[str]:
    r = results.get("vision-budgets") or committed()
    if not r or "rows" not in r:
        return []
    wait = r.get("quiet_wait") or {}
    model = "The test fixture (quick mode)" if r.get("quick") else "Random weights at the real Qwen3.5-0.8B geometry with its vision tower, int8 weights (optimum-intel `image-text-to-text` export)"
    lines = [HEADING + "\n",
             f"{model}; " + (f"transformers {r['versions']['transformers']} fp32 on the same checkpoint, the same prompt "
                             "ids and the same budget" if r.get("hf") else "transformers not run") + ". A 1280×720 game-like grab (app/capture_timing.py), every run cold; "
             f"{r['rounds']} interleaved round(s) (budgets rotated, the first engine alternating) after a warm-up; medians. "
             f"Measured {r['date']} on {r['cpus']} vCPUs ({r['cpu']}; {r['cpu_flags']}), OpenVINO "
             f"{r['versions']['openvino']}. Before it the command waited {wait.get('waited_s', 0):.0f} s for a load "
             f"≤ 0.5 per vCPU and started at load {wait.get('load', r['load_before']):.2f} "
             f"({'quiet' if wait.get('quiet') else 'NOT quiet: the wait timed out'}); load after {r['load_after']:.2f}. "
             f"Whole command {r.get('command_s', r['wall_s']):.0f} s{_over(r)}.\n",
             "| budget → grab scaled to | image tokens | Decider capture-to-bars | preprocess | vision tower | prefill | "
             "transformers fp32 | ×Decider | max Δ logprob | others' cores (max), quiet |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [_row(row, r["cpus"]) for row in r["rows"]] + [""]
    lines += _demo(r.get("demo"))
    lines.append(_choice(r))
    return lines


def place(text: str, section_text: str) -> str:
    """BENCHMARKS.md with this section replaced, or put after the capture budget section when absent."""
    def next_heading(at: int) -> int:
        found = text.find("\n## ", at + 1)
        return len(text) if found < 0 else found + 1

    start = text.find(HEADING)
    if start >= 0:
        end = next_heading(start)
    else:
        after = text.find(AFTER)
        start = end = next_heading(after) if after >= 0 else len(text)
    return text[:start] + section_text.rstrip("\n") + "\n\n" + text[end:]
