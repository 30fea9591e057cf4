"""The capture budget's default is chosen by a stated rule from a measurement (issue 39 items 3-4).

app/capture_budget.py holds the rule; `python -m bench vision-budgets` measures its rows and commits them to
docs/benchmarks/vision-budgets.json. engine/core/settings.py's default must equal the rule applied to that file, so the
default cannot drift from the measurement. While the committed file holds no quiet row (the rule cannot choose), the
default must equal what the quiet estimates (BENCHMARKS.md, "Capture budget", bench/report_capture.py) chose.
"""

from __future__ import annotations

import json
import math
import os
import sys

from decider.app.capture_budget import (FLOOR, OTHERS_PER_CPU, TARGET_S, BudgetRow, choose_budget, is_quiet_load,
                                        rows_from_result)
from decider.engine.core.settings import SETTINGS

FULL, HALF, QUARTER = 921_600, 460_800, 230_400


def row(budget: int, seconds: float, others: float = 0.0, cpus: int = 2) -> BudgetRow:
    return BudgetRow(budget, seconds, others, cpus)


def test_the_largest_quiet_budget_within_the_target_is_chosen():
    rows = [row(FULL, 9.1), row(HALF, TARGET_S - 0.01), row(QUARTER, 1.4)]
    assert choose_budget(rows).budget == HALF
    assert choose_budget([row(FULL, TARGET_S), row(QUARTER, 1.0)]).budget == FULL  # the target itself fits


def test_rows_measured_while_other_work_ran_do_not_count():
    busy = OTHERS_PER_CPU * 2 + 0.01  # just over the share on 2 vCPUs
    rows = [row(FULL, 2.0, others=busy), row(HALF, 2.5), row(QUARTER, 1.0)]
    assert choose_budget(rows).budget == HALF  # the full budget "fits" only under a measurement that does not count
    assert choose_budget([row(FULL, 2.0, others=busy)]) is None
    assert row(FULL, 2.0, others=busy, cpus=4).quiet  # the share is per vCPU


def test_when_nothing_quiet_fits_the_floor_is_chosen_and_says_why():
    choice = choose_budget([row(FULL, 9.0), row(QUARTER, 3.5)])
    assert choice.budget == FLOOR and "230,400 pixels, took 3.50 s" in choice.reason


def test_quiet_load_is_per_vcpu():
    assert is_quiet_load(0.9, 2) and not is_quiet_load(1.1, 2) and is_quiet_load(1.9, 4)


def _result(seconds: dict[str, float], others: float) -> dict:
    budgets = {"full": FULL, "half": HALF, "quarter": QUARTER}
    runs = lambda s: [{"others_cores": others, "capture_to_bars_s": s}, {"others_cores": 0.0, "capture_to_bars_s": s}]  # noqa: E731
    return {"cpus": 2, "rows": [{"name": n, "budget": b, "decider": {"capture_to_bars_s": seconds[n], "runs": runs(seconds[n])},
                                 "torch": {"capture_to_bars_s": 99.0}} for n, b in budgets.items()]}


def test_rows_are_read_from_a_result_with_each_rows_worst_run():
    rows = rows_from_result(_result({"full": 5.0, "half": 2.9, "quarter": 1.5}, others=0.05))
    assert [(r.budget, r.capture_to_bars_s, r.others_cores) for r in rows] == [(FULL, 5.0, 0.05), (HALF, 2.9, 0.05),
                                                                              (QUARTER, 1.5, 0.05)]
    assert choose_budget(rows).budget == HALF  # transformers' 99 s never enters the rule
    assert choose_budget(rows_from_result(_result({"full": 5.0, "half": 2.9, "quarter": 1.5}, others=0.5))) is None


def test_the_default_is_the_rule_applied_to_the_committed_measurement():
    from bench import report
    from bench.report_budgets import COMMITTED
    from bench.report_capture import estimated_choice

    default = SETTINGS["image_pixels"].default
    assert COMMITTED.is_file(), "docs/benchmarks/vision-budgets.json is missing: run `python -m bench vision-budgets`"
    measured = json.loads(COMMITTED.read_text())
    assert {row["budget"] for row in measured["rows"]} == {FULL, HALF, QUARTER}
    choice = choose_budget(rows_from_result(measured))
    if choice is not None:
        assert default == choice.budget, f"engine/core/settings.py's default {default:,} is not the rule's ({choice.reason})"
        return
    committed = json.loads(report.RAW.read_text())  # no quiet row yet: the quiet estimates' choice stands
    assert default == estimated_choice(committed)


def test_the_command_measures_writes_and_renders_on_the_fixture(tmp_path, monkeypatch):
    """`python -m bench vision-budgets --quick` end to end (no transformers in the test venv: Decider's rows)."""
    from bench import vision_budgets
    from bench.report_budgets import HEADING

    monkeypatch.setenv("DECIDER_BENCH_PYTHON", sys.executable)
    benchmarks = tmp_path / "BENCHMARKS.md"
    benchmarks.write_text("# B\n\n## Capture budget: before\n\ntext\n\n## 13. after\n\nmore\n")
    out = tmp_path / "vb.json"
    assert vision_budgets.main(["--quick", "--no-torch", "--rounds", "1", "--out", str(out), "--benchmarks", str(benchmarks)]) == 0
    result = json.loads(out.read_text())
    assert result["quiet_wait"]["cpus"] == os.cpu_count() and "load" in result["quiet_wait"] and result["cpu_flags"]
    tokens = [r["decider"]["tokens"] for r in result["rows"]]
    assert tokens == [880, 420, 220]  # the fixture given Qwen's budget: 1280×704, 896×480, 640×352
    first = result["rows"][0]["decider"]
    assert math.isclose(first["capture_to_bars_s"], first["runs"][0]["capture_to_bars_s"])
    assert first["preprocess_s"] > 0 and first["vision_s"] > 0 and first["prefill_s"] > 0
    assert set(result["demo"]["budgets"]) == {"full", "half", "quarter"} and result["factors"]["quarter"] == 0.5
    text = benchmarks.read_text()
    assert text.index("## Capture budget: before") < text.index(HEADING) < text.index("## 13. after")
    assert "| full 921,600 px → 1280×704 | 880 |" in text
    vision_budgets.render_into(benchmarks, result)  # a second run replaces its section, not adds one
    assert benchmarks.read_text().count(HEADING) == 1


def test_the_section_renders_without_the_peer():
    from bench.report_budgets import section

    result = _result({"full": 5.0, "half": 2.9, "quarter": 1.5}, others=0.0)
    for r in result["rows"]:
        r.pop("torch")
        r["decider"].update(preprocess_s=0.1, vision_s=1.0, prefill_s=1.0, tokens=880)
        r["decider"]["runs"][0]["size"] = [704, 1280]
    result.update(rounds=2, versions={"openvino": "x"}, date="d", cpu="c", cpu_flags="f", load_before=0.2,
                  load_after=0.3, wall_s=10)
    text = "\n".join(section({"vision-budgets": result}))
    assert "| — | — | — |" in text and "This run's choice: 460,800 pixels" in text
