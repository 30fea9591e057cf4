"""Kernels of our own, for work the OpenVINO plugin runs far from what the machine can do.

The exact int8 projection, two ways. A decode step reads every weight once; the plugin widens each int8 weight to f32
before multiplying, and one core cannot widen bytes as fast as it can read them (#35). Ours instead split the f32
activations into signed integer pieces and take integer dot products with the weights (VNNI `vpdpbusd` on four 8-bit
pieces, or AVX2's `vpmaddwd` on two 16-bit ones: exact in int32), combined in double: closer to float64 than an f32
dot product.
  - native (`native_op`, `native_steps`; source in native/): the AVX-512 VNNI and AVX2 arithmetic as an OpenVINO
    extension library, committed built, in the one-token step compile where it measured faster than the plugin's
    steps (0.8B and up; DECIDER_EXACT_KERNEL=native forces it, =plugin turns it off; DECIDER_NATIVE_ISA=avx2 picks
    the AVX2 arithmetic on a VNNI CPU); with it, each DeltaNet layer's one-token state update as one native
    operation (`native_deltanet`).
  - JIT (`kernel_ir`, `kernel_jit`, `projection_op`, `adoption`): llvmlite-compiled, every instruction set, as a
    Python custom operation routed by token count; off unless DECIDER_EXACT_KERNEL=auto or =kernel (a Python call
    per projection group costs more than it saves wherever it was measured).
Prefill keeps the plugin's kernels either way.
"""
