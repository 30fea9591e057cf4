"""The capture budget (issue 39 item 3): capture-to-bars of a 1280×720 grab at several pixel budgets.

    python -m bench.w_capture_budget --model resources/demo-vl-model --repeats 3
    python -m bench.w_capture_budget --text-model ~/.cache/decider-bench/models/qwen35-0.8b/ov-int8 --repeats 2

--model (a vision-language export): cold decisions (app/capture_timing.py) on the game-like screen at each budget,
interleaved repeat by repeat in a rotating order after one warm-up decision; each budget's time is also given as a ratio to the full budget's in the same
repeat. A model whose own preprocessor budget is below a budget caps it (the shipped seeing demo: 16,384 pixels).

--text-model (a text export at the real geometry, when no vision export of it is built): the language model's
share only — the same decision prompt with as many text tokens in place of the image as the budget gives the
image (the language model's cost per position does not depend on what embeds it); the vision tower's share is
not in this number.

Writes ~/.cache/decider-bench/results/capture-budget.json (each part's rows with the run's date and load) and
prints one line per budget; `python -m bench report` renders it (bench/report_capture.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from .common import RESULTS, log, stamp, write_json

# real Qwen3.5's preprocessor: 256² to 4096² pixels; a 1280×720 grab is 921,600, so "full" leaves it whole
BUDGETS = (1280 * 720, 640 * 640, 512 * 512, 384 * 384, 256 * 256)
TOKENS_PER_PIXEL = 1 / 1024  # one merged image token per 32×32 pixels


def _image_tokens_at(budget: int) -> int:
    from decider.app.capture_timing import HEIGHT, WIDTH
    from decider.engine.vision.preprocess import ProcessorConfig, target_size

    height, width = target_size(HEIGHT, WIDTH, ProcessorConfig(min_pixels=65536, max_pixels=budget))
    return (height // 32) * (width // 32)


def _rotated(repeat: int) -> tuple[int, ...]:
    """The budgets in another order each repeat, so no budget always runs first (or after the same one)."""
    shift = repeat % len(BUDGETS)
    return BUDGETS[shift:] + BUDGETS[:shift]


def vision_rows(model: str, repeats: int) -> list[dict]:
    from decider.app.capture_timing import time_capture
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.runners.runner import ModelRunner

    runner = ModelRunner(model, DeviceOptions(device="CPU"))
    time_capture(runner, BUDGETS[-1])  # warm-up (the first inference after a compile is slower), not counted
    times: dict[int, list] = {budget: [] for budget in BUDGETS}
    for repeat in range(repeats):
        for budget in _rotated(repeat):
            times[budget].append(time_capture(runner, budget))
        log(f"capture budget: repeat {repeat + 1} of {repeats} done")
    rows = []
    for budget in BUDGETS:
        runs = times[budget]
        ratios = [run.seconds / full.seconds for run, full in zip(runs, times[BUDGETS[0]])]
        rows.append({"budget": budget, "image_tokens": runs[0].image_tokens, "size": runs[0].size,
                     "capture_to_bars_s": statistics.median(r.seconds for r in runs),
                     "preprocess_s": statistics.median(r.preprocess_s for r in runs),
                     "encode_s": statistics.median(r.encode_s for r in runs),
                     "prefill_s": statistics.median(r.prefill_s for r in runs),
                     "vs_full": statistics.median(ratios), "model_budget": runs[0].model_budget})
    return rows


def text_rows(model: str, repeats: int) -> list[dict]:
    """The language model's prefill of the decision prompt with each budget's image tokens as text tokens."""
    from decider.app.capture_timing import OPTIONS, QUESTION
    from decider.engine.decisions.decide import decide
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.runners.runner import ModelRunner
    from decider.engine.core.settings import SamplingSettings
    from decider.engine.decisions.types import DecisionRequest

    runner = ModelRunner(model, DeviceOptions(device="CPU"))
    word = " field"  # one token in Qwen's vocabulary: the rows' prompt_tokens show each budget's length
    times: dict[int, list[float]] = {budget: [] for budget in BUDGETS}
    prompts: dict[int, int] = {}
    for repeat in range(repeats):
        for budget in _rotated(repeat):
            context = word * _image_tokens_at(budget)  # one token per image token it stands in for
            request = DecisionRequest(question=QUESTION, options=OPTIONS, context=context,
                                      sampling=SamplingSettings(temperature=0.0))
            runner.reset()
            runner.clear_snapshots()
            started = time.perf_counter()
            result = decide(runner, request)
            times[budget].append(time.perf_counter() - started)
            prompts[budget] = result.usage["prompt_tokens"]
    full = times[BUDGETS[0]]
    return [{"budget": b, "image_tokens": _image_tokens_at(b), "prompt_tokens": prompts[b],
             "language_model_s": statistics.median(times[b]),
             "vs_full": statistics.median(t / f for t, f in zip(times[b], full))} for b in BUDGETS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_capture_budget")
    parser.add_argument("--model", help="a vision-language export: capture-to-bars per budget")
    parser.add_argument("--text-model", help="a text export: the language model's share per budget")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if not args.model and not args.text_model:
        parser.error("give --model or --text-model")
    path = RESULTS / "capture-budget.json"
    # one run may measure one part: the other part's earlier rows are kept
    earlier = json.loads(path.read_text()) if path.is_file() else {}
    result = {part: earlier[part] for part in ("vision", "text") if part in earlier}
    result["budgets"] = list(BUDGETS)
    about = stamp(repeats=args.repeats)
    if args.model:
        rows = vision_rows(args.model, args.repeats)
        result["vision"] = {"model": os.path.basename(os.path.normpath(args.model)), "rows": rows, **about,
                            "load_after": os.getloadavg()[0]}
        for row in result["vision"]["rows"]:
            print(f"{row['budget']:>9,} px  {row['image_tokens']:>4} tokens  capture-to-bars {row['capture_to_bars_s']:.3f} s "
                  f"(encode {row['encode_s']:.3f}, prefill {row['prefill_s']:.3f})  {row['vs_full']:.2f}× full")
    if args.text_model:
        rows = text_rows(args.text_model, args.repeats)
        result["text"] = {"model": "/".join(os.path.normpath(args.text_model).split(os.sep)[-2:]), "rows": rows, **about,
                          "load_after": os.getloadavg()[0]}
        for row in result["text"]["rows"]:
            print(f"{row['budget']:>9,} px  {row['image_tokens']:>4} image tokens  prompt {row['prompt_tokens']}  "
                  f"language model {row['language_model_s']:.3f} s  {row['vs_full']:.2f}× full")
    write_json(path, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
