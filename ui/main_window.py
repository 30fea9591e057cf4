"""The main window: situation and options on the left, the decision (and its tokens, calibration and
history) in the middle, settings on the right, model, engine and timings in the status bar.

The window talks to the engine only through the worker (app/worker.py) it is given: requests go out
as queued signals, results come back as signals. It never blocks on the engine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QPoint, QRect, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.settings_store import GuiSettings
from engine.decide import DecisionRequest
from engine.errors import SettingsError

from .calibration_view import CalibrationView, HistoryView
from .clipboard import parse_situation
from .hotkey import GlobalHotkey
from .inspector import TokenInspector
from .model_picker import ModelPickerDialog
from .options_editor import OptionsEditor
from .overlay import CompanionOverlay
from .result_view import ResultView, engine_summary
from .settings_panel import SettingsPanel

RELOAD_FIELDS = ("device", "exact")
REMOTE_FIELDS = ("remote_url", "remote_api_key", "remote_model", "remote_timeout", "remote_constraint")
TABS = ("decision", "inspector", "calibration", "history")


def _caption(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("SectionTitle")
    return label


class MainWindow(QMainWindow):
    hotkey_triggered = Signal()  # the clipboard trigger: global hotkey, in-app shortcut, or a test
    decision_shown = Signal(object)  # DecisionResult, after the window has rendered it
    model_ready = Signal(object)  # ModelInfo
    model_error = Signal(str)
    decision_failed = Signal(str)

    def __init__(
        self,
        worker,
        settings: GuiSettings,
        save: Callable[[GuiSettings], object] | None = None,
        *,
        demo_dir: str | None = None,
        warnings: list[str] | None = None,
        api_available: bool = False,
        register_global_hotkey: bool = True,
        history=None,
    ) -> None:
        """`history`: a callable giving the app.history.HistoryStore the Calibration and History tabs read
        (None: those tabs say the history is off)."""
        super().__init__()
        self.worker = worker
        self.settings = settings
        self._save = save
        self.demo_dir = demo_dir
        self.model_info = None
        self.loading_path: str | None = None
        self.deciding = False
        self.last_request: DecisionRequest | None = None
        self.last_result = None
        self._source = "window"
        self._submitted_at = 0.0
        self._api_available = api_available
        self._last_local: tuple[str, bool] | None = None  # the local model to return to from a remote engine
        self._keep_engine = False  # set while a local load itself switches the engine setting back to local
        self._connection_task = None
        self.setWindowTitle("Decider")
        self.resize(1240, 780)
        self.setMinimumSize(900, 560)
        self._restore_geometry(settings.window_geometry)

        central = QWidget()
        self.setCentralWidget(central)
        outer = QVBoxLayout(central)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        outer.addWidget(self._build_header())

        self.splitter = QSplitter(Qt.Horizontal)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setHandleWidth(1)
        self.splitter.addWidget(self._build_ask_panel())
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.tabBar().setDrawBase(False)
        self.result_view = ResultView()
        self.result_view.choose_model.connect(self.choose_model)
        self.inspector = TokenInspector()
        self.calibration_view = CalibrationView(history)
        self.calibration_view.temperature_applied.connect(self._on_temperature_applied)
        self.history_view = HistoryView(history)
        self.history_view.labelled.connect(lambda *_: self.calibration_view.mark_dirty())
        self.tabs.addTab(self.result_view, "Decision")
        self.tabs.addTab(self.inspector, "Token inspector")
        self.tabs.addTab(self.calibration_view, "Calibration")
        self.tabs.addTab(self.history_view, "History")
        center = QWidget()
        center.setObjectName("Panel")
        center_layout = QVBoxLayout(center)
        center_layout.setContentsMargins(8, 6, 8, 0)
        center_layout.addWidget(self.tabs)
        self.splitter.addWidget(center)
        self.settings_panel = SettingsPanel(settings)
        self.settings_panel.setMinimumWidth(330)
        self.settings_panel.setMaximumWidth(420)
        self.settings_panel.settings_changed.connect(self._on_settings_changed)
        self.settings_panel.model_defaults_requested.connect(self.restore_model_defaults)
        self.settings_panel.test_connection_requested.connect(self.test_connection)
        self.settings_panel.connect_requested.connect(self.connect_remote)
        self.settings_panel.set_api_status(
            "off" if api_available else "the local API is not part of this build", api_available
        )
        self.splitter.addWidget(self.settings_panel)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setStretchFactor(2, 0)
        self.splitter.setSizes([360, 550, 330])
        outer.addWidget(self.splitter, 1)
        self.settings_panel.setVisible(settings.show_settings)

        self._build_status_bar()

        self.overlay = CompanionOverlay(settings.overlay_opacity, settings.overlay_click_through)
        self.overlay.moved.connect(lambda x, y: self._update_settings(overlay_position=(x, y)))
        self.overlay.close_requested.connect(lambda: self.set_overlay_visible(False))
        self._place_overlay()

        self._save_timer = QTimer(self, singleShot=True, interval=300)
        self._save_timer.timeout.connect(self.save_now)
        self._reconnect_timer = QTimer(self, singleShot=True, interval=150)
        self._reconnect_timer.timeout.connect(self.connect_remote)

        # shortcuts
        for sequence in ("Ctrl+Return", "Ctrl+Enter"):
            QShortcut(QKeySequence(sequence), self, self.decide)
        QShortcut(QKeySequence("Escape"), self, self._escape)
        self.app_shortcut = QShortcut(QKeySequence(settings.hotkey), self)
        self.app_shortcut.setContext(Qt.ApplicationShortcut)
        self.app_shortcut.activated.connect(self.hotkey_triggered.emit)
        self.hotkey_triggered.connect(self.decide_from_clipboard)
        self.global_hotkey = GlobalHotkey(self)
        self.global_hotkey.triggered.connect(self.hotkey_triggered.emit)
        self._register_global = register_global_hotkey
        self._apply_hotkey()

        # the worker's signals (queued: they come from the engine thread)
        worker.model_loaded.connect(self._on_model_loaded)
        worker.model_failed.connect(self._on_model_failed)
        worker.decided.connect(self._on_decided)
        worker.failed.connect(self._on_failed)
        worker.cancelled.connect(self._on_cancelled)
        worker.busy.connect(self._on_busy)
        worker.progress.connect(self._on_progress)
        worker.api_state.connect(self._on_api_state)
        worker.api_decided.connect(self._on_api_decided, Qt.QueuedConnection)

        self.result_view.show_no_model()
        self._update_buttons()
        for warning in warnings or []:
            self.show_message(warning, 10_000)
        if settings.overlay_enabled:
            self.overlay.show()

    # ------------------------------------------------------------ building
    def _build_header(self) -> QWidget:
        header = QWidget()
        header.setObjectName("Header")
        header.setFixedHeight(56)
        layout = QHBoxLayout(header)
        layout.setContentsMargins(18, 8, 14, 8)
        layout.setSpacing(8)
        logo = QLabel("D")
        logo.setObjectName("Logo")
        logo.setAlignment(Qt.AlignCenter)
        logo.setFixedSize(28, 28)
        word = QLabel("Decider")
        word.setObjectName("Wordmark")
        layout.addWidget(logo)
        layout.addSpacing(2)
        layout.addWidget(word)
        layout.addStretch(1)
        self.model_button = QPushButton("Choose a model…")
        self.model_button.setObjectName("ModelButton")
        self.model_button.setMinimumWidth(340)
        self.model_button.setCursor(Qt.PointingHandCursor)
        self.model_button.setToolTip("Choose or change the model (a Qwen3.5 OpenVINO export folder)")
        self.model_button.clicked.connect(self.choose_model)
        layout.addWidget(self.model_button)
        layout.addStretch(1)
        self.overlay_button = QPushButton("Overlay")
        self.overlay_button.setObjectName("Toggle")
        self.overlay_button.setCheckable(True)
        self.overlay_button.setChecked(self.settings.overlay_enabled)
        self.overlay_button.setToolTip("Show the companion overlay (always on top, beside a game)")
        self.overlay_button.toggled.connect(self.set_overlay_visible)
        self.settings_button = QPushButton("Settings")
        self.settings_button.setObjectName("Toggle")
        self.settings_button.setCheckable(True)
        self.settings_button.setChecked(self.settings.show_settings)
        self.settings_button.toggled.connect(lambda on: self._update_settings(show_settings=on))
        layout.addWidget(self.overlay_button)
        layout.addWidget(self.settings_button)
        return header

    def _build_ask_panel(self) -> QWidget:
        panel = QWidget()
        panel.setObjectName("Panel")
        panel.setMinimumWidth(340)
        layout = QVBoxLayout(panel)
        layout.setContentsMargins(16, 16, 12, 14)
        layout.setSpacing(8)
        layout.addWidget(_caption("SITUATION"))
        self.question = QPlainTextEdit()
        self.question.setPlaceholderText("Describe the situation and ask the question…")
        self.question.setTabChangesFocus(True)
        self.question.setMinimumHeight(90)
        layout.addWidget(self.question, 1)
        layout.addSpacing(6)
        layout.addWidget(_caption("OPTIONS"))
        self.options = OptionsEditor()
        self.options.submit.connect(self.decide)
        self.options.changed.connect(self._update_buttons)
        self.question.textChanged.connect(self._update_buttons)
        layout.addWidget(self.options)
        layout.addSpacing(4)

        toggles = QHBoxLayout()
        self.think_box = QCheckBox("Think first")
        self.think_box.setToolTip("the model reasons before it answers (slower); see the settings for its budget")
        self.think_box.setChecked(self.settings.think)
        self.think_box.toggled.connect(lambda on: self.settings_panel.set_value("think", on))
        self.permute_box = QCheckBox("Debias order")
        self.permute_box.setToolTip("ask once per cyclic order of the options and average the bars")
        self.permute_box.setChecked(self.settings.permute)
        self.permute_box.toggled.connect(lambda on: self.settings_panel.set_value("permute", on))
        toggles.addWidget(self.think_box)
        toggles.addWidget(self.permute_box)
        toggles.addStretch(1)
        layout.addLayout(toggles)

        buttons = QHBoxLayout()
        self.decide_button = QPushButton("Decide")
        self.decide_button.setObjectName("Primary")
        self.decide_button.setCursor(Qt.PointingHandCursor)
        self.decide_button.setToolTip("Decide (Ctrl+Enter)")
        self.decide_button.clicked.connect(self.decide)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("Danger")
        self.cancel_button.setToolTip("Stop the running decision (Esc)")
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.hide()
        buttons.addWidget(self.decide_button, 1)
        buttons.addWidget(self.cancel_button, 1)
        layout.addLayout(buttons)
        self.shortcut_hint = QLabel("Ctrl+Enter to decide")
        self.shortcut_hint.setObjectName("RangeHint")
        self.shortcut_hint.setAlignment(Qt.AlignCenter)
        self.shortcut_hint.setWordWrap(True)
        layout.addWidget(self.shortcut_hint)
        return panel

    def _build_status_bar(self) -> None:
        bar = self.statusBar()
        bar.setSizeGripEnabled(False)
        self.busy_indicator = QProgressBar()
        self.busy_indicator.setRange(0, 0)
        self.busy_indicator.setTextVisible(False)
        self.busy_indicator.setFixedWidth(90)
        self.busy_indicator.hide()
        self.status_model = QLabel("no model")
        self.status_device = QLabel("")
        self.status_engine = QLabel("")
        self.status_latency = QLabel("")
        self.status_tokens = QLabel("")
        self.status_hotkey = QLabel("")
        bar.addPermanentWidget(self.busy_indicator)
        for label in (self.status_model, self.status_device, self.status_engine, self.status_latency, self.status_tokens,
                      self.status_hotkey):
            bar.addPermanentWidget(label)

    # ------------------------------------------------------------ model
    def choose_model(self) -> None:
        if self.loading_path is not None:
            return
        current = self.model_info.path if self.model_info else None
        try:
            options = self.settings.device_options()
        except SettingsError:
            options = None
        dialog = ModelPickerDialog(list(self.settings.recent_models), current, self.demo_dir, self, doctor_options=options)
        if dialog.exec() and dialog.chosen:
            self.load_model(dialog.chosen, is_demo=dialog.chosen == self.demo_dir)

    def start(self, path: str | None, is_demo: bool = False) -> None:
        """The first model at start: the remote server when that is the engine, else the local folder."""
        if self.settings.engine == "remote":
            self.connect_remote()
        elif path is not None:
            self.load_model(path, is_demo)

    def load_model(self, path: str, is_demo: bool = False) -> None:
        """Load off the UI thread; the window stays usable (and shows the old model until the new one is in)."""
        path = os.path.abspath(os.path.expanduser(str(path)))
        if self.deciding:
            self.worker.cancel()
        try:
            options = self.settings.device_options()
        except SettingsError as exc:
            self._on_model_failed(str(exc))
            return
        if self.settings.engine != "local":  # choosing a folder means the local engine
            self._keep_engine = True
            try:
                self._update_settings(engine="local")
            finally:
                self._keep_engine = False
        self.loading_path = str(path)
        self._loading_demo = is_demo
        name = "demo model" if is_demo else Path(path).name
        self.model_button.setText(f"Loading {name}…")
        if self.model_info is None:
            self.result_view.show_loading(name)
        self.show_message(f"Loading {path} on {options.device}…")
        self._update_buttons()
        self.worker.request_load.emit(str(path), options, is_demo)

    def connect_remote(self) -> bool:
        """Decide on the remote server of the settings from now on (the worker checks it first)."""
        self._reconnect_timer.stop()
        try:
            config = self.settings.remote_config()
        except SettingsError as exc:
            self.settings_panel.set_connection_status(str(exc), False)
            self.show_message(f"Remote engine: {exc}", 10_000)
            if self.model_info is None:
                self.result_view.show_no_model(f"Remote engine: {exc}")
            return False
        if self.deciding:
            self.worker.cancel()
        self.loading_path = config.base_url
        self.model_button.setText(f"Connecting to {config.base_url}…")
        if self.model_info is None:
            self.result_view.show_loading(config.base_url)
        self.settings_panel.set_connection_status(f"Connecting to {config.base_url}…", None)
        self.show_message(f"Connecting to {config.base_url}…")
        self._update_buttons()
        self.worker.request_remote.emit(config)
        return True

    def test_connection(self) -> bool:
        """Ask the configured server for its models and whether it returns logprobs (off the UI thread)."""
        from app.worker import connection_task

        if self._connection_task is not None and self._connection_task.running:
            return False
        try:
            config = self.settings.remote_config()
        except SettingsError as exc:
            self.settings_panel.set_connection_status(str(exc), False)
            return False
        task = connection_task(config)
        self._connection_task = task
        self.settings_panel.set_testing(True)
        self.settings_panel.set_connection_status(f"Testing {config.base_url}…", None)

        def done(report) -> None:
            names = ", ".join(report.models[:6]) + (f" and {len(report.models) - 6} more" if len(report.models) > 6 else "")
            served = f"serves {len(report.models)} model{'s' if len(report.models) != 1 else ''}: {names}" if report.models else "serves no model"
            if report.logprobs:
                self.settings_panel.set_connection_status(f"✓ Connected: {served} · returns logprobs (top-20 alternatives)", True)
            else:
                self.settings_panel.set_connection_status(
                    f"Connected, but the server does not return logprobs: decisions will fail. It {served}.", False)
            self.settings_panel.set_remote_models(report.models)

        def failed(message: str) -> None:
            self.settings_panel.set_connection_status(f"✗ {message}", False)

        task.succeeded.connect(done)
        task.failed.connect(failed)
        task.finished.connect(lambda: self.settings_panel.set_testing(False))
        task.start()
        return True

    def _on_model_loaded(self, info) -> None:
        self.loading_path = None
        first = self.model_info is None
        self.model_info = info
        remote = getattr(info, "remote", False)
        short, long = engine_summary(getattr(info, "engine", None))
        self.status_model.setText(info.name)
        self.status_engine.setText(short)
        self.status_engine.setToolTip(long)
        if remote:
            self.model_button.setText(f"●  {info.name}   ·   remote")
            self.model_button.setToolTip(f"{info.path} (remote engine)\nconnected in {info.load_seconds:.1f} s · click to choose a local model")
            self.status_device.setText(f"remote {info.path.split('://', 1)[-1]}")
            self.status_device.setToolTip(info.path)
            self.settings_panel.set_connection_status(f"✓ Deciding on {info.path} with {info.name}", True)
        else:
            self._last_local = (info.path, info.is_demo)
            self.model_button.setText(f"●  {info.name}   ·   {info.device}")
            self.model_button.setToolTip(f"{info.path}\nloaded in {info.load_seconds:.1f} s · click to change")
            self.status_device.setText(info.device)
            self.status_device.setToolTip("")
        self.settings_panel.set_model_defaults(info.defaults)
        if not info.is_demo and not remote:
            self._update_settings(settings=self.settings.with_recent_model(info.path))
        self.calibration_view.set_current(self._model_key(), self.settings.think)
        if first or self.result_view.currentWidget() is not self.result_view.main_page:
            if self.last_result is not None:
                self.result_view.show_result(self.last_result, self._temperature(self.last_request))
            else:
                self.result_view.show_ready()
        if remote:
            self.show_message(f"Connected to {info.name} in {info.load_seconds:.1f} s", 6000)
        else:
            self.show_message(f"{info.name} loaded on {info.device} in {info.load_seconds:.1f} s", 6000)
        self._update_buttons()
        if self.settings.api_enabled and self._api_available:
            self.worker.request_api.emit(True, self.settings.api_host, self.settings.api_port)
        self.model_ready.emit(info)

    def _on_model_failed(self, message: str) -> None:
        path = self.loading_path
        self.loading_path = None
        if self.settings.engine == "remote":
            self.settings_panel.set_connection_status(f"✗ {message}", False)
        if self.model_info is None:
            self.model_button.setText("Choose a model…")
            self.result_view.show_no_model(message)
        else:
            info = self.model_info
            self.model_button.setText(f"●  {info.name}   ·   {'remote' if getattr(info, 'remote', False) else info.device}")
            what = "use the remote server" if self.settings.engine == "remote" else "load the model"
            self.result_view.show_error(f"Could not {what}: {message}")
            self.tabs.setCurrentWidget(self.result_view)
        if path and self.settings.last_model == path:
            self._update_settings(last_model=None)
        self.show_message(f"Model not loaded: {message}", 10_000)
        self._update_buttons()
        self.model_error.emit(message)

    def restore_model_defaults(self) -> None:
        if self.model_info is None:
            return
        self._update_settings(settings=self.settings.with_sampling(self.model_info.defaults))
        self.show_message("Sampling restored to the model's defaults", 4000)

    # ------------------------------------------------------------ deciding
    def build_request(self) -> DecisionRequest:
        s = self.settings
        return DecisionRequest(
            question=self.question.toPlainText(),
            options=tuple(self.options.options()),
            system=s.system_prompt or None,
            think=s.think,
            reasoning_budget=s.reasoning_budget,
            permute=s.permute,
            sampling=s.sampling(),
        )

    def decide(self, source: str = "window") -> bool:
        """Submit the editor's decision; False (with the reason shown) when it cannot run now."""
        if not isinstance(source, str):
            source = "window"
        if self.deciding or self.loading_path is not None:
            return False
        if self.model_info is None:
            self.result_view.show_no_model("Choose a model first.")
            if source != "window":
                self.set_overlay_visible(True)
                self.overlay.show_error("No model is loaded: open Decider and choose a model folder.", self._source_text(source))
            return False
        try:
            request = self.build_request()
        except SettingsError as exc:
            self.tabs.setCurrentWidget(self.result_view)
            self.result_view.show_error(str(exc))
            if source != "window":
                self.overlay.show_error(str(exc), self._source_text(source))
            return False
        self.last_request = request
        self.deciding = True
        self._source = source
        self._submitted_at = time.perf_counter()
        # With permute, every cyclic order thinks again: the progress counts across all of them.
        budget = request.reasoning_budget * (len(request.options) if request.permute else 1)
        self.result_view.show_running(request.think, budget)
        if self.overlay.isVisible() or source != "window":
            self.overlay.show_running(request.question, self._source_text(source))
        self.worker.submit_decision(request)
        self._update_buttons()
        return True

    def cancel(self) -> None:
        if self.deciding:
            self.worker.cancel()
            self.cancel_button.setEnabled(False)
            self.cancel_button.setText("Cancelling…")

    def _escape(self) -> None:
        if self.deciding:
            self.cancel()

    def _on_progress(self, tokens: int) -> None:
        if self.deciding:
            self.result_view.show_progress(tokens)
            if self.overlay.isVisible():
                self.overlay.show_progress(tokens)

    def _model_key(self) -> str | None:
        """The model name decisions are filed under in the history (and calibrated under)."""
        info = self.model_info
        if info is None:
            return None
        return getattr(info, "model_key", "") or info.name

    def _temperature(self, request) -> float | None:
        """The temperature the user applied for the loaded model and the request's think mode, if any."""
        model = self._model_key()
        if model is None or request is None:
            return None
        from app.calibrate import saved_temperature

        return saved_temperature(model, bool(request.think))

    def _on_temperature_applied(self, model: str, think: bool, temperature) -> None:
        if (
            self.last_result is not None and self.last_request is not None and model == self._model_key()
            and bool(self.last_request.think) == think and not self.deciding
            and self.result_view.result is self.last_result
        ):
            self.result_view.show_result(self.last_result, temperature)
        shown = self.overlay.shown
        if shown is not None and shown[1] is self.last_result and self.result_view.result is self.last_result:
            self.overlay.show_result(*shown, calibrated=self.result_view.calibrated)
        state = f"T = {temperature:.3f} applied" if temperature is not None else "calibration off"
        self.show_message(f"{model} ({'think' if think else 'no think'}): {state}", 5000)

    def _on_decided(self, request, result) -> None:
        self.deciding = False
        self.last_request, self.last_result = request, result
        self.result_view.show_result(result, self._temperature(request))
        self.inspector.set_result(result, request)
        engine = getattr(result, "engine", None)
        if engine:
            short, long = engine_summary(engine)
            self.status_engine.setText(short)
            self.status_engine.setToolTip(long)
        self.history_view.mark_dirty()
        self.calibration_view.mark_dirty()
        total_ms = result.timings.get("total_s", 0.0) * 1000
        self.status_latency.setText(f"latency {total_ms:,.0f} ms")
        self.status_latency.setToolTip(f"engine time of the last decision; {1000 * (time.perf_counter() - self._submitted_at):,.0f} ms with the queue")
        usage = result.usage
        self.status_tokens.setText(f"{usage.get('prompt_tokens', 0)} prompt · {usage.get('completion_tokens', 0)} answer tokens")
        if self.overlay.isVisible() or self._source != "window":
            self.overlay.show_result(request.question, result, self._source_text(self._source), self.result_view.calibrated)
            if self._source != "window":
                self.set_overlay_visible(True)
        self._update_buttons()
        self.decision_shown.emit(result)

    def _on_failed(self, message: str) -> None:
        self.deciding = False
        self.tabs.setCurrentWidget(self.result_view)
        self.result_view.show_error(message)
        if self.overlay.isVisible():
            self.overlay.show_error(message, self._source_text(self._source))
        self.show_message(f"Decision failed: {message}", 10_000)
        self._update_buttons()
        self.decision_failed.emit(message)

    def _on_cancelled(self) -> None:
        if not self.deciding:
            return
        self.deciding = False
        self.result_view.show_cancelled()
        if self.overlay.isVisible():
            if self.last_result is not None and self.last_request is not None:
                self.overlay.show_result(self.last_request.question, self.last_result)
            else:
                self.overlay.show_idle("Cancelled.")
        self.show_message("Decision cancelled", 4000)
        self._update_buttons()

    def _on_busy(self, busy: bool) -> None:
        self.busy_indicator.setVisible(busy)

    # ------------------------------------------------------------ clipboard trigger and API
    @staticmethod
    def _source_text(source: str) -> str:
        return {"hotkey": "· from clipboard", "api": "· via local API"}.get(source, "")

    def decide_from_clipboard(self) -> bool:
        """Decide on the clipboard's text (a situation, then one option per line; see ui/clipboard.py)."""
        text = QGuiApplication.clipboard().text()
        try:
            question, options = parse_situation(text)
        except SettingsError as exc:
            self.set_overlay_visible(True)
            self.overlay.show_error(str(exc), "· from clipboard")
            self.show_message(f"Clipboard: {exc}", 8000)
            return False
        if self.deciding or self.loading_path is not None:
            self.show_message("Busy: the clipboard decision was not started", 5000)
            return False
        self.question.setPlainText(question)
        self.options.set_options(options)
        return self.decide("hotkey")

    def _on_api_decided(self, question: str, result) -> None:
        self.history_view.mark_dirty()
        self.calibration_view.mark_dirty()
        self.set_overlay_visible(True)
        self.overlay.show_result(question, result, "· via local API")
        self.show_message(f"API decision: {result.options[result.choice_index].text}", 6000)

    def _on_api_state(self, running: bool, message: str) -> None:
        self.settings_panel.set_api_status(message, self._api_available)

    # ------------------------------------------------------------ overlay and hotkey
    def _place_overlay(self) -> None:
        position = self.settings.overlay_position
        screen = QGuiApplication.primaryScreen()
        if position is not None and screen is not None:
            point = QPoint(*position)
            if any(s.availableGeometry().contains(point) for s in QGuiApplication.screens()):
                self.overlay.move(point)
                return
        if screen is not None:
            area = screen.availableGeometry()
            self.overlay.move(area.right() - self.overlay.width() - 24, area.top() + 24)

    def set_overlay_visible(self, visible: bool) -> None:
        visible = bool(visible)
        if visible:
            if self.last_result is not None and self.last_request is not None and not self.deciding and self._source == "window":
                self.overlay.show_result(self.last_request.question, self.last_result)
            self.overlay.show()
            self.overlay.raise_()
        else:
            self.overlay.hide()
        if self.overlay_button.isChecked() != visible:
            self.overlay_button.blockSignals(True)
            self.overlay_button.setChecked(visible)
            self.overlay_button.blockSignals(False)
        if self.settings.overlay_enabled != visible:
            self._update_settings(overlay_enabled=visible)

    def _apply_hotkey(self) -> None:
        sequence = self.settings.hotkey
        self.app_shortcut.setKey(QKeySequence(sequence))
        native = QKeySequence(sequence).toString(QKeySequence.NativeText)
        if self._register_global:
            ok = self.global_hotkey.register(sequence)
            message = self.global_hotkey.message
        else:
            ok, message = False, "global hotkey not registered"
        if ok:
            self.status_hotkey.setText(f"hotkey {native}")
            self.status_hotkey.setToolTip(message)
            self.settings_panel.set_hotkey_status(f"{message}: decides on the clipboard from any application.", True)
        else:
            self.status_hotkey.setText(f"{native} (in app only)")
            self.status_hotkey.setToolTip(message)
            self.settings_panel.set_hotkey_status(
                f"{message[0].upper() + message[1:]}. {native} still works while Decider has focus.", False
            )
        self.shortcut_hint.setText(f"Ctrl+Enter decides · {native} decides on the clipboard")
        if self.last_result is None and not self.deciding:
            self.overlay.show_idle(f"Copy a situation and its options (one per line), then press {native}.")

    # ------------------------------------------------------------ settings
    def _update_settings(self, settings: GuiSettings | None = None, **changes) -> None:
        updated = settings if settings is not None else self.settings.with_changes(**changes)
        if updated == self.settings:
            return
        old = self.settings
        self.settings = updated
        self.settings_panel.set_settings(updated)
        self._settings_side_effects(old, updated)
        self._save_timer.start()

    def _on_settings_changed(self, settings: GuiSettings, name: str) -> None:
        old = self.settings
        self.settings = settings
        self._settings_side_effects(old, settings)
        self._save_timer.start()

    def _settings_side_effects(self, old: GuiSettings, new: GuiSettings) -> None:
        if old.think != new.think and self.think_box.isChecked() != new.think:
            self.think_box.blockSignals(True)
            self.think_box.setChecked(new.think)
            self.think_box.blockSignals(False)
        if old.permute != new.permute and self.permute_box.isChecked() != new.permute:
            self.permute_box.blockSignals(True)
            self.permute_box.setChecked(new.permute)
            self.permute_box.blockSignals(False)
        if old.show_settings != new.show_settings:
            self.settings_panel.setVisible(new.show_settings)
            if self.settings_button.isChecked() != new.show_settings:
                self.settings_button.setChecked(new.show_settings)
        if old.overlay_enabled != new.overlay_enabled:
            self.set_overlay_visible(new.overlay_enabled)
        if old.overlay_opacity != new.overlay_opacity:
            self.overlay.set_opacity(new.overlay_opacity)
        if old.overlay_click_through != new.overlay_click_through:
            self.overlay.set_click_through(new.overlay_click_through)
        if old.hotkey != new.hotkey:
            self._apply_hotkey()
        if (old.api_enabled, old.api_host, old.api_port) != (new.api_enabled, new.api_host, new.api_port):
            if self._api_available and (new.api_enabled or old.api_enabled):
                self.worker.request_api.emit(new.api_enabled, new.api_host, new.api_port)
        if old.think != new.think:
            self.calibration_view.set_current(self._model_key(), new.think)
        if old.engine != new.engine:
            self._engine_changed(new.engine)
        elif new.engine == "remote" and any(getattr(old, f) != getattr(new, f) for f in REMOTE_FIELDS):
            self._reconnect_timer.start()
        if (
            any(getattr(old, f) != getattr(new, f) for f in RELOAD_FIELDS) and self.model_info is not None
            and new.engine == "local" and not getattr(self.model_info, "remote", False)
        ):
            self.load_model(self.model_info.path, self.model_info.is_demo)

    def _engine_changed(self, engine: str) -> None:
        if engine == "remote":
            self._reconnect_timer.start()
            return
        self._reconnect_timer.stop()
        if self._keep_engine:  # a local folder is being loaded: that load is the switch
            return
        local = self._last_local
        if local is None and self.settings.last_model and os.path.isdir(self.settings.last_model):
            local = (self.settings.last_model, False)
        if local is None and self.demo_dir:
            local = (self.demo_dir, True)
        if local is not None:
            self.load_model(*local)
            return
        self.model_info = None
        self.model_button.setText("Choose a model…")
        self.status_model.setText("no model")
        self.status_device.setText("")
        self.status_engine.setText("")
        self.result_view.show_no_model()
        self._update_buttons()

    def save_now(self) -> None:
        self._save_timer.stop()
        if self._save is None:
            return
        try:
            self._save(self.settings)
        except OSError as exc:
            self.show_message(f"Settings not saved: {exc.strerror or exc}", 10_000)

    # ------------------------------------------------------------ misc
    def show_tab(self, name: str) -> None:
        """decision, inspector, calibration or history."""
        widgets = dict(zip(TABS, (self.result_view, self.inspector, self.calibration_view, self.history_view)))
        self.tabs.setCurrentWidget(widgets[name])

    def show_message(self, text: str, timeout_ms: int = 0) -> None:
        self.statusBar().showMessage(text, timeout_ms)

    def _update_buttons(self) -> None:
        running = self.deciding
        self.decide_button.setVisible(not running)
        self.cancel_button.setVisible(running)
        if not running:
            self.cancel_button.setEnabled(True)
            self.cancel_button.setText("Cancel")
        ready = self.model_info is not None and self.loading_path is None
        self.decide_button.setEnabled(ready)
        self.decide_button.setToolTip("Decide (Ctrl+Enter)" if ready else "Load a model first")

    def _restore_geometry(self, geometry: tuple[int, int, int, int] | None) -> None:
        """Where the window was last closed, if that is still on a screen (a monitor may have gone)."""
        if geometry is None:
            return
        x, y, width, height = geometry
        title_bar = QRect(x, y, width, 32)
        if any(screen.availableGeometry().intersects(title_bar) for screen in QGuiApplication.screens()):
            self.setGeometry(x, y, max(width, self.minimumWidth()), max(height, self.minimumHeight()))

    def remember_geometry(self) -> None:
        maximized = self.isMaximized() or self.isFullScreen()
        # a maximised window keeps the size it returns to, not the screen's
        g = self.normalGeometry() if maximized else self.geometry()
        changes: dict = {"window_maximized": maximized}
        if g.isValid():
            changes["window_geometry"] = (g.x(), g.y(), g.width(), g.height())
        self._update_settings(**changes)

    def closeEvent(self, event) -> None:  # noqa: N802
        if self.deciding:
            self.worker.cancel()
        self.remember_geometry()
        self.save_now()
        self.global_hotkey.close()
        self.overlay.close()
        super().closeEvent(event)
