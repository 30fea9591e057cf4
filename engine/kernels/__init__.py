"""Kernels of our own, for work the OpenVINO plugin runs far from what the machine can do.

One today: the exact int8 projection (`int8_projection`). A decode step reads every weight once; the plugin widens
each int8 weight to f32 before multiplying, and one core cannot widen bytes as fast as it can read them (#35). The
kernel instead splits the f32 activations into four signed 8-bit pieces and takes integer dot products with the
weights (VNNI `vpdpbusd`, or AVX2's `vpmaddubsw` + `vpmaddwd` on 7-bit pieces: exact in int32), so the weights
stream at the memory's pace. It is JIT-compiled with
llvmlite from LLVM IR (`kernel_ir`, `kernel_jit`; nothing to compile at install time) and enters the graph as an
OpenVINO custom operation (`projection_op`) on the few-token path only; prefill keeps the plugin's kernels.
"""
