"""bench/w_profile.py runs end to end on a fixture, and the paired section renders what it is given
(no timing is asserted)."""

import json

from bench import report_paired, w_profile
from support.models import case, model_dir


def test_profile_worker_runs_and_renders(tmp_path):
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps({"decisions": {"256": {"ids": [int(t) for t in case("dist_ten_options")["prompt_ids"]]}}}))
    out = tmp_path / "profile.json"
    argv = ["--model", str(model_dir("qwen35-text")), "--prompts", str(prompts), "--steps", "6", "--pairs", "6", "--out", str(out)]
    assert w_profile.main(argv) == 0
    result = json.loads(out.read_text())
    for mode in ("exact", "fast"):
        kinds = result[mode]["by_kind_ms"]
        assert kinds and all(v >= 0 for v in kinds.values())
        assert kinds["matmul (weights)"] > 0  # the projections are found whatever the plugin calls them
        assert result[mode]["top_nodes"]
    assert result["exact"]["runtime"]["KV_CACHE_PRECISION"] != result["fast"]["runtime"]["KV_CACHE_PRECISION"]
    assert set(result["variants"]) == set(w_profile.VARIANTS)
    assert result["variants"]["exact"]["ratio"]["median"] == 1.0  # the reference, against itself
    assert "logits to float64" in result["host_ms"]
    text = "\n".join(report_paired.section({"fixture/paired/profile": result}, ["fixture"], None))
    assert "Where a decode step goes" in text and "| exact (" in text and "exact, 1 thread" in text


def _s(*values):
    values = [float(v) for v in values]
    return {"median": sorted(values)[len(values) // 2], "min": min(values), "max": max(values), "n": len(values), "values": values}


def test_decode_rows_give_the_ratio_and_the_share_of_the_memory_bound():
    decode = {"tokens": 8, "prompt_tokens": 5, "threads": 1, "drawn": {},
              "sampling": {"temperature": 0.7, "top_k": 20, "top_p": 0.8, "presence_penalty": 1.5, "frequency_penalty": 1.0},
              "step_ms": {"exact": _s(50, 52), "fast": _s(45, 46), "llama": _s(40, 41)},
              "tokens_per_s": {"exact": _s(20, 19.2), "fast": _s(22, 21.7), "llama": _s(25, 24.4)},
              "ratio_vs_llama": {"exact": _s(1.25, 1.27), "fast": _s(1.12, 1.13)},
              "weight_bytes": 10**9, "gguf_bytes": 10**9}
    text = "\n".join(report_paired.section({"m/paired/decode": decode}, ["m"], 40.0))
    assert "**1.27×**" in text and "**1.13×**" in text  # the median of two rounds is the upper one here
    assert "| Decider exact (f32) | 52.0 ms" in text
    assert "48 %" in text  # 1 GB at 40 GB/s = 25 ms of a 52 ms step
    assert "one thread each" in text
    assert report_paired.targets({"m/paired/decode": decode}, ["m"]) == [
        ("fast decode step ≤ 0.85× llama.cpp q8_0 (m)", "1.13×", "**missed**", "§8")]
    decode["_meta"] = {"other_busy_cores": 3.0, "finished": "2026-12-03 11:00:00"}
    loaded = "\n".join(report_paired.section({"m/paired/decode": decode}, ["m"], 40.0))
    assert "48 %" not in loaded and "No share of the memory bound" in loaded and "**1.27×**" in loaded


def test_nothing_measured_renders_nothing():
    assert report_paired.section({"m/paired/decode": {"error": "exit 1"}}, ["m"], None) == []


def test_projection_variants_run_round_robin_against_the_exact_compile(tmp_path):
    from bench import w_projections

    out = tmp_path / "projections.json"
    fixture = str(model_dir("qwen35-text"))
    argv = ["--model", fixture, "--model", fixture, "--variants", "exact,dq32", "--rounds", "2", "--steps", "3",
            "--prompt", "8", "--out", str(out)]
    assert w_projections.main(argv) == 0
    rows = json.loads(out.read_text())["variants"]
    assert list(rows) == ["qwen35-text#0/exact", "qwen35-text#0/dq32", "qwen35-text#1/exact", "qwen35-text#1/dq32"]
    first = rows["qwen35-text#0/exact"]
    assert first["ratio_to_exact"]["median"] == 1.0 and first["drift_max_abs_logit"] == 0.0
    assert rows["qwen35-text#1/exact"]["drift_max_abs_logit"] == 0.0  # the same IR, the same compile: the same logits
    assert all(row["step_ms"]["n"] == 2 and row["fully_connected_kernels"] for row in rows.values())


def test_a_step_profile_holds_the_steps_not_the_prefill():
    """The plugin's counters are means over every infer of a compiled model, whichever request ran it: read after a
    long prefill, every step carries a share of it. bench/step_profile.py profiles the steps on a compile that never
    prefilled (the states copied in), so a step's node time stays within its wall time."""
    import openvino as ov

    from bench.step_profile import profile_steps
    from bench.w_decode_graph import _properties, decode_model, step_feed

    model, layers = decode_model(model_dir("qwen35-text") / "openvino_model.xml", rewrite=True)
    assert layers > 0
    names = {p.get_any_name() for p in model.inputs}
    prompt, steps = [1000 + i % 3000 for i in range(4000)], 10
    profile = profile_steps(model, "CPU", _properties(1, perf=False), step_feed(names, prompt, 0),
                            lambda i: step_feed(names, [198], len(prompt) + i), steps)
    assert 0 < profile["step_nodes_ms"] <= 1.5 * profile["step_wall_ms"]["max"]
    assert profile["by_kind_ms"]["matmul (weights)"] > 0 and profile["top_nodes"]
    assert profile["runtime"]["INFERENCE_NUM_THREADS"] == "1"
    # the same steps read the old way, on the compile that prefilled: the means carry the prefill
    request = ov.Core().compile_model(model, "CPU", _properties(1, perf=True)).create_infer_request()
    request.infer(step_feed(names, prompt, 0))
    for i in range(steps):
        request.infer(step_feed(names, [198], len(prompt) + i))
    carried = sum(info.real_time.total_seconds() * 1e3 for info in request.profiling_info if info.status.name == "EXECUTED")
    assert carried > 2 * profile["step_nodes_ms"]


def test_the_decode_graph_bench_measures_a_change_against_the_path_it_replaces(tmp_path):
    """bench/w_decode_graph.py --earlier FILE: an earlier decode_graph.py's one-token path joins the same rounds
    (here a copy whose update is written wrongly, so its logits must come out different, and the bench says so)."""
    from pathlib import Path

    from bench import w_decode_graph

    source = (Path(w_decode_graph.__file__).parent.parent / "engine" / "graphs" / "decode.py").read_text(encoding="utf-8")
    wrong = source.replace("delta = ops.multiply(ops.subtract(v, ", "delta = ops.multiply(ops.add(v, ")
    assert wrong != source
    earlier = tmp_path / "earlier_decode_graph.py"
    earlier.write_text(wrong, encoding="utf-8")
    out = tmp_path / "graph.json"
    argv = ["--model", str(model_dir("qwen35-text")), "--prompt", "16", "--pairs", "6", "--profile-steps", "5",
            "--threads", "1", "--earlier", str(earlier), "--out", str(out)]
    assert w_decode_graph.main(argv) == 0
    result = json.loads(out.read_text())
    paired = result["paired"]
    assert set(paired["step_ms"]) == {"exported", "one-token path", "earlier one-token path"}
    assert paired["step_max_abs_delta"] < 1e-4 < paired["earlier"]["step_max_abs_delta"]
    assert paired["earlier"]["now_over_earlier"]["n"] == 2 and paired["prefill_max_abs_delta"] == 0.0
    assert set(result["profile"]) == set(paired["step_ms"]) and result["cpu_flags"] is not None


def test_the_paired_benchs_drafted_generation_keeps_plain_decodings_tokens(tmp_path):
    """bench/w_paired's drafted rows (#36) decode with the request's drafter: greedy, the same tokens as plain
    decoding; with the MTP head, drafts are verified (the runner's forwards counted for tokens per weight read)."""
    from bench.w_paired import decider_generate
    from decider.engine.runners.runner import ModelRunner
    from support.mtp_reference import folder_with_mtp
    from test_speculative import GREEDY, repetitive_prompt

    runner = ModelRunner(folder_with_mtp("qwen35-text", tmp_path / "qwen35-text"))
    prompt = repetitive_prompt(runner)
    plain, _ = decider_generate(runner, prompt, 20, GREEDY)
    assert len(plain) == 20
    for draft in ("lookup", "mtp", "auto"):
        before = runner.stats.forwards
        assert decider_generate(runner, prompt, 20, GREEDY, draft)[0] == plain, draft
        assert runner.stats.forwards > before
