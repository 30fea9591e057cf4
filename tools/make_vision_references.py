#!/usr/bin/env python
"""Float64 references for images on the VL fixture: tests/fixtures/reference/qwen35-vl-images.json.

Needs the fixture environment (torch, transformers 5.2.x; see tests/fixtures/README.md) and the committed
checkpoint and export of qwen35-vl (with its preprocessor_config.json, written by tools/make_fixtures.py).

    python tools/make_vision_references.py            # images (if missing), references, resize comparison

1. Test images -> tests/fixtures/images/*.png: seeded synthetic scenes (a coloured background, rectangles,
   a circle, per-pixel noise) at several sizes and aspect ratios: square, 96×64, 64×128, a 16:9 screenshot
   that the pixel budget scales down, and a small one it scales up.
2. For each case, the prompt is Qwen3.5's chat template (transformers' apply_chat_template with
   {"type": "image"} parts) with each image's single <|image_pad|> expanded to its token count, exactly as
   the Qwen3-VL processor does. Pixels: the PNG decoded by Pillow, then transformers' Qwen2VLImageProcessor
   (the slow, Pillow-resizing one) configured from the export's preprocessor_config.json.
   transformers Qwen3_5ForConditionalGeneration, float64, eager attention: the next-token log-probs over
   the real vocabulary after the prompt, then greedy steps (KV cache, rope deltas) with their top-5.
3. Resize difference, measured separately: the same images resized by torch's antialiased bicubic
   interpolation (what the torchvision-based fast image processor does) instead of Pillow, then the same
   float64 forward: the max |Δ logprob| that the choice of resize alone causes.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
IMAGES = FIXTURES / "images"
NAME = "qwen35-vl"
CHECKPOINT = FIXTURES / "checkpoints" / NAME
MODEL = FIXTURES / "models" / NAME
OUT = FIXTURES / "reference" / f"{NAME}-images.json"
SEED = 20260517
GREEDY_STEPS = 6
TOP_K = 5

# name -> (width, height)
IMAGE_SIZES = {
    "square_64x64": (64, 64),
    "wide_96x64": (96, 64),
    "tall_64x128": (64, 128),
    "screen_640x360": (640, 360),  # 16:9, over the budget: scaled down to 320×192
    "small_40x24": (40, 24),  # under the budget: scaled up
}

QUESTION = "Which door is open?\nA) Left\nB) Right\nC) Neither\nAnswer with one letter."
CASES = [
    {"name": "square", "images": ["square_64x64"], "text": QUESTION},
    {"name": "wide", "images": ["wide_96x64"], "text": QUESTION},
    {"name": "tall", "images": ["tall_64x128"], "text": QUESTION},
    {"name": "screen", "images": ["screen_640x360"], "text": "The game screen. Attack, defend or retreat?"},
    {"name": "small", "images": ["small_40x24"], "text": QUESTION},
    {"name": "two_images", "images": ["wide_96x64", "tall_64x128"], "text": "Which picture shows the castle?"},
]
# A decision as `decider ask --image` builds it (the engine's decision prompt: image, context, question, options).
DECISION = {"name": "decision_screen", "images": ["screen_640x360"], "question": "The dragon sleeps. What now?",
            "options": ["Sneak past", "Fight", "Go back"], "context": "Rules: the hero has one potion."}


def make_image(name: str, width: int, height: int) -> np.ndarray:
    rng = np.random.default_rng(SEED + sum(map(ord, name)))
    image = np.empty((height, width, 3), dtype=np.float64)
    image[:] = rng.uniform(0, 255, 3)
    for _ in range(4):
        x0, y0 = rng.integers(0, width), rng.integers(0, height)
        x1, y1 = x0 + rng.integers(4, max(5, width // 2)), y0 + rng.integers(4, max(5, height // 2))
        image[y0:y1, x0:x1] = rng.uniform(0, 255, 3)
    yy, xx = np.mgrid[0:height, 0:width]
    cy, cx, r = rng.uniform(0, height), rng.uniform(0, width), rng.uniform(4, max(5, min(width, height) / 3))
    image[(yy - cy) ** 2 + (xx - cx) ** 2 < r * r] = rng.uniform(0, 255, 3)
    image += rng.normal(0, 12, image.shape)
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def write_images() -> None:
    from PIL import Image

    IMAGES.mkdir(parents=True, exist_ok=True)
    for name, (width, height) in IMAGE_SIZES.items():
        path = IMAGES / f"{name}.png"
        if not path.exists():
            Image.fromarray(make_image(name, width, height), mode="RGB").save(path, optimize=True)


def load_image(name: str) -> np.ndarray:
    from PIL import Image

    with Image.open(IMAGES / f"{name}.png") as image:
        return np.asarray(image.convert("RGB"))


def torch_resize(pixels: np.ndarray, height: int, width: int) -> np.ndarray:
    """Antialiased bicubic on uint8 pixels, rounded back to uint8 (the torchvision/fast-processor path)."""
    import torch

    x = torch.from_numpy(pixels).permute(2, 0, 1)[None].float()
    y = torch.nn.functional.interpolate(x, size=(height, width), mode="bicubic", antialias=True, align_corners=False)
    return y[0].permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8).numpy()


def main() -> int:
    sys.modules["torchvision"] = None  # see make_fixtures.py: the PyPI wheel breaks beside CPU torch
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer, Qwen3_5ForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor, smart_resize

    torch.use_deterministic_algorithms(True)
    write_images()
    processor_config = json.loads((MODEL / "preprocessor_config.json").read_text())
    processor = Qwen2VLImageProcessor(**{k: v for k, v in processor_config.items() if k != "image_processor_type"})
    hf_tokenizer = AutoTokenizer.from_pretrained(str(CHECKPOINT))
    tokenizer = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    size = tokenizer.get_vocab_size()
    model = Qwen3_5ForConditionalGeneration.from_pretrained(str(CHECKPOINT), dtype=torch.float64, attn_implementation="eager").eval()
    config = model.config
    merge = processor_config["merge_size"]

    def pixel_inputs(names, resizer=None):
        arrays = [load_image(n) for n in names]
        if resizer is not None:
            resized = []
            for a in arrays:
                h, w = smart_resize(a.shape[0], a.shape[1], processor_config["patch_size"] * merge,
                                    processor.min_pixels, processor.max_pixels)
                resized.append(resizer(a, h, w))
            arrays = resized
        out = processor(images=arrays, return_tensors="np")
        return out["pixel_values"], out["image_grid_thw"]

    def prompt_ids(text, grids):
        messages = [{"role": "user", "content": [*({"type": "image"} for _ in grids), {"type": "text", "text": text}]}]
        rendered = hf_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=False)
        ids = tokenizer.encode(rendered, add_special_tokens=False).ids
        out, k = [], 0
        for token in ids:
            if token == config.image_token_id:
                out += [token] * int(np.prod(grids[k]) // merge**2)
                k += 1
            else:
                out.append(token)
        assert k == len(grids)
        return out

    def log_softmax(row):
        x = row[:size].double().numpy()
        m = x.max()
        return x - (m + np.log(np.exp(x - m).sum()))

    def run(ids, pixel_values, grids, steps):
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids]), pixel_values=torch.tensor(pixel_values, dtype=torch.float64),
                        image_grid_thw=torch.tensor(grids), use_cache=True)
            first = log_softmax(out.logits[0, -1])
            lp, past, record, seq = first, out.past_key_values, [], list(ids)
            for k in range(steps):
                order = np.lexsort((np.arange(lp.size), -lp))
                token = int(order[0])
                record.append({"token": token, "logprob": float(lp[token]), "top": [[int(i), float(lp[i])] for i in order[:TOP_K]]})
                if k + 1 == steps:
                    break
                seq.append(token)
                # The model keeps its rope deltas from the prefill: text positions continue after the image.
                # (No attention_mask: with one, transformers 5.2 derives positions for the whole sequence.)
                out = model(input_ids=torch.tensor([[token]]), past_key_values=past, use_cache=True)
                lp, past = log_softmax(out.logits[0, -1]), out.past_key_values
        return first, record

    images, cases, resize = {}, [], {}
    for name in IMAGE_SIZES:
        pv, grid = pixel_inputs([name])
        h, w = smart_resize(*load_image(name).shape[:2], processor_config["patch_size"] * merge, processor.min_pixels, processor.max_pixels)
        images[name] = {
            "file": f"images/{name}.png",
            "width": IMAGE_SIZES[name][0],
            "height": IMAGE_SIZES[name][1],
            "resized": [h, w],
            "grid_thw": [int(v) for v in grid[0]],
            "pixel_values_sha256": hashlib.sha256(np.ascontiguousarray(pv, dtype=np.float32).tobytes()).hexdigest(),
            "png_sha256": hashlib.sha256((IMAGES / f"{name}.png").read_bytes()).hexdigest(),
        }
    for case in CASES:
        pv, grids = pixel_inputs(case["images"])
        ids = prompt_ids(case["text"], [list(g) for g in grids])
        first, steps = run(ids, pv, grids, GREEDY_STEPS)
        cases.append({**case, "prompt_ids": ids, "logprobs": [float(v) for v in first], "steps": steps})
        print(f"{case['name']}: {len(ids)} tokens, grids {grids.tolist()}, top-1 p {np.exp(first.max()):.3f}", flush=True)
        if any(images[n]["resized"] != [images[n]["height"], images[n]["width"]] for n in case["images"]):
            pv_t, grids_t = pixel_inputs(case["images"], resizer=torch_resize)
            other, _ = run(ids, pv_t, grids_t, 1)
            resize[case["name"]] = {"max_abs_logprob": float(np.abs(other - first).max()),
                                    "max_abs_pixel_value": float(np.abs(pv_t - pv).max())}
            print(f"  Pillow vs torch antialiased bicubic resize: {resize[case['name']]}", flush=True)
    # The decision prompt comes from the engine's own builder (the prompt is the input here, not what is tested).
    sys.path.insert(0, str(ROOT))
    from decider.engine.decisions.prompt import build_decision_prompt
    from decider.engine.model.tokenizer import ChatTokenizer
    from decider.engine.model.vision_tokens import image_tokens, token_ids

    pv, grids = pixel_inputs(DECISION["images"])
    blocks = [image_tokens(n, int(g[1]) // merge, int(g[2]) // merge) for n, g in zip(DECISION["images"], grids)]
    prompt = build_decision_prompt(ChatTokenizer(MODEL / "tokenizer.json"), DECISION["question"], DECISION["options"],
                                   context=DECISION["context"], images=blocks)
    ids = token_ids(prompt.ids, config.image_token_id).tolist()
    first, steps = run(ids, pv, grids, 1)
    cases.append({**DECISION, "prompt_ids": ids, "logprobs": [float(v) for v in first], "steps": steps})
    print(f"{DECISION['name']}: {len(ids)} tokens", flush=True)
    import importlib.metadata as md

    doc = {
        "format": 1,
        "model": NAME,
        "model_dir": str(MODEL.relative_to(ROOT)),
        "dtype": "float64",
        "attn_implementation": "eager",
        "tokenizer_size": size,
        "image_token_id": config.image_token_id,
        "preprocessor_config": processor_config,
        "image_processor": "transformers Qwen2VLImageProcessor (Pillow resize)",
        "greedy_steps": GREEDY_STEPS,
        "top_k": TOP_K,
        "versions": {d: md.version(d) for d in ("transformers", "torch", "numpy", "pillow")},
        "checkpoint_sha256": hashlib.sha256((CHECKPOINT / "model.safetensors").read_bytes()).hexdigest(),
        "images": images,
        "cases": cases,
        "resize_comparison": {
            "what": "max |Δ| when the images are resized by torch antialiased bicubic (the fast processor's path) "
                    "instead of Pillow bicubic; same model, same prompt",
            "cases": resize,
        },
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"-> {OUT.relative_to(ROOT)} ({OUT.stat().st_size / 1e3:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
