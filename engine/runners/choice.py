"""Open a model on the best device that can actually compile it, and say so when that was not the first choice.

AUTO tries NPU, then GPU, then CPU; a device that fails to compile the model is skipped with a notice
the front ends show (CLI stderr, `decider doctor`, the window). An explicitly requested device is the
user's decision: its failure stays an error, except that an explicitly requested NPUW_LLM pipeline
falls back to the static path on the same NPU (it does not compile Qwen3.5 with OpenVINO 2026.4; a later
release may, which is why it can still be asked for).

Each attempt first plans its compiles (engine/compile/planner.py); where --fast has no measurement here yet, it is taken
then (`measured_plan`), before the runner is built with the plan.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import openvino as ov

from ..compile.plan import CompilePlan
from ..compile.devices import AUTO_PREFERENCE, DeviceOptions, choose_device, path_for, visible_devices
from ..core.errors import DeciderError, DeviceError, ModelError
from ..compile.fast_tuning import tune
from ..model.folder import ModelFolder, inspect_folder
from ..compile.planner import plan_for
from .runner import ModelRunner
from .base import RunnerBase
from .static import StaticRunner


def measured_plan(folder: ModelFolder, options: DeviceOptions, core: ov.Core, *, static: bool = False,
                  notices: list[str] | None = None) -> CompilePlan:
    """The compile plan for these options, --fast's measurement taken first where it is missing: --fast asks for the
    fastest compile, and which one that is is measured on this machine (engine/compile/fast_tuning.py) by `decider doctor
    --tune`, a think-mode decision or here, on first use, against an exact runner of the same model on the same Core.
    Only where there is a folder to keep the measurement in; a compile or step that fails leaves the stated default."""
    plan = plan_for(folder, options, core, static=static, notices=notices)
    if not plan.measure_first:
        return plan
    try:
        tune(ModelRunner(folder, core=core, plan=plan_for(folder, replace(plan.options, exact=True), core)))
    except (DeciderError, RuntimeError):
        return plan
    return plan_for(folder, options, core, static=static, notices=notices)


def _build(folder: ModelFolder, options: DeviceOptions, core: ov.Core, path: str, notices: list[str]) -> RunnerBase:
    if path == "npuw_llm" and not options.device.startswith("NPU"):
        raise DeviceError(f"the npuw_llm path runs on the NPU only (device {options.device})")
    plan = measured_plan(folder, options, core, static=path == "static", notices=notices)
    return StaticRunner(folder, core=core, plan=plan) if path == "static" else ModelRunner(folder, core=core, plan=plan)


def _attempt(folder: ModelFolder, options: DeviceOptions, core: ov.Core, notices: list[str]) -> RunnerBase:
    path = path_for(options.device, options)
    if path != "npuw_llm":
        return _build(folder, options, core, path, notices)
    try:
        return _build(folder, options, core, "npuw_llm", notices)
    except DeviceError as exc:
        notices.append(f"{exc}; using the static-shape path on {options.device} instead")
        return _build(folder, replace(options, path="static"), core, "static", notices)


def _candidates(requested: str, available: list[str]) -> list[str]:
    if requested != "AUTO":
        return [choose_device(requested, available)]
    families = {d.split(".")[0] for d in available}
    found = [family for family in AUTO_PREFERENCE if family in families]
    if not found:
        raise DeviceError("no OpenVINO device is available (not even CPU)")
    return found


def open_runner(folder: ModelFolder | str | Path, options: DeviceOptions | None = None, core: ov.Core | None = None) -> RunnerBase:
    """The runner for these options; `runner.notices` lists every fallback that happened on the way."""
    folder = folder if isinstance(folder, ModelFolder) else inspect_folder(folder)
    options = options or DeviceOptions()
    core = core or ov.Core()
    candidates = _candidates(options.device, visible_devices(core.available_devices))
    notices: list[str] = []
    for index, device in enumerate(candidates):
        last = index == len(candidates) - 1
        try:
            runner = _attempt(folder, replace(options, device=device), core, notices)
        except (DeviceError, ModelError) as exc:
            # A ModelError here comes from a device path's graph edits (the folder itself was validated):
            # another device may still run the export as it is.
            if last or (isinstance(exc, ModelError) and path_for(device, options) != "static"):
                if notices:
                    raise type(exc)(f"{exc} (after: {'; '.join(notices)})") from None
                raise
            notices.append(f"{device} could not run the model ({exc}); trying {candidates[index + 1]}")
            continue
        runner.notices[:0] = notices
        return runner
    raise DeviceError("no device could run the model")  # unreachable: the last candidate raises
