"""llama.cpp (llama-cpp-python) on a GGUF written from the same checkpoint vs Decider.

    python -m bench.w_llama --gguf FILE --prompts prompts.json [--decider-model IR_DIR] --out result.json
    python -m bench.w_llama --why --gguf FILE --prompts prompts.json --out result.json

A llama.cpp decision: the same prompt ids, `Llama.eval` (memory cleared first), the last position's
logits, float64 log-softmax over the real vocabulary, the option letters. With --decider-model the
Decider decision on the IR of the same weights runs interleaved in this process. --decode adds a
128-token greedy generation (tokens/s). --why records exactly why llama.cpp cannot run here.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from .common import THINK_TOKENS, peak_rss_mib, read_json, write_json
from .versus import letter_decision, versus


def load(gguf: str, n_ctx: int = 4096):
    from llama_cpp import Llama

    threads = os.cpu_count() or 1
    return Llama(model_path=gguf, n_ctx=n_ctx, n_batch=2048, n_ubatch=512, n_threads=threads,
                 n_threads_batch=threads, logits_all=False, verbose=False)


def last_logits(llm) -> np.ndarray:
    import llama_cpp

    pointer = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(pointer, shape=(llm.n_vocab(),)).copy()


def llama_decision(llm, ids: list[int], letters: list[int], vocab: int) -> dict:
    llm.reset()
    llm.eval(ids)
    return letter_decision(last_logits(llm), vocab, letters)


def llama_decode(llm, ids: list[int], tokens: int) -> dict:
    llm.reset()
    llm.eval(ids)
    token = int(np.argmax(last_logits(llm)))
    started = time.perf_counter()
    for _ in range(tokens - 1):
        llm.eval([token])
        token = int(np.argmax(last_logits(llm)))
    elapsed = time.perf_counter() - started
    return {"tokens_per_s": (tokens - 1) / elapsed, "step_ms": elapsed / (tokens - 1) * 1e3}


def why(args) -> dict:
    """Every step that could stop llama.cpp here, tried in order; the first failure is the answer."""
    out: dict = {"runs": False}
    try:
        import llama_cpp

        out["llama_cpp_python"] = llama_cpp.__version__
    except Exception as exc:
        out["reason"] = f"llama-cpp-python is not installed in {sys.executable}: {type(exc).__name__}: {exc}"
        return out
    path = Path(args.gguf)
    failed = path.with_suffix(".failed")
    if failed.exists():
        out["reason"] = "convert_hf_to_gguf.py failed: " + failed.read_text().strip()
        return out
    if not path.exists():
        out["reason"] = f"no GGUF at {path} (run `python -m bench build`)"
        return out
    try:
        llm = load(str(path))
        prompts = read_json(args.prompts)
        llama_decision(llm, prompts["decisions"]["64"]["ids"], prompts["letters"], prompts["vocab"])
        out["runs"] = True
    except Exception as exc:
        out["reason"] = f"llama.cpp could not load/run the GGUF: {type(exc).__name__}: {exc}"
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_llama")
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--decider-model")
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--lengths", default="256")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--decode", action="store_true")
    parser.add_argument("--why", action="store_true")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.why:
        write_json(Path(args.out), why(args))
        return 0
    prompts = read_json(args.prompts)
    letters = prompts["letters"]
    started = time.perf_counter()
    llm = load(args.gguf)
    import llama_cpp

    out = {"load_s": time.perf_counter() - started, "llama_cpp_python": llama_cpp.__version__, "n_vocab": llm.n_vocab(),
           "lengths": {}, "gguf_bytes": Path(args.gguf).stat().st_size}
    vocab = prompts["vocab"]
    runner = None
    if args.decider_model:
        from decider.engine.compile.devices import DeviceOptions
        from decider.engine.runners.runner import ModelRunner

        runner = ModelRunner(args.decider_model, DeviceOptions(device=args.device, exact=True))
    for length in [int(x) for x in args.lengths.split(",") if x]:
        out["lengths"][str(length)] = versus("llama", lambda ids: llama_decision(llm, ids, letters, vocab), runner,
                                             prompts, length, args.repeats, warmup=args.repeats > 1)
    if args.decode:
        out["decode"] = llama_decode(llm, prompts["think"]["ids"], THINK_TOKENS)
    out["peak_rss_mib"] = peak_rss_mib()
    write_json(Path(args.out), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
