"""The compile plan (engine/compile/plan.py, engine/compile/planner.py): the properties every compile receives, as recorded
before the plan existed (tests/compile_properties.json, written by tools/record_compile_properties.py), the reasons
it gives, and the per-property-set cache folders that keep OpenVINO 2026.4's CPU cache from mixing precisions."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import openvino as ov
import pytest

import record_compile_properties as recorder
from support.models import model_dir
from decider.engine.compile.plan import CompilePlan, Host
from decider.engine.compile.devices import DeviceOptions
from decider.engine.compile.measurements import Tuning
from decider.engine.model.folder import inspect_folder
from decider.engine.compile.planner import plan_compile

TABLE = json.loads((Path(__file__).parent / "compile_properties.json").read_text())
CACHE = Path("/cache")  # the plan's cache folder in the pure tests; the table writes it "<cache>"
VISION_MODELS = 3  # the vision encoder's compiled models (engine/vision/encoder.VISION_IRS)


def _normal(properties: dict) -> dict:
    """CACHE_DIR as the table writes it: the plan's subfolder of the cache folder is where the table has the folder."""
    out = dict(properties)
    if "CACHE_DIR" in out:
        out["CACHE_DIR"] = re.sub(r"^(/cache|<cache>)/[0-9a-f]{12}$", "<cache>", str(out["CACHE_DIR"]))
    return out


def _host(record: dict) -> Host:
    env = record["env"]
    return Host(tuple(record["capabilities"]), env.get("DECIDER_NPUW_DEVICES"), env.get("DECIDER_NPUW_PRECISION", "f32"))


def _plan(record: dict, options: DeviceOptions, path: str, overrides=None, measured: bool = True) -> CompilePlan:
    folder = inspect_folder(model_dir(record["model"]))
    tuning = Tuning.from_json(record["tuning"]) if record["tuning"] and measured else None
    vision = [options.vision_device] if folder.has_vision else []
    return plan_compile(options, _host(record), path=path, tuning=tuning, overrides=overrides,
                        embeddings=folder.layout == "vl", vision_devices=vision)


def _sequence(plan: CompilePlan, variants: int = 1) -> list[tuple]:
    """The compiles a runner makes from this plan, in order (a failing first vision candidate aside)."""
    calls: list[tuple] = []

    def compile_(target, count):
        if target.host:
            calls.append(("Core CPU properties", "CPU", target.host_properties))
        calls.extend([(target.role, target.device, target.properties)] * count)

    compile_(plan.language, variants)
    if plan.embeddings is not None:
        calls.append((plan.embeddings.role, "CPU", plan.embeddings.properties))
    if plan.vision:
        compile_(plan.vision[0], VISION_MODELS)
    return calls


def _variants(record: dict, options: DeviceOptions) -> int:
    window = min(options.static_window, inspect_folder(model_dir(record["model"])).context_length)
    return len({c for c in options.static_chunks if c < window})


def _planned(record: dict) -> list[tuple]:
    """What the plan says each compile of the recorded case gets, in the order the runners compile."""
    fields = dict(record["options"])
    path_asked = fields.get("path", "auto")
    options = DeviceOptions(**fields, cache_dir=CACHE if record["cache"] else None)
    calls: list[tuple] = []
    if path_asked == "npuw_llm":  # compiled, fails on this OpenVINO, falls back to the static path
        calls += _sequence(_plan(record, options, "npuw_llm"))[:2]
        options = replace(options, path="static")
    static = options.device == "NPU" and options.path == "auto" or options.path == "static"
    path = "static" if static else "npuw_llm" if options.device == "NPU" else "dynamic"
    calls += _sequence(_plan(record, options, path), _variants(record, options) if static else 1)
    twin = record["twin"]
    if twin is not None:
        fields = {k: v for k, v in twin["options"].items() if k != "cache"}
        twin_options = DeviceOptions(**fields, cache_dir=CACHE if twin["options"].get("cache") else None)
        # a twin compiles its language model only: its parent's embeddings and vision encoder serve it
        calls += _sequence(_plan(record, twin_options, "dynamic", overrides=twin.get("extra")))[:1]
    return calls


def _recorded(record: dict) -> list[tuple]:
    return [(c["role"], c["device"], c["properties"]) for c in record["compiles"]]


def test_the_table_covers_the_matrix():
    cases = {r["case"] for r in TABLE}
    assert cases == set(recorder.CASES)
    devices = {r["options"]["device"] for r in TABLE}
    assert devices == {"CPU", "NPU"} and any(r["twin"] for r in TABLE) and any(r["model"] == "qwen35-vl" for r in TABLE)
    assert {r["options"].get("exact", True) for r in TABLE} == {True, False}


@pytest.mark.parametrize("record", TABLE, ids=[r["case"] for r in TABLE])
def test_the_plan_gives_every_compile_the_recorded_properties(record):
    planned = [(role.split(" (")[0], device, _normal(props)) for role, device, props in _planned(record)]
    assert planned == [(role, device, _normal(props)) for role, device, props in _recorded(record)]


@pytest.mark.parametrize("case", ["cpu-fast-text-chosen-2-threads", "npu-fast-vl-vision-npu", "cpu-twin-fast-reasoning"])
def test_the_runners_compile_what_the_table_recorded(case):
    """Re-recorded now, through the runners as the app opens them: the same properties as before the plan existed,
    each cache folder a subfolder of the one asked for."""
    live = recorder.run_case(case)
    recorded = next(r for r in TABLE if r["case"] == case)
    # The one-token steps' compile (new since the table): the properties of the language model it was cut from
    steps = [c for c in live["compiles"] if c["role"] == recorder.STEP_ROLE]
    live["compiles"] = [c for c in live["compiles"] if c["role"] != recorder.STEP_ROLE]
    languages = [c["properties"] for c in live["compiles"] if c["role"] == "language model"]
    assert all(step["properties"] in languages for step in steps)
    assert bool(steps) == (live["options"]["device"] == "CPU")
    assert [(r, d, _normal(p)) for r, d, p in _recorded(live)] == _recorded(recorded)
    folders = {c["properties"]["CACHE_DIR"] for c in live["compiles"] if "CACHE_DIR" in c["properties"]}
    assert folders and all(re.fullmatch(r"<cache>/[0-9a-f]{12}", folder) for folder in folders)


def _language(options: DeviceOptions, tuning: Tuning | None = None, capabilities=("BF16", "FP32")) -> CompilePlan:
    return plan_compile(options, Host(capabilities), path="dynamic", tuning=tuning, can_measure=True)


def _reasons(plan: CompilePlan) -> dict[str, str]:
    return {s.name: s.reason for s in plan.language.settings}


def test_each_setting_says_why():
    exact = _reasons(_language(DeviceOptions(device="CPU", cache_dir=CACHE)))
    assert "exact" in exact["INFERENCE_PRECISION_HINT"] and "exact" in exact["KV_CACHE_PRECISION"]
    assert "latency" in exact["PERFORMANCE_HINT"] and "2026.4" in exact["CACHE_DIR"]
    stated = _language(DeviceOptions(device="CPU", exact=False))
    assert "not measured" in _reasons(stated)["INFERENCE_PRECISION_HINT"] and "bf16" in _reasons(stated)["INFERENCE_PRECISION_HINT"]
    assert "stated default" in _reasons(stated)["KV_CACHE_PRECISION"] and "KV cache" in _reasons(stated)["KV_CACHE_PRECISION"]
    assert stated.measure_first and "not measured" in stated.tuning
    record = next(r for r in TABLE if r["case"] == "cpu-fast-text-chosen-2-threads")
    tuning = Tuning.from_json(record["tuning"])
    measured = _language(DeviceOptions(device="CPU", exact=False), tuning)
    assert not measured.measure_first and f"{tuning.chosen} at 2 threads" in measured.tuning
    assert all(tuning.chosen in _reasons(measured)[name] for name in ("INFERENCE_PRECISION_HINT", "INFERENCE_NUM_THREADS"))
    none_won = _language(DeviceOptions(device="CPU", exact=False), replace(tuning, chosen=None, threads=None))
    assert "beat the exact step" in _reasons(none_won)["INFERENCE_PRECISION_HINT"]
    assert none_won.language.properties["INFERENCE_PRECISION_HINT"] == "f32"
    npu = plan_compile(DeviceOptions(device="NPU"), Host(("BF16",), "CPU", "f16"), path="static")
    assert "DECIDER_NPUW_PRECISION" in npu.language.host[0].reason and "testing aid" in _reasons(npu)["NPUW_DEVICES"]
    twin = plan_compile(DeviceOptions(device="CPU", exact=False), Host(), path="dynamic", overrides={"INFERENCE_NUM_THREADS": 1})
    assert "twin" in _reasons(twin)["INFERENCE_NUM_THREADS"] and twin.twin and not twin.measure_first


def test_describe_names_every_setting_with_its_reason():
    plan = plan_compile(DeviceOptions(device="CPU", cache_dir=CACHE), Host(("BF16",)), path="dynamic", embeddings=True,
                        vision_devices=["CPU"])
    text = "\n".join(plan.describe())
    for target in (plan.language, plan.embeddings, *plan.vision):
        assert target is not None
        assert all(f"{s.name}={s.value}: {s.reason}" in text for s in target.settings)
    assert "text embeddings on CPU:" in text and "vision encoder on CPU:" in text


def test_each_property_set_has_a_cache_folder_of_its_own():
    exact = _language(DeviceOptions(device="CPU", cache_dir=CACHE)).language.properties["CACHE_DIR"]
    fast = _language(DeviceOptions(device="CPU", exact=False, cache_dir=CACHE)).language.properties["CACHE_DIR"]
    again = _language(DeviceOptions(device="CPU", cache_dir=CACHE)).language.properties["CACHE_DIR"]
    assert exact != fast and exact == again and Path(exact).parent == CACHE == Path(fast).parent


def _logits(compiled) -> np.ndarray:
    ids = np.arange(5, 25, dtype=np.int64)[None]
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "position_ids": np.arange(20)[None],
            "beam_idx": np.zeros(1, np.int32)}
    names = {p.get_any_name() for p in compiled.inputs}
    return compiled.create_infer_request().infer({k: v for k, v in feed.items() if k in names})[0].copy()


def test_a_bf16_and_an_f32_compile_in_one_cache_folder_each_run_their_own_precision(tmp_path):
    """OpenVINO 2026.4's CPU cache key leaves the precision hints out: in one CACHE_DIR the second of a bf16 and an f32
    compile imported the first's blob and computed its arithmetic while its INFERENCE_PRECISION_HINT read back as asked.
    The plan's folders keep them apart: each compiles fresh, reads back its own precision and computes what a compile
    without any cache computes."""
    core = ov.Core()
    if "BF16" not in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        pytest.skip("no bf16 on this CPU: a bf16 hint computes f32, nothing to tell apart")
    xml = model_dir("qwen35-text") / "openvino_model.xml"
    options = DeviceOptions(device="CPU", cache_dir=tmp_path)
    plans = {hint: plan_compile(options, Host(), path="dynamic", overrides={"INFERENCE_PRECISION_HINT": hint}) for hint in ("bf16", "f32")}
    for hint, plan in plans.items():
        properties = plan.language.properties
        compiled = core.compile_model(xml, "CPU", properties)
        assert not compiled.get_property("LOADED_FROM_CACHE"), hint
        assert {"bf16": "bfloat16", "f32": "float32"}[hint] in str(compiled.get_property("INFERENCE_PRECISION_HINT"))
        fresh = core.compile_model(xml, "CPU", {k: v for k, v in properties.items() if k != "CACHE_DIR"})
        assert np.array_equal(_logits(compiled), _logits(fresh)), hint
    assert not np.array_equal(_logits(core.compile_model(xml, "CPU", plans["bf16"].language.properties)),
                              _logits(core.compile_model(xml, "CPU", plans["f32"].language.properties)))


def test_doctor_prints_the_plan_with_its_reasons(tmp_path):
    from decider.app.doctor import run_doctor

    report = run_doctor(model_dir("qwen35-text"), DeviceOptions(device="CPU", cache_dir=tmp_path), compile=True).render()
    assert "compile plan:" in report and "language model on CPU:" in report
    assert "INFERENCE_PRECISION_HINT=f32: exact log-probabilities requested" in report
    assert f"CACHE_DIR={tmp_path}/" in report and "OpenVINO 2026.4" in report


def test_a_runner_compiles_what_its_plan_says_and_decides_nothing_itself(tmp_path):
    """A plan with one setting changed (an f32 compile with a u8 KV cache, which no rule of the planner gives an exact
    request): the runner compiles exactly that, and its precision read back says so."""
    from decider.engine.compile.plan import Property
    from decider.engine.compile.planner import plan_for
    from decider.engine.compile.precision import short_type
    from decider.engine.runners.runner import ModelRunner

    core, folder = ov.Core(), inspect_folder(model_dir("qwen35-text"))
    plan = plan_for(folder, DeviceOptions(device="CPU", cache_dir=tmp_path), core)
    kv = Property("KV_CACHE_PRECISION", "u8", "this test")
    language = replace(plan.language, settings=tuple(kv if s.name == kv.name else s for s in plan.language.settings))
    runner = ModelRunner(folder, core=core, plan=replace(plan, language=language))
    assert runner.plan.language.properties["KV_CACHE_PRECISION"] == "u8" and runner.precision.kv_cache == "u8"
    assert short_type(runner.compiled.get_property("KV_CACHE_PRECISION")) == "u8"
