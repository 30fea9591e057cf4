"""Record the properties every compile of the engine receives, for a matrix of devices, precision requests, fast
tuning states, execution paths and vision, on the fixture models.

Each case runs in a child process of its own (the NPU testing aids are environment variables, and a Core keeps the
CPU properties an NPU compile set on it). In the child, `ov.Core.compile_model` and `ov.Core.set_property` are
wrapped so every call is written down with the role of the model it compiled (language model, text embeddings,
vision encoder, or a precision probe the runner compiles to read its arithmetic back), then the case opens its
runner the way the app does (engine/runners/choice.open_runner) or builds a twin as fast tuning and fast reasoning do.

    python tools/record_compile_properties.py --out tests/compile_properties.json

The table this wrote on the commit before engine/compile/plan.py (the properties as engine/compile/devices.py and
engine/compile/precision.py chose them) is tests/compile_properties.json; tests/test_compile_plan.py checks the plan gives
the same, and re-records a few cases live. CACHE_DIR is written relative to the case's cache folder ("<cache>"), so
the table does not depend on where it was recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "fixtures" / "models"
CACHE = "<cache>"

BF16_F32_KV = {"INFERENCE_PRECISION_HINT": "bf16", "KV_CACHE_PRECISION": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}

# name: model, DeviceOptions fields, environment, the fast-tuning measurement in the cache folder ("stated": the
# stated default won; a candidate's name; None: nothing beat exact; absent: unmeasured), a twin to build.
CASES: dict[str, dict] = {
    "cpu-exact-text": {"model": "qwen35-text", "options": {"device": "CPU"}},
    "cpu-exact-text-capacity-no-cache": {"model": "qwen35-text", "options": {"device": "CPU", "runtime_cache_capacity": 256},
                                         "cache": False},
    "cpu-fast-text-stated": {"model": "qwen35-text", "options": {"device": "CPU", "exact": False}, "tuning": "stated"},
    "cpu-fast-text-chosen-2-threads": {"model": "qwen35-text", "options": {"device": "CPU", "exact": False},
                                       "tuning": "f32, u8 KV, int8 activations (groups of 128)", "threads": 2},
    "cpu-fast-text-none-won": {"model": "qwen35-text", "options": {"device": "CPU", "exact": False}, "tuning": None},
    "cpu-fast-text-unmeasured": {"model": "qwen35-text", "options": {"device": "CPU", "exact": False}, "cache": False},
    "cpu-exact-vl": {"model": "qwen35-vl", "options": {"device": "CPU"}},
    "cpu-fast-vl": {"model": "qwen35-vl", "options": {"device": "CPU", "exact": False}, "tuning": "stated"},
    "cpu-static-exact-vl": {"model": "qwen35-vl", "options": {"device": "CPU", "path": "static"}},
    "cpu-static-fast-text": {"model": "qwen35-text", "options": {"device": "CPU", "path": "static", "exact": False},
                             "tuning": "f32, u8 KV, int8 activations (groups of 128)"},
    "npu-exact-text": {"model": "qwen35-text", "options": {"device": "NPU", "npu_max_prompt_len": 96, "npu_min_response_len": 32},
                       "env": {"DECIDER_NPUW_DEVICES": "CPU"}},
    "npu-fast-vl-vision-npu": {"model": "qwen35-vl", "options": {"device": "NPU", "exact": False, "vision_device": "NPU",
                                                                 "npu_max_prompt_len": 96, "npu_min_response_len": 32,
                                                                 "npu_vision_max_pixels": 64 * 64},
                               "env": {"DECIDER_NPUW_DEVICES": "CPU"}},
    "npu-f16-exact-text": {"model": "qwen35-text", "options": {"device": "NPU", "npu_max_prompt_len": 96, "npu_min_response_len": 32},
                           "env": {"DECIDER_NPUW_DEVICES": "CPU", "DECIDER_NPUW_PRECISION": "f16"}},
    "npu-npuw-llm-then-static-text": {"model": "qwen35-text", "options": {"device": "NPU", "path": "npuw_llm",
                                                                          "npu_max_prompt_len": 96, "npu_min_response_len": 32},
                                      "env": {"DECIDER_NPUW_DEVICES": "CPU"}},
    "cpu-twin-with-properties": {"model": "qwen35-text", "options": {"device": "CPU"},
                                 "twin": {"options": {"device": "CPU", "exact": False}, "extra": BF16_F32_KV}},
    "cpu-twin-fast-reasoning": {"model": "qwen35-vl", "options": {"device": "CPU"},
                                "twin": {"options": {"device": "CPU", "exact": False, "cache": True}, "extra": BF16_F32_KV}},
    "cpu-twin-measured-via-app-cache": {"model": "qwen35-text", "options": {"device": "CPU"}, "cache": False,
                                        "app_cache": True, "tuning": None, "twin": {"options": {"device": "CPU", "exact": False}}},
}

STEP_ROLE = "language model (one-token steps)"


def role(model) -> str:
    """Which model a compile is of, from its inputs and outputs."""
    inputs = {i.get_any_name() for i in model.inputs}
    outputs = {o.get_any_name() for o in model.outputs}
    tokens = [i for i in model.inputs if i.get_any_name() in ("input_ids", "inputs_embeds")]
    if tokens:  # the one-token steps' compile (engine/graphs/one_token.py): its token axis fixed, the cache's length not
        masks = [i.get_partial_shape() for i in model.inputs if i.get_any_name() == "attention_mask"]
        step = tokens[0].get_partial_shape()[1].is_static and bool(masks) and masks[0].is_dynamic
        return STEP_ROLE if step else "language model"
    if "inputs_embeds" in outputs:
        return "text embeddings"
    if "last_hidden_state" in outputs:
        return "vision encoder"
    return "probe"


def _relative(properties: dict, cache: Path | None) -> dict:
    out = dict(properties)
    if "CACHE_DIR" in out and cache is not None:
        text = str(out["CACHE_DIR"])
        out["CACHE_DIR"] = CACHE + text[len(str(cache)):] if text.startswith(str(cache)) else text
    return out


def _write_tuning(folder: Path, cache_file: Path, case: dict, capabilities: tuple[str, ...]) -> dict | None:
    """The measurement the case's cache folder holds (as fast_tuning.json keeps it), or None (unmeasured)."""
    if "tuning" not in case:
        return None
    from decider.engine.compile.fast_tuning import Measured, Tuning, candidates, key_for
    from decider.engine.compile.precision import isa_summary

    screen = candidates(capabilities)
    chosen = case["tuning"]
    if chosen == "stated":
        chosen = next(name for name, props in screen.items()
                      if props["KV_CACHE_PRECISION"] == "u8" and props["DYNAMIC_QUANTIZATION_GROUP_SIZE"] == "32")
    measured = [Measured(name, props, 9.0 if name == chosen else 11.0, 0.0, "recorded, not measured")
                for name, props in screen.items()]
    tuning = Tuning(key_for(folder, "CPU"), isa_summary(), 10.0, 2.0, case.get("threads"), chosen, measured)
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    cache_file.write_text(json.dumps({tuning.key: tuning.to_json()}), encoding="utf-8")
    return tuning.to_json()


def record_case(name: str, cache_root: Path) -> dict:
    """Run one case in this process (the child): every compile and Core CPU property set, in order."""
    import openvino as ov

    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.compile.precision import cpu_capabilities
    from decider.engine.runners.choice import open_runner

    case = CASES[name]
    folder = MODELS / case["model"]
    cache = cache_root / "cache" if case.get("cache", True) else None
    app_cache = cache_root / "app" if case.get("app_cache") else None
    os.environ.pop("DECIDER_CACHE_DIR", None)
    if app_cache is not None:
        os.environ["DECIDER_CACHE_DIR"] = str(app_cache)
    capabilities = cpu_capabilities(ov.Core())
    tuning_file = (cache or (app_cache / "compiled" if app_cache else cache_root / "unused")) / "fast-tuning.json"
    tuning = _write_tuning(folder, tuning_file, case, capabilities)
    calls: list[dict] = []
    compile_model, set_property = ov.Core.compile_model, ov.Core.set_property

    def recording_compile(self, model, device=None, config=None):
        calls.append({"role": role(model), "device": device, "properties": _relative(dict(config or {}), cache)})
        return compile_model(self, model, device, config or {})

    def recording_set(self, *args):
        if len(args) == 2 and isinstance(args[1], dict):
            calls.append({"role": "Core CPU properties", "device": args[0], "properties": _relative(dict(args[1]), cache)})
        return set_property(self, *args)

    ov.Core.compile_model, ov.Core.set_property = recording_compile, recording_set  # type: ignore[method-assign]
    runner = open_runner(folder, DeviceOptions(**case["options"], cache_dir=cache))
    twin = case.get("twin")
    if twin is not None:
        options = {k: v for k, v in twin["options"].items() if k != "cache"}
        runner.twin(DeviceOptions(**options, cache_dir=cache if twin["options"].get("cache") else None), twin.get("extra"))
    return {"case": name, "model": case["model"], "options": case["options"], "env": case.get("env", {}),
            "cache": cache is not None, "app_cache": app_cache is not None, "twin": twin, "tuning": tuning,
            "capabilities": list(capabilities), "compiles": [c for c in calls if c["role"] != "probe"]}


def run_case(name: str) -> dict:
    """One case in a fresh child process with the case's environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("DECIDER_NPUW_DEVICES", "DECIDER_NPUW_PRECISION")}
    env.update(CASES[name].get("env", {}))
    link = Path(tempfile.mkdtemp(prefix="decider-record-"))
    (link / "decider").symlink_to(ROOT, target_is_directory=True)  # this checkout, importable as `decider`
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(link), env.get("PYTHONPATH", "")) if p)
    done = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True, text=True, env=env, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"case {name} failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", help="run one case in this process and print its record (the child)")
    parser.add_argument("--out", type=Path, help="write every case's record here (JSON)")
    parser.add_argument("--only", nargs="*", default=None, help="cases to record (default: all)")
    args = parser.parse_args(argv)
    if args.case:
        with tempfile.TemporaryDirectory() as root:
            print(json.dumps(record_case(args.case, Path(root))))
        return
    records = [run_case(name) for name in (args.only or CASES)]
    text = json.dumps(records, indent=1)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)


if __name__ == "__main__":
    main()
