"""The report section for vision: a 1280×720 screenshot at the real Qwen3.5-0.8B vision geometry, encode cost
split by part and the whole capture-to-bars latency, Decider vs transformers (vs OpenVINO GenAI's
VLMPipeline where it runs). Results: `python -m bench.w_vision` (~/.cache/decider-bench/results/vision.json)."""

from __future__ import annotations

ENGINES = {
    "decider": "Decider, encoder on CPU (default)",
    "decider_npu": "Decider, encoder through the NPU plugin",
    "torch": "transformers fp32",
}


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else (f"{seconds * 1e3:.0f} ms" if seconds < 1 else f"{seconds:.2f} s")


def section(results: dict) -> list[str]:
    r = results.get("vision")
    if not r or "summary" not in r:
        return []
    lines: list[str] = []
    add = lines.append
    summary = r["summary"]
    base = summary["decider"]
    tokens = r["runs"]["decider"]["encode"][0]["tokens"]
    grid = r["runs"]["decider"]["encode"][0]["grid"]
    add("## Vision: a screenshot at the real Qwen3.5-0.8B geometry\n")
    add(f"`python -m bench.build --vl && python -m bench.w_vision --repeats {r['repeats']} && python -m bench report --out "
        "BENCHMARKS.md`. Random weights at the real Qwen3.5-0.8B geometry *including its vision tower* (12 blocks of 768, "
        "12 heads, 48×48 position table, merger to 1024; 0.853 B parameters, 100.6 M of them vision), int8 weights as "
        "the text bench model, exported by optimum-intel 2.2.0 as `image-text-to-text` (the layout real Qwen3.5 "
        "exports have). The real preprocessor budget (256² to 4096² pixels): a 1280×720 screenshot becomes "
        f"{grid[2] * 16}×{grid[1] * 16} pixels, {grid[1] * grid[2]:,} patches, **{tokens} image tokens**; the decision "
        f"prompt around it (three options) is {r['prompt_tokens']} tokens. All engines in one process, interleaved "
        f"repeat by repeat, every repeat cold (state, snapshots and the encoded-image cache cleared); medians of "
        f"{r['repeats']} repeats, ratios are medians of the per-repeat ratios against Decider on the CPU. "
        "Capture-to-bars starts from the grabbed screen's pixels (the grab itself is not included) and ends with "
        "the bars; the encode columns are its parts, timed inside the same run. transformers: its "
        "`Qwen2VLImageProcessor`, then one forward (`use_cache=True`, `logits_to_keep=1`) and a float64 log-softmax; "
        "its vision tower's share is timed by hooks.\n")
    if r.get("note"):
        add(f"{r['note']}\n")
    add("| engine | preprocess | patch embedding | positions | merger (12 blocks) | encode total | vs Decider | "
        "capture-to-bars | vs Decider |")
    add("|---|---|---|---|---|---|---|---|---|")
    for key, label in ENGINES.items():
        row = summary.get(key)
        if row is None:
            continue
        enc, dec = row["encode"], row["decision"]
        ratio_e = f"{row['ratio_encode']:.2f}×" if "ratio_encode" in row else "1"
        ratio_d = f"{row['ratio_decision']:.2f}×" if "ratio_decision" in row else "1"
        add(f"| {label} | {_ms(enc.get('preprocess_s'))} | {_ms(enc.get('patch_embed_s'))} | {_ms(enc.get('positions_s'))} | "
            f"{_ms(enc.get('merger_s'))} | **{_ms(enc['total_s'])}** | {ratio_e} | **{_ms(dec['seconds'])}** | {ratio_d} |")
    add("")
    base_runs = r["runs"]["decider"]["decision"]
    per_repeat = []
    for key, label in ENGINES.items():
        runs = r["runs"].get(key)
        if runs is None:
            continue
        cells = [f"{_ms(d['seconds'])}" + ("" if key == "decider" else f" ({d['seconds'] / b['seconds']:.2f}×)")
                 for d, b in zip(runs["decision"], base_runs)]
        per_repeat.append(f"{label}: {', '.join(cells)}")
    add("Capture-to-bars repeat by repeat (ratio to Decider's run in the same repeat): " + "; ".join(per_repeat) + ".\n")
    decision = r["runs"]["decider"]["decision"][0]
    timings = decision.get("timings", {})
    if timings:
        parts = ", ".join(f"{k.removesuffix('_s')} {_ms(v)}" for k, v in timings.items() if isinstance(v, (int, float)))
        add(f"Inside Decider's capture-to-bars (first repeat): {parts}. The language model's prefill of the "
            f"{r['prompt_tokens']} tokens is the rest of the time beyond the encode.\n")
    if r.get("torch_drift") is not None:
        add(f"Agreement: the option logprobs of Decider (int8 weights, f32 arithmetic) and transformers (the fp32 "
            f"checkpoint) differ by at most {r['torch_drift']:.3f} nats — int8 weight rounding, not the image path "
            "(on the fp32 VL test fixture the two agree to 1e-4, `tests/test_vision.py`).\n")
    if r.get("npu_drift") is not None:
        add(f"Encoder through the NPU plugin (NPUW running on this CPU, `DECIDER_NPUW_DEVICES={r.get('npuw_devices')}`, "
            f"static shapes for {r.get('npu_static_patches', '?')} patches): option logprobs within {r['npu_drift']:.1e} "
            "of the CPU encoder's. It is no speed figure for a real NPU; it shows the static path's cost of padding "
            "on the CPU.\n")
    elif r.get("decider_npu_error"):
        add(f"Encoder through the NPU plugin: not measured ({r['decider_npu_error']}).\n")
    genai = r.get("genai") or {}
    if genai.get("ok"):
        add(f"OpenVINO GenAI {genai.get('version', '')} `VLMPipeline` runs this Qwen3.5 export (a text prompt with the "
            f"image, one generated token, no logprobs): {_ms(genai['seconds']['median'])} (median of {genai['seconds']['n']}), "
            f"load {_ms(genai.get('load_s'))}. {genai.get('note', '')}\n")
    elif genai:
        add(f"OpenVINO GenAI {genai.get('version', '')} `VLMPipeline` does not run this Qwen3.5 export: at "
            f"`{genai.get('stage')}` it raises\n\n```\n{genai.get('error', '').strip()}\n```\n")
    loads = r.get("load_s") or {}
    if loads:
        add("Load times (read + compile, once per process): " + ", ".join(
            f"{ENGINES.get(k, k)} {_ms(v)}" for k, v in loads.items()) + ".\n")
    add(f"Peak RSS of the process holding every engine: {r.get('peak_rss_mib', 0) / 1024:.2f} GiB. Measured "
        f"{r.get('date', '')}.\n")
    return lines
