"""The int8 kernels JIT-compiled for this CPU with llvmlite (a wheel: nothing to compile at install time), or the
reason they cannot run here.

`compiled()` compiles once per process (~0.2 s) for the best instruction set the CPU has (kernel_ir.ISAS: VNNI, else
AVX2's 16-bit multiply-adds) and returns the entry points as ctypes functions; ctypes releases the GIL for
the call, so two threads can run two row ranges at once. `unavailable()` says why not, in one line: llvmlite missing,
or a CPU without AVX2. DECIDER_EXACT_KERNEL=plugin turns the kernel off on any CPU (it is off unless asked for:
engine/kernels/adoption.py).
"""

from __future__ import annotations

import ctypes
import functools
import os
from dataclasses import dataclass
from typing import Any

from . import kernel_ir
from .kernel_ir import Isa

MAX_TOKENS = kernel_ir.MAX_TOKENS
_P, _I = ctypes.c_void_p, ctypes.c_int64
_SPLIT = ctypes.CFUNCTYPE(None, _P, _I, _I, _I, _P, _P)
_ROWS = ctypes.CFUNCTYPE(None, _P, _I, _I, _P, _P, _P, _P, _P, _I, _I, _I, _I, _I)


@dataclass(frozen=True)
class Kernels:
    isa: Isa
    split: Any  # ctypes entry points (ctypes releases the GIL for their calls)
    rows: dict[int, Any]  # tokens (1 … MAX_TOKENS) → rows kernel
    engine: object  # the JIT engine owning the code: kept alive with the entry points

    @property
    def pad(self) -> int:
        """The inner dimension is padded to a multiple of this (zero weights and zero pieces add nothing), and packed
        rows interleave in vectors of this many weights."""
        return self.isa.step


def _llvm():
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm


def _isa(features: dict[str, bool]) -> Isa | None:
    """The first of kernel_ir.ISAS (the fastest first) this CPU runs."""
    return next((isa for isa in kernel_ir.ISAS if _has(isa, features)), None)


def _has(isa: Isa, features: dict[str, bool]) -> bool:
    return any(all(features.get(name) for name in names) for names in isa.needs)


def runs_here(isa: Isa) -> bool:
    """Whether this CPU has the instructions of `isa` (every VNNI CPU has AVX2's too)."""
    return _has(isa, dict(_llvm().get_host_cpu_features()))


@functools.cache
def unavailable() -> str | None:
    """Why the kernel cannot run in this process, or None when it can."""
    if os.environ.get("DECIDER_EXACT_KERNEL", "").lower() == "plugin":
        return "turned off by DECIDER_EXACT_KERNEL=plugin"
    try:
        llvm = _llvm()
    except ImportError:
        return "llvmlite is not installed"
    if _isa(dict(llvm.get_host_cpu_features())) is None:
        return "this CPU has neither VNNI nor AVX2: int8 dot products would need widening"
    return None


def compiled(isa: Isa | None = None) -> Kernels:
    """The kernels for `isa` (default: the best this CPU has); call only where `unavailable()` is None and the CPU
    runs `isa`."""
    isa = isa or _isa(dict(_llvm().get_host_cpu_features()))
    if isa is None:
        raise RuntimeError(unavailable() or "neither VNNI nor AVX2")
    return _compiled(isa)


@functools.cache
def _compiled(isa: Isa) -> Kernels:
    """Once per instruction set and process, however it was asked for (by default or by name)."""
    llvm = _llvm()
    features = llvm.get_host_cpu_features()
    module = llvm.parse_assembly(kernel_ir.module_ir(isa))
    module.verify()
    machine = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=features.flatten(), opt=3)
    options = llvm.create_pipeline_tuning_options(speed_level=3)
    builder = llvm.create_pass_builder(machine, options)
    builder.getModulePassManager().run(module, builder)
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    rows = {t: _ROWS(engine.get_function_address(f"rows_t{t}")) for t in range(1, MAX_TOKENS + 1)}
    return Kernels(isa, _SPLIT(engine.get_function_address("split")), rows, engine)
