"""The fast compile is chosen by measurement on this machine (#30): real compiles and steps, cached per model,
device, CPU and OpenVINO version; the timings may be replaced by a test to decide which candidate wins."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support.fast_pin import stated_candidate
from support.models import model_dir
from decider.engine.runners import fast_reasoning
from decider.engine.compile import fast_tuning
from decider.engine.compile.devices import DeviceOptions
from decider.engine.runners.fast_reasoning import fast_properties, reasoner_for, release, twin_of
from decider.engine.compile.fast_tuning import CACHE_NAME, cached, candidates, tune, tuning_key
from decider.engine.compile.precision import cpu_capabilities, short_type
from decider.engine.runners.runner import ModelRunner
from decider.engine.runners.choice import open_runner


@pytest.fixture
def runner(tmp_path):
    return ModelRunner(model_dir("qwen35-text"), DeviceOptions(device="CPU", cache_dir=tmp_path))


def fixed(seconds: dict[str, float], default: float = 0.010):
    """Timings: each named measurement takes this many seconds a step (the steps still run for real)."""
    return lambda name, measured: [seconds.get(name.split(" @ ")[0], default)] * len(measured)


def test_the_fastest_candidate_is_chosen_and_kept(runner, tmp_path):
    names = list(candidates(cpu_capabilities(runner._core)))
    winner = names[-1]
    tuning = tune(runner, fixed({"exact": 0.010, "exact prefill": 0.001, winner: 0.004}, default=0.008), threads=(1,))
    assert tuning.chosen == winner and tuning.winner.step_ms == pytest.approx(4.0)
    assert tuning.reasoning_pays  # saves 6 ms a step where an exact prefill costs ~0.02 ms a token
    for m in tuning.measured:  # every candidate really compiled and ran: its precision read back, its drift measured
        assert m.precision and not m.precision.startswith("f32") or "KV" in m.precision
        assert m.drift_nats > 0
    assert tuning.properties == {**tuning.winner.properties, "INFERENCE_NUM_THREADS": 1} or tuning.threads is None
    stored = json.loads((tmp_path / CACHE_NAME).read_text())
    assert list(stored) == [tuning_key(runner)] and stored[tuning.key]["chosen"] == winner
    assert cached(runner).chosen == winner


def test_a_twin_uses_the_measured_choice_and_fast_reasoning_follows_the_measurement(runner, monkeypatch):
    monkeypatch.delenv(fast_reasoning.PROPERTIES_ENV, raising=False)
    names = list(candidates(cpu_capabilities(runner._core)))
    tune(runner, fixed({"exact": 0.010, "exact prefill": 0.0001, names[0]: 0.002}), threads=(1,))
    assert fast_properties(runner)["INFERENCE_PRECISION_HINT"] == candidates(cpu_capabilities(runner._core))[names[0]]["INFERENCE_PRECISION_HINT"]
    reasoner = reasoner_for(runner, True)
    assert reasoner.runner is twin_of(runner) and reasoner.runner is not runner
    release(runner)
    # measured slower (or a saving below the exact prefill's cost): the runner reasons itself, and says why
    tune(runner, fixed({"exact": 0.010, "exact prefill": 0.5}), threads=(1,))
    assert fast_properties(runner) is None
    reasoner = reasoner_for(runner, True)
    assert reasoner.runner is runner and "measured no faster here" in reasoner.precision and twin_of(runner) is None


def test_a_changed_key_measures_again(runner, tmp_path):
    tune(runner, fixed({"exact": 0.010}), threads=(1,))
    key = tuning_key(runner)
    other = ModelRunner(model_dir("qwen35-vl"), DeviceOptions(device="CPU", cache_dir=tmp_path))
    assert tuning_key(other) != key and cached(other) is None
    (tmp_path / CACHE_NAME).write_text("{ not json")
    assert cached(runner) is None  # a damaged cache is a miss, not an error


def test_doctor_tune_reports_the_choice_in_a_fresh_process(tmp_path):
    done = subprocess.run([sys.executable, "-m", "decider.app.cli", "doctor", str(model_dir("qwen35-text")), "--device", "CPU",
                           "--tune"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "DECIDER_CACHE_DIR": str(tmp_path)})
    assert "fast compile:" in done.stdout and "ms/step" in done.stdout, done.stdout + done.stderr
    assert (tmp_path / CACHE_NAME).is_file() or any(tmp_path.rglob(CACHE_NAME))


def test_fast_mode_compiles_the_measured_choice(runner, tmp_path):
    options = candidates(cpu_capabilities(runner._core))
    # a candidate that differs from the stated default (u8 KV): bf16/f16 with an f32 KV cache, where the CPU has them
    other = next((name for name, props in options.items() if props["KV_CACHE_PRECISION"] == "f32"), None)
    if other is None:
        pytest.skip("this CPU offers one reduced compile only (no bf16/f16): nothing to choose between")
    tune(runner, fixed({"exact": 0.010, "exact prefill": 0.0001, other: 0.001}), threads=(1,))
    fast = ModelRunner(model_dir("qwen35-text"), DeviceOptions(device="CPU", exact=False, cache_dir=tmp_path))
    assert fast.precision.kv_cache == "f32" and fast.precision.inference == options[other]["INFERENCE_PRECISION_HINT"]


def test_threads_are_measured_and_the_count_is_kept_and_stated(runner):
    """1 and 2 threads beside the plugin's default (#30 item 3): the fastest count is compiled, and all are said."""
    winner = list(candidates(cpu_capabilities(runner._core)))[-1]
    seconds = {"exact": 0.010, "exact prefill": 0.0001, winner: 0.004, f"{winner} @ 1 threads": 0.003,
               f"{winner} @ 2 threads": 0.005}
    tuning = tune(runner, lambda name, measured: [seconds.get(name, 0.008)] * len(measured), threads=(1, 2))
    assert tuning.threads == 1 and tuning.properties["INFERENCE_NUM_THREADS"] == 1
    assert tuning.thread_ms == pytest.approx({"default": 4.0, "1": 3.0, "2": 5.0})
    assert "1 threads 3.00 ms" in tuning.summary() and "default threads 4.00 ms" in tuning.summary()
    assert cached(runner).thread_ms == tuning.thread_ms  # kept with the choice


def test_the_twin_compile_counts_against_fast_reasoning(runner):
    """Fast reasoning pays only end to end: twin steps saved minus the exact prefill of the reasoning minus the
    twin's compile, over one think-mode decision's reasoning (fast_tuning.REASONING_TOKENS)."""
    winner = list(candidates(cpu_capabilities(runner._core)))[-1]
    base = {"exact": 0.010, "exact prefill": 0.0, winner: 0.009}  # 1 ms saved a step: 0.512 s per decision
    slow_compile = tune(runner, fixed({**base, f"{winner} compile": 0.6}), threads=(1,))
    assert slow_compile.chosen == winner and not slow_compile.reasoning_pays
    assert "does not pay" in slow_compile.summary() and "-0.09 s per 512 reasoning tokens" in slow_compile.summary()
    quick_compile = tune(runner, fixed({**base, f"{winner} compile": 0.2}), threads=(1,))
    assert quick_compile.reasoning_pays and quick_compile.reasoning_gain_ms == pytest.approx(312.0)


def test_the_first_fast_runner_measures_and_compiles_the_choice(tmp_path):
    """--fast's first use on a model measures (once: the next process reads the choice) and compiles the winner."""
    options = DeviceOptions(device="CPU", exact=False, cache_dir=tmp_path)
    fast = open_runner(model_dir("qwen35-text"), options)  # the measurement is a step before the runner is built
    tuning = cached(fast)
    assert tuning is not None and {m.name for m in tuning.measured} == set(candidates(cpu_capabilities(fast._core)))
    compiled = {name: str(fast.compiled.get_property(name)) for name in ("KV_CACHE_PRECISION", "INFERENCE_NUM_THREADS")}
    if tuning.properties is not None:
        assert fast.precision.kv_cache == tuning.properties["KV_CACHE_PRECISION"]
        assert fast.precision.inference == tuning.properties["INFERENCE_PRECISION_HINT"]
        if tuning.threads:
            assert compiled["INFERENCE_NUM_THREADS"] == str(tuning.threads)
    else:  # nothing beat the exact step: --fast compiles exact, and its label says so
        assert fast.precision.exact and fast.precision.label == "f32"
    stored = (tmp_path / CACHE_NAME).stat().st_mtime_ns
    code = ("from decider.engine.runners.runner import ModelRunner; from decider.engine.compile.devices import DeviceOptions; "
            f"ModelRunner({str(model_dir('qwen35-text'))!r}, DeviceOptions(device='CPU', exact=False, cache_dir={str(tmp_path)!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / CACHE_NAME).stat().st_mtime_ns == stored  # another process reused it: no second measurement


def test_without_a_cache_folder_the_measurement_is_kept_for_the_process(monkeypatch):
    """The engine used as a library (no cache folder): a think-mode decision measures once, not every time."""
    monkeypatch.delenv("DECIDER_CACHE_DIR", raising=False)
    monkeypatch.delenv(fast_reasoning.PROPERTIES_ENV, raising=False)
    runner = ModelRunner(model_dir("qwen35-text"), DeviceOptions(device="CPU"))
    calls = []
    real = fast_tuning.tune
    monkeypatch.setattr(fast_tuning, "tune", lambda *a, **k: calls.append(1) or real(*a, **k))  # a spy: real runs
    first = fast_properties(runner)
    assert fast_properties(runner) == first and len(calls) == 1
    assert cached(runner) is not None


def test_a_screen_winner_within_the_margin_is_not_chosen(runner):
    """The screen times candidates one after another; its winner must also beat exact by MARGIN in rounds that
    alternate the two (a host's drift between measurements minutes apart exceeds a 1 % difference)."""
    from decider.engine.compile.fast_tuning import CONFIRM_ROUNDS, MARGIN

    winner = list(candidates(cpu_capabilities(runner._core)))[-1]
    seen: list[str] = []

    def timings(name, measured):
        seen.append(name)
        return fixed({"exact": 0.010, "exact prefill": 0.0001, winner: 0.0099})(name, measured)

    close = tune(runner, timings, threads=(1,))
    assert close.chosen is None and close.properties is None and close.threads is None
    assert close.paired_ratio == pytest.approx(0.99) and close.paired_ratio >= MARGIN
    assert "paired against exact: 0.99x" in close.summary() and "chosen: none" in close.summary()
    # the confirmation ran alternating rounds: exact and the winner each timed once per round, after the screen
    confirm = seen[-2 * CONFIRM_ROUNDS:]
    assert sorted(set(confirm)) == sorted({"exact", winner}) and confirm[0] == "exact" and confirm[2] == winner
    clear = tune(runner, fixed({"exact": 0.010, "exact prefill": 0.0001, winner: 0.0090}), threads=(1,))
    assert clear.chosen == winner and clear.paired_ratio == pytest.approx(0.90)


def test_fast_compiles_exact_where_no_reduced_compile_beat_it(runner, tmp_path):
    """--fast asks for the fastest compile; where that is the exact one, --fast is exact and its label says so
    (not the stated reduced default, which measured slower)."""
    tuning = tune(runner, fixed({"exact": 0.005, "exact prefill": 0.0001}, default=0.010), threads=(1,))
    assert tuning.chosen is None and "--fast compiles exact" in tuning.summary()
    fast = ModelRunner(model_dir("qwen35-text"), DeviceOptions(device="CPU", exact=False, cache_dir=tmp_path))
    assert fast.precision.exact and fast.precision.label == "f32"
    assert short_type(fast.compiled.get_property("KV_CACHE_PRECISION")) == "f32"


def test_the_session_pins_the_stated_reduced_compile_for_the_fixture_models():
    """tests/support/fast_pin.py: a fast runner with no cache folder of its own reads the session's pinned choice
    (the stated reduced default) instead of measuring on first use, so the suite's --fast bars are reduced on any CPU."""
    fast = ModelRunner(model_dir("qwen35-text"), DeviceOptions(device="CPU", exact=False))
    tuning = cached(fast)
    assert tuning is not None and tuning.chosen == stated_candidate(cpu_capabilities(fast._core))
    assert "not measured" in tuning.winner.precision and not tuning.reasoning_pays
    assert not fast.precision.exact and fast.precision.kv_cache == "u8"
