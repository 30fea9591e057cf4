"""Which device runs the vision encoder (DeviceOptions.vision_device), and how it is compiled there.

The language model's device and the vision encoder's are chosen separately: an image costs one
encoder pass, every token a language-model pass, and the two may sit best on different devices.
AUTO prefers NPU, then GPU, then CPU, and falls back to the CPU with a notice when the preferred
device cannot compile the encoder; an explicit choice that cannot compile is an error. On the NPU the
encoder runs with static shapes (DeviceOptions.npu_vision_max_pixels, see VisionEncoder).
"""

from __future__ import annotations

import openvino as ov

from .devices import AUTO_PREFERENCE, DeviceOptions, choose_device, static_compile_properties, visible_devices
from .errors import DeviceError, ModelError
from .model_folder import ModelFolder
from .precision import cpu_capabilities, prepare_core
from .vision_encoder import VisionEncoder


def vision_candidates(requested: str, available: list[str]) -> list[str]:
    """Devices to try in order: the explicit one, or AUTO's preference among the visible ones (CPU last)."""
    if requested != "AUTO":
        return [choose_device(requested, available)]
    families = {d.split(".")[0] for d in available}
    return [family for family in AUTO_PREFERENCE if family in families] or [choose_device("AUTO", available)]


def open_vision_encoder(core: ov.Core, folder: ModelFolder, options: DeviceOptions, notices: list[str]) -> VisionEncoder:
    """The folder's vision encoder on options.vision_device; fallbacks are appended to `notices`."""
    candidates = vision_candidates(options.vision_device, visible_devices(core.available_devices))
    for index, device in enumerate(candidates):
        static = options.npu_vision_max_pixels if device.split(".")[0] == "NPU" else None
        try:
            # static_compile_properties: as the language model's on CPU/GPU (f32 when exact), plain NPUW on the NPU,
            # whose CPU partitions take the Core's CPU precision (prepare_core).
            prepare_core(core, device, options.exact)
            properties = static_compile_properties(device, options, cpu_capabilities(core))
            return VisionEncoder(core, folder.path, folder.vision_config, device, properties, static)
        except ModelError as exc:
            if index == len(candidates) - 1:
                raise
            notices.append(f"the vision encoder could not run on {device} ({exc}); trying {candidates[index + 1]}")
    raise DeviceError("no device could run the vision encoder")  # unreachable: the last candidate raises
