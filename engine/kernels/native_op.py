"""Our exact int8 projection as a native OpenVINO operation, shipped built (native/): no Python on the step's path.

The JIT kernel (kernel_jit) streams the weights faster than the plugin's widening MatMul, but as a Python operation
each call costs the step more than the kernel saves on an AVX2 CPU (#35: a routed 0.8B step 128.6 ms against the
plugin's 97). The same arithmetic in C++ (native/int8_projection.cpp, for two of the JIT kernel's instruction sets:
VNNI's four 8-bit pieces against the bytes as they are, AVX2's two 16-bit pieces against the bytes widened;
int32 dot products, outputs equal to the JIT kernel's bit for bit) is an OpenVINO extension library the plugin calls
directly. `isa()` picks the instruction set (the best this CPU runs, or DECIDER_NATIVE_ISA's), and the operation
carries it as an attribute, so the label names what ran.

The library is built by `python tools/build_native_kernels.py` against the openvino wheel and committed with a stamp
(the OpenVINO version it links, the platform, its source's hash): nothing is compiled at install time. Where it cannot
run — another platform or OpenVINO version, a CPU without AVX2 — `unavailable()` says
why in one line and the plugin's path runs as before. `replace_int8_matmuls(model)` puts the operation in place of
every MatMul whose weights are an int8 constant decompressed per row (optimum-intel's int8 export); the runner does
that on its one-token step compile only, and keeps it where it measured faster (engine/kernels/native_steps.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset13 as ops

from ..graphs.int8_weights import Int8Weights, int8_weights
from .int8_matvec import arena, kernel_layout, padded_width
from .kernel_ir import AVX2, VNNI_256, Isa

FOLDER = Path(__file__).with_name("native")
LIBRARY = FOLDER / "libdecider_kernels.so"
STAMP = FOLDER / "libdecider_kernels.json"
SOURCES = ("int8_projection.cpp", "deltanet_step.hpp", "conv_step.hpp", "CMakeLists.txt")
OP_TYPE = "DeciderInt8Projection"


@dataclass(frozen=True)
class NativeIsa:
    name: str  # as the label gives it
    arithmetic: Isa  # the JIT kernel's instruction set whose arithmetic it runs (its step: the inner dimension's
    # padding and the packed rows' interleave)
    flags: tuple[str, ...]  # /proc/cpuinfo's flags it needs


# The operation's `isa` attribute → what it runs, the fastest first. AVX-512 VNNI's vpdpbusd on 256-bit vectors: the
# 512-bit form streamed slower where measured (native/int8_projection.cpp). A CPU with AVX-VNNI but no AVX-512 (16
# vector registers) runs the AVX2 kernel.
ISAS: dict[str, NativeIsa] = {
    "avx512_vnni": NativeIsa("AVX-512 VNNI", VNNI_256, ("avx512_vnni", "avx512vl", "avx512bw")),
    "avx2": NativeIsa("AVX2", AVX2, ("avx2",)),
}
ISA_VARIABLE = "DECIDER_NATIVE_ISA"  # one of ISAS: that instruction set, where the CPU runs it (tests, benches)


def description(isa: str) -> str:
    """The label's part for the native steps with `isa`."""
    native = ISAS[isa]
    return (f"one-token int8 projections: native {native.name} kernel, {native.arithmetic.bits}-bit activations, "
            "int32 dot products")


def source_hash() -> str:
    """The sha256 of the sources the library is built from, in SOURCES order."""
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((FOLDER / name).read_bytes())
    return digest.hexdigest()


def platform_tag() -> str:
    return f"{platform.system().lower()}-{platform.machine().lower()}"


@functools.cache
def _cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return frozenset(line.partition(":")[2].split())


def runs_here(isa: str) -> bool:
    return set(ISAS[isa].flags) <= _cpu_flags()


def isa() -> str:
    """The instruction set the operation runs with: DECIDER_NATIVE_ISA's where set (ValueError if unknown or this CPU
    lacks it), else the fastest this CPU runs (check `unavailable()` first)."""
    asked = os.environ.get(ISA_VARIABLE, "").strip().lower()
    if asked:
        if asked not in ISAS:
            raise ValueError(f"{ISA_VARIABLE}={asked}: not one of {', '.join(ISAS)}")
        if not runs_here(asked):
            raise ValueError(f"{ISA_VARIABLE}={asked}: this CPU does not run it")
        return asked
    return next((name for name in ISAS if runs_here(name)), "avx2")


@functools.cache
def unavailable() -> str | None:
    """Why the native operation cannot run in this process, or None when it can (DECIDER_EXACT_KERNEL=plugin is
    native_steps's to read: it may change between runners)."""
    try:
        stamp = json.loads(STAMP.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "the native kernel is not built (python tools/build_native_kernels.py)"
    if not LIBRARY.is_file():
        return "the native kernel is not built (python tools/build_native_kernels.py)"
    if stamp.get("platform") != platform_tag():
        return f"the native kernel is built for {stamp.get('platform')}, this is {platform_tag()}"
    if stamp.get("openvino") != ov.get_version():
        return f"the native kernel is built for OpenVINO {stamp.get('openvino')}, this is {ov.get_version()}"
    if stamp.get("source_sha256") != source_hash():
        return "the native kernel is older than its source (python tools/build_native_kernels.py)"
    if not runs_here("avx2"):
        return "this CPU has no AVX2"
    try:
        _factory()
    except RuntimeError as exc:
        return f"the native kernel did not load: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc}"
    return None


def create(op_type: str, inputs: list[ov.Output], attributes: dict) -> ov.Node:
    """A node of one of the library's operations (this one's, native_deltanet's); call only where `unavailable()` is
    None."""
    return _factory().create(op_type, inputs, attributes)


@functools.cache
def _factory():
    from openvino.utils.node_factory import NodeFactory

    factory = NodeFactory()
    factory.add_extension(str(LIBRARY))
    return factory


def int8_matmuls(model: ov.Model, isa: str = "avx2") -> list[tuple[ov.Node, Int8Weights]]:
    """The MatMuls of `model` the native operation can take: int8 weights decompressed per row, inner dimension
    within the instruction set's max_columns (wider rows would overflow its int32 lanes)."""
    limit = ISAS[isa].arithmetic.max_columns
    return [(node, w) for node in model.get_ordered_ops() if node.get_type_name() == "MatMul"
            for w in [int8_weights(node)] if w is not None and w.weights.shape[1] <= limit]


def projection(x: ov.Output, parts: Sequence[Int8Weights], isa: str, storage: np.ndarray | None = None) -> ov.Node:
    """The native operation computing x @ dequantised(part.weights).T for each part with `isa` — one output per part,
    the activations split once (every part has x's columns and one dtype) — its weights in the kernel's layout, one
    matrix (placed in `storage` where given: the constant shares that memory)."""
    weights = parts[0].weights if len(parts) == 1 else np.concatenate([p.weights for p in parts])
    zero_point = np.concatenate([np.broadcast_to(np.asarray(p.zero_point, np.float64).reshape(-1), (p.weights.shape[0],))
                                 for p in parts])
    scale = np.concatenate([np.broadcast_to(np.asarray(p.scale, np.float64).reshape(-1), (p.weights.shape[0],))
                            for p in parts])
    packed, zp, _ = kernel_layout(weights, zero_point, ISAS[isa].arithmetic.step, storage=storage)
    inputs = [x, ops.constant(packed, shared_memory=storage is not None).output(0),
              ops.constant(scale.view(np.uint8)).output(0), ops.constant(zp.view(np.uint8)).output(0)]
    rows = [p.weights.shape[0] for p in parts] if len(parts) > 1 else []
    return create(OP_TYPE, inputs, {"isa": isa, "rows": rows})


def replace_int8_matmuls(model: ov.Model, isa: str) -> tuple[int, np.ndarray | None]:
    """Every MatMul of `int8_matmuls(model, isa)` replaced by the native operation with `isa`, in place — one
    operation for the MatMuls of the same activations and weights' dtype (a layer's q, k, v…; gate and up: fewer calls,
    longer streams, the activations split once); call only where `unavailable()` is None. Returns how many MatMuls,
    and the one buffer holding their weights (the graph's constants share it: keep it alive with the compiled model)."""
    found = int8_matmuls(model, isa)
    if not found:
        return 0, None
    groups: dict[tuple, list[tuple[ov.Node, Int8Weights]]] = {}
    for matmul, w in found:
        source = matmul.input_value(0)
        groups.setdefault((source.get_node().get_name(), source.get_index(), w.weights.dtype.str), []).append((matmul, w))
    pad = ISAS[isa].arithmetic.step
    storage = arena([sum(w.weights.shape[0] for _, w in group) * padded_width(group[0][1].weights.shape[1], pad)
                     for group in groups.values()])
    for group, place in zip(groups.values(), storage):
        native = projection(group[0][0].input_value(0), [w for _, w in group], isa, storage=place)
        native.set_friendly_name(group[0][0].get_friendly_name() + "/native_int8")
        for (matmul, _), output in zip(group, native.outputs()):
            names = matmul.output(0).get_names()  # a model output's name (the logits) stays with its value
            matmul.output(0).get_tensor().set_names(set())
            output.get_tensor().set_names(names)
            for reader in list(matmul.output(0).get_target_inputs()):
                reader.replace_source_output(output)
    model.validate_nodes_and_infer_types()
    return len(found), storage[0].base if storage[0].base is not None else storage[0]
