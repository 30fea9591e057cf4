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
