"""bench/w_step_rest.py runs end to end on a fixture: both variants profiled in one process (no timing is asserted)."""

import json

import numpy as np
import openvino as ov
import pytest

from bench import w_step_rest
from decider.engine.kernels import native_op
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
    assert len(result["read_rate_gbs"]) == 2 and min(result["read_rate_gbs"]) > 0
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


@pytest.mark.skipif(native_op.unavailable() is not None, reason=f"native kernel: {native_op.unavailable()}")
def test_the_native_variant_s_projections_read_the_int8_weights_once(tmp_path):
    """native-one-token's projection bytes are the int8 weights its operations read: every int8 matrix but the
    embedding table, as the plugin's variant counts them (the rates and shares follow from them)."""
    out = tmp_path / "rest.json"
    argv = ["--model", str(model_dir("qwen35-text-int8")), "--prompt", "12", "--steps", "6", "--warm", "3",
            "--variants", "native-one-token,one-token", "--out", str(out)]
    assert w_step_rest.main(argv) == 0
    variants = json.loads(out.read_text())["variants"]
    native, plugin = variants["native-one-token"], variants["one-token"]
    # counted two ways: our operation's columns × rows, the plugin's FullyConnected weight inputs
    assert native["projection_bytes"] == plugin["projection_bytes"] > 0
    model = ov.Core().read_model(model_dir("qwen35-text-int8") / "openvino_model.xml")
    matrices = [int(np.prod(n.get_output_shape(0))) for n in model.get_ordered_ops() if n.get_type_name() == "Constant"
                and n.get_output_element_type(0) == ov.Type.u8 and len(n.get_output_shape(0)) == 2 and min(n.get_output_shape(0)) > 1]
    embedding = max(matrices)  # the fixture's untied embedding table (as large as its head): gathered, not streamed
    assert native["projection_bytes"] == sum(matrices) - embedding
    assert native["projection_gbs"] > 0 and native["projection_share_of_read_rate"] > 0
