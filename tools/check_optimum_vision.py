#!/usr/bin/env python
"""optimum-intel's own Qwen3.5 VL pipeline against the float64 image references (printed, not stored).

    python tools/check_optimum_vision.py     # fixture environment (torch, transformers 5.2, optimum-intel 2.2.0)

For each case of tests/fixtures/reference/qwen35-vl-images.json: optimum-intel's OVModelForVisualCausalLM
forward (prefill) on the same pixel values (transformers' slow Qwen2-VL processor), then generate() for 6
greedy steps, compared with the reference. Measured with optimum-intel 2.2.0 / openvino 2026.4.1: single
images of every shape match (prefill ≤ 3e-5, generate ≤ 8e-6, same tokens); with two images in one prompt the
prefill matches but generate() picks other tokens after the first one (its decode positions).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.modules["torchvision"] = None  # see make_fixtures.py

import numpy as np  # noqa: E402
import torch  # noqa: E402
from optimum.intel.openvino import OVModelForVisualCausalLM  # noqa: E402
from PIL import Image  # noqa: E402
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def main() -> int:
    ref = json.loads((FIXTURES / "reference" / "qwen35-vl-images.json").read_text())
    folder = FIXTURES / "models" / "qwen35-vl"
    model = OVModelForVisualCausalLM.from_pretrained(
        folder, ov_config={"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"}, compile=True)
    config = json.loads((folder / "preprocessor_config.json").read_text())
    processor = Qwen2VLImageProcessor(**{k: v for k, v in config.items() if k != "image_processor_type"})
    size = ref["tokenizer_size"]
    for case in (c for c in ref["cases"] if "text" in c):
        images = [np.asarray(Image.open(FIXTURES / ref["images"][n]["file"]).convert("RGB")) for n in case["images"]]
        pixels = processor(images=images, return_tensors="pt")
        ids = torch.tensor([case["prompt_ids"]])
        inputs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), pixel_values=pixels["pixel_values"],
                      image_grid_thw=pixels["image_grid_thw"])
        model.rope_deltas = None
        with torch.no_grad():
            logits = model(**inputs).logits[0, -1, :size].double()
        prefill = np.abs(torch.log_softmax(logits, -1).numpy() - np.array(case["logprobs"])).max()
        out = model.generate(**inputs, max_new_tokens=len(case["steps"]), do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
        tokens = out.sequences[0, ids.shape[1]:].tolist()
        want = [s["token"] for s in case["steps"]]
        first_wrong = next((k for k, (a, b) in enumerate(zip(tokens, want)) if a != b), None)
        steps = max(abs(torch.log_softmax(l[0, :size].double(), -1)[s["token"]].item() - s["logprob"])
                    for l, s in zip(out.logits, case["steps"]))
        print(f"{case['name']:12s} {'+'.join(case['images']):28s} prefill max|Δ| {prefill:.1e}   generate(): "
              f"{'same tokens' if first_wrong is None else f'token {first_wrong} differs'}, max|Δ| of the reference "
              f"tokens' logprobs {steps:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
