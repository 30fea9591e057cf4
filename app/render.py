"""Terminal rendering of a decision: one bar per option."""

from __future__ import annotations

from engine.decide import DecisionResult

BAR_WIDTH = 24


def bar(probability: float, width: int = BAR_WIDTH) -> str:
    filled = round(probability * width)
    return "█" * filled + "░" * (width - filled)


def render_decision(question: str, result: DecisionResult, model: str) -> str:
    lines = [question, ""]
    text_width = min(40, max(len(o.text) for o in result.options))
    for index, option in enumerate(result.options):
        text = option.text if len(option.text) <= text_width else option.text[: text_width - 1] + "…"
        shown = option.debiased_probability if option.debiased_probability is not None else option.probability
        mark = "  ← chosen" if index == result.choice_index else ""
        extra = f"  (raw {option.probability:6.1%})" if option.debiased_probability is not None else ""
        lines.append(f"  {option.label}  {text:<{text_width}}  {bar(shown)} {shown:6.1%}{extra}{mark}")
    lines.append("")
    if result.reasoning:
        lines += ["Reasoning:", result.reasoning, ""]
    total_ms = result.timings.get("total_s", 0.0) * 1000
    lines.append(
        f"coverage {result.coverage:.1%} · {result.mode} · {result.usage['prompt_tokens']} prompt tokens "
        f"({result.usage['reused_tokens']} reused) · {total_ms:.0f} ms · {model}"
    )
    return "\n".join(lines)


def render_calibration(entry: dict) -> str:
    report = entry["report"]
    mode = "think" if entry["think"] else "no think"
    lines = [
        f"{entry['model']} ({mode}): {report.count} labelled decisions",
        f"  accuracy {report.accuracy:.1%} · Brier {report.brier:.4f} · NLL {report.nll:.4f} · "
        f"ECE {report.ece:.4f} ({len(report.bins)} equal-width bins)",
        "  reliability (confidence bin → accuracy, count):",
    ]
    for b in report.bins:
        if b.count:
            lines.append(f"    {b.low:4.2f}–{b.high:4.2f}  conf {b.confidence:5.1%}  acc {b.accuracy:5.1%}  "
                         f"{bar(b.accuracy, 20)}  n={b.count}")
    fit = entry.get("fit")
    if fit is not None:
        lines.append(
            f"  temperature {fit.temperature:.3f} fitted on {fit.fitted_on} rows; on {fit.held_out} held-out rows "
            f"ECE {fit.before.ece:.4f} → {fit.after.ece:.4f}, NLL {fit.before.nll:.4f} → {fit.after.nll:.4f}"
        )
    lines.append("  letter bias (chosen / right): " + ", ".join(
        f"{b['label']} {b['chosen_rate']:.0%}/{b['right_rate']:.0%}" for b in entry["bias"]))
    return "\n".join(lines)
