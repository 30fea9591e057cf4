"""The engine worker: a QObject living in its own QThread that owns the EngineService.

Widgets never call the engine. They emit requests (queued into this thread) and get results back as
signals. Cancellation does not go through the queue (the thread is busy then): `cancel()` is called
directly from the UI thread and sets a flag the engine's should_stop polls between tokens.

Every failure becomes a signal with a plain message; nothing raised here reaches Qt.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Qt, Signal, Slot

from engine.errors import Cancelled, DeciderError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelInfo:
    """What the UI shows about the loaded model (no engine objects)."""

    path: str
    name: str  # folder name, or "demo model"
    device: str
    defaults: object  # engine.settings.SamplingSettings from the model's generation_config
    layout: str
    context_length: int
    is_demo: bool
    load_seconds: float


class EngineWorker(QObject):
    # results
    model_loaded = Signal(object)  # ModelInfo
    model_failed = Signal(str)
    decided = Signal(object, object)  # DecisionRequest, DecisionResult
    failed = Signal(str)
    cancelled = Signal()
    busy = Signal(bool)
    progress = Signal(int)  # reasoning tokens generated so far in the running decision
    api_state = Signal(bool, str)  # running?, message
    api_decided = Signal(object, object)  # question text, DecisionResult (from the API server's thread)

    # requests (connected to the slots below; emitted from the UI thread, run in the worker thread)
    request_load = Signal(str, object, bool)
    request_decide = Signal(object, int)
    request_api = Signal(bool, str, int)
    request_shutdown = Signal()

    def __init__(self, history_factory=None) -> None:
        super().__init__()
        self.service = None  # app.service.EngineService once a model is loaded
        self._history_factory = history_factory  # () -> app.history.HistoryStore, or None: no history
        self._history = None
        self.model_info: ModelInfo | None = None
        self._api_server = None
        self._lock = threading.Lock()
        self._submitted = 0  # job ids handed out (UI thread)
        self._cancel_upto = 0  # every job with an id <= this is cancelled
        self._running_job = 0
        self.request_load.connect(self.load_model, Qt.QueuedConnection)
        self.request_decide.connect(self._decide_job, Qt.QueuedConnection)
        self.request_api.connect(self.set_api, Qt.QueuedConnection)
        self.request_shutdown.connect(self._shutdown, Qt.QueuedConnection)

    # ----- called from the UI thread -----
    def submit_decision(self, request) -> int:
        """Queue a decision; returns its job id (for cancel)."""
        with self._lock:
            self._submitted += 1
            job = self._submitted
        self.request_decide.emit(request, job)
        return job

    def cancel(self) -> None:
        """Cancel the running and every queued decision (thread-safe, returns at once)."""
        with self._lock:
            self._cancel_upto = self._submitted

    def _is_cancelled(self, job: int) -> bool:
        with self._lock:
            return job <= self._cancel_upto

    # ----- slots (worker thread) -----
    @Slot(str, object, bool)
    def load_model(self, path: str, options, is_demo: bool = False) -> None:
        self.busy.emit(True)
        try:
            from engine.model_folder import inspect_folder

            from .service import EngineService

            started = time.perf_counter()
            inspect_folder(path)  # plain-worded ModelError before any compile
            service = EngineService(path, options, self._history_store())
            was_serving = self._api_server is not None
            if was_serving:
                self._stop_api()
            self.service = service
            folder = service.runner.folder
            self.model_info = ModelInfo(
                path=str(Path(path)),
                name="demo model" if is_demo else service.model_name,
                device=service.runner.device,
                defaults=service.defaults,
                layout=folder.layout,
                context_length=folder.context_length,
                is_demo=is_demo,
                load_seconds=time.perf_counter() - started,
            )
            self.model_loaded.emit(self.model_info)
            if was_serving:
                self.set_api(True, *self._api_address)
        except DeciderError as exc:
            self.model_failed.emit(str(exc))
        except Exception as exc:  # an engine bug must not take the window down
            log.error("model load failed:\n%s", traceback.format_exc())
            self.model_failed.emit(f"could not load {path}: {type(exc).__name__}: {exc}")
        finally:
            self.busy.emit(False)

    def _history_store(self):
        if self._history is None and self._history_factory is not None:
            try:
                self._history = self._history_factory()
            except Exception as exc:  # history is a convenience: never a reason not to load
                log.warning("decision history unavailable: %s", exc)
                self._history_factory = None
        return self._history

    @Slot(object)
    def decide(self, request) -> None:
        """Run a decision (public slot; the UI uses submit_decision so it can cancel)."""
        with self._lock:
            self._submitted += 1
            job = self._submitted
        self._decide_job(request, job)

    @Slot(object, int)
    def _decide_job(self, request, job: int) -> None:
        if self._is_cancelled(job):
            self.cancelled.emit()
            return
        if self.service is None:
            self.failed.emit("no model is loaded: choose a model folder first")
            return
        self.busy.emit(True)
        self._running_job = job
        tokens = 0

        def should_stop() -> bool:
            nonlocal tokens
            if self._is_cancelled(job):
                return True
            if request.think:
                self.progress.emit(tokens)
                tokens += 1
            return False

        try:
            result = self.service.decide(request, should_stop=should_stop, source="app")
            if self._is_cancelled(job):
                self.cancelled.emit()
            else:
                self.decided.emit(request, result)
        except Cancelled:
            self.cancelled.emit()
        except DeciderError as exc:
            self.failed.emit(str(exc))
        except Exception as exc:
            log.error("decision failed:\n%s", traceback.format_exc())
            self.failed.emit(f"the engine failed: {type(exc).__name__}: {exc}")
        finally:
            self._running_job = 0
            self.busy.emit(False)

    # ----- the local API server (#5), if app.server exists -----
    _api_address: tuple[str, int] = ("127.0.0.1", 8765)

    @Slot(bool, str, int)
    def set_api(self, enabled: bool, host: str = "127.0.0.1", port: int = 8765) -> None:
        self._api_address = (host, port)
        if not enabled:
            self._stop_api()
            self.api_state.emit(False, "local API off")
            return
        if self._api_server is not None:
            self._stop_api()
        if self.service is None:
            self.api_state.emit(False, "local API waits for a model")
            return
        try:
            from .server import ApiServer
        except ImportError:
            self.api_state.emit(False, "the local API is not part of this build")
            return
        try:
            server = ApiServer(self.service, host, port, on_decision=self._on_api_decision)
            server.start()
            self._api_server = server
            url = getattr(server, "url", None) or f"http://{host}:{port}/v1"
            self.api_state.emit(True, f"serving {self.service.model_name} on {url}")
        except DeciderError as exc:
            self.api_state.emit(False, str(exc))
        except OSError as exc:
            self.api_state.emit(False, f"cannot serve on {host}:{port}: {exc.strerror or exc}")
        except Exception as exc:
            log.error("API server failed to start:\n%s", traceback.format_exc())
            self.api_state.emit(False, f"the local API failed to start: {type(exc).__name__}: {exc}")

    def _stop_api(self) -> None:
        server, self._api_server = self._api_server, None
        if server is None:
            return
        try:
            server.stop()
        except Exception:
            log.error("API server stop failed:\n%s", traceback.format_exc())

    def _on_api_decision(self, result, request=None) -> None:
        """Called from a server handler thread: hand the decision to the UI through a queued signal."""
        question = getattr(request, "question", "") if request is not None else ""
        self.api_decided.emit(question, result)

    @Slot()
    def _shutdown(self) -> None:
        self._stop_api()
        self.service = None


class EngineThread:
    """The worker and its QThread, started together; `close()` cancels, stops and joins."""

    def __init__(self, history_factory=None) -> None:
        self.thread = QThread()
        self.thread.setObjectName("decider-engine")
        self.worker = EngineWorker(history_factory)
        self.worker.moveToThread(self.thread)
        self.thread.start()

    def close(self, timeout_ms: int = 10_000) -> bool:
        """True when the thread has stopped. A model still compiling cannot be interrupted: then False."""
        if not self.thread.isRunning():
            return True
        self.worker.cancel()
        self.worker.request_shutdown.emit()
        self.thread.quit()
        if not self.thread.wait(timeout_ms):
            log.warning("the engine thread did not stop within %d ms", timeout_ms)
            return False
        self.worker._shutdown()  # the loop may have quit before the queued shutdown ran; the thread is gone now
        return True
