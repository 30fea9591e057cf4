"""Device choice: the user's options, which device and path run a model, and what the compiled model can do.

Plain functions so every rule is visible and unit-tested. The compile properties each device gets are the compile
plan's (engine/compile/planner.py); NPU code paths cannot run on a machine without an NPU, so the properties they use are
pinned by tests instead (see the NPU section of the Qwen3.5/OpenVINO facts)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import DeviceError, SettingsError

DEVICES = ("AUTO", "CPU", "GPU", "NPU")
# AUTO prefers the accelerator a decision agent is meant for, then any GPU, then the CPU.
AUTO_PREFERENCE = ("NPU", "GPU", "CPU")

DEFAULT_NPU_MAX_PROMPT_LEN = 1024
DEFAULT_NPU_MIN_RESPONSE_LEN = 128
# Tokens per forward of the static runner's variants: a prompt is cut greedily into these sizes.
DEFAULT_STATIC_CHUNKS = (64, 8, 1)
# The vision encoder's device. CPU by default: measured at the real 0.8B vision geometry (BENCHMARKS.md,
# "Vision"), and the one device whose f32 features keep the bars exact.
DEFAULT_VISION_DEVICE = "CPU"
# On the NPU the vision encoder runs with static shapes: every image is scaled into this pixel budget
# (the model's own budget when that is smaller) and padded to its patch count.
DEFAULT_NPU_VISION_MAX_PIXELS = 1280 * 720

# "auto": static shapes on the NPU, the dynamic stateful export elsewhere. "npuw_llm" is the NPU
# plugin's own LLM pipeline (it does not compile Qwen3.5 with OpenVINO 2026.4); kept for later versions.
EXECUTION_PATHS = ("auto", "dynamic", "static", "npuw_llm")

# A testing aid: the NPU plugin runs NPUW with these devices (e.g. "CPU"), so the NPU path works on a
# machine without an NPU. Passed to the plugin as NPUW_DEVICES; it also makes NPU count as available.
NPUW_DEVICES_ENV = "DECIDER_NPUW_DEVICES"


def npuw_devices_override() -> str | None:
    return os.environ.get(NPUW_DEVICES_ENV, "").strip() or None


def npu_emulated() -> str | None:
    """Which devices run "the NPU" when the testing aid runs NPUW without an NPU (e.g. "CPU"); None on a real NPU."""
    override = npuw_devices_override()
    if override and "NPU" not in [d.strip().split(".")[0].upper() for d in override.split(",")]:
        return override
    return None


@dataclass(frozen=True)
class DeviceOptions:
    """What the user may choose about compilation.

    exact: compile for exact log-probabilities (f32 inference and f32 KV cache on CPU/GPU, no
    dynamic activation quantisation). Turning it off compiles the fast arithmetic spelled out in
    engine/compile/precision.py (bf16/f16 where the device has it, a u8 KV cache); the bars then drift, and the
    result's precision says by which arithmetic.
    """

    device: str = "AUTO"
    exact: bool = True
    npu_max_prompt_len: int = DEFAULT_NPU_MAX_PROMPT_LEN
    npu_min_response_len: int = DEFAULT_NPU_MIN_RESPONSE_LEN
    cache_dir: Path | None = None
    path: str = "auto"
    static_chunks: tuple[int, ...] = DEFAULT_STATIC_CHUNKS
    # CPU plugin's per-shape cache of compiled kernels (entries); None leaves OpenVINO's default.
    runtime_cache_capacity: int | None = None
    vision_device: str = DEFAULT_VISION_DEVICE  # which device runs the vision encoder (AUTO, CPU, GPU, NPU)
    npu_vision_max_pixels: int = DEFAULT_NPU_VISION_MAX_PIXELS

    def __post_init__(self) -> None:
        for name in ("device", "vision_device"):
            value = getattr(self, name)
            if not isinstance(value, str) or (value.upper() not in DEVICES and not value.upper().startswith(("GPU.", "NPU."))):
                raise SettingsError(f"{name} must be one of {', '.join(DEVICES)} (got {value!r})")
            object.__setattr__(self, name, value.upper())
        value = self.npu_vision_max_pixels
        if not isinstance(value, int) or isinstance(value, bool) or not 32 * 32 <= value <= 4096 * 4096:
            raise SettingsError(f"npu_vision_max_pixels must be an integer in {32 * 32}..{4096 * 4096} (got {value!r})")
        if self.path not in EXECUTION_PATHS:
            raise SettingsError(f"execution path must be one of {', '.join(EXECUTION_PATHS)} (got {self.path!r})")
        chunks = tuple(self.static_chunks)
        if not chunks or 1 not in chunks or any(not isinstance(c, int) or isinstance(c, bool) or not 1 <= c <= 4096 for c in chunks):
            raise SettingsError(f"static_chunks must be integers in 1..4096 including 1 (got {self.static_chunks!r})")
        object.__setattr__(self, "static_chunks", chunks)
        for name in ("npu_max_prompt_len", "npu_min_response_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 16 <= value <= 131072:
                raise SettingsError(f"{name} must be an integer in 16..131072 (got {value!r})")


    @property
    def static_window(self) -> int:
        """KV slots of the static runner: the whole conversation (prompt plus response) must fit."""
        return self.npu_max_prompt_len + self.npu_min_response_len


@dataclass(frozen=True)
class DeviceCaps:
    """What the compiled model on a device can do; the runner degrades by these, never by name checks."""

    device: str
    snapshots: bool  # query_state() exposes every state and restoring it is exact
    prefix_reuse: bool  # a multi-token infer may continue an existing state
    max_prompt_len: int | None  # static prompt limit (NPU), None where shapes are dynamic
    max_total_len: int | None


def choose_device(requested: str, available: list[str]) -> str:
    """Resolve AUTO to the best available device and check an explicit choice exists."""
    requested = requested.upper()
    families = {d.split(".")[0] for d in available}
    if requested == "AUTO":
        for family in AUTO_PREFERENCE:
            if family in families:
                return family
        raise DeviceError("no OpenVINO device is available (not even CPU)")
    if requested.split(".")[0] not in families or ("." in requested and requested not in available):
        raise DeviceError(
            f"device {requested} is not available; OpenVINO sees: {', '.join(available) or 'none'}"
        )
    return requested


def visible_devices(available: list[str]) -> list[str]:
    """OpenVINO's devices, plus NPU when the NPUW testing override runs the NPU plugin on other devices."""
    if npuw_devices_override() and not any(d.split(".")[0] == "NPU" for d in available):
        return [*available, "NPU"]
    return list(available)


def path_for(device: str, options: DeviceOptions) -> str:
    """Which runner computes on this device: the user's explicit choice, else static shapes on the NPU."""
    if options.path != "auto":
        return options.path
    return "static" if device.split(".")[0] == "NPU" else "dynamic"


def vision_candidates(requested: str, available: list[str]) -> list[str]:
    """Devices to try for the vision encoder in order: the explicit one, or AUTO's preference among the visible ones
    (CPU last)."""
    if requested != "AUTO":
        return [choose_device(requested, available)]
    families = {d.split(".")[0] for d in available}
    return [family for family in AUTO_PREFERENCE if family in families] or [choose_device("AUTO", available)]


def device_caps(device: str, options: DeviceOptions) -> DeviceCaps:
    family = device.split(".")[0]
    if family == "NPU":
        # NPUW hides the DeltaNet state from query_state() and treats every multi-token infer as
        # a fresh prompt: no snapshots, no continuation prefill, a static prompt limit.
        return DeviceCaps(
            device=device,
            snapshots=False,
            prefix_reuse=False,
            max_prompt_len=options.npu_max_prompt_len,
            max_total_len=options.npu_max_prompt_len + options.npu_min_response_len,
        )
    return DeviceCaps(device=device, snapshots=True, prefix_reuse=True, max_prompt_len=None, max_total_len=None)
