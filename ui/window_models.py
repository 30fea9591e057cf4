"""The main window's model side: choosing a folder, loading it, using a remote server, testing the
connection, and showing which model is in (header button, status bar, settings panel).

A mixin of MainWindow (it reads the window's settings, controller and widgets): one job, kept apart so
the window file stays readable.
"""

from __future__ import annotations

import os
from pathlib import Path

from decider.engine.errors import SettingsError

from .model_picker import ModelPickerDialog
from .result_view import engine_summary
from .window_parts import connection_message


class ModelActions:
    model_picker = None  # the picker while it is open
    _shown_model = None  # the model the window shows (None until the first one is in)

    def choose_model(self) -> None:
        if self.loading_path is not None:
            return
        current = self.model_info.path if self.model_info else None
        try:
            options = self.settings.device_options()
        except SettingsError:
            options = None
        bundled = dict(self.ports.demo_models)
        dialog = ModelPickerDialog(self.ports.models, list(self.settings.recent_models), current, self.demo_dir, self,
                                   doctor_options=options, bundled=bundled)
        self.model_picker = dialog  # while it is open (tests, screenshots)
        try:
            accepted = dialog.exec() and dialog.chosen
        finally:
            self.model_picker = None
        if accepted:
            self.load_model(dialog.chosen, is_demo=dialog.chosen == self.demo_dir or dialog.chosen in bundled)

    def start(self, path: str | None, is_demo: bool = False) -> None:
        """The first model at start: the remote server when that is the engine, else the local folder."""
        if self.settings.engine == "remote":
            self.connect_remote()
        elif path is not None:
            self.load_model(path, is_demo)

    def load_model(self, path: str, is_demo: bool = False) -> None:
        """Load off the UI thread; the window stays usable (and shows the old model until the new one is in)."""
        path = os.path.abspath(os.path.expanduser(str(path)))
        try:
            options = self.settings.device_options()
        except SettingsError as exc:
            self._on_model_failed(str(exc), "")
            return
        if self.settings.engine != "local":  # choosing a folder means the local engine
            with self.settings_effects.loading_local():
                self._update_settings(engine="local")
        name = "demo model" if is_demo else Path(path).name
        self.model_button.setText(f"Loading {name}…")
        if self.model_info is None:
            self.result_view.show_loading(name)
        self.show_message(f"Loading {path} on {options.device}…")
        self.controller.load_model(path, options, is_demo)
        self._update_buttons()

    def connect_remote(self) -> bool:
        """Decide on the remote server of the settings from now on (the engine thread checks it first)."""
        self.settings_effects.stop_reconnect()
        try:
            config = self.settings.remote_config()
        except SettingsError as exc:
            self.settings_panel.set_connection_status(str(exc), False)
            self.show_message(f"Remote engine: {exc}", 10_000)
            if self.model_info is None:
                self.result_view.show_no_model(f"Remote engine: {exc}")
            return False
        self.model_button.setText(f"Connecting to {config.base_url}…")
        if self.model_info is None:
            self.result_view.show_loading(config.base_url)
        self.settings_panel.set_connection_status(f"Connecting to {config.base_url}…", None)
        self.show_message(f"Connecting to {config.base_url}…")
        self.controller.connect_remote(config)
        self._update_buttons()
        return True

    def test_connection(self) -> bool:
        """Ask the configured server for its models and whether it returns logprobs (off the UI thread)."""
        if self._connection_task is not None and self._connection_task.running:
            return False
        try:
            config = self.settings.remote_config()
        except SettingsError as exc:
            self.settings_panel.set_connection_status(str(exc), False)
            return False
        task = self.ports.models.connection_task(config)
        self._connection_task = task
        self.settings_panel.set_testing(True)
        self.settings_panel.set_connection_status(f"Testing {config.base_url}…", None)

        def done(report) -> None:
            self.settings_panel.set_connection_status(*connection_message(report))
            self.settings_panel.set_remote_models(report.models)

        task.succeeded.connect(done)
        task.failed.connect(lambda message: self.settings_panel.set_connection_status(f"✗ {message}", False))
        task.finished.connect(lambda: self.settings_panel.set_testing(False))
        task.start()
        return True

    def _on_model_loaded(self, info) -> None:
        first = self._shown_model is None
        changed = not first and self._shown_model.path != info.path
        self._shown_model = info
        if changed:
            # the last decision was another model's (other options, maybe a picture): not shown as this one's
            self.controller.forget_result()
            self.inspector.clear()
            self.result_view.show_ready()
        if self.image_slot.pixels() and getattr(info, "sees_images", None) is False:
            self.image_slot.clear()
            self.image_slot.show_note(f"Picture removed:\n{info.name} cannot see images.")
        remote = getattr(info, "remote", False)
        notices = tuple(getattr(info, "notices", ()))
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
            self.model_button.setText(f"●  {info.name}   ·   {info.device}")
            self.model_button.setToolTip(f"{info.path}\nloaded in {info.load_seconds:.1f} s · click to change")
            # A fallback is the user's business (they asked for AUTO and got the CPU): said where the device is shown.
            self.status_device.setText(f"{info.device}  ⚠" if notices else info.device)
            self.status_device.setToolTip("\n".join(notices))
        self.settings_panel.set_model_defaults(info.defaults)
        if not remote:  # a bundled demo too: the window reopens on it, the picker lists it first
            self._update_settings(settings=self.settings.with_recent_model(info.path))
        self.calibration_view.set_current(self.controller.model_key, self.settings.think)
        if first or self.result_view.currentWidget() is not self.result_view.main_page:
            if self.last_result is not None:
                self.result_view.show_result(self.last_result, self._temperature(self.last_request))
            else:
                self.result_view.show_ready()
        if remote:
            self.show_message(f"Connected to {info.name} in {info.load_seconds:.1f} s", 6000)
        else:
            loaded = f"{info.name} loaded on {info.device} in {info.load_seconds:.1f} s"
            if notices:  # stays until the next message, unlike the plain "loaded"
                self.show_message(f"{loaded} — {notices[-1]}", 0)
            else:
                self.show_message(loaded, 6000)
        self._update_buttons()
        self.model_ready.emit(info)

    def _on_model_failed(self, message: str, path: str) -> None:
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
