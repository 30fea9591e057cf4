"""Does a second compile of the same ov.Model share the first one's weights? (raw OpenVINO, one process)

    python -m bench.twin_sharing MODE [CANDIDATE]      # MODE: one | same | reread

one: an exact compile, a 64-token prefill and 4 steps; same: then a second compile (CANDIDATE's properties)
of the same ov.Model, run the same way; reread: the second compile from a second read_model of the files.
Prints RSS after each. BENCHMARKS.md §13 quotes it for the twin of fast reasoning.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import openvino as ov

MODEL = os.path.expanduser("~/.cache/decider-bench/models/qwen35-0.8b/ov-int8/openvino_model.xml")
EXACT = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0",
         "PERFORMANCE_HINT": "LATENCY"}
CANDIDATES = {
    "dq32_kvu8": {**EXACT, "DYNAMIC_QUANTIZATION_GROUP_SIZE": "32", "KV_CACHE_PRECISION": "u8"},
    "kvu8": {**EXACT, "KV_CACHE_PRECISION": "u8"},
    "dq32": {**EXACT, "DYNAMIC_QUANTIZATION_GROUP_SIZE": "32"},
    "f16": {**EXACT, "INFERENCE_PRECISION_HINT": "f16", "KV_CACHE_PRECISION": "f16"},
}


def rss_mib() -> float:
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20


def run(compiled: ov.CompiledModel) -> ov.InferRequest:
    request = compiled.create_infer_request()
    ids = np.arange(1000, 1064)
    request.infer({"input_ids": ids[None], "attention_mask": np.ones((1, 64), np.int64),
                   "position_ids": np.arange(64)[None], "beam_idx": np.zeros(1, np.int32)})
    for i in range(4):
        past = 64 + i
        request.infer({"input_ids": np.array([[5]]), "attention_mask": np.ones((1, past + 1), np.int64),
                       "position_ids": np.array([[past]]), "beam_idx": np.zeros(1, np.int32)})
    return request


def main() -> None:
    mode = sys.argv[1]
    candidate = CANDIDATES[sys.argv[2] if len(sys.argv) > 2 else "dq32_kvu8"]
    core = ov.Core()
    model = core.read_model(MODEL)
    first = run(core.compile_model(model, "CPU", EXACT))
    print(mode, "after the exact compile", round(rss_mib()), "MiB", flush=True)
    if mode in ("same", "reread"):
        second_model = model if mode == "same" else core.read_model(MODEL)
        second = run(core.compile_model(second_model, "CPU", candidate))
        print(mode, "after the second compile", round(rss_mib()), "MiB")
        del second
    del first


if __name__ == "__main__":
    main()
