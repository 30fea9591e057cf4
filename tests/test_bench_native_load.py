"""bench/w_native_load.py runs end to end on a fixture: the model opened three ways, each in a process of its own (no
timing is asserted)."""

import json

from bench import w_native_load
from support.models import model_dir


def test_native_load_worker_opens_the_model_three_ways_in_processes_of_their_own(tmp_path):
    out = tmp_path / "load.json"
    assert w_native_load.main(["--model", str(model_dir("qwen35-text-int8")), "--repeats", "1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["cpu_flags"] and result["threads"] == 1 and "load_after" in result
    assert set(result["runs"]) == {"plugin", "timed", "cached"}
    for way, (run,) in result["runs"].items():
        assert run["load_s"] > 0 and run["rss_in_use_mib"] >= run["rss_mib"] * 0.5 > 0 and run["peak_rss_mib"] >= run["rss_mib"] * 0.5
        assert run["label"].startswith("f32")
    assert result["runs"]["plugin"][0]["native"] == "turned off by DECIDER_EXACT_KERNEL=plugin"
    assert result["runs"]["timed"][0]["native"] != result["runs"]["plugin"][0]["native"]  # the default's own reason
