"""What a settings change sets in motion beyond the form, apart from any widget.

    device / exact changed, a local model in      → reload that folder (once)
    API switch, host, port, key or origins changed → (re)start or stop the local API server (once)
    engine local → remote, or a remote field        → connect to the server (debounced: typing a URL is one connect)
    engine remote → local                           → back to the last local model (else the last folder, else the demo)
    hotkey changed                                  → register the new one

The window hands every accepted change to `apply(old, new)` and only renders. What needs no rendering
(the API server) goes straight to the DecisionController; what the window shows while it happens (a
load, a connection, the hotkey's status) is asked for with a signal the window connects to its action.
Nothing happens when the values an effect depends on did not change.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from PySide6.QtCore import QObject, QTimer, Signal

from decider.engine.core.info import ModelInfo

from .decision_controller import DecisionController
from .ports import Settings

RELOAD_FIELDS = ("device", "vision_device", "exact")
REMOTE_FIELDS = ("remote_url", "remote_api_key", "remote_model", "remote_timeout", "remote_constraint")
API_FIELDS = ("api_enabled", "api_host", "api_port", "api_key", "api_allowed_origins")
RECONNECT_DELAY_MS = 150


def changed(old: Settings, new: Settings, names: Sequence[str]) -> bool:
    return any(getattr(old, name) != getattr(new, name) for name in names)


class SettingsEffects(QObject):
    load_requested = Signal(str, bool)  # a local folder to load: path, is_demo
    connect_requested = Signal()  # decide on the remote server of the settings from now on
    model_dropped = Signal()  # the engine switched to local and there is no local model to return to
    hotkey_changed = Signal(str)  # the new key sequence, to register

    def __init__(self, controller: DecisionController, settings: Settings, demo_dir: str | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.demo_dir = demo_dir
        self.last_local: tuple[str, bool] | None = None  # the local model to return to from a remote engine
        self._loading_local = False
        self._reconnect = QTimer(self, singleShot=True, interval=RECONNECT_DELAY_MS)
        self._reconnect.timeout.connect(self.connect_requested.emit)
        controller.model_ready.connect(self._on_model_ready)
        if settings.api_enabled:
            # The engine thread keeps this wish and serves each local model it loads from now on.
            self.serve_api(settings)

    @property
    def reconnect_pending(self) -> bool:
        return self._reconnect.isActive()

    def apply(self, old: Settings, new: Settings) -> None:
        """Act on one accepted change of the settings (old → new)."""
        if old.hotkey != new.hotkey:
            self.hotkey_changed.emit(new.hotkey)
        if changed(old, new, API_FIELDS) and (old.api_enabled or new.api_enabled):
            self.serve_api(new)
        if old.engine != new.engine:
            self._engine_changed(new)
        elif new.engine == "remote" and changed(old, new, REMOTE_FIELDS):
            self._reconnect.start()
        info = self.controller.model_info
        if changed(old, new, RELOAD_FIELDS) and new.engine == "local" and info is not None and not info.remote:
            self.load_requested.emit(info.path, info.is_demo)

    def serve_api(self, settings: Settings) -> None:
        self.controller.serve_api(settings.api_enabled, settings.api_host, settings.api_port,
                                  settings.api_key or None, tuple(settings.api_allowed_origins))

    def stop_reconnect(self) -> None:
        """A connection was started by hand: the pending one would only repeat it."""
        self._reconnect.stop()

    @contextmanager
    def loading_local(self) -> Iterator[None]:
        """While a chosen folder switches the engine setting back to local: that load is the switch."""
        self._loading_local = True
        try:
            yield
        finally:
            self._loading_local = False

    def _engine_changed(self, new: Settings) -> None:
        if new.engine == "remote":
            self._reconnect.start()
            return
        self._reconnect.stop()
        if self._loading_local:
            return
        local = self.last_local
        if local is None and new.last_model and os.path.isdir(new.last_model):
            local = (new.last_model, False)
        if local is None and self.demo_dir:
            local = (self.demo_dir, True)
        if local is not None:
            self.load_requested.emit(*local)
            return
        self.controller.forget_model()
        self.model_dropped.emit()

    def _on_model_ready(self, info: ModelInfo) -> None:
        if not info.remote:
            self.last_local = (info.path, info.is_demo)
