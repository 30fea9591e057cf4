"""The VNNI kernels JIT-compiled for this CPU with llvmlite (a wheel: nothing to compile at install time), or the
reason they cannot run here.

`compiled()` compiles once per process (~0.2 s) and returns the entry points as ctypes functions; ctypes releases the
GIL for the call, so two threads can run two row ranges at once. `unavailable()` says why not, in one line: llvmlite
missing, or a CPU without VNNI (AVX2-only CPUs without AVX-VNNI have no integer dot-product instruction; the plugin's
path stays there). DECIDER_EXACT_KERNEL=plugin turns the kernel off on any CPU (it is off unless asked for:
engine/kernels/adoption.py).
"""

from __future__ import annotations

import ctypes
import functools
import os
from dataclasses import dataclass
from typing import Any

from . import vnni_ir

MAX_TOKENS = vnni_ir.MAX_TOKENS
_P, _I = ctypes.c_void_p, ctypes.c_int64
_SPLIT = ctypes.CFUNCTYPE(None, _P, _I, _I, _I, _P, _P)
_ROWS = ctypes.CFUNCTYPE(None, _P, _I, _I, _P, _P, _P, _P, _P, _I, _I, _I, _I, _I)


@dataclass(frozen=True)
class Kernels:
    width: int  # vector bits: 512 (AVX-512 VNNI) or 256 (AVX-VNNI)
    split: Any  # ctypes entry points (ctypes releases the GIL for their calls)
    rows: dict[int, Any]  # tokens (1 … MAX_TOKENS) → rows kernel
    engine: object  # the JIT engine owning the code: kept alive with the entry points

    @property
    def pad(self) -> int:
        return vnni_ir.vector_bytes(self.width)


def _llvm():
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm


def _width(features: dict[str, bool]) -> int | None:
    if features.get("avx512vnni") and features.get("avx512bw"):
        return 512
    if features.get("avxvnni") or (features.get("avx512vnni") and features.get("avx512vl")):
        return 256
    return None


@functools.cache
def unavailable() -> str | None:
    """Why the kernel cannot run in this process, or None when it can."""
    if os.environ.get("DECIDER_EXACT_KERNEL", "").lower() == "plugin":
        return "turned off by DECIDER_EXACT_KERNEL=plugin"
    try:
        llvm = _llvm()
    except ImportError:
        return "llvmlite is not installed"
    if _width(dict(llvm.get_host_cpu_features())) is None:
        return "this CPU has no VNNI (AVX-512 VNNI or AVX-VNNI): int8 dot products would need widening"
    return None


@functools.cache
def compiled() -> Kernels:
    """The kernels for this CPU; call only where `unavailable()` is None."""
    llvm = _llvm()
    features = llvm.get_host_cpu_features()
    width = _width(dict(features))
    if width is None:
        raise RuntimeError(unavailable() or "no VNNI")
    module = llvm.parse_assembly(vnni_ir.module_ir(width))
    module.verify()
    machine = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=features.flatten(), opt=3)
    options = llvm.create_pipeline_tuning_options(speed_level=3)
    builder = llvm.create_pass_builder(machine, options)
    builder.getModulePassManager().run(module, builder)
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    rows = {t: _ROWS(engine.get_function_address(f"rows_t{t}")) for t in range(1, MAX_TOKENS + 1)}
    return Kernels(width, _SPLIT(engine.get_function_address("split")), rows, engine)
