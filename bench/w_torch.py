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

import numpy as np

from .common import peak_rss_mib, read_json, summary, write_json


def load_torch(hf: str):
    sys.modules.setdefault("torchvision", None)  # PyPI torchvision does not load beside CPU torch
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(os.cpu_count() or 1)
    return AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32).eval()


def torch_decision(model, vocab: int, ids: list[int], letters: list[int]) -> dict:
    import torch

    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids]), logits_to_keep=1, use_cache=False).logits[0, -1]
    x = logits[:vocab].double().numpy()
    logprobs = x - (x.max() + np.log(np.exp(x - x.max()).sum()))
    option = logprobs[letters]
    probabilities = np.exp(option - option.max())
    probabilities /= probabilities.sum()
    return {"choice": int(np.argmax(option)), "probabilities": probabilities.tolist(), "logprobs": option.tolist()}


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
        from decider.engine.decide import DecisionRequest, decide
        from decider.engine.devices import DeviceOptions
        from decider.engine.runner import ModelRunner
        from decider.engine.settings import SamplingSettings

        runner = ModelRunner(args.decider_model, DeviceOptions(device=args.device, exact=True))
    import torch

    out["torch_threads"] = torch.get_num_threads()
    out["torch_version"] = torch.__version__
    for length in [int(x) for x in args.lengths.split(",") if x]:
        item = prompts["decisions"][str(length)]
        ids = item["ids"]
        times = {"torch": [], "decider": []}
        results = {}
        engines = ["torch"] + (["decider"] if runner else [])
        for rep in range(args.repeats + 1):
            for name in (engines if rep % 2 == 0 else engines[::-1]):
                begun = time.perf_counter()
                if name == "torch":
                    results["torch"] = torch_decision(model, vocab, ids, letters)
                else:
                    runner.reset()
                    runner.clear_snapshots()
                    r = decide(runner, DecisionRequest(item["question"], tuple(prompts["options"]),
                                                       sampling=SamplingSettings(temperature=0.0, seed=0)))
                    results["decider"] = {"choice": r.choice_index, "probabilities": [o.probability for o in r.options],
                                          "logprobs": [o.logprob for o in r.options]}
                if rep:
                    times[name].append(time.perf_counter() - begun)
            if rep:
                print(f"  {length}: " + ", ".join(f"{n} {times[n][-1]:.3f} s" for n in engines), file=sys.stderr, flush=True)
        entry = {"torch_s": summary(times["torch"]), "torch": results["torch"]}
        if runner:
            d, t = results["decider"], results["torch"]
            entry.update({
                "decider_s": summary(times["decider"]), "decider": d,
                "ratio": summary([a / b for a, b in zip(times["decider"], times["torch"])]),
                "same_choice": d["choice"] == t["choice"],
                "max_probability_diff": float(np.max(np.abs(np.array(d["probabilities"]) - t["probabilities"]))),
                "max_logprob_diff": float(np.max(np.abs(np.array(d["logprobs"]) - t["logprobs"]))),
            })
        out["lengths"][str(length)] = entry
    out["peak_rss_mib"] = peak_rss_mib()
    write_json(Path(args.out), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
