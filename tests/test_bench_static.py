"""bench/w_static.py runs end to end on a fixture and its rows render (no timing is asserted)."""

import json

from bench import report_static, w_static
from support.models import model_dir


def test_static_paths_worker_runs_and_renders(tmp_path):
    out = tmp_path / "paths.json"
    argv = ["--model", str(model_dir("qwen35-text")), "--task", "paths", "--repeats", "1", "--lengths", "9",
            "--steps", "2", "--chunks", "4,1", "--out", str(out)]
    assert w_static.main(argv) == 0
    result = json.loads(out.read_text())
    entry = result["chunks"]["4,1"]
    assert entry["max_abs_dlogprob"] < 1e-4  # the static runner it timed computes what the dynamic one does
    assert entry["prefill"]["9"]["ratio"]["n"] == 1 and entry["decode_step"]["static_s"]["median"] > 0
    text = "\n".join(report_static.section({"fixture/static-paths": result}))
    assert "| fixture CPU | 4,1 | prefill 9 |" in text and "| fixture CPU | 4,1 | decode step |" in text
    assert "static / dynamic" in text


def test_the_section_says_when_nothing_was_measured():
    assert "(not measured)" in "\n".join(report_static.section({"0.8b/int8/latency": {"x": 1}}))
