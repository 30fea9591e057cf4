"""The seeing demo's accuracy at capture budgets: rendered scenes shrunk as a budget shrinks a 1280×720 grab.

    python tools/demo_vl_budgets.py --scales full=1,half=0.69,quarter=0.5 --out /tmp/demo.json [--quick]

A budget below the whole grab scales the screenshot down by a linear factor (sqrt of the pixel ratio, after the
preprocessor's rounding to 32-pixel sides); whatever the player asks about on that screen shrinks by the same
factor. So each held-out scene (tools/demo_vl_tasks.py: the 96×96 layouts and the held-out styles) is rendered,
resized by each budget's factor (bicubic) and decided through the real engine (engine.decide), as `decider ask
--image` would. The demo model's own preprocessor then applies its budget (16,384 pixels) and floor (4,096):
larger styled scenes are capped by it whatever the budget, small ones scaled up to its floor.

Run by `python -m bench vision-budgets` as a subprocess (the benchmarks never import tools/); prints one line per
budget and writes the metrics (tools/demo_tasks.py's accuracy and ECE, the largest wrong bar) as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import demo_tasks  # noqa: E402
import demo_vl_tasks as tasks  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LAYOUT_SEED, STYLE_SEED = 39_0401, 39_0402  # not the seeds training or tests/test_demo_vl_model.py draw with
LAYOUTS = {"colour": 40, "star": 30, "door": 40, "colour_none": 10, "star_none": 10, "door_none": 10}
STYLES = {"colour": 24, "star": 24, "door": 24, "colour_none": 8, "star_none": 8, "door_none": 8}


def shrunk(pixels: np.ndarray, factor: float) -> np.ndarray:
    """The picture scaled by `factor` on each side (bicubic), at least one pixel a side."""
    if factor >= 1.0:
        return pixels
    from PIL import Image

    height, width = pixels.shape[:2]
    size = (max(1, round(width * factor)), max(1, round(height * factor)))
    return np.asarray(Image.fromarray(pixels).resize(size, Image.Resampling.BICUBIC))


def measure(runner, items: list, factor: float) -> dict:
    from decider.engine.decisions.decide import DecisionRequest, decide
    from decider.engine.core.settings import SamplingSettings

    probabilities = []
    for item in items:
        request = DecisionRequest(item.question, item.options, images=(shrunk(item.image(), factor),),
                                  sampling=SamplingSettings(temperature=0.0))
        probabilities.append([option.probability for option in decide(runner, request).options])
    m = demo_tasks.metrics(items, probabilities)
    wrong = [max(p) for it, p in zip(items, probabilities) if not it.ambiguous and demo_tasks.argmax(p) != it.answer]
    return {"n": m["n"], "accuracy": m["accuracy"], "ece": m["ece"], "by_kind": m["by_kind"],
            "largest_wrong_bar": max(wrong, default=0.0)}


def main(argv: list[str] | None = None) -> int:
    from decider.engine.runners.runner import ModelRunner

    parser = argparse.ArgumentParser(prog="tools/demo_vl_budgets.py")
    parser.add_argument("--scales", required=True, help="name=factor,… (1 for the whole grab)")
    parser.add_argument("--model", default=str(ROOT / "resources" / "demo-vl-model"))
    parser.add_argument("--quick", action="store_true", help="a tenth of the scenes")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    scales = {name: float(value) for name, value in (pair.split("=") for pair in args.scales.split(","))}
    shrink = 10 if args.quick else 1
    sets = {"layouts": tasks.heldout_items(LAYOUT_SEED, {k: max(1, v // shrink) for k, v in LAYOUTS.items()}),
            "styles": tasks.heldout_style_items(STYLE_SEED, {k: max(1, v // shrink) for k, v in STYLES.items()})}
    runner = ModelRunner(args.model)
    started = time.perf_counter()
    out: dict = {"model": Path(args.model).name, "scene_side": tasks.SIZE, "model_budget": runner.vision.processor.max_pixels,
                 "items": {name: len(items) for name, items in sets.items()}, "budgets": {}}
    for name, factor in scales.items():
        row = {"factor": factor, **{set_name: measure(runner, items, factor) for set_name, items in sets.items()}}
        out["budgets"][name] = row
        print(f"{name:>8} ×{factor:.3f}: " + ", ".join(f"{s} {row[s]['accuracy']:.3f} (largest wrong bar "
                                                         f"{row[s]['largest_wrong_bar']:.3f})" for s in sets), flush=True)
    out["seconds"] = time.perf_counter() - started
    Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
