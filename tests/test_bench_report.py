"""The benchmark report renders from the committed raw results (no models, no measurements needed)."""

import json

import pytest

from bench import report


@pytest.fixture
def committed(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "RESULTS", tmp_path / "results")  # no fresh results on this machine
    return report.load_results()


def test_the_report_renders_every_section_and_the_targets(committed):
    assert committed, "docs/benchmarks/results.json is committed"
    text = report.render(committed)
    for heading in ("## 1. One-forward decision latency", "## 2. Logprobs on vs off", "## 5. OpenVINO GenAI",
                    "## 9. Against the machine's physical limits", "## 12. Structured output", "## Targets"):
        assert heading in text
    mask = text.split("## 12. Structured output", 1)[1].split("## Targets", 1)[0]
    median = committed["structured"]["rows"][0]["mask_ms_median"]
    assert f"**{median:.3f} ms**" in mask and mask in (report.ROOT / "BENCHMARKS.md").read_text()
    targets = text.split("## Targets", 1)[1]
    assert "logprobs on vs off ≤ 1 %" in targets and "warm / cold ≤ 0.2×" in targets
    assert "kept from an earlier run" in text  # every row came from the committed file


def test_a_partial_rerun_replaces_its_rows_and_keeps_the_others(committed, tmp_path):
    key = next(k for k in committed if k.endswith("/warm"))
    fresh = json.loads(json.dumps(committed[key]))
    fresh["ratio"] = {"median": 0.5, "min": 0.4, "max": 0.6, "n": 3, "values": [0.4, 0.5, 0.6]}
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / (key.replace("/", "__") + ".json")).write_text(json.dumps(fresh))
    merged = report.load_results()
    assert merged[key]["ratio"]["median"] == 0.5
    assert set(merged) == set(committed)
    line = report.runs(merged)
    assert "1 measurement rerun here" in line and f"`{key}`" not in line
