"""The machine's physical limits, measured: f32 matmul throughput and memory copy bandwidth.

    python -m bench.w_limits --out result.json

- numpy float32 matmul 2048³ (the installed BLAS, all cores): best of N, GFLOP/s.
- OpenVINO f32 MatMul shaped like a Qwen3.5 MLP projection for a 1,024-token prompt
  ([1024, 1024] × [1024, 3584] and [1024, 2048] × [2048, 6144]), compiled with Decider's exact CPU
  properties: best of N, GFLOP/s — the peak a prefill could reach on this machine.
- memory bandwidth: numpy copy of a 1 GiB float32 array (read + write counted), an OpenVINO elementwise
  op over the same (all cores), and read-only sums (numpy, one thread; OpenVINO ReduceSum, all cores) —
  a decode step only reads its weights. The largest is the bandwidth the decode fraction is taken of.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from .common import write_json


def best(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def numpy_matmul(n: int, repeats: int) -> float:
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
    return 2 * n**3 / best(lambda: a @ b, repeats) / 1e9


def openvino_matmul(m: int, k: int, n: int, repeats: int, precision: str = "f32") -> float:
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([m, k], ov.Type.f32, name="x")
    w = ops.constant(np.random.default_rng(2).standard_normal((k, n), dtype=np.float32))
    model = ov.Model([ops.matmul(x, w, False, False)], [x])
    props = {"INFERENCE_PRECISION_HINT": precision, "PERFORMANCE_HINT": "LATENCY"}
    request = ov.Core().compile_model(model, "CPU", props).create_infer_request()
    data = np.random.default_rng(3).standard_normal((m, k), dtype=np.float32)
    return 2 * m * k * n / best(lambda: request.infer({0: data}), repeats) / 1e9


def numpy_copy_bandwidth(gib: float, repeats: int) -> float:
    count = int(gib * 2**30 / 4)
    src = np.ones(count, dtype=np.float32)
    dst = np.empty_like(src)
    return 2 * src.nbytes / best(lambda: np.copyto(dst, src), repeats) / 1e9


def openvino_stream_bandwidth(gib: float, repeats: int) -> float:
    """y = x * 2 over a large tensor on all cores (read + write)."""
    import openvino as ov
    import openvino.opset13 as ops

    count = int(gib * 2**30 / 4)
    x = ops.parameter([count], ov.Type.f32, name="x")
    model = ov.Model([ops.multiply(x, ops.constant(np.float32(2.0)))], [x])
    request = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"}).create_infer_request()
    data = np.ones(count, dtype=np.float32)
    tensor = ov.Tensor(data, shared_memory=True)
    request.set_input_tensor(tensor)
    return 2 * data.nbytes / best(request.infer, repeats) / 1e9


def numpy_read_bandwidth(gib: float, repeats: int) -> float:
    data = np.ones(int(gib * 2**30 / 4), dtype=np.float32)
    return data.nbytes / best(lambda: np.add.reduce(data), repeats) / 1e9


def openvino_read_bandwidth(gib: float, repeats: int) -> float:
    """ReduceSum over a large tensor on all cores: reads only, like a decode step reading its weights."""
    import openvino as ov
    import openvino.opset13 as ops

    count = int(gib * 2**30 / 4)
    rows = count // 4096
    x = ops.parameter([rows, 4096], ov.Type.f32, name="x")
    model = ov.Model([ops.reduce_sum(x, ops.constant(np.array([1], dtype=np.int64)), False)], [x])
    request = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"}).create_infer_request()
    data = np.ones((rows, 4096), dtype=np.float32)
    request.set_input_tensor(ov.Tensor(data, shared_memory=True))
    return data.nbytes / best(request.infer, repeats) / 1e9


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_limits")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    r = args.repeats
    out = {
        "numpy_matmul_gflops": numpy_matmul(2048, r),
        "openvino_matmul_gflops": {
            "1024x1024x3584": openvino_matmul(1024, 1024, 3584, r),
            "1024x2048x6144": openvino_matmul(1024, 2048, 6144, r),
        },
        "openvino_matmul_bf16_gflops": openvino_matmul(1024, 2048, 6144, r, "bf16"),
        "numpy_copy_gbps": numpy_copy_bandwidth(1.0, r),
        "openvino_stream_gbps": openvino_stream_bandwidth(1.0, r),
        "numpy_read_gbps": numpy_read_bandwidth(1.0, r),
        "openvino_read_gbps": openvino_read_bandwidth(1.0, r),
    }
    out["matmul_peak_gflops"] = max(out["numpy_matmul_gflops"], *out["openvino_matmul_gflops"].values())
    out["bandwidth_gbps"] = max(out["numpy_copy_gbps"], out["openvino_stream_gbps"], out["numpy_read_gbps"],
                                out["openvino_read_gbps"])
    for key, value in out.items():
        print(f"  {key}: {value}", file=sys.stderr, flush=True)
    write_json(Path(args.out), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
