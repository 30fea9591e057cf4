"""Terminal rendering of a decision: one bar per option."""

from __future__ import annotations

from typing import TYPE_CHECKING

from decider.engine.decisions.labels import TINY_COVERAGE, uncertain_text, usage_text
from decider.engine.decisions.types import DecisionResult

if TYPE_CHECKING:
    from .calibration_history import CalibrationEntry

BAR_WIDTH = 24


def bar(probability: float, width: int = BAR_WIDTH) -> str:
    filled = round(probability * width)
    return "█" * filled + "░" * (width - filled)


def coverage_text(result: DecisionResult) -> str:
    """Coverage as a number that means something: a percentage for letters; for whole option texts (a product
    of many token probabilities, tiny by nature) a plain probability in scientific notation."""
    if result.mode == "words":
        return f"coverage {result.coverage:.3g} (probability of the whole option texts)"
    if result.coverage < TINY_COVERAGE:  # a percentage would round a 3.4e-90 to 0.0% beside bars of 99.6%
        return f"coverage {result.coverage:.2g} (tiny: the bars are renormalised over almost nothing)"
    return f"coverage {result.coverage:.1%}"


def choice_note(result: DecisionResult) -> str | None:
    """The sentence under the bars when the big letter is not simply the longest bar, else None."""
    notes = []
    likely = result.options[result.most_likely_index]
    if result.drawn:
        notes.append(f"{result.choice.label} was drawn at the sampling settings (sample-choice mode); "
                     f"most likely: {likely.label}. {likely.text} ({likely.shown:.1%})")
    if result.uncertain:
        notes.append(uncertain_text(result))
    return " · ".join(notes) or None


def render_decision(question: str, result: DecisionResult, model: str) -> str:
    lines = [question, ""]
    text_width = min(40, max(len(o.text) for o in result.options))
    likely = result.most_likely_index
    for index, option in enumerate(result.options):
        text = option.text if len(option.text) <= text_width else option.text[: text_width - 1] + "…"
        shown = option.shown
        value = f"{'<' if option.bound == 'upper' else '~' if option.bar == 'estimate' else ' '}{shown:6.1%}"
        if index == result.choice_index:
            mark = "  ← drawn" if result.drawn else "  ← chosen"
        else:
            mark = "  ← most likely" if result.drawn and index == likely else ""
        extra = f"  (one order {option.probability:6.1%})" if option.debiased_probability is not None else ""
        lines.append(f"  {option.label}  {text:<{text_width}}  {bar(shown)} {value}{extra}{mark}")
    lines.append("")
    if result.shown_field == "debiased_probability":
        lines.append("bars: averaged over every cyclic option order (debiased); 'one order' is the order given")
    note = choice_note(result)
    if note:
        lines.append(note)
    if result.shown_field == "debiased_probability" or note:
        lines.append("")
    if result.reasoning:
        lines += ["Reasoning:", result.reasoning, ""]
    total_ms = result.timings.get("total_s", 0.0) * 1000
    lines.append(
        f"{coverage_text(result)} · {result.mode} · {usage_text(result.usage)} · {total_ms:.0f} ms · {model}"
    )
    engine = result.engine
    if engine is not None and not engine.remote:
        lines.append(f"computed on {engine.device}" + (f" (emulated: {engine.emulated})" if engine.emulated else "")
                     + f" · {engine.execution_path} path · {engine.logprobs_text} logprobs")
    if engine is not None and engine.remote:
        lines.append(f"server {engine.server or 'unknown'} at {engine.url} · method {engine.method} · bars {engine.bars_text}")
        if any(o.bar != "exact" for o in result.options):
            lines.append("~ an estimate (the server's numbers could not be checked) · < an upper bound (not in the "
                         "server's list)")
        lines += [f"note: {note}" for note in engine.notes]
    return "\n".join(lines)


def render_calibration(entry: CalibrationEntry) -> str:
    report = entry["report"]
    mode = "think" if entry["think"] else "no think"
    lines = [
        f"{entry['model']} ({mode}, {entry['precision']}): {report.count} labelled decisions",
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
