"""The main window: situation and options on the left, the decision (and its tokens, calibration and
history) in the middle, settings on the right, model, engine and timings in the status bar.

The window renders and forwards. The decision state (model loading/ready, idle/running/cancelling,
the request the form makes) lives in the DecisionController; everything it needs from the
application comes in one `AppPorts` (ui/ports.py) built by app/gui.py. It never blocks on the engine.
The model side (picker, loading, remote server) is the composed `self.models` (window_models.py), the
companion side (overlay, clipboard hotkey, API decisions) `self.companion` (window_companion.py), the fixed
parts in window_parts.py.

What pressing Decide does, in three files: `MainWindow.decide` here builds the request from the form and hands
it to `DecisionController.submit` (ui/decision_controller.py), which queues it on the engine thread's worker
(`EngineWorker.submit_decision` → `_decide_job` in app/engine_thread.py, which calls the decision service's
`decide` on that thread); the answer comes back as the controller's `decided` signal, rendered by `_on_decided` here.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QRect, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import QLabel, QMainWindow, QSplitter, QTabWidget, QVBoxLayout, QWidget

from decider.engine.decisions.types import DecisionRequest, DecisionResult
from decider.engine.core.errors import SettingsError
from decider.engine.core.info import ModelInfo

from .calibration_tab import CalibrationView
from .history_tab import HistoryView
from .decision_controller import DecisionController, build_request
from .hotkey import GlobalHotkey
from .image_input import ImageSlot
from .inspector import TokenInspector
from .overlay import CompanionOverlay
from .ports import AppPorts, Settings
from .result_view import ResultView, engine_summary
from .screen_decisions import ScreenDecisions
from .settings_effects import SettingsEffects
from .settings_panel import SettingsPanel
from .window_companion import SOURCE_TEXT, WindowCompanion
from .window_columns import FormScroll, WindowColumns
from .window_models import WindowModels
from .window_watch import WindowWatch
from .window_parts import AskPanel, Header, StatusLabels

TABS = ("decision", "inspector", "calibration", "history")
FAILED_PREFIX = "Decision failed: "


class MainWindow(QMainWindow):
    hotkey_triggered = Signal()  # the clipboard trigger: global hotkey, in-app shortcut, or a test
    decision_shown = Signal(DecisionResult)  # after the window has rendered it
    model_ready = Signal(ModelInfo)
    model_error = Signal(str)
    decision_failed = Signal(str)
    # parts made in _build, declared for the type checker (it reads __init__'s lambdas before _build)
    status: StatusLabels
    status_latency: QLabel
    settings_panel: SettingsPanel
    result_view: ResultView

    def __init__(self, ports: AppPorts, settings: Settings, *, warnings: list[str] | None = None,
                 register_global_hotkey: bool = True) -> None:
        super().__init__()
        self.ports = ports
        self.settings = settings
        self.demo_dir = ports.demo_dir
        self.controller = DecisionController(ports.engine, self)
        # what a settings change sets in motion (reload, API restart, engine switch, hotkey); the window renders
        self.settings_effects = SettingsEffects(self.controller, settings, ports.demo_dir, self)
        self.models = WindowModels(self)
        self.companion = WindowCompanion(self)
        self.setWindowTitle("Decider")
        self.resize(1240, 780)
        self.setMinimumSize(900, 560)
        self._restore_geometry(settings.window_geometry)
        self._build(ports, settings)

        self.overlay = CompanionOverlay(settings.overlay_opacity, settings.overlay_click_through)
        self.overlay.moved.connect(lambda x, y: self.update_settings(overlay_position=(x, y)))
        self.overlay.close_requested.connect(lambda: self.companion.set_overlay_visible(False))
        self.companion.place_overlay()
        self.screen_decisions = ScreenDecisions(self, self.image_slot, self.overlay, self.decide, register_global_hotkey)
        self.screen_decisions.latency_measured.connect(
            lambda seconds: self.status_latency.setText(f"capture → bars {seconds * 1000:,.0f} ms"))
        self.watch = WindowWatch(self, register_global_hotkey)

        self._save_timer = QTimer(self, singleShot=True, interval=300)
        self._save_timer.timeout.connect(self.save_now)
        effects = self.settings_effects
        effects.load_requested.connect(self.models.load_model)
        effects.connect_requested.connect(self.models.connect_remote)
        effects.model_dropped.connect(self.models.show_no_model)
        effects.hotkey_changed.connect(lambda _sequence: self.companion.apply_hotkey())

        for sequence in ("Ctrl+Return", "Ctrl+Enter"):
            QShortcut(QKeySequence(sequence), self, self.decide)
        QShortcut(QKeySequence("Escape"), self, self.cancel)
        self.app_shortcut = QShortcut(QKeySequence(settings.hotkey), self)
        self.app_shortcut.setContext(Qt.ShortcutContext.ApplicationShortcut)
        self.app_shortcut.activated.connect(self.hotkey_triggered.emit)
        self.hotkey_triggered.connect(self.companion.decide_from_clipboard)
        self.global_hotkey = GlobalHotkey(self)
        self.global_hotkey.triggered.connect(self.hotkey_triggered.emit)
        self.register_global = register_global_hotkey
        self.companion.apply_hotkey()

        c = self.controller
        c.model_ready.connect(self.models.show_model_loaded)
        c.model_failed.connect(self.models.show_model_failed)
        c.decided.connect(self._on_decided)
        c.failed.connect(self._on_failed)
        c.cancelled.connect(self._on_cancelled)
        c.busy.connect(lambda busy: self.status.busy.setVisible(busy))
        c.progress.connect(self._on_progress)
        c.api_state.connect(lambda running, message: self.settings_panel.set_api_status(message, True))
        c.api_decided.connect(self.companion.show_api_decision)

        self.result_view.show_no_model()
        self.update_buttons()
        for warning in warnings or []:
            self.show_message(warning, 10_000)
        if settings.overlay_enabled:
            self.overlay.show()

    def _build(self, ports: AppPorts, settings: Settings) -> None:
        central = QWidget()
        self.setCentralWidget(central)
        outer = QVBoxLayout(central)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        self.header = Header(settings.overlay_enabled, settings.show_settings)
        self.model_button = self.header.model_button
        self.overlay_button = self.header.overlay_button
        self.settings_button = self.header.settings_button
        self.model_button.clicked.connect(self.choose_model)
        self.overlay_button.toggled.connect(self.set_overlay_visible)
        self.settings_button.toggled.connect(lambda on: self.update_settings(show_settings=on))
        outer.addWidget(self.header)

        self.ask_panel = AskPanel(settings.think, settings.permute)
        panel = self.ask_panel
        self.question, self.options = panel.question, panel.options
        self.think_box, self.permute_box = panel.think_box, panel.permute_box
        self.decide_button, self.cancel_button = panel.decide_button, panel.cancel_button
        self.shortcut_hint = panel.shortcut_hint
        self.image_slot = ImageSlot()
        panel.column.insertWidget(2, self.image_slot)
        self.options.submit.connect(self.decide)
        self.options.changed.connect(self.update_buttons)
        self.question.textChanged.connect(self.update_buttons)
        self._form_error = False  # a "the question is empty"-kind message is shown: re-checked as the form changes
        self.tools: tuple = ()  # functions as the options (set_tools), while the editor lists their names
        self.options.changed.connect(self._recheck_form)
        self.question.textChanged.connect(self._recheck_form)
        self.think_box.toggled.connect(lambda on: self.settings_panel.set_value("think", on))
        self.permute_box.toggled.connect(lambda on: self.settings_panel.set_value("permute", on))
        self.decide_button.clicked.connect(self.decide)
        self.cancel_button.clicked.connect(self.cancel)

        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.tabBar().setDrawBase(False)
        self.result_view = ResultView(ports.calibration.calibrated_probabilities)
        self.result_view.choose_model.connect(self.choose_model)
        self.inspector = TokenInspector()
        self.calibration_view = CalibrationView(ports.history, ports.calibration)
        self.calibration_view.temperature_applied.connect(self._on_temperature_applied)
        self.history_view = HistoryView(ports.history)
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
        self.settings_panel = SettingsPanel(settings, ports.settings_rules)
        self.settings_panel.settings_changed.connect(self._on_settings_changed)
        self.settings_panel.model_defaults_requested.connect(lambda: self.models.restore_model_defaults())
        self.settings_panel.test_connection_requested.connect(lambda: self.models.test_connection())
        self.settings_panel.connect_requested.connect(lambda: self.models.connect_remote())
        self.settings_panel.set_api_status("off", True)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.ask_scroll = FormScroll(panel)
        self.center_panel = center
        self.columns = WindowColumns(self.splitter, self.ask_scroll, center, self.settings_panel)
        self.splitter.setSizes([360, 550, 330])
        outer.addWidget(self.splitter, 1)
        self.columns.set_settings_open(settings.show_settings)

        self.status = StatusLabels(self.statusBar())
        self.status_model, self.status_device, self.status_engine = self.status.model, self.status.device, self.status.engine
        self.status_latency, self.status_tokens, self.status_hotkey = self.status.latency, self.status.tokens, self.status.hotkey

    # ------------------------------------------------------------ the controller's state, for readers and tests
    @property
    def worker(self):
        """The engine client the window was given (the engine thread's worker)."""
        return self.ports.engine

    @property
    def deciding(self) -> bool:
        return self.controller.deciding

    @property
    def model_info(self):
        return self.controller.model_info

    @property
    def loading_path(self) -> str | None:
        return self.controller.loading

    @property
    def last_request(self) -> DecisionRequest | None:
        return self.controller.last_request

    @property
    def last_result(self) -> DecisionResult | None:
        return self.controller.last_result

    # ------------------------------------------------------------ deciding
    def build_request(self) -> DecisionRequest:
        return build_request(self.question.toPlainText(), self.options.options(), self.settings, self.image_slot.pixels(),
                             self.tools)

    def set_tools(self, tools: tuple) -> None:
        """Functions as the options (`decider gui --tool FILE`): the editor lists their names; a decision on those
        names gives a bar per function and the chosen call."""
        self.tools = tuple(tools)
        self.options.set_options([t.name for t in self.tools])

    def decide(self, source: str = "window") -> bool:
        """Submit the editor's decision; False (with the reason shown) when it cannot run now."""
        if not isinstance(source, str):  # a button's `checked` argument
            source = "window"
        if self.deciding or self.loading_path is not None:
            return False
        if self.model_info is None:
            self.result_view.show_no_model("Choose a model first.")
            if source != "window":
                self.companion.set_overlay_visible(True)
                self.overlay.show_error("No model is loaded: open Decider and choose a model folder.", SOURCE_TEXT.get(source, ""))
            return False
        try:
            request = self.build_request()
        except SettingsError as exc:
            self.tabs.setCurrentWidget(self.result_view)
            self.result_view.show_error(str(exc))
            self.inspector.clear()
            self._form_error = True
            if source != "window":
                self.overlay.show_error(str(exc), SOURCE_TEXT.get(source, ""))
            return False
        self._form_error = False
        if source == "window" and self.columns.covers_decision():
            self.update_settings(show_settings=False)  # the settings drawer closes: the bars come where it was
        self.result_view.show_running(request.think, request.reasoning_limit)  # every order's reasoning, with permute
        if self.overlay.isVisible() or source != "window":
            self.overlay.show_running(request.question, SOURCE_TEXT.get(source, ""))
        started = self.controller.submit(request, source)
        self.update_buttons()
        return started

    def _recheck_form(self) -> None:
        """While a form error is shown, edits re-check the form: the message goes once the form is right."""
        if not self._form_error or self.deciding:
            return
        try:
            self.build_request()
        except SettingsError as exc:
            self.result_view.show_error(str(exc))
            return
        self._form_error = False
        self.result_view.show_ready()

    def cancel(self) -> None:
        if self.controller.cancel():
            self.ask_panel.show_cancelling()

    def _on_progress(self, done: int, total: int) -> None:
        self.result_view.show_progress(done, total)
        if self.overlay.isVisible():
            self.overlay.show_progress(done)

    @property
    def qt_parent(self) -> QWidget:
        """The window as the Qt parent of what its parts (window_models/companion/watch) make: they know it only
        as a WindowPort (ui/window_port.py)."""
        return self

    def temperature_for(self, request) -> float | None:
        """The temperature the user applied for the loaded model and the request's think mode, if any."""
        model = self.controller.model_key
        if model is None or request is None:
            return None
        return self.ports.calibration.saved_temperature(model, bool(request.think))

    def _on_temperature_applied(self, model: str, think: bool, temperature) -> None:
        if (
            self.last_result is not None and self.last_request is not None and model == self.controller.model_key
            and bool(self.last_request.think) == think and not self.deciding
            and self.result_view.result is self.last_result
        ):
            self.result_view.show_result(self.last_result, temperature)
        shown = self.overlay.shown
        if shown is not None and shown[1] is self.last_result and self.result_view.result is self.last_result:
            question, result, source = shown
            self.overlay.show_result(question, result, source, calibrated=self.result_view.calibrated)
        state = f"T = {temperature:.3f} applied" if temperature is not None else "calibration off"
        self.show_message(f"{model} ({'think' if think else 'no think'}): {state}", 5000)

    def _on_decided(self, request: DecisionRequest, result: DecisionResult, source: str) -> None:
        if self.status.current_message().startswith(FAILED_PREFIX):
            self.show_message("")  # an earlier failure is not this decision's news
        self.result_view.show_result(result, self.temperature_for(request))
        self.inspector.set_result(result, request)
        engine = result.engine
        if engine:
            short, long = engine_summary(engine)
            self.status_engine.setText(short)
            self.status_engine.setToolTip(long)
        self.history_view.mark_dirty()
        self.calibration_view.mark_dirty()
        total_ms = result.timings.get("total_s", 0.0) * 1000
        queued_ms = 1000 * (time.perf_counter() - self.controller.submitted_at)
        self.status_latency.setText(f"latency {total_ms:,.0f} ms")
        self.status_latency.setToolTip(f"engine time of the last decision; {queued_ms:,.0f} ms with the queue")
        usage = result.usage
        self.status_tokens.setText(f"{usage.get('prompt_tokens', 0)} prompt · {usage.get('completion_tokens', 0)} answer tokens")
        if self.overlay.isVisible() or source != "window":
            self.overlay.show_result(request.question, result, SOURCE_TEXT.get(source, ""), self.result_view.calibrated)
            if source != "window":
                self.companion.set_overlay_visible(True)
        self.update_buttons()
        self.screen_decisions.decision_shown()
        self.decision_shown.emit(result)
        self.watch.decision_ended(True)

    def _on_failed(self, message: str, source: str) -> None:
        self.tabs.setCurrentWidget(self.result_view)
        self.result_view.show_error(message)
        self.inspector.clear()
        if self.overlay.isVisible():
            self.overlay.show_error(message, SOURCE_TEXT.get(source, ""))
        self.show_message(f"{FAILED_PREFIX}{message}", 10_000)
        self.screen_decisions.decision_ended()
        self.update_buttons()
        self.decision_failed.emit(message)
        self.watch.decision_ended(False)

    def _on_cancelled(self, source: str) -> None:
        self.result_view.show_cancelled()
        if self.overlay.isVisible():
            if self.last_result is not None and self.last_request is not None:
                self.overlay.show_result(self.last_request.question, self.last_result)
            else:
                self.overlay.show_idle("Cancelled.")
        self.show_message("Decision cancelled", 4000)
        self.screen_decisions.decision_ended()
        self.update_buttons()
        self.watch.decision_ended(False)

    # ------------------------------------------------------------ settings
    def update_settings(self, settings: Settings | None = None, **changes) -> None:
        updated = settings if settings is not None else self.settings.with_changes(**changes)
        if updated == self.settings:
            return
        self.settings_panel.set_settings(updated)
        self._settings_changed(updated)

    def _on_settings_changed(self, settings: Settings, name: str) -> None:
        self._settings_changed(settings)

    def _settings_changed(self, new: Settings) -> None:
        """The window shows the new values; SettingsEffects does what they set in motion; saved shortly."""
        old, self.settings = self.settings, new
        self._show_settings(old, new)
        self.settings_effects.apply(old, new)
        self._save_timer.start()

    def _show_settings(self, old: Settings, new: Settings) -> None:
        """Widgets outside the settings panel that show a setting follow it."""
        for box, name in ((self.think_box, "think"), (self.permute_box, "permute")):
            if getattr(old, name) != getattr(new, name) and box.isChecked() != getattr(new, name):
                box.blockSignals(True)
                box.setChecked(getattr(new, name))
                box.blockSignals(False)
        if old.show_settings != new.show_settings:
            self.columns.set_settings_open(new.show_settings)
            if self.settings_button.isChecked() != new.show_settings:
                self.settings_button.setChecked(new.show_settings)
        if old.overlay_enabled != new.overlay_enabled:
            self.companion.set_overlay_visible(new.overlay_enabled)
        if old.overlay_opacity != new.overlay_opacity:
            self.overlay.set_opacity(new.overlay_opacity)
        if old.overlay_click_through != new.overlay_click_through:
            self.overlay.set_click_through(new.overlay_click_through)
        if old.think != new.think:
            self.calibration_view.set_current(self.controller.model_key, new.think)
        if (old.watch_enabled, old.watch_interval_ms, old.watch_threshold) != (
                new.watch_enabled, new.watch_interval_ms, new.watch_threshold):
            self.watch.apply(new)

    def save_now(self) -> None:
        self._save_timer.stop()
        if self.ports.save_settings is None:
            return
        try:
            self.ports.save_settings(self.settings)
        except OSError as exc:
            self.show_message(f"Settings not saved: {exc.strerror or exc}", 10_000)

    # ------------------------------------------------------------ the composed sides, as the window's own verbs
    def start(self, path: str | None, is_demo: bool = False) -> None:
        self.models.start(path, is_demo)

    def choose_model(self) -> None:
        self.models.choose_model()

    def load_model(self, path: str, is_demo: bool = False) -> None:
        self.models.load_model(path, is_demo)

    def set_overlay_visible(self, visible: bool) -> None:
        self.companion.set_overlay_visible(visible)

    # ------------------------------------------------------------ misc
    def show_tab(self, name: str) -> None:
        """decision, inspector, calibration or history."""
        widgets = dict(zip(TABS, (self.result_view, self.inspector, self.calibration_view, self.history_view)))
        self.tabs.setCurrentWidget(widgets[name])

    def show_message(self, text: str, timeout_ms: int = 0) -> None:
        self.status.show_message(text, timeout_ms)

    def update_buttons(self) -> None:
        self.ask_panel.show_running(self.deciding, self.model_info is not None and self.loading_path is None)

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
        self.update_settings(**changes)

    def closeEvent(self, event) -> None:  # noqa: N802
        self.controller.cancel_quietly()
        self.remember_geometry()
        self.save_now()
        self.global_hotkey.close()
        self.watch.close()
        self.overlay.close()
        super().closeEvent(event)
