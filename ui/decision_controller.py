"""The decision state machine, apart from any widget: which model is loaded (or loading), whether a
decision runs, and the request a form's values make.

    model:    none ──load──▶ loading ──ready──▶ ready ──load──▶ loading ──failed──▶ (previous model kept)
    decision: idle ──submit──▶ running ──decided──▶ idle (done)
                                  ├──failed────▶ idle
                                  └──cancel───▶ cancelling ──cancelled──▶ idle

The controller talks to the engine thread through the `EngineClient` it is given and re-emits what
comes back, tagged with where the decision came from (window, hotkey). The main window only renders
these signals and forwards clicks; tests drive the controller with a stand-in engine and no widgets.
"""

from __future__ import annotations

import time
from enum import Enum
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, Signal

from decider.engine.core.info import ModelInfo
from decider.engine.decisions.types import DecisionRequest, DecisionResult

from .ports import EngineClient, Settings

if TYPE_CHECKING:  # the widgets never load the engine's devices or a server's engine at run time
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.remote.engine import RemoteConfig


class DecisionState(str, Enum):
    IDLE = "idle"
    RUNNING = "running"
    CANCELLING = "cancelling"


def build_request(question: str, options: list[str] | tuple[str, ...], settings: Settings, images: tuple = (),
                  tools: tuple = ()) -> DecisionRequest:
    """The request the form's text, its picture (pixel arrays) and the settings make; SettingsError names what is wrong.
    `tools`: functions loaded as the options (`decider gui --tool`), used while the options are still their names."""
    if tools and tuple(options) == tuple(t.name for t in tools):
        return DecisionRequest(question=question, options=tuple(options), tools=tuple(tools),
                               system=settings.system_prompt or None, sampling=settings.sampling())
    return DecisionRequest(question=question, options=tuple(options), images=images,
                           system=settings.system_prompt or None, sampling=settings.sampling(),
                           **settings.decision().to_dict())


class DecisionController(QObject):
    state_changed = Signal(str)  # DecisionState value
    started = Signal(DecisionRequest, str)  # the request, source
    decided = Signal(DecisionRequest, DecisionResult, str)  # the request, its result, source
    failed = Signal(str, str)  # message, source
    cancelled = Signal(str)  # source
    progress = Signal(int, int)  # reasoning tokens of the running decision so far, the most it may draw
    model_loading = Signal(str)  # what is being loaded (folder or server URL)
    model_ready = Signal(ModelInfo)
    model_failed = Signal(str, str)  # message, the folder or URL that failed
    busy = Signal(bool)
    api_state = Signal(bool, str)
    api_decided = Signal(str, DecisionResult)  # the question, its result

    def __init__(self, engine: EngineClient, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.state = DecisionState.IDLE
        self.model_info: ModelInfo | None = None
        self.loading: str | None = None  # folder or URL being loaded
        self.last_request: DecisionRequest | None = None
        self.last_result: DecisionResult | None = None
        self.source = "window"  # where the running (or last) decision came from
        self.submitted_at = 0.0
        engine.model_loaded.connect(self._on_model_loaded)
        engine.model_failed.connect(self._on_model_failed)
        engine.decided.connect(self._on_decided)
        engine.failed.connect(self._on_failed)
        engine.cancelled.connect(self._on_cancelled)
        engine.progress.connect(self._on_progress)
        engine.busy.connect(self.busy)
        engine.api_state.connect(self.api_state)
        # From an API server thread: queued, so it reaches the window on the UI thread.
        engine.api_decided.connect(self.api_decided, Qt.ConnectionType.QueuedConnection)

    # ------------------------------------------------------------ state
    @property
    def deciding(self) -> bool:
        return self.state is not DecisionState.IDLE

    @property
    def ready(self) -> bool:
        """A decision can be submitted now."""
        return self.model_info is not None and self.loading is None and not self.deciding

    @property
    def model_key(self) -> str | None:
        """The model name decisions are filed (and calibrated) under."""
        info = self.model_info
        if info is None:
            return None
        return info.model_key or info.name

    def _set_state(self, state: DecisionState) -> None:
        if state is not self.state:
            self.state = state
            self.state_changed.emit(state.value)

    # ------------------------------------------------------------ model
    def load_model(self, path: str, options: DeviceOptions, is_demo: bool = False) -> None:
        """Load a local folder in the engine thread; a running decision is cancelled first."""
        if self.deciding:
            self.engine.cancel()
        self.loading = path
        self.model_loading.emit(path)
        self.engine.load(path, options, is_demo)

    def connect_remote(self, config: RemoteConfig) -> None:
        """Decide on an OpenAI-compatible server from now on (the engine thread checks it first)."""
        if self.deciding:
            self.engine.cancel()
        self.loading = config.base_url
        self.model_loading.emit(config.base_url)
        self.engine.use_remote(config)

    def forget_result(self) -> None:
        """The last decision no longer applies (another model is in)."""
        self.last_request, self.last_result = None, None

    def forget_model(self) -> None:
        """No model: the engine setting changed and there is nothing to fall back on."""
        self.model_info = None

    def serve_api(self, enabled: bool, host: str, port: int, api_key: str | None = None,
                  allow_origins: tuple[str, ...] = ()) -> None:
        """Serve the local API on each local model from now on (or stop); the engine says how it went (api_state)."""
        self.engine.serve_api(enabled, host, port, api_key, allow_origins)

    def _on_model_loaded(self, info: ModelInfo) -> None:
        self.loading = None
        self.model_info = info
        self.model_ready.emit(info)

    def _on_model_failed(self, message: str) -> None:
        what, self.loading = self.loading, None
        self.model_failed.emit(message, what or "")

    # ------------------------------------------------------------ deciding
    def submit(self, request: DecisionRequest, source: str = "window") -> bool:
        """Queue the decision; False when one runs, a model is loading or none is loaded."""
        if not self.ready:
            return False
        self.last_request = request
        self.source = source
        self.submitted_at = time.perf_counter()
        self._set_state(DecisionState.RUNNING)
        self.started.emit(request, source)
        self.engine.submit_decision(request)
        return True

    def cancel(self) -> bool:
        """Cancel the running decision (the engine stops between tokens); False when none runs."""
        if self.state is not DecisionState.RUNNING:
            return False
        self.engine.cancel()
        self._set_state(DecisionState.CANCELLING)
        return True

    def cancel_quietly(self) -> None:
        """On close: stop the engine's work, whatever the state."""
        if self.deciding:
            self.engine.cancel()

    def _on_progress(self, done: int, total: int) -> None:
        if self.deciding:
            self.progress.emit(done, total)

    def _on_decided(self, request: DecisionRequest, result: DecisionResult) -> None:
        self.last_request, self.last_result = request, result
        self._set_state(DecisionState.IDLE)
        self.decided.emit(request, result, self.source)

    def _on_failed(self, message: str) -> None:
        self._set_state(DecisionState.IDLE)
        self.failed.emit(message, self.source)

    def _on_cancelled(self) -> None:
        if not self.deciding:  # a queued job cancelled after its decision was already replaced
            return
        self._set_state(DecisionState.IDLE)
        self.cancelled.emit(self.source)
