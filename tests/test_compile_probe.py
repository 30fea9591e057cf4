"""A reduced CPU compile that kills its process is tried in a child first and never compiled in-process
(engine/compile/probe.py); the one such compile known, OpenVINO's fused MLP on one bf16 thread, is avoided
(engine/graphs/mlp_fusion_guard.py). Real child processes throughout; the crash itself is faked (a child that sends itself
SIGFPE) only where the error path needs a crash on any CPU."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import openvino as ov
import pytest

from support.models import model_dir
from decider.engine.compile import probe as compile_probe, fast_tuning, measurements
from decider.engine.runners import fast_reasoning
from decider.engine.compile.probe import CACHE_NAME, CompileRefused, probe_all, run_child
from decider.engine.compile.devices import DeviceOptions
from decider.engine.runners.fast_reasoning import reasoner_for
from decider.engine.compile.fast_tuning import candidates, tune
from decider.engine.graphs.mlp_fusion_guard import unfused_mlp_if_one_thread
from decider.engine.compile.precision import cpu_capabilities, cpu_flags
from decider.engine.runners.runner import ModelRunner

BF16_ONE_THREAD = {"INFERENCE_PRECISION_HINT": "bf16", "KV_CACHE_PRECISION": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0",
                   "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": 1}
# A child that compiles nothing: it reports each set, and dies of SIGFPE (as the plugin's did) on a set marked "die"
# and on every reduced set.
FAULTY_CHILD = [sys.executable, "-c", (
    "import json, os, signal, sys\n"
    "for p in json.loads(sys.stdin.read())['properties']:\n"
    # any reduced set dies: a bf16/f16 hint, or (an AVX2-only CPU's reduced default) f32 with a u8 KV cache or
    # dynamic quantisation
    "    reduced = p.get('INFERENCE_PRECISION_HINT') in ('bf16', 'f16') or p.get('KV_CACHE_PRECISION', 'f32') != 'f32' \\\n"
    "        or str(p.get('DYNAMIC_QUANTIZATION_GROUP_SIZE', '0')) != '0'\n"
    "    if p.get('die') or reduced: os.kill(os.getpid(), signal.SIGFPE)\n"
    "    print(json.dumps({'outcome': 'ok'}), flush=True)\n")]
AMX = "amx_bf16" in cpu_flags()


def test_a_child_that_dies_of_a_fault_convicts_the_set_it_was_compiling_and_the_rest_get_a_new_child():
    verdicts = run_child("unused", "CPU", [{"INFERENCE_PRECISION_HINT": "f32"}, {"die": 1}, {"INFERENCE_PRECISION_HINT": "f32"}],
                         command=FAULTY_CHILD)
    assert [v and v["outcome"] for v in verdicts] == ["ok", "crashed", "ok"]
    assert "SIGFPE" in verdicts[1]["detail"]


def test_a_child_killed_otherwise_or_failing_to_start_decides_nothing():
    killed = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    assert run_child("unused", "CPU", [{"die": 1}], command=killed) == [None]  # the OOM killer's signal: no verdict
    assert run_child("unused", "CPU", [{"die": 1}], command=[sys.executable, "-c", "raise SystemExit(3)"]) == [None]


@pytest.fixture
def faulty_child(monkeypatch):
    """Every reduced compile the probe tries kills its child: the error path on any CPU."""
    monkeypatch.setattr(compile_probe, "child_command", lambda: list(FAULTY_CHILD))
    monkeypatch.setattr(compile_probe, "_IN_PROCESS", {})  # no verdict of another test's
    monkeypatch.setattr(measurements, "_IN_PROCESS", {})  # nor a tuning (without a cache folder, kept in memory)


def test_a_fast_runner_whose_compile_killed_the_probe_compiles_exact_and_says_why(faulty_child, monkeypatch):
    # No cache folder (the engine as a library): no tuning on first use, the stated reduced default is asked for.
    monkeypatch.delenv("DECIDER_CACHE_DIR")
    runner = ModelRunner(model_dir("qwen35-text"), DeviceOptions(device="CPU", exact=False))
    assert runner.precision.exact and runner.precision.label == "f32"
    assert any("--fast compiles exact" in n and "SIGFPE" in n for n in runner.notices), runner.notices


def test_tuning_skips_a_candidate_that_killed_the_probe_and_a_twin_is_refused(faulty_child, tmp_path, monkeypatch):
    runner = ModelRunner(model_dir("qwen35-text"), DeviceOptions(device="CPU", cache_dir=tmp_path))
    reduced = [name for name, p in candidates(cpu_capabilities(runner._core)).items() if p["INFERENCE_PRECISION_HINT"] != "f32"]
    if not reduced:
        pytest.skip("this CPU offers no bf16/f16 candidate")
    tuning = tune(runner, lambda name, seconds: seconds, threads=(1,))
    assert set(tuning.skipped) >= set(reduced) and all("SIGFPE" in why for why in tuning.skipped.values())
    assert not {m.name for m in tuning.measured} & set(reduced)
    assert "skipped" in tuning.summary()
    stored = json.loads((tmp_path / CACHE_NAME).read_text())  # kept beside the tuning, for every process
    assert any(v["outcome"] == "crashed" for v in stored.values())
    with pytest.raises(CompileRefused, match="SIGFPE"):
        runner.twin(DeviceOptions(device="CPU", exact=False), BF16_ONE_THREAD)
    monkeypatch.setenv(fast_reasoning.PROPERTIES_ENV, json.dumps(BF16_ONE_THREAD))
    reasoner = reasoner_for(runner, True)  # think mode reasons exactly instead of dying
    assert reasoner.runner is runner and "fast reasoning off" in reasoner.precision


def test_a_verdict_is_kept_and_not_probed_again(tmp_path, monkeypatch):
    runner = ModelRunner(model_dir("qwen35-text"), DeviceOptions(device="CPU", cache_dir=tmp_path))
    first = probe_all(runner, [BF16_ONE_THREAD])
    assert first == [{"outcome": "ok", "detail": ""}]  # the real child compiled the fixture (guarded, see below)
    monkeypatch.setattr(compile_probe, "child_command", lambda: list(FAULTY_CHILD))
    monkeypatch.setattr(compile_probe, "_IN_PROCESS", {})  # as another process would: only the file
    assert probe_all(runner, [BF16_ONE_THREAD]) == first  # from compile-probes.json: no child ran


@pytest.mark.skipif(not AMX, reason="the plugin's fused MLP kernel runs on AMX CPUs only")
@pytest.mark.parametrize("name,ir", [("qwen35-text", "openvino_model.xml"), ("qwen35-vl", "openvino_language_model.xml")])
def test_openvino_still_divides_by_zero_in_its_fused_mlp_on_one_bf16_thread_and_the_guard_avoids_it(name, ir):
    path = model_dir(name) / ir
    compile_raw = ("import openvino as ov, sys; c = ov.Core(); c.compile_model(c.read_model(sys.argv[1]), 'CPU', "
                   "{'INFERENCE_PRECISION_HINT': 'bf16', 'INFERENCE_NUM_THREADS': 1})")
    raw = subprocess.run([sys.executable, "-c", compile_raw, str(path)], capture_output=True, timeout=300)
    # When this fails, OpenVINO fixed LLMMLP's one-thread split: engine/graphs/mlp_fusion_guard.py may go.
    assert raw.returncode == -signal.SIGFPE
    core = ov.Core()
    model = core.read_model(path)
    with unfused_mlp_if_one_thread(model, "CPU", BF16_ONE_THREAD) as changed:
        compiled = core.compile_model(model, "CPU", BF16_ONE_THREAD)
    assert changed == 4  # one gated MLP per layer
    layers = {str(n.get_rt_info()["layerType"].astype(str)) for n in compiled.get_runtime_model().get_ordered_ops()}
    assert "LLMMLP" not in layers
    two_threads = core.compile_model(model, "CPU", {**BF16_ONE_THREAD, "INFERENCE_NUM_THREADS": 2})  # model put back
    assert "LLMMLP" in {str(n.get_rt_info()["layerType"].astype(str)) for n in two_threads.get_runtime_model().get_ordered_ops()}


def test_a_bf16_twin_on_one_thread_compiles_whether_the_thread_count_is_asked_of_the_compile_or_of_the_core():
    # In a child, so that a regression fails this test instead of killing the session (on AMX CPUs it would).
    script = (
        "import sys, openvino as ov\n"
        "from decider.engine.compile.devices import DeviceOptions\n"
        "from decider.engine.runners.runner import ModelRunner\n"
        "core = ov.Core()\n"
        "runner = ModelRunner(sys.argv[1], DeviceOptions(device='CPU'), core)\n"
        "fast = DeviceOptions(device='CPU', exact=False)\n"
        "print(runner.twin(fast, {'INFERENCE_PRECISION_HINT': 'bf16', 'INFERENCE_NUM_THREADS': 1}).precision.inference)\n"
        "core.set_property('CPU', {'INFERENCE_NUM_THREADS': 1})  # as the benches do\n"
        "print(runner.twin(fast, {'INFERENCE_PRECISION_HINT': 'bf16'}).precision.inference)\n")
    done = subprocess.run([sys.executable, "-c", script, str(model_dir("qwen35-text"))], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    expected = "bf16" if "BF16" in cpu_capabilities(ov.Core()) else "f32"
    assert done.stdout.split() == [expected, expected]
