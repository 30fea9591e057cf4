"""The report section for structured output: the JSON-schema mask's cost per generated token
(`python -m bench.structured --save`)."""

from __future__ import annotations

from .common import table_head


def section(results: dict) -> list[str]:
    r = results.get("structured")
    if not r or "error" in r:
        return []
    lines: list[str] = []
    add = lines.append
    add("## 12. Structured output: the JSON-schema mask per token\n")
    add(f"`python -m bench.structured --save`: the tokens allowed after each prefix of a valid instance of a small "
        f"game-action schema ({r['instance_tokens']} tokens), over Qwen3.5's real tokenizer ({r['vocab']:,} tokens); "
        "medians over the walk, repeated. `apply` is the numpy step Decider adds to mask float64 logits. For scale: a "
        "decode step of the 0.8B model is tens of milliseconds on this CPU (§8). outlines-core's figure is a look-up in "
        "the index it builds per schema (its set-up) and returns a list of ids, not yet a mask.\n")
    if r.get("note"):
        add(f"{r['note']}\n")
    add(table_head("| library | one-off set-up | mask per token (median) | p95 | apply per token |"))
    for row in r["rows"]:
        if "error" in row:
            add(f"| {row['library']} | not measured: {row['error']} | | | |")
            continue
        apply = f"{row['apply_ms_median']:.2f} ms" if "apply_ms_median" in row else "—"
        add(f"| {row['library']} | {row['setup_s']:.1f} s | **{row['mask_ms_median']:.3f} ms** | "
            f"{row['mask_ms_p95']:.3f} ms | {apply} |")
    add("")
    return lines
