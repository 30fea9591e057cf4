"""Calibration of a model's bars from labelled history, and the temperature a user chose to apply."""

from __future__ import annotations

import json
from typing import NotRequired, TypedDict

import numpy as np

from decider.engine.decisions.calibration import CalibrationReport, TemperatureFit, evaluate, fit_temperature, letter_bias, probabilities
from decider.engine.core.errors import SettingsError

from .config import config_dir
from .history import HistoryRow, HistoryStore

MIN_ROWS_TO_FIT = 10


class CalibrationEntry(TypedDict):
    """One model and mode's calibration, as `decider calibrate` prints it."""

    model: str
    think: bool
    precision: str  # one arithmetic per entry: rows of two precisions are never pooled
    report: CalibrationReport
    bias: list[dict]
    fit: NotRequired[TemperatureFit]  # with --fit


def labelled(store: HistoryStore, model: str | None, think: bool | None) -> list[HistoryRow]:
    return store.rows(model=model, think=think, labelled=True)


def by_precision(rows: list[HistoryRow]) -> dict[str, list[HistoryRow]]:
    """The rows split by the arithmetic that computed their bars (HistoryRow.precision), in first-seen order:
    f32 bars and a fast compile's drift differently, so one calibration never mixes them."""
    groups: dict[str, list[HistoryRow]] = {}
    for row in rows:
        groups.setdefault(row.precision, []).append(row)
    return groups


def _right_answers(rows: list[HistoryRow]) -> list[int]:
    """The right option of each row; every row here is a labelled one."""
    right = [r.right_index for r in rows]
    if any(index is None for index in right):
        raise SettingsError("calibration reads labelled decisions only")
    return [index for index in right if index is not None]


def report(rows: list[HistoryRow], bins: int = 10, temperature: float = 1.0) -> CalibrationReport:
    if not rows:
        raise SettingsError("no labelled decisions yet: label some with `decider history label ID LETTER`")
    return evaluate([r.shown_logprobs for r in rows], _right_answers(rows), bins=bins, temperature=temperature)


def split(rows: list[HistoryRow]) -> tuple[list[HistoryRow], list[HistoryRow]]:
    """Deterministic 2:1 split by id, so the held-out rows never change between runs."""
    fit = [r for r in rows if r.id % 3 != 0]
    held = [r for r in rows if r.id % 3 == 0]
    return fit, held


def fit(rows: list[HistoryRow], bins: int = 10) -> TemperatureFit:
    fit_rows, held = split(rows)
    if len(fit_rows) < MIN_ROWS_TO_FIT or not held:
        raise SettingsError(f"need at least {MIN_ROWS_TO_FIT + 5} labelled decisions to fit a temperature (have {len(rows)})")
    temperature = fit_temperature([r.shown_logprobs for r in fit_rows], _right_answers(fit_rows))
    return TemperatureFit(temperature, len(fit_rows), len(held), report(held, bins), report(held, bins, temperature))


def bias(rows: list[HistoryRow]) -> list[dict]:
    return letter_bias([r.choice_index for r in rows], _right_answers(rows))


# ----- the temperature the user applied, per model and think mode -----


def _path():
    return config_dir() / "calibration.json"


def _key(model: str, think: bool) -> str:
    return f"{model}|{'think' if think else 'no-think'}"


def saved_temperature(model: str, think: bool) -> float | None:
    try:
        data = json.loads(_path().read_text())
        value = data.get(_key(model, think))
        return float(value) if isinstance(value, (int, float)) and value > 0 else None
    except (OSError, ValueError):
        return None


def save_temperature(model: str, think: bool, temperature: float | None) -> None:
    path = _path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    if temperature is None:
        data.pop(_key(model, think), None)
    else:
        data[_key(model, think)] = temperature
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))


def calibrated_probabilities(option_logprobs: list[float], temperature: float) -> list[float]:
    """The displayed 'calibrated' confidence: option log-values softened or sharpened by T. Pass the log of the
    shown bars (a single order's logprobs give the same result), so calibration rescales what the user saw.
    Monotonic: it never changes which option is most likely."""
    return probabilities(np.array([option_logprobs], dtype=float), temperature)[0].tolist()
