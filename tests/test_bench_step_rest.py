"""bench/w_step_rest.py runs end to end on a fixture: both variants profiled in one process (no timing is asserted)."""

import json

from bench import w_step_rest
from support.models import model_dir


def test_step_rest_worker_profiles_before_and_after_and_compares_their_logits(tmp_path):
    out = tmp_path / "rest.json"
    argv = ["--model", str(model_dir("qwen35-text")), "--prompt", "12", "--steps", "7", "--warm", "3",
            "--variants", "exported,before,after", "--top", "1000", "--out", str(out)]
    assert w_step_rest.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["cpu_flags"] and len(result["load_average_before"]) == 3 and "load_after" in result
    assert result["threads"] == 1 and result["reference"] == "before"
    variants = result["variants"]
    assert set(variants) == {"exported", "before", "after"}
    assert variants["after"]["logits_vs_reference"]["bit_identical"]  # the conv shift changes no bit
    assert not variants["exported"]["logits_vs_reference"]["bit_identical"]  # a comparison that can tell
    for entry in variants.values():
        assert entry["step_wall_ms"]["n"] == 4
        assert entry["projections_ms"] > 0 and entry["rest_ms"] > 0
        assert abs(entry["projections_ms"] + entry["rest_ms"] - entry["nodes_ms"]) < 1e-6
        assert not any(kind.startswith("FullyConnected") for kind in entry["rest_by_type_ms"])
    # the exported conv window (its Concat, which the plugin may merge into a reorder before the conv) runs in
    # `before`'s steps and not in `after`'s
    windows = {name: [n for n in entry["rest_top_nodes"] if "linear_attn/aten::cat/Concat" in n["name"]]
               for name, entry in variants.items()}
    assert windows["before"] and windows["after"] == []


def test_the_one_token_variant_is_profiled_after_a_prefill_on_the_graph_it_was_cut_from(tmp_path):
    out = tmp_path / "rest.json"
    argv = ["--model", str(model_dir("qwen35-text")), "--prompt", "12", "--steps", "6", "--warm", "3",
            "--variants", "after,one-token", "--out", str(out)]
    assert w_step_rest.main(argv) == 0
    variants = json.loads(out.read_text())["variants"]
    one = variants["one-token"]
    # the same graph at fixed shapes: its logits follow the same 12-token prompt (a state left empty would not)
    # (the fixture's projections may read 0 µs a step on a fast CPU: the step's nodes as a whole are what must show)
    assert one["logits_vs_reference"]["max_abs"] < 1e-4 and one["projections_ms"] >= 0 and one["nodes_ms"] > 0
