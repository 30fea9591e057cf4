"""Which arithmetic computes a model: asked for explicitly at every compile, read back after it, said on every result.

OpenVINO's CPU plugin picks its own defaults by CPU: bf16 inference where the CPU has avx512_bf16 or AMX,
f32 on AVX2-only CPUs; the IR's metadata asks for an f16 KV cache; int8 exports quantise activations on the
fly. So nothing here is left to a default. Every compile passes the precision it means (`cpu_properties`,
`gpu_properties`, `npu_host_properties`, put together by engine/compile/planner.py), and a runner reads back what it got (`read_cpu_precision`): that,
not the request, is what the result's label says.

The NPU plugin runs a model through NPUW, which partitions it and compiles the partitions on its devices. A
real NPU computes in f16 whatever the host does. Partitions NPUW places on the CPU (all of them under the
testing aid DECIDER_NPUW_DEVICES=CPU) are compiled by the CPU plugin with the Core's CPU properties, which
NPUW's own configuration does not reach (measured with OpenVINO 2026.4.1: a DEVICE_PROPERTIES entry is
ignored; the Core's CPU properties are used). The compile plan sets them before an NPU compile.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..core.errors import SettingsError

# Exact logprobs on the CPU: f32 arithmetic, an f32 KV cache, no on-the-fly int8 quantisation of activations.
CPU_EXACT: dict[str, object] = {
    "INFERENCE_PRECISION_HINT": "f32",
    "KV_CACHE_PRECISION": "f32",
    "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0",
}
GPU_EXACT: dict[str, object] = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"}
GPU_FAST: dict[str, object] = {"INFERENCE_PRECISION_HINT": "f16", "KV_CACHE_PRECISION": "f16"}

# The testing aid beside DECIDER_NPUW_DEVICES: which arithmetic the emulated NPU's CPU partitions use.
# "f32" (the default) makes the emulated NPU compute what the CPU path computes; "f16" emulates the NPU's own
# arithmetic for measuring drift (bf16 on a CPU without f16 arithmetic; the label says which ran).
NPUW_PRECISION_ENV = "DECIDER_NPUW_PRECISION"
NPUW_PRECISIONS = ("f32", "f16")

_SHORT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "uint8_t": "u8", "int8_t": "i8", "u8": "u8",
          "uint4_t": "u4", "int4_t": "i4"}


def short_type(value: object) -> str:
    """'f32' for OpenVINO's <Type: 'float32'>, 'float32', 'f32' alike."""
    text = str(value).replace("<Type: '", "").replace("'>", "").strip().lower()
    return _SHORT.get(text, text)


def fast_inference(capabilities: Sequence[str]) -> str:
    """The CPU's fastest floating-point arithmetic the plugin offers: bf16, f16, else f32."""
    for capability, hint in (("BF16", "bf16"), ("FP16", "f16")):
        if capability in capabilities:
            return hint
    return "f32"


def draft_properties(properties: dict[str, object], capabilities: Sequence[str]) -> dict[str, object]:
    """A CPU draft head's compile (engine/runners/mtp_head.py): the runner's properties in the CPU's fastest float
    arithmetic, stated. A draft only changes which tokens are proposed, never which are kept nor their logprobs (the
    exact model verifies each, sampled drafts against the head's own q). Its cache gets a subfolder of its own: the
    plugin's cache key leaves the precision hint out."""
    hint = fast_inference(capabilities)
    out = {**properties, "INFERENCE_PRECISION_HINT": hint}
    if out.get("CACHE_DIR"):
        out["CACHE_DIR"] = os.path.join(str(out["CACHE_DIR"]), f"draft-head-{hint}")
    return out


def cpu_properties(exact: bool, capabilities: Sequence[str] = ()) -> dict[str, object]:
    """The CPU plugin's precision properties: exact, or the fast compile spelled out (never the plugin's choice)."""
    if exact:
        return dict(CPU_EXACT)
    return {
        "INFERENCE_PRECISION_HINT": fast_inference(capabilities),
        "KV_CACHE_PRECISION": "u8",
        "DYNAMIC_QUANTIZATION_GROUP_SIZE": "32",
    }


def gpu_properties(exact: bool) -> dict[str, object]:
    return dict(GPU_EXACT if exact else GPU_FAST)


def npuw_precision() -> str:
    value = os.environ.get(NPUW_PRECISION_ENV, "").strip().lower() or "f32"
    if value not in NPUW_PRECISIONS:
        raise SettingsError(f"{NPUW_PRECISION_ENV} must be one of {', '.join(NPUW_PRECISIONS)} (got {value!r})")
    return value


def npu_host_properties(exact: bool, capabilities: Sequence[str] = (), mode: str | None = None) -> dict[str, object]:
    """What the CPU partitions of an NPU compile run with: f32 (the CPU path's numbers), or, in the named
    emulation mode, the NPU's f16 — or the nearest arithmetic the CPU has (a CPU without f16 arithmetic
    quietly computes an f16 hint in f32 when it is set on the Core: measured with OpenVINO 2026.4.1). mode: "f32" or
    "f16" (DECIDER_NPUW_PRECISION, read when not given)."""
    if (mode or npuw_precision()) == "f16":
        inference = "f16" if "FP16" in capabilities else "bf16" if "BF16" in capabilities else "f32"
        return {"INFERENCE_PRECISION_HINT": inference, "KV_CACHE_PRECISION": "f16", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}
    return cpu_properties(exact)


def cpu_capabilities(core) -> tuple[str, ...]:
    """The CPU plugin's OPTIMIZATION_CAPABILITIES (BF16, FP16, INT8…), plus "VNNI" where the CPU flags show int8
    dot products and "AMX_INT8" where they show AMX's int8 tiles (the plugin's list says neither)."""
    try:
        found = tuple(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")) if core is not None else ()
    except RuntimeError:
        found = ()
    flags = set(cpu_flags())
    return found + (("VNNI",) if _VNNI_FLAGS & flags else ()) + (("AMX_INT8",) if "amx_int8" in flags else ())


_VNNI_FLAGS = {"avx512_vnni", "avx_vnni", "amx_int8"}
# The flags that decide OpenVINO's CPU defaults and kernels: named in doctor, bench results and closing notes.
ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_int8")


def cpu_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            return next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), [])
    except OSError:
        return []


def isa_summary() -> str:
    """'avx2 avx512f avx512_vnni avx512_bf16' — the ISA flags of this CPU that change OpenVINO's choices."""
    flags = set(cpu_flags())
    return " ".join(flag for flag in ISA_FLAGS if flag in flags) or "unknown (no /proc/cpuinfo flags)"


@dataclass(frozen=True)
class Precision:
    """The arithmetic a compiled model really runs, read back from it."""

    inference: str  # f32, bf16, f16
    kv_cache: str  # f32, f16, bf16, u8 ("host" for the static path, whose caches the host keeps in f32)
    activations_int8_group: int = 0  # dynamic int8 quantisation of activations (0: off)
    where: str = ""  # a qualifier: "NPU" (the hardware's arithmetic), "NPU emulated on CPU"
    kernels: str = ""  # the FullyConnected kernels read back after inference ("brgemm_avx512_bf16"); "" not read
    projections: str = ""  # our kernel where it computes projections (engine/kernels/adoption.py); "" the plugin's

    @property
    def exact(self) -> bool:
        return (
            self.inference == "f32" and self.kv_cache in ("f32", "host") and self.activations_int8_group == 0
            and self.where != "NPU"
        )

    @property
    def label(self) -> str:
        """'f32', 'bf16 inference, u8 KV cache, int8 activations (groups of 32)', 'f16 on the NPU'…"""
        if self.where == "NPU":
            return "f16 on the NPU"
        if self.exact:
            text = f"f32; {self.projections}" if self.projections else "f32"
        else:
            parts = [f"{self.inference} inference"]
            if self.kv_cache != "host":
                parts.append(f"{self.kv_cache} KV cache")
            if self.activations_int8_group:
                parts.append(f"int8 activations (groups of {self.activations_int8_group})")
            text = ", ".join(parts)
            if self.kernels:
                text += f" (FullyConnected {self.kernels})"
        return f"{text}, {self.where}" if self.where else text


NPU_HARDWARE = Precision("f16", "f16", 0, "NPU")


def _read(source, name: str, *args) -> str:
    try:
        return str(source.get_property(*args, name))
    except (RuntimeError, TypeError):
        return "?"


def ran_kernels(*compiled) -> set[tuple[str, str]]:
    """(layer type, primitive type) of every node the compiled models ran (a runner's own compile and its one-token
    steps' compile), from their runtime models. Read after an inference: a node that has not run reads 'undef…' and is
    left out; devices without the CPU's exec graph have nothing to read."""
    found = set()
    for one in compiled:
        try:
            ops = one.get_runtime_model().get_ordered_ops()
        except (AttributeError, RuntimeError):
            continue
        for node in ops:
            info = node.get_rt_info()
            try:
                layer, primitive = str(info["layerType"].astype(str)), str(info["primitiveType"].astype(str))
            except (KeyError, RuntimeError, AttributeError):
                continue
            if not primitive.startswith("undef"):
                found.add((layer, primitive))
    return found


def fully_connected_kernels(*compiled) -> tuple[str, ...]:
    """The primitive types the compiled models' FullyConnected layers ran (ran_kernels)."""
    return tuple(sorted(primitive for layer, primitive in ran_kernels(*compiled) if layer == "FullyConnected" and primitive))


def as_ran(precision: Precision, kernels: Sequence[str]) -> Precision:
    """The precision with the FullyConnected kernels that ran named. Whether activations were quantised is
    read_cpu_precision's answer (a probe): kernel names do not tell — the plugin's int8 path for f32 activations
    runs inside a kernel named brgemm_avx512_f32. Unread: unchanged."""
    if not kernels or precision.exact:
        return precision
    return replace(precision, kernels=", ".join(kernels))


_INT_WEIGHTS = ("u8", "i8", "u4", "i4")


def has_int_weights(model) -> bool:
    """Whether the model stores weights as integers the plugin decompresses (an int8 or int4 export)."""
    return any(op.get_type_name() == "Constant" and short_type(op.get_output_element_type(0)) in _INT_WEIGHTS
               for op in model.get_ops())


def _quantisation_group(properties: dict[str, object]) -> str | None:
    """The activation group size the properties ask the plugin to quantise in, None where they ask for none."""
    group = str(properties.get("DYNAMIC_QUANTIZATION_GROUP_SIZE", "0")).strip()
    return None if group in ("", "0") else group


def dynamic_quantization_runs(core, properties: dict[str, object]) -> bool:
    """Whether the CPU plugin, compiled with these properties on this CPU, quantises f32 activations to int8 in
    front of u8 weights. Asked of the plugin, not of a table: it does so only for f32 activations (not under bf16
    inference), on a CPU with VNNI, for group sizes it accepts (OpenVINO 2026.4), and names no kernel for it.

    The probe is one u8-weight projection whose answer tells the two apart: 2x with x = [1000, -1000, 1, 1, …]
    against weights [0, 0, 1, 1, …] is 2,044 in f32 or bf16 (sums of twos, exact in both), but an 8-bit
    quantisation of the first group, symmetric or not, has a step of ~16 and moves each of its twos by up to half.
    """
    import numpy as np
    import openvino as ov
    from openvino import opset13 as ops

    if _quantisation_group(properties) is None:
        return False
    width, rows = 1024, 16
    weights = np.ones((rows, width), np.uint8)
    weights[:, :2] = 0
    decompressed = ops.multiply(
        ops.subtract(ops.convert(ops.constant(weights), np.float32), ops.convert(ops.constant(np.zeros((rows, 1), np.uint8)), np.float32)),
        ops.constant(np.ones((rows, 1), np.float32)))
    x = ops.parameter([1, width], np.float32)
    # As in a model, the projection reads another node's output (under bf16 inference that output is bf16, and the
    # plugin quantises only f32 activations), not the parameter itself.
    doubled = ops.multiply(x, ops.constant(np.full((1, width), 2.0, np.float32)))
    model = ov.Model([ops.matmul(doubled, decompressed, False, True)], [x])
    settings = {k: v for k, v in properties.items() if k in ("INFERENCE_PRECISION_HINT", "DYNAMIC_QUANTIZATION_GROUP_SIZE")}
    try:
        compiled = core.compile_model(model, "CPU", {**settings, "INFERENCE_NUM_THREADS": 1})
    except RuntimeError:
        return False
    probe = np.ones((1, width), np.float32)
    probe[0, :2] = (1000.0, -1000.0)
    answer = float(np.asarray(compiled(probe)[0])[0, 0])
    return abs(answer - 2 * (width - 2)) > 16


# The plugin's answer per (inference precision, group size): the CPU and OpenVINO do not change within a process,
# so a --fast runner, its fast-reasoning twin and the tuning's candidates ask once each.
_PROBED: dict[tuple[str, str], bool] = {}


def int8_activations_run(core, model, properties: dict[str, object]) -> bool:
    """Whether a CPU compile of `model` with these properties quantises its activations to int8: a group size asked
    for, integer weights to quantise in front of, and the plugin's own answer (dynamic_quantization_runs)."""
    group = _quantisation_group(properties)
    if group is None or not has_int_weights(model):
        return False
    key = (str(properties.get("INFERENCE_PRECISION_HINT", "")), group)
    if key not in _PROBED:
        _PROBED[key] = dynamic_quantization_runs(core, properties)
    return _PROBED[key]


def read_cpu_precision(compiled, kv_cache: str | None = None, *, int8_activations: bool = True) -> Precision:
    """What a CPU-compiled model runs, from its own properties. kv_cache overrides where the host keeps it;
    int8_activations False: the requested dynamic quantisation does not run (int8_activations_run said so)."""
    group = _read(compiled, "DYNAMIC_QUANTIZATION_GROUP_SIZE")
    return Precision(
        inference=short_type(_read(compiled, "INFERENCE_PRECISION_HINT")),
        kv_cache=kv_cache or short_type(_read(compiled, "KV_CACHE_PRECISION")),
        activations_int8_group=int(group) if group.isdigit() and int8_activations else 0,
    )


def npu_precision(core, host: dict[str, object], emulated: bool) -> Precision:
    """An NPU compile: the hardware's f16, or under emulation what NPUW's CPU partitions really run — read back
    from a one-MatMul probe compiled with the CPU properties the plan set on the Core (`host`; the Core's own
    property echoes a request the CPU may not honour)."""
    if not emulated:
        return NPU_HARDWARE
    return Precision(inference=_probe_cpu_inference(core, host), kv_cache="host", where="NPU emulated on CPU")


def _probe_cpu_inference(core, properties: dict[str, object]) -> str:
    import numpy as np
    import openvino as ov
    from openvino import opset13 as ops

    x = ops.parameter([1, 8], np.float32)
    model = ov.Model([ops.matmul(x, ops.constant(np.ones((8, 8), np.float32)), False, False)], [x])
    try:
        return short_type(core.compile_model(model, "CPU", properties).get_property("INFERENCE_PRECISION_HINT"))
    except RuntimeError:
        return short_type(properties["INFERENCE_PRECISION_HINT"])


def gpu_precision(compiled) -> Precision:
    return Precision(
        inference=short_type(_read(compiled, "INFERENCE_PRECISION_HINT")),
        kv_cache=short_type(_read(compiled, "KV_CACHE_PRECISION")),
    )
