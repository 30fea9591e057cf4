"""`decider doctor [MODEL]`: what OpenVINO sees and whether a model folder will run, each problem with its fix.

The IR is read (cheap: the weights are memory-mapped) and checked the way the runner checks it at load
time. With `compile` (the CLI's default) the model is then opened the way the app opens it, so the
report names the device and execution path that will compute, and every fallback on the way.
"""

from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from decider.engine.compile.devices import DeviceOptions
from decider.engine.core.errors import ModelError

from .models import checkpoint_info, describe, human_size

NPU_QWEN35_MIN_OPENVINO = (2026, 5)  # first release whose notes list Qwen3.5 on NPU (docs only)


@dataclass
class Check:
    status: str  # "ok", "info", "warn" (advice, not a failure), "fail"
    text: str
    fix: str | None = None

    def render(self) -> str:
        mark = {"ok": "✓", "info": "·", "warn": "!", "fail": "✗"}[self.status]
        return f"{mark} {self.text}" + (f" → fix: {self.fix}" if self.fix else "")


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)

    def add(self, status: str, text: str, fix: str | None = None) -> Check:
        check = Check(status, text, fix)
        self.checks.append(check)
        return check

    @property
    def ok(self) -> bool:
        return not any(c.status == "fail" for c in self.checks)

    def render(self) -> str:
        return "\n".join(c.render() for c in self.checks)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "checks": [c.__dict__ for c in self.checks]}


# ----- OpenVINO and devices -------------------------------------------------------------------------------------


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("-")[0].split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


def _property(core, device: str, name: str) -> str | None:
    try:
        value = core.get_property(device, name)
    except Exception:  # noqa: BLE001 - plugins raise RuntimeError or TypeError for unknown properties
        return None
    return str(value).strip() or None


def check_openvino(report: Report) -> tuple[object | None, list[str]]:
    try:
        import openvino as ov
    except Exception as exc:  # noqa: BLE001 - a broken install raises anything from ImportError to OSError
        report.add("fail", f"OpenVINO cannot be imported ({type(exc).__name__}: {exc})", "pip install -U openvino")
        return None, []
    version = ov.get_version()
    report.add("ok", f"OpenVINO {version}")
    try:
        core = ov.Core()
        devices = list(core.available_devices)
    except Exception as exc:  # noqa: BLE001
        report.add("fail", f"OpenVINO cannot list devices ({exc})", "reinstall OpenVINO: pip install --force-reinstall openvino")
        return None, []
    for device in devices:
        name = _property(core, device, "FULL_DEVICE_NAME") or "?"
        text = f"{device}: {name}"
        if device.startswith("NPU"):
            driver = _property(core, device, "NPU_DRIVER_VERSION")
            if driver:
                text += f" (driver {driver})"
        report.add("ok", text)
    if "CPU" not in devices:
        report.add("fail", "OpenVINO does not list the CPU", "reinstall OpenVINO: pip install --force-reinstall openvino")
    if not any(d.startswith("GPU") for d in devices):
        report.add("info", "GPU: none found (Intel GPU needs its OpenCL/Level Zero runtime)")
    check_cpu_precision(report, core)
    check_npu(report, devices, version)
    return core, devices


def check_cpu_precision(report: Report, core) -> None:
    """The CPU's ISA and the arithmetic the CPU plugin would pick by itself: Decider never relies on it."""
    from decider.engine.compile.measurements import read_host
    from decider.engine.compile.precision import fast_inference, isa_summary, short_type

    default = short_type(_property(core, "CPU", "INFERENCE_PRECISION_HINT") or "?")
    report.add(
        "info", f"CPU flags: {isa_summary()}; the CPU plugin's own default is {default} — Decider always asks for f32 "
        f"(exact) or, with --fast, the compile measured fastest here (unmeasured: {fast_inference(read_host(core).capabilities)} "
        f"arithmetic and a u8 KV cache; exact where no reduced compile beat it)",
    )


def check_npu(report: Report, devices: list[str], version: str) -> None:
    from decider.engine.compile.devices import npu_emulated
    from decider.engine.compile.precision import npuw_precision

    has_npu = any(d.startswith("NPU") for d in devices)
    emulated = npu_emulated()
    if emulated and not has_npu:
        report.add(
            "info", f"NPU: emulated — no NPU here; the NPU plugin runs NPUW on {emulated} (DECIDER_NPUW_DEVICES), its "
            f"partitions in {npuw_precision()} arithmetic (a real NPU computes in f16)",
        )
        return
    nodes = sorted(glob.glob("/dev/accel/accel*")) if sys.platform.startswith("linux") else []
    if has_npu:
        if _version_tuple(version) < NPU_QWEN35_MIN_OPENVINO:
            report.add(
                "warn",
                f"NPU: Qwen3.5 (linear attention) on NPU is first listed in the OpenVINO 2026.5 release notes; this is {version.split('-')[0]}",
                "pip install -U openvino (if NPU compilation fails)",
            )
        return
    if nodes:
        unusable = [n for n in nodes if not os.access(n, os.R_OK | os.W_OK)]
        if unusable:
            report.add(
                "fail", f"NPU: {', '.join(unusable)} exists but this user cannot open it",
                "sudo usermod -aG render $USER, then log out and in again",
            )
        else:
            report.add(
                "fail", f"NPU: the kernel driver is loaded ({', '.join(nodes)}) but OpenVINO does not list an NPU",
                "install the Intel NPU user-space driver (intel-driver-compiler-npu, intel-level-zero-npu, level-zero) "
                "from github.com/intel/linux-npu-driver",
            )
        return
    if sys.platform.startswith("linux"):
        report.add("info", "NPU: none found (no /dev/accel/accel*; Decider uses GPU or CPU)")
    else:
        report.add("info", "NPU: none found (install the Intel NPU driver if this machine has one; Decider uses GPU or CPU)")


# ----- the model folder -----------------------------------------------------------------------------------------


def fix_for(message: str, folder: Path) -> str:
    """The one-line fix for a ModelError message from inspect_folder / the runner's checks."""
    if "truncated" in message or "missing file (an OpenVINO IR" in message:
        return "the download or export did not finish: `decider pull REPO` again, or re-export with `decider convert`"
    if "tokenizer.json" in message and "missing" in message:
        return f"copy tokenizer.json from the original Hugging Face checkpoint into {folder}"
    if "config.json" in message and "missing" in message:
        return f"copy config.json from the export (or the original checkpoint) into {folder}"
    if "unknown model_type" in message:
        return "Decider runs Qwen3.5 only: pull or convert a Qwen3.5 model"
    if "not valid JSON" in message:
        return "the file is damaged: download or export the model again"
    if "not a folder" in message:
        return "check the path (a model is a folder holding config.json and openvino_*.xml/.bin)"
    if "not an OpenVINO IR" in message or "cannot read" in message:
        return "re-export it: decider convert HF_DIR OUT_DIR --weights int4-npu (or pip install -U openvino if it is newer)"
    return "re-export it with `decider convert HF_DIR OUT_DIR` or pull it again"


def check_model(report: Report, path: str | Path, core=None, options: DeviceOptions | None = None) -> None:
    from decider.engine.model.folder import inspect_folder

    options = options or DeviceOptions()
    folder = Path(path).expanduser()
    report.add("info", f"model {folder}")
    try:
        model = inspect_folder(folder)
    except ModelError as exc:
        if folder.is_dir() and checkpoint_info(folder) is not None:
            report.add(
                "fail", f"{folder} is a Hugging Face checkpoint, not an OpenVINO export",
                f"decider convert {folder} {folder}-ov --weights int4-npu",
            )
        else:
            report.add("fail", str(exc), fix_for(str(exc), folder))
        return
    entry = describe(folder)
    files = ", ".join(p.name for p in (model.language_ir, model.embeddings_ir) if p is not None)
    report.add("ok", f"folder complete: {entry.layout} layout ({files}), model_type {model.model_type}, {human_size(entry.size_bytes)}")
    weights = entry.precision
    if weights is not None:
        text = f"weights {weights.label}"
        if weights.npu_preferred:
            report.add("ok", text + " (the NPU's preferred format)")
        else:
            report.add("info", text + " (NPU works; int4-sym channel-wise is its preferred format: `decider convert … --weights int4-npu`)")
    report.add("info", f"context length {model.context_length:,} tokens (max_position_embeddings)")
    # Read the IR the way the runner will (no compilation) and check the contract it relies on.
    logits_width = None
    if core is not None:
        logits_width = _check_ir(report, core, model)
    _check_tokenizer(report, model, logits_width)
    limit, response = options.npu_max_prompt_len, options.npu_min_response_len
    report.add(
        "info",
        f"on NPU: prompts up to {limit} tokens, {limit + response} with the answer (static shapes over a "
        f"{options.static_window}-slot KV window; change with --npu-max-prompt)",
    )


def check_compile(report: Report, path: str | Path, options: DeviceOptions, tune: bool = False) -> None:
    """Open the model as the app would: which device and path compute, how long compiling took, fallbacks."""
    from decider.engine.compile.devices import npu_emulated
    from decider.engine.core.errors import DeciderError
    from decider.engine.runners.choice import open_runner

    try:
        runner = open_runner(path, options)
    except DeciderError as exc:
        report.add("fail", f"{options.device}: the model does not compile ({exc})", "try --device CPU, or pip install -U openvino")
        return
    for notice in runner.notices:
        report.add("warn", f"fallback: {notice}")
    emulated = f", emulated: NPUW on {npu_emulated()}" if runner.device.startswith("NPU") and npu_emulated() else ""
    report.add(
        "ok", f"compiled on {runner.device} ({runner.execution_path} path{emulated}) in {runner.stats.compile_s:.1f} s; "
        f"{runner.precision.label} arithmetic ({'exact' if runner.precision.exact else 'not exact'} logprobs); "
        f"context {runner.context_length:,} tokens",
    )
    plan = getattr(runner, "plan", None)  # every property each compile got, and why (engine/compile/plan.py)
    if plan is not None:
        report.add("info", "compile plan:\n    " + "\n    ".join(plan.describe()))
    head = getattr(runner, "mtp", None)  # the MTP draft head, where the export has one (engine/runners/mtp_head.py)
    if head is not None:
        ids = f"the first {len(head.vocabulary):,} of {head.vocab_size:,} ids" if head.vocabulary is not None else "every id"
        report.add("info", f"MTP draft head: {head.inference or 'the device default'} arithmetic, {ids} (drafts only: "
                           "every kept token and every logprob is the exact model's)")
    kernel_note = getattr(runner, "kernel_note", None)  # the dynamic runner's; the static path has no kernel
    if kernel_note:
        report.add("info", f"exact int8 kernel (few-token infers): {kernel_note}")
    native_note = getattr(runner, "native_note", None)  # where one-token steps have a compile of their own
    if native_note:
        report.add("info", f"native int8 kernel (one-token steps): {native_note}")
    _check_capture(report, runner, tune)
    if tune and runner.device.startswith("CPU") and runner.execution_path == "dynamic":
        from decider.engine.compile.fast_tuning import tune as measure

        report.add("info", "fast compile: " + measure(runner).summary())
    elif tune:
        report.add("info", f"fast compile: measured on the CPU's dynamic path only (this model runs on {runner.device})")


def _check_capture(report: Report, runner, tune: bool = False) -> None:
    """Capture-to-bars at the default pixel budget, measured on this model here (a vision export only); `tune`:
    first measure this machine's own default and keep it (app/machine_capture.py)."""
    from decider.engine.core.errors import DeciderError
    from decider.engine.core.settings import IMAGE_PIXELS_DEFAULT

    from .capture_timing import time_capture
    from .config import cache_dir
    from .machine_capture import measure, store, stored

    if runner.vision is None:
        report.add("info", "capture-to-bars: this model cannot see images (no vision encoder on this path)")
        return
    try:
        if tune:
            measured, line = measure(runner)
            if measured is None:
                report.add("warn", f"capture budget for this machine: {line}")
            else:
                path = store(runner, cache_dir(), measured)
                report.add("ok", f"capture budget for this machine: {line}; kept in {path} (decisions left at the "
                                 f"default {IMAGE_PIXELS_DEFAULT:,} use it)")
        machine = stored(runner, cache_dir())
        budget = machine.budget if machine is not None else IMAGE_PIXELS_DEFAULT
        timing = time_capture(runner, budget)
    except DeciderError as exc:
        report.add("warn", f"capture-to-bars: a decision on a screenshot failed ({exc})")
        return
    except OSError as exc:  # the cache folder cannot be written: measured, not kept
        report.add("warn", f"capture budget for this machine: not kept ({exc.strerror or exc})")
        return
    if machine is not None:
        report.add("info", f"capture-to-bars at this machine's measured image budget, cold: {timing.summary()}")
    else:
        report.add("info", f"capture-to-bars at the default image budget, cold on this machine: {timing.summary()}; "
                           "set image_pixels lower for faster screen decisions, or let `decider doctor --tune` measure "
                           "this machine's default")


def _check_ir(report: Report, core, model) -> int | None:
    from decider.engine.runners.base import REQUIRED_INPUTS

    try:
        ir = core.read_model(model.language_ir)
    except Exception as exc:  # noqa: BLE001 - RuntimeError from the frontend
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        report.add("fail", f"{model.language_ir}: OpenVINO cannot read it ({first})", fix_for("cannot read", model.path))
        return None
    names = {name for port in ir.inputs for name in port.get_names()}
    missing = REQUIRED_INPUTS[model.layout] - names
    if missing:
        report.add(
            "fail", f"{model.language_ir}: inputs {', '.join(sorted(missing))} missing (not a stateful Qwen3.5 export)",
            "re-export with `decider convert HF_DIR OUT_DIR` (task text-generation-with-past / image-text-to-text)",
        )
    if not ir.get_sinks():
        report.add("fail", f"{model.language_ir}: the model has no state", "re-export with `decider convert` (stateful, the default)")
    try:
        shape = ir.output("logits").get_partial_shape()
        width = shape[shape.rank.get_length() - 1]
        logits = None if width.is_dynamic else width.get_length()
    except RuntimeError:
        report.add("fail", f"{model.language_ir}: no 'logits' output", "re-export with `decider convert`")
        return None
    if logits is None:
        report.add("fail", f"{model.language_ir}: the logits width is not static", "re-export with `decider convert`")
    elif logits != model.vocab_size:
        report.add(
            "fail", f"{model.path / 'config.json'}: vocab_size {model.vocab_size} but the IR has {logits} logits",
            "use the config.json that came with this export",
        )
    else:
        report.add("ok", f"language model IR readable: {len(ir.get_sinks())} state variables, {logits:,} logits")
    return logits


def _check_tokenizer(report: Report, model, logits_width: int | None) -> None:
    from decider.engine.model.tokenizer import ChatTokenizer

    try:
        tokenizer = ChatTokenizer(model.tokenizer_json)
    except ModelError as exc:
        report.add("fail", str(exc), f"copy tokenizer.json from the original Qwen3.5 checkpoint into {model.path}")
        return
    width = logits_width or model.vocab_size
    if tokenizer.size > width:
        report.add(
            "fail", f"{model.tokenizer_json}: {tokenizer.size:,} tokens but the model has {width:,} logits",
            f"the tokenizer belongs to another model: copy the checkpoint's tokenizer.json into {model.path}",
        )
        return
    padding = width - tokenizer.size
    report.add(
        "ok", f"vocabulary: tokenizer {tokenizer.size:,} ids, model {width:,} logits"
        + (f" ({padding:,} padding ids never scored)" if padding else ""),
    )
    _check_template(report, model.path, tokenizer)


def _check_template(report: Report, folder: Path, tokenizer) -> None:
    """The folder's own chat template against Decider's rendering of its reference conversations."""
    from decider.engine.model.template_check import CORPUS, differences_note, folder_template, template_differences

    if folder_template(folder) is None:
        report.add("info", "chat template: the folder has none (Decider renders Qwen3.5's format itself)")
        return
    note = differences_note(template_differences(folder, tokenizer))
    if note:
        report.add("warn", f"chat template: {note}", "use the checkpoint's own chat_template.jinja (Qwen3.5's)")
    else:
        report.add("ok", f"chat template: the folder's template renders all {len(CORPUS)} reference conversations as Decider does")


def run_doctor(model: str | Path | None = None, options: DeviceOptions | None = None, compile: bool = False,
               tune: bool = False) -> Report:
    """tune: also time the reduced-precision candidates on this machine and keep the fastest (engine/compile/fast_tuning.py)."""
    report = Report()
    core, _ = check_openvino(report)
    if model is not None:
        check_model(report, model, core, options)
        if compile and report.ok:
            check_compile(report, model, options or DeviceOptions(), tune)
    return report
