"""The vision benchmark's pieces that run without the big model: the synthetic screenshot, the paired ratios, and the
report section rendered from the committed result (BENCHMARKS.md carries that rendering)."""

import numpy as np
import pytest

from bench import report
from bench.report_vision import section
from bench.w_vision import drift, screenshot, summarise


def test_the_screenshot_is_a_deterministic_720p_frame():
    one, two = screenshot(), screenshot()
    assert one.shape == (720, 1280, 3) and one.dtype == np.uint8
    assert np.array_equal(one, two) and not np.array_equal(one, screenshot(seed=1))
    assert one.std() > 20  # a picture, not a flat fill


def _runs(scale: float, logprob: float) -> dict:
    encode = [{"preprocess_s": 0.1 * scale * k, "total_s": 1.0 * scale * k} for k in (1, 2, 3)]
    decision = [{"seconds": 10.0 * scale * k, "logprobs": [logprob, -1.0, -2.0]} for k in (1, 2, 3)]
    return {"encode": encode, "decision": decision}


def test_ratios_are_paired_per_repeat_and_drift_is_the_worst_repeat():
    runs = {"decider": _runs(1.0, -0.5), "torch": _runs(3.0, -0.25)}
    out = summarise(runs)
    assert out["decider"]["encode"]["total_s"] == 2.0 and out["torch"]["decision"]["seconds"] == 60.0
    assert out["torch"]["ratio_encode"] == pytest.approx(3.0) and out["torch"]["ratio_decision"] == pytest.approx(3.0)
    assert "ratio_encode" not in out["decider"]
    assert drift(runs, "torch") == pytest.approx(0.25) and drift(runs, "decider_npu") is None


def test_the_committed_vision_section_is_in_benchmarks_md(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "RESULTS", tmp_path / "results")  # the committed results only
    results = report.load_results()
    if "vision" not in results:
        pytest.fail("docs/benchmarks/results.json has no vision result")
    lines = section(results)
    text = "\n".join(lines)
    assert text.startswith("## Vision") and "capture-to-bars" in text
    ratio = results["vision"]["summary"]["torch"]["ratio_decision"]
    assert f"{ratio:.2f}×" in text
    assert text.strip() in (report.ROOT / "BENCHMARKS.md").read_text()
    assert text in report.render(results)
