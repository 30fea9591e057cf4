"""The main window's model side: choosing a folder, loading it, using a remote server, testing the
connection, and showing which model is in (header button, status bar, settings panel).

An object the window owns (`window.models`), given the window it works for: one job, kept apart so the
window file stays readable; what it touches of the window is typed (the WindowPort of
ui/window_port.py, which MainWindow satisfies), so a checker follows it without this module importing the window.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from decider.engine.core.errors import SettingsError
from decider.engine.core.info import ModelInfo
from decider.engine.core.settings import IMAGE_PIXELS_DEFAULT

from .model_picker import ModelPickerDialog
from .ports import TaskHandle
from .result_view import engine_summary
from .window_parts import connection_message

if TYPE_CHECKING:
    from .window_port import WindowPort


class WindowModels:
    """Choose, load, connect: the model side of the window."""

    def __init__(self, window: WindowPort) -> None:
        self.window = window
        self.model_picker: ModelPickerDialog | None = None  # the picker while it is open
        self._shown_model: ModelInfo | None = None  # the model the window shows (None until the first one is in)
        self._connection_task: TaskHandle | None = None

    def choose_model(self) -> None:
        w = self.window
        if w.loading_path is not None:
            return
        current = w.model_info.path if w.model_info else None
        try:
            options = w.settings.device_options()
        except SettingsError:
            options = None
        bundled = dict(w.ports.demo_models)
        dialog = ModelPickerDialog(w.ports.models, list(w.settings.recent_models), current, w.demo_dir, w.qt_parent,
                                   doctor_options=options, bundled=bundled)
        self.model_picker = dialog  # while it is open (tests, screenshots)
        try:
            accepted = dialog.exec() and dialog.chosen
        finally:
            self.model_picker = None
        if accepted and dialog.chosen is not None:
            self.load_model(dialog.chosen, is_demo=dialog.chosen == w.demo_dir or dialog.chosen in bundled)

    def start(self, path: str | None, is_demo: bool = False) -> None:
        """The first model at start: the remote server when that is the engine, else the local folder."""
        if self.window.settings.engine == "remote":
            self.connect_remote()
        elif path is not None:
            self.load_model(path, is_demo)

    def load_model(self, path: str, is_demo: bool = False) -> None:
        """Load off the UI thread; the window stays usable (and shows the old model until the new one is in)."""
        w = self.window
        path = os.path.abspath(os.path.expanduser(str(path)))
        try:
            options = w.settings.device_options()
        except SettingsError as exc:
            self.show_model_failed(str(exc), "")
            return
        if w.settings.engine != "local":  # choosing a folder means the local engine
            with w.settings_effects.loading_local():
                w.update_settings(engine="local")
        name = self.display_name(path, is_demo)
        w.model_button.setText(f"Loading {name}…")
        if w.model_info is None:
            w.result_view.show_loading(name)
        w.show_message(f"Loading {path} on {options.device}…")
        w.controller.load_model(path, options, is_demo)
        w.update_buttons()

    def display_name(self, path: str, is_demo: bool) -> str:
        """What the model is called while it loads: a bundled model by its label however it was chosen (the last
        model at start is a plain path), a reloaded one by the name it already has, else its folder's name."""
        w = self.window
        bundled = dict(w.ports.demo_models)
        if path in bundled:
            return bundled[path]
        if w.model_info is not None and w.model_info.path == path:
            return w.model_info.name
        return "demo model" if is_demo else Path(path).name

    def clear_decision_status(self) -> None:
        """The status bar's latency and token counts are the last decision's: gone with its model."""
        w = self.window
        for label in (w.status_latency, w.status_tokens):
            label.setText("")
            label.setToolTip("")

    def connect_remote(self) -> bool:
        """Decide on the remote server of the settings from now on (the engine thread checks it first)."""
        w = self.window
        w.settings_effects.stop_reconnect()
        try:
            config = w.settings.remote_config()
        except SettingsError as exc:
            w.settings_panel.set_connection_status(str(exc), False)
            w.show_message(f"Remote engine: {exc}", 10_000)
            if w.model_info is None:
                w.result_view.show_no_model(f"Remote engine: {exc}")
            return False
        w.model_button.setText(f"Connecting to {config.base_url}…")
        if w.model_info is None:
            w.result_view.show_loading(config.base_url)
        w.settings_panel.set_connection_status(f"Connecting to {config.base_url}…", None)
        w.show_message(f"Connecting to {config.base_url}…")
        w.controller.connect_remote(config)
        w.update_buttons()
        return True

    def test_connection(self) -> bool:
        """Ask the configured server for its models and whether it returns logprobs (off the UI thread)."""
        w = self.window
        if self._connection_task is not None and self._connection_task.running:
            return False
        try:
            config = w.settings.remote_config()
        except SettingsError as exc:
            w.settings_panel.set_connection_status(str(exc), False)
            return False
        task = w.ports.models.connection_task(config)
        self._connection_task = task
        w.settings_panel.set_testing(True)
        w.settings_panel.set_connection_status(f"Testing {config.base_url}…", None)

        def done(report) -> None:
            w.settings_panel.set_connection_status(*connection_message(report))
            w.settings_panel.set_remote_models(report.models)

        task.succeeded.connect(done)
        task.failed.connect(lambda message: w.settings_panel.set_connection_status(f"✗ {message}", False))
        task.finished.connect(lambda: w.settings_panel.set_testing(False))
        task.start()
        return True

    def show_model_loaded(self, info: ModelInfo) -> None:
        w = self.window
        first = self._shown_model is None
        changed = self._shown_model is not None and self._shown_model.path != info.path
        self._shown_model = info
        if changed:
            # the last decision was another model's (other options, maybe a picture): not shown as this one's
            w.controller.forget_result()
            w.inspector.clear()
            w.result_view.show_ready()
            self.clear_decision_status()
        if w.image_slot.pixels() and info.sees_images is False:
            w.image_slot.clear()
            w.image_slot.show_note(f"Picture removed:\n{info.name} cannot see images.")
        remote = info.remote
        notices = info.notices
        short, long = engine_summary(info.engine)
        w.status_model.setText(info.name)
        w.status_engine.setText(short)
        w.status_engine.setToolTip(long)
        if remote:
            w.model_button.setText(f"●  {info.name}   ·   remote")
            w.model_button.setToolTip(f"{info.path} (remote engine)\nconnected in {info.load_seconds:.1f} s · click to choose a local model")
            w.status_device.setText(f"remote {info.path.split('://', 1)[-1]}")
            w.status_device.setToolTip(info.path)
            w.settings_panel.set_connection_status(f"✓ Deciding on {info.path} with {info.name}", True)
        else:
            w.model_button.setText(f"●  {info.name}   ·   {info.device}")
            w.model_button.setToolTip(f"{info.path}\nloaded in {info.load_seconds:.1f} s · click to change")
            # A fallback is the user's business (they asked for AUTO and got the CPU): said where the device is shown.
            w.status_device.setText(f"{info.device}  ⚠" if notices else info.device)
            w.status_device.setToolTip("\n".join(notices))
        w.settings_panel.set_model_defaults(info.defaults)
        w.settings_panel.set_capture_budget(info.capture_budget)
        if not remote:  # a bundled demo too: the window reopens on it, the picker lists it first
            w.update_settings(settings=w.settings.with_recent_model(info.path))
        w.calibration_view.set_current(w.controller.model_key, w.settings.think)
        if first or w.result_view.currentWidget() is not w.result_view.main_page:
            if w.last_result is not None:
                w.result_view.show_result(w.last_result, w.temperature_for(w.last_request))
            else:
                w.result_view.show_ready()
        if remote:
            w.show_message(f"Connected to {info.name} in {info.load_seconds:.1f} s", 6000)
        else:
            loaded = f"{info.name} loaded on {info.device} in {info.load_seconds:.1f} s"
            if info.capture_budget is not None and w.settings.image_pixels == IMAGE_PIXELS_DEFAULT:
                loaded += f"; screen pictures at {info.capture_budget:,} pixels (this machine's measured budget)"
            if notices:  # stays until the next message, unlike the plain "loaded"
                w.show_message(f"{loaded} — {notices[-1]}", 0)
            else:
                w.show_message(loaded, 6000)
        w.update_buttons()
        w.model_ready.emit(info)

    def show_model_failed(self, message: str, path: str) -> None:
        w = self.window
        if w.settings.engine == "remote":
            w.settings_panel.set_connection_status(f"✗ {message}", False)
        if w.model_info is None:
            w.model_button.setText("Choose a model…")
            w.result_view.show_no_model(message)
        else:
            info = w.model_info
            w.model_button.setText(f"●  {info.name}   ·   {'remote' if info.remote else info.device}")
            what = "use the remote server" if w.settings.engine == "remote" else "load the model"
            w.result_view.show_error(f"Could not {what}: {message}")
            w.tabs.setCurrentWidget(w.result_view)
        if path and w.settings.last_model == path:
            w.update_settings(last_model=None)
        w.show_message(f"Model not loaded: {message}", 10_000)
        w.update_buttons()
        w.model_error.emit(message)

    def show_no_model(self) -> None:
        w = self.window
        self._shown_model = None
        w.model_button.setText("Choose a model…")
        w.status_model.setText("no model")
        w.status_device.setText("")
        w.status_engine.setText("")
        self.clear_decision_status()
        w.result_view.show_no_model()
        w.update_buttons()

    def restore_model_defaults(self) -> None:
        w = self.window
        if w.model_info is None:
            return
        restored = w.settings.sampling().with_model_defaults(w.model_info.defaults)
        w.update_settings(settings=w.settings.with_sampling(restored))
        w.show_message("Sampling restored to the model's defaults (drafts and seed kept)", 4000)
