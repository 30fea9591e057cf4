"""Our exact int8 projection as a native OpenVINO operation, shipped built (native/): no Python on the step's path.

The JIT kernel (kernel_jit) streams the weights faster than the plugin's widening MatMul, but as a Python operation
each call costs the step more than the kernel saves on an AVX2 CPU (#35: a routed 0.8B step 128.6 ms against the
plugin's 97). The same arithmetic in C++ (native/int8_projection.cpp: AVX2, two 16-bit pieces, int32 dot products;
its outputs equal the JIT kernel's bit for bit) is an OpenVINO extension library the plugin calls directly.

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
import platform
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset13 as ops

from ..graphs.int8_weights import Int8Weights, int8_weights
from .int8_matvec import arena, kernel_layout, padded_width

FOLDER = Path(__file__).with_name("native")
LIBRARY = FOLDER / "libdecider_kernels.so"
STAMP = FOLDER / "libdecider_kernels.json"
SOURCES = ("int8_projection.cpp", "CMakeLists.txt")
OP_TYPE = "DeciderInt8Projection"
PAD = 16  # the inner dimension padded to, and the packed rows interleaved by (16 weights widened to a vector)
MAX_COLUMNS = 16384  # int32 lanes exact up to here (kernel_ir.AVX2.max_columns)
DESCRIPTION = "one-token int8 projections: native AVX2 kernel, 26-bit activations, int32 dot products"


def source_hash() -> str:
    """The sha256 of the sources the library is built from, in SOURCES order."""
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((FOLDER / name).read_bytes())
    return digest.hexdigest()


def platform_tag() -> str:
    return f"{platform.system().lower()}-{platform.machine().lower()}"


def _cpu_has_avx2() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(line.startswith("flags") and " avx2" in line for line in flags.splitlines())


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
    if not _cpu_has_avx2():
        return "this CPU has no AVX2"
    try:
        _factory()
    except RuntimeError as exc:
        return f"the native kernel did not load: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc}"
    return None


@functools.cache
def _factory():
    from openvino.utils.node_factory import NodeFactory

    factory = NodeFactory()
    factory.add_extension(str(LIBRARY))
    return factory


def int8_matmuls(model: ov.Model) -> list[tuple[ov.Node, Int8Weights]]:
    """The MatMuls of `model` the native operation can take: int8 weights decompressed per row, inner dimension ≤
    MAX_COLUMNS (wider rows would overflow its int32 lanes)."""
    return [(node, w) for node in model.get_ordered_ops() if node.get_type_name() == "MatMul"
            for w in [int8_weights(node)] if w is not None and w.weights.shape[1] <= MAX_COLUMNS]


def replace_int8_matmuls(model: ov.Model) -> tuple[int, np.ndarray | None]:
    """Every MatMul of `int8_matmuls(model)` replaced by the native operation, in place; call only where
    `unavailable()` is None. Returns how many, and the one buffer holding their weights (the graph's constants share
    it: keep it alive with the compiled model)."""
    found = int8_matmuls(model)
    if not found:
        return 0, None
    sizes = [w.weights.shape[0] * padded_width(w.weights.shape[1], PAD) for _, w in found]
    storage = arena(sizes)
    factory = _factory()
    for (matmul, w), place in zip(found, storage):
        packed, zero_point, _ = kernel_layout(w.weights, w.zero_point, PAD, storage=place)
        scale = np.ascontiguousarray(w.scale, dtype=np.float64)
        inputs = [matmul.input_value(0), ops.constant(packed, shared_memory=True).output(0),
                  ops.constant(scale.view(np.uint8)).output(0), ops.constant(zero_point.view(np.uint8)).output(0)]
        native = factory.create(OP_TYPE, inputs, {})
        native.set_friendly_name(matmul.get_friendly_name() + "/native_int8")
        names = matmul.output(0).get_names()  # a model output's name (the logits) stays with its value
        matmul.output(0).get_tensor().set_names(set())
        native.output(0).get_tensor().set_names(names)
        for reader in list(matmul.output(0).get_target_inputs()):
            reader.replace_source_output(native.output(0))
    model.validate_nodes_and_infer_types()
    return len(found), storage[0].base if storage[0].base is not None else storage[0]
