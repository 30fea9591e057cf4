"""Vision at the real Qwen3.5-0.8B geometry: a 1280×720 screenshot from pixels to bars, Decider vs its peers.

    python -m bench.build --vl                    # the VL model (once; cached)
    python -m bench.w_vision --repeats 3          # -> ~/.cache/decider-bench/results/vision.json
    python -m bench.report_vision                 # the "Vision" section of BENCHMARKS.md

One process holds every engine and runs them interleaved (Decider, transformers, Decider with the encoder
through the NPU plugin when DECIDER_NPUW_DEVICES makes it runnable, OpenVINO GenAI), so each repeat's
ratios compare runs made under the same machine load. Every repeat is cold: the runner's state, its
snapshots and the encoded-image cache are cleared first.

Rows (each repeat is one cold decision; its encode part is timed inside it):
  encode     preprocessing (digest, resize, normalise, patchify) and the encoder's parts: patch embedding IR,
             position embeddings (table IR + host interpolation), the merger IR (12 blocks + 2×2 merger);
             transformers: its image processor, then the vision tower's forward (timed by hooks).
  decision   capture-to-bars: the pixel array of a grabbed screen in, the option bars out (image + a short
             three-option decision; the screen grab itself is not included). transformers: processor,
             one forward over the same prompt ids with `logits_to_keep=1`, float64 log-softmax.
  genai      OpenVINO GenAI's VLMPipeline on the same export, one generated token, or the exact error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from .common import RESULTS, block_broken_torchvision, log, peak_rss_mib, summary, write_json

QUESTION = "The screenshot shows the battle. What should we do?"
OPTIONS = ("Attack", "Defend", "Retreat")
WIDTH, HEIGHT = 1280, 720


def screenshot(width: int = WIDTH, height: int = HEIGHT, seed: int = 0) -> np.ndarray:
    """A deterministic game-like screen: sky and ground gradients, a few sprites, HUD bars, sensor noise (the one
    `decider doctor` times capture-to-bars on)."""
    from decider.app.capture_timing import game_screen

    return game_screen(width, height, seed)


class Decider:
    def __init__(self, model: str, vision_device: str):
        from decider.engine.compile.devices import DeviceOptions
        from decider.engine.runners.runner import ModelRunner
        from decider.engine.core.settings import SamplingSettings

        started = time.perf_counter()
        self.runner = ModelRunner(model, DeviceOptions(device="CPU", vision_device=vision_device))
        self.load_s = time.perf_counter() - started
        self.greedy = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0)

    def cold(self) -> None:
        self.runner.reset()
        self.runner.clear_snapshots()
        self.runner.vision.clear()

    def decision(self, pixels: np.ndarray) -> tuple[dict, dict]:
        """One cold capture-to-bars; its encode part comes from the encoder's own clock inside the decision."""
        from decider.engine.decisions.decide import DecisionRequest, decide
        from decider.engine.vision.preprocess import target_size

        self.cold()
        started = time.perf_counter()
        result = decide(self.runner, DecisionRequest(QUESTION, OPTIONS, images=(pixels,), sampling=self.greedy))
        seconds = time.perf_counter() - started
        stats, vision = self.runner.vision.stats, self.runner.vision
        height, width = target_size(pixels.shape[0], pixels.shape[1], vision.processor)
        patch = vision.processor.patch_size
        # preprocess: the pixels' digest (the encoded-image cache's key) and the resize/normalise/patchify.
        encode = {"preprocess_s": stats.last_preprocess_s, **stats.last_split, "encoder_s": stats.last_encode_s,
                  "total_s": stats.last_preprocess_s + stats.last_encode_s, "tokens": result.usage["image_tokens"],
                  "grid": [1, height // patch, width // patch]}
        return encode, {"seconds": seconds, "logprobs": [o.logprob for o in result.options], "usage": result.usage,
                        "timings": result.timings}

    def prompt_ids(self, pixels: np.ndarray, image_token_id: int) -> list[int]:
        """The decision's prompt as token ids (image tokens as the placeholder), for the peers."""
        from decider.engine.decisions.prompt import build_decision_prompt, letter_ids
        from decider.engine.model.vision_tokens import token_ids

        self.letters = letter_ids(self.runner.tokenizer, len(OPTIONS))
        tokens = tuple(self.runner.image_tokens(pixels))
        prompt = build_decision_prompt(self.runner.tokenizer, QUESTION, list(OPTIONS), think=False, images=[tokens])
        return token_ids(prompt.ids, image_token_id).tolist()


class Transformers:
    def __init__(self, hf: str):
        block_broken_torchvision()
        import json

        import torch
        from transformers import Qwen2VLImageProcessor, Qwen3_5ForConditionalGeneration

        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        torch.set_num_threads(os.cpu_count() or 1)
        started = time.perf_counter()
        self.model = Qwen3_5ForConditionalGeneration.from_pretrained(hf, dtype=torch.float32).eval()
        self.load_s = time.perf_counter() - started
        config = json.loads((Path(hf) / "preprocessor_config.json").read_text())
        self.processor = Qwen2VLImageProcessor(**{k: v for k, v in config.items() if k not in ("image_processor_type", "processor_class")})
        self.vocab = None

    def _pixels(self, pixels: np.ndarray):
        import torch

        out = self.processor(images=[pixels], return_tensors="np")
        return torch.from_numpy(out["pixel_values"]).float(), torch.from_numpy(out["image_grid_thw"])

    def decision(self, pixels: np.ndarray, ids: list[int], letters: list[int], vocab: int) -> dict:
        import torch

        clock: dict[str, float] = {}
        visual = self.model.model.visual
        hooks = [visual.register_forward_pre_hook(lambda *_: clock.__setitem__("start", time.perf_counter())),
                 visual.register_forward_hook(lambda *_: clock.__setitem__("end", time.perf_counter()))]
        started = time.perf_counter()
        values, grid = self._pixels(pixels)
        prepared = time.perf_counter()
        with torch.inference_mode():
            # use_cache=True: with use_cache=False transformers 5.2 gives an image prompt other logprobs (0.6 nats
            # off on the VL fixture, against its own cached run and Decider's, which match to 1e-5).
            logits = self.model(input_ids=torch.tensor([ids]), pixel_values=values, image_grid_thw=grid,
                                logits_to_keep=1, use_cache=True).logits[0, -1]
        x = logits[:vocab].double().numpy()
        logprobs = x - (x.max() + np.log(np.exp(x - x.max()).sum()))
        seconds = time.perf_counter() - started
        for hook in hooks:
            hook.remove()
        encoder = clock["end"] - clock["start"]  # the whole vision tower, inside the forward
        encode = {"preprocess_s": prepared - started, "encoder_s": encoder, "total_s": prepared - started + encoder,
                  "tokens": int(grid.prod()) // 4}
        return encode, {"seconds": seconds, "logprobs": logprobs[letters].tolist()}


def genai_attempt(model: str, pixels: np.ndarray, repeats: int) -> dict:
    """OpenVINO GenAI's VLMPipeline on the export: one token per repeat, or the exact error it gives."""
    try:
        import openvino as ov
        import openvino_genai

        version = openvino_genai.__version__
    except Exception as exc:  # noqa: BLE001 - recorded as the row's outcome
        return {"ok": False, "stage": "import", "error": f"{type(exc).__name__}: {exc}"}
    try:
        started = time.perf_counter()
        pipe = openvino_genai.VLMPipeline(model, "CPU")
        load_s = time.perf_counter() - started
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "version": version, "stage": "VLMPipeline(model, 'CPU')", "error": f"{type(exc).__name__}: {exc}".strip()}
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = 1
    prompt = f"{QUESTION}\nA. {OPTIONS[0]}\nB. {OPTIONS[1]}\nC. {OPTIONS[2]}\nAnswer with the letter."
    times = []
    try:
        for _ in range(repeats):
            pipe.finish_chat() if hasattr(pipe, "finish_chat") else None
            started = time.perf_counter()
            pipe.generate(prompt, images=[ov.Tensor(pixels[None])], generation_config=config)
            times.append(time.perf_counter() - started)
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "version": version, "stage": "generate", "load_s": load_s, "error": f"{type(exc).__name__}: {exc}".strip()}
    return {"ok": True, "version": version, "load_s": load_s, "seconds": summary(times)}


def main(argv=None) -> int:
    from .build import VL, VL_FORMAT
    from .common import hf_dir, ir_dir

    parser = argparse.ArgumentParser(prog="python -m bench.w_vision")
    parser.add_argument("--model", default=str(ir_dir(VL, VL_FORMAT)))
    parser.add_argument("--hf", default=str(hf_dir(VL)))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--no-genai", action="store_true")
    parser.add_argument("--out", default=str(RESULTS / "vision.json"))
    args = parser.parse_args(argv)
    pixels = screenshot()
    result: dict = {"image": [WIDTH, HEIGHT], "repeats": args.repeats, "model": args.model,
                    "npuw_devices": os.environ.get("DECIDER_NPUW_DEVICES"), "date": time.strftime("%Y-%m-%d")}

    log("vision: loading Decider (vision encoder on CPU) ...")
    engines = {"decider": Decider(args.model, "CPU")}
    if os.environ.get("DECIDER_NPUW_DEVICES"):
        log("vision: loading Decider with the vision encoder through the NPU plugin ...")
        try:
            engines["decider_npu"] = Decider(args.model, "NPU")
            result["npu_static_patches"] = engines["decider_npu"].runner.vision.static_patches
        except Exception as exc:  # noqa: BLE001 - recorded, the other rows still run
            result["decider_npu_error"] = f"{type(exc).__name__}: {exc}"
    decider = engines["decider"]
    image_token_id = decider.runner.tokenizer.special_id("<|image_pad|>")
    ids = decider.prompt_ids(pixels, image_token_id)
    result["prompt_tokens"] = len(ids)
    if not args.no_torch:
        log("vision: loading transformers (float32) ...")
        engines["torch"] = Transformers(args.hf)
    result["load_s"] = {name: engine.load_s for name, engine in engines.items()}

    runs: dict[str, dict[str, list]] = {name: {"encode": [], "decision": []} for name in engines}
    for repeat in range(args.repeats):
        for name, engine in engines.items():
            log(f"vision: repeat {repeat + 1}/{args.repeats}: {name} ...")
            if name == "torch":
                encode, decision = engine.decision(pixels, ids, decider.letters, decider.runner.vocab_size)
            else:
                encode, decision = engine.decision(pixels)
            runs[name]["encode"].append(encode)
            runs[name]["decision"].append(decision)
            log(f"vision:   encode {encode['total_s']:.2f} s, capture-to-bars {decision['seconds']:.2f} s")
        # Written after every repeat: a run cut short keeps what it measured.
        result["repeats"] = repeat + 1
        result["runs"] = runs
        result["summary"] = summarise(runs)
        result["npu_drift"] = drift(runs, "decider_npu")
        result["torch_drift"] = drift(runs, "torch")
        result["peak_rss_mib"] = peak_rss_mib()
        write_json(Path(args.out), result)
    del engines
    if not args.no_genai:
        log("vision: OpenVINO GenAI VLMPipeline ...")
        try:
            result["genai"] = genai_attempt(args.model, pixels, args.repeats)
        except Exception:  # noqa: BLE001
            result["genai"] = {"ok": False, "stage": "unexpected", "error": traceback.format_exc().strip().splitlines()[-1]}
        log(f"vision: genai: {result['genai']}")
    write_json(Path(args.out), result)
    log(f"vision: -> {args.out}")
    return 0


def summarise(runs: dict) -> dict:
    """Medians per engine and part; paired ratios (same repeat) against Decider on the CPU."""
    out: dict = {}
    base = runs["decider"]
    for name, parts in runs.items():
        row: dict = {}
        for part in ("encode", "decision"):
            keys = [k for k, v in parts[part][0].items() if k.endswith("_s") or k == "seconds"]
            row[part] = {k: summary([r[k] for r in parts[part]])["median"] for k in keys}
        if name != "decider":
            row["ratio_encode"] = summary([r["total_s"] / b["total_s"] for r, b in zip(parts["encode"], base["encode"])])["median"]
            row["ratio_decision"] = summary([r["seconds"] / b["seconds"] for r, b in zip(parts["decision"], base["decision"])])["median"]
        out[name] = row
    return out


def drift(runs: dict, name: str) -> float | None:
    if name not in runs:
        return None
    return max(float(np.max(np.abs(np.array(r["logprobs"]) - np.array(b["logprobs"]))))
               for r, b in zip(runs[name]["decision"], runs["decider"]["decision"]))


if __name__ == "__main__":
    sys.exit(main())
