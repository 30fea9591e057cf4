"""What the widgets need from the application, declared here so `ui/` never imports `app/`.

`app/gui.py` builds one `AppPorts` (see app/gui_ports.py) and hands it to the main window; the window
passes each widget the part it uses. The types are structural (Protocols): the application objects
satisfy them without knowing this module, and a test can hand a widget a stand-in.

Values that cross the boundary are engine types (DecisionRequest, DecisionResult, EngineInfo, ModelInfo,
SamplingSettings, DeviceOptions, RemoteConfig, CalibrationReport, TemperatureFit) or plain data; `ui/` may import
`engine/` (never the runner: no OpenVINO in the widgets).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from PySide6.QtCore import SignalInstance

if TYPE_CHECKING:  # for the checker only: at run time the widgets load none of these modules through this one
    from decider.engine.decisions.calibration import CalibrationReport, TemperatureFit
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.remote.engine import RemoteConfig
    from decider.engine.core.settings import DecisionSettings, SamplingSettings
    from decider.engine.decisions.types import DecisionRequest


@runtime_checkable
class Settings(Protocol):
    """The desktop settings object (app.preferences.GuiSettings): immutable, validated on change (so read-only here)."""

    @property
    def think(self) -> bool: ...
    @property
    def permute(self) -> bool: ...
    @property
    def image_pixels(self) -> int: ...  # the capture budget (engine.settings)
    @property
    def system_prompt(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def engine(self) -> str: ...
    @property
    def last_model(self) -> str | None: ...
    @property
    def recent_models(self) -> tuple[str, ...]: ...
    @property
    def hotkey(self) -> str: ...
    @property
    def show_settings(self) -> bool: ...
    @property
    def overlay_enabled(self) -> bool: ...
    @property
    def overlay_opacity(self) -> float: ...
    @property
    def overlay_position(self) -> tuple[int, int] | None: ...
    @property
    def overlay_click_through(self) -> bool: ...
    @property
    def watch_enabled(self) -> bool: ...  # watch mode: grab and re-decide when the picture changes
    @property
    def watch_interval_ms(self) -> int: ...
    @property
    def watch_threshold(self) -> float: ...
    @property
    def api_enabled(self) -> bool: ...
    @property
    def api_host(self) -> str: ...
    @property
    def api_port(self) -> int: ...
    @property
    def api_key(self) -> str: ...  # empty: none
    @property
    def api_allowed_origins(self) -> tuple[str, ...]: ...  # browser Origins the local API answers
    @property
    def window_geometry(self) -> tuple[int, int, int, int] | None: ...
    @property
    def window_maximized(self) -> bool: ...

    def with_changes(self, **changes: object) -> Settings: ...
    def with_sampling(self, sampling: SamplingSettings) -> Settings: ...
    def with_recent_model(self, path: str | Path) -> Settings: ...
    def sampling(self) -> SamplingSettings: ...
    def decision(self) -> DecisionSettings: ...  # think, permute, the reasoning budget, ... (engine.settings)
    def device_options(self) -> DeviceOptions: ...
    def remote_config(self) -> RemoteConfig: ...  # SettingsError when incomplete


@dataclass(frozen=True)
class SettingsRules:
    """Ranges and choices the settings form shows (the same rules the settings object enforces)."""

    setting_range: Callable[[str], tuple[float, float, bool]]  # name -> (min, max, integer?)
    range_text: Callable[[str], str]  # name -> "0 – 2"
    remote_constraints: tuple[str, ...]


@runtime_checkable
class EngineClient(Protocol):
    """The engine thread's face toward the window. Requests return at once (the work is queued to the
    engine thread); results come back as signals, delivered queued on the UI thread."""

    model_loaded: SignalInstance  # (engine.info.ModelInfo)
    model_failed: SignalInstance  # (message)
    decided: SignalInstance  # (DecisionRequest, DecisionResult)
    failed: SignalInstance  # (message)
    cancelled: SignalInstance  # ()
    busy: SignalInstance  # (bool)
    progress: SignalInstance  # (reasoning tokens so far, the most the decision may draw)
    api_state: SignalInstance  # (running, message)
    api_decided: SignalInstance  # (question, DecisionResult) of a decision that arrived through the local API

    def load(self, path: str, options: DeviceOptions, is_demo: bool) -> None: ...
    def use_remote(self, config: RemoteConfig) -> None: ...
    def serve_api(self, enabled: bool, host: str, port: int, api_key: str | None = None,
                  allow_origins: tuple[str, ...] = ()) -> None: ...
    def submit_decision(self, request: DecisionRequest) -> None: ...  # cancel() stops all submitted so far
    def cancel(self) -> None: ...


@runtime_checkable
class TaskHandle(Protocol):
    """A side job on a thread of its own (app.task_runner.Task): signals in, start and cancel out."""

    progress: SignalInstance  # (done, total)
    line: SignalInstance  # (text)
    succeeded: SignalInstance  # (outcome)
    failed: SignalInstance  # (message)
    was_cancelled: SignalInstance
    finished: SignalInstance

    @property
    def running(self) -> bool: ...
    def start(self) -> object: ...
    def cancel(self) -> None: ...


@dataclass(frozen=True)
class ModelTools:
    """Model management for the picker and its dialogs: folders, download, convert, doctor."""

    models_root: Callable[[], Path]
    downloaded: Callable[[], list[str]]  # folders a download stored
    is_checkpoint: Callable[[str], bool]  # a Hugging Face checkpoint (needs converting)
    human_size: Callable[[int], str]
    check_repo_id: Callable[[str], str]  # normalised id, or SettingsError
    optimum_available: Callable[[], bool]
    install_hint: str
    # each task's `succeeded` carries: an outcome with path, usable, kind, summary (pull, convert); a list of checks
    # (doctor); a report with models and logprobs (connection)
    pull_task: Callable[[str, str | None, str | Path], TaskHandle]  # (repo_id, revision, dest_root)
    convert_task: Callable[[str, str, str], TaskHandle]  # (hf_dir, out_dir, weights)
    doctor_task: Callable[[str | None, DeviceOptions | None], TaskHandle]  # (path, device options)
    connection_task: Callable[[RemoteConfig], TaskHandle]


@runtime_checkable
class HistoryRecord(Protocol):
    """One recorded decision (app.history.HistoryRow)."""

    @property
    def id(self) -> int: ...
    @property
    def created_at(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def options(self) -> list[str]: ...
    @property
    def result(self) -> dict: ...
    @property
    def choice_index(self) -> int: ...
    @property
    def right_index(self) -> int | None: ...
    @property
    def think(self) -> bool: ...
    @property
    def source(self) -> str: ...
    @property
    def precision(self) -> str: ...  # the arithmetic that computed the bars
    @property
    def images_seen(self) -> int: ...


@runtime_checkable
class History(Protocol):
    """The decision history the Calibration and History tabs read (app.history.HistoryStore)."""

    @property
    def path(self) -> Path: ...  # where it is stored, for the user to see
    def models(self) -> list[str]: ...
    def rows(self, *, model: str | None = None, think: bool | None = None, labelled: bool | None = None,
             limit: int | None = None, newest_first: bool = False) -> Sequence[HistoryRecord]: ...
    def label(self, decision_id: int, right: int | None) -> HistoryRecord: ...
    def export_csv(self) -> str: ...
    def export_jsonl(self) -> str: ...


@dataclass(frozen=True)
class Calibration:
    """Calibration from labelled decisions, and the temperature the user applied per model and mode."""

    report: Callable[[Sequence[HistoryRecord], int, float], CalibrationReport]  # (rows, bins, temperature)
    fit: Callable[[Sequence[HistoryRecord], int], TemperatureFit]  # (rows, bins)
    bias: Callable[[Sequence[HistoryRecord]], list[dict]]
    saved_temperature: Callable[[str, bool], float | None]
    save_temperature: Callable[[str, bool, float | None], None]
    calibrated_probabilities: Callable[[list[float], float], list[float]]


@dataclass(frozen=True)
class AppPorts:
    """Everything the main window is given by the application."""

    engine: EngineClient
    settings_rules: SettingsRules
    calibration: Calibration
    models: ModelTools
    history: Callable[[], History] | None = None  # opens the history; None: the history is off
    save_settings: Callable[[Settings], object] | None = None  # None: nothing is written (a screenshot run)
    demo_dir: str | None = None
    demo_models: tuple[tuple[str, str], ...] = ()  # the bundled models: (folder, label), listed in the picker
