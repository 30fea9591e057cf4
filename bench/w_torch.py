"""transformers (torch CPU, fp32) on the same weights vs Decider: one-token decision and agreement.

    python -m bench.w_torch --hf DIR [--decider-model IR_DIR] --prompts prompts.json --out result.json

The checkpoint's weights are float16-representable, so the fp16 IR (computed in f32 by Decider's exact
mode) and this fp32 torch model hold identical weights: differences are arithmetic only.
A transformers decision here: the same prompt ids, one forward with `logits_to_keep=1`, float64
log-softmax over the real vocabulary, the option letters' logprobs, greedy choice among them.
With --decider-model both engines run in this process, interleaved; without, torch alone (peak RSS).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from .common import block_broken_torchvision, peak_rss_mib, read_json, write_json
from .versus import letter_decision, versus


def load_torch(hf: str):
    block_broken_torchvision()
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(os.cpu_count() or 1)
    return AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32).eval()


def torch_decision(model, vocab: int, ids: list[int], letters: list[int]) -> dict:
    import torch

    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids]), logits_to_keep=1, use_cache=False).logits[0, -1]
    return letter_decision(logits.double().numpy(), vocab, letters)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_torch")
    parser.add_argument("--hf", required=True)
    parser.add_argument("--decider-model")
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--lengths", default="256")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    prompts = read_json(args.prompts)
    letters = prompts["letters"]
    started = time.perf_counter()
    model = load_torch(args.hf)
    vocab = prompts["vocab"]
    out = {"torch_load_s": time.perf_counter() - started, "lengths": {}}
    runner = None
    if args.decider_model:
        from decider.engine.compile.devices import DeviceOptions
        from decider.engine.runners.runner import ModelRunner

        runner = ModelRunner(args.decider_model, DeviceOptions(device=args.device, exact=True))
    import torch

    out["torch_threads"] = torch.get_num_threads()
    out["torch_version"] = torch.__version__
    for length in [int(x) for x in args.lengths.split(",") if x]:
        out["lengths"][str(length)] = versus("torch", lambda ids: torch_decision(model, vocab, ids, letters), runner,
                                             prompts, length, args.repeats, warmup=True)
    out["peak_rss_mib"] = peak_rss_mib()
    write_json(Path(args.out), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
