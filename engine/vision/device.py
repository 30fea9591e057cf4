"""Open the vision encoder on the device its compile plan chose (DeviceOptions.vision_device), falling back in order.

The language model's device and the vision encoder's are chosen separately: an image costs one
encoder pass, every token a language-model pass, and the two may sit best on different devices.
AUTO prefers NPU, then GPU, then CPU (engine/compile/devices.vision_candidates), and falls back to the CPU with a notice
when the preferred device cannot compile the encoder; an explicit choice that cannot compile is an error. On the NPU
the encoder runs with static shapes (DeviceOptions.npu_vision_max_pixels, see VisionEncoder). Each candidate's compile
properties are the plan's (engine/compile/planner.py): as the language model's on CPU/GPU, plain NPUW on the NPU, whose CPU
partitions take the CPU properties the plan sets on the Core.
"""

from __future__ import annotations

from collections.abc import Sequence

import openvino as ov

from ..compile.plan import CompileTarget
from ..compile.devices import DeviceOptions, vision_candidates as vision_candidates
from ..core.errors import DeviceError, ModelError
from ..compile.measurements import read_host
from ..model.folder import ModelFolder
from ..compile.planner import vision_targets
from .encoder import VisionEncoder


def apply_host(core: ov.Core, target: CompileTarget) -> None:
    """Before a compile on the NPU: the CPU properties NPUW's CPU partitions compile with, set on the Core."""
    if target.host:
        core.set_property("CPU", target.host_properties)


def open_vision_encoder(core: ov.Core, folder: ModelFolder, options: DeviceOptions, notices: list[str],
                        targets: Sequence[CompileTarget] | None = None) -> VisionEncoder:
    """The folder's vision encoder compiled as `targets` say (the plan's, in order; not given: planned here from
    `options`); fallbacks are appended to `notices`."""
    if targets is None:
        targets = vision_targets(options, read_host(core), core.available_devices)
    for index, target in enumerate(targets):
        static = options.npu_vision_max_pixels if target.device.split(".")[0] == "NPU" else None
        try:
            apply_host(core, target)
            return VisionEncoder(core, folder.path, folder.vision_config, target.device, target.properties, static)
        except ModelError as exc:
            if index == len(targets) - 1:
                raise
            notices.append(f"the vision encoder could not run on {target.device} ({exc}); trying {targets[index + 1].device}")
    raise DeviceError("no device could run the vision encoder")  # unreachable: the last candidate raises
