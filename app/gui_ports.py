"""The application side of ui/ports.py: the objects and functions the widgets are given.

The widgets never import `app`; `app/gui.py` builds these and hands them over. Functions are looked
up when called (not bound at build time), so a test that replaces one in its module is obeyed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from decider.engine.decisions.calibration import CalibrationReport, TemperatureFit
from decider.ui.ports import AppPorts, Calibration, EngineClient, History, HistoryRecord, ModelTools, SettingsRules

from . import calibration_history, convert, model_jobs, models, preferences, pull
from .history import HistoryRow


def settings_rules() -> SettingsRules:
    return SettingsRules(preferences.setting_range, preferences.range_text, preferences.REMOTE_CONSTRAINTS)


def _history_rows(rows: Sequence[HistoryRecord]) -> list[HistoryRow]:
    """The rows a tab hands back are the ones the history store gave it."""
    if not all(isinstance(row, HistoryRow) for row in rows):
        raise TypeError("calibration reads rows of the decision history (app.history.HistoryRow)")
    return [row for row in rows if isinstance(row, HistoryRow)]


def _report(rows: Sequence[HistoryRecord], bins: int, temperature: float) -> CalibrationReport:
    return calibration_history.report(_history_rows(rows), bins, temperature)


def _fit(rows: Sequence[HistoryRecord], bins: int) -> TemperatureFit:
    return calibration_history.fit(_history_rows(rows), bins)


def calibration() -> Calibration:
    return Calibration(
        report=_report,
        fit=_fit,
        bias=lambda rows: calibration_history.bias(_history_rows(rows)),
        saved_temperature=lambda model, think: calibration_history.saved_temperature(model, think),
        save_temperature=lambda model, think, t: calibration_history.save_temperature(model, think, t),
        calibrated_probabilities=lambda logprobs, t: calibration_history.calibrated_probabilities(logprobs, t),
    )


def _downloaded() -> list[str]:
    """Folders `decider pull` / Download… stored under the data dir."""
    try:
        root = models.models_root()
        if not root.is_dir():
            return []
        return sorted(str(p) for p in root.iterdir() if p.is_dir() and (p / models.PULL_MANIFEST).is_file())
    except OSError:
        return []


def _is_checkpoint(path: str) -> bool:
    try:
        return models.checkpoint_info(Path(path)) is not None
    except OSError:
        return False


def model_tools() -> ModelTools:
    return ModelTools(
        models_root=lambda: models.models_root(),
        downloaded=_downloaded,
        is_checkpoint=_is_checkpoint,
        human_size=lambda n: models.human_size(n),
        check_repo_id=lambda repo_id: pull.check_repo_id(repo_id),
        optimum_available=lambda: convert.optimum_available(),
        install_hint=convert.INSTALL_HINT,
        pull_task=lambda *args, **kwargs: model_jobs.pull_task(*args, **kwargs),
        convert_task=lambda *args, **kwargs: model_jobs.convert_task(*args, **kwargs),
        doctor_task=lambda *args, **kwargs: model_jobs.doctor_task(*args, **kwargs),
        connection_task=lambda config: model_jobs.connection_task(config),
    )


def app_ports(engine: EngineClient, *, history: Callable[[], History] | None = None,
              save_settings: Callable[[object], object] | None = None, demo_dir: str | None = None) -> AppPorts:
    from .config import demo_models

    return AppPorts(
        engine=engine, settings_rules=settings_rules(), calibration=calibration(), models=model_tools(),
        history=history, save_settings=save_settings, demo_dir=demo_dir,
        demo_models=tuple((str(path), label) for path, label in demo_models()),
    )
