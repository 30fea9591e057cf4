"""The engine thread: a QObject worker living in its own QThread that owns the EngineService (a local
model folder) or the RemoteService (an OpenAI-compatible server), and the local API server on it.

Widgets never call the engine. They call the worker's request methods (ui.ports.EngineClient), which
queue the work into this thread, and get results back as signals. Cancellation does not go through
the queue (the thread is busy then): `cancel()` is called directly from the UI thread and sets a flag
the engine's should_stop polls between tokens.

Every failure becomes a signal with a plain message; nothing raised here reaches Qt.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QThread, Qt, Signal, Slot

from decider.engine.compile.devices import DeviceOptions
from decider.engine.core.errors import Cancelled, DeciderError, SettingsError
from decider.engine.core.info import ModelInfo
from decider.engine.decisions.types import DecisionRequest, DecisionResult

if TYPE_CHECKING:  # the API stack loads only when the API is switched on; a server's engine when first used
    from decider.engine.remote.engine import RemoteConfig

    from .api.server import ApiServer
    from .api.state import ApiDecision
    from .history import HistoryStore
    from .service import DecisionService

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ApiConfig:
    """Where and for whom the local API serves (app.api.server.ApiServer's arguments)."""

    host: str = "127.0.0.1"
    port: int = 8765
    api_key: str | None = None
    allow_origins: tuple[str, ...] = ()  # browser Origins allowed to call it (CORS); others get 403


class EngineWorker(QObject):
    # results
    model_loaded = Signal(ModelInfo)
    model_failed = Signal(str)
    decided = Signal(DecisionRequest, DecisionResult)
    failed = Signal(str)
    cancelled = Signal()
    busy = Signal(bool)
    progress = Signal(int, int)  # reasoning tokens drawn so far in the running decision, the most it may draw
    api_state = Signal(bool, str)  # running?, message
    api_decided = Signal(str, DecisionResult)  # question text, result (from the API server's thread)

    # requests (connected to the slots below; emitted from the UI thread, run in the worker thread)
    request_load = Signal(str, DeviceOptions, bool)
    request_remote = Signal(object)  # engine.remote.RemoteConfig (object: engine.remote loads the tokenizer, imported when used)
    request_decide = Signal(DecisionRequest, int)
    request_api = Signal(bool, ApiConfig)
    request_shutdown = Signal()

    def __init__(self, history_factory: Callable[[], HistoryStore] | None = None) -> None:
        super().__init__()
        self.service: DecisionService | None = None  # EngineService or RemoteService once a model is loaded
        self._history_factory = history_factory  # () -> app.history.HistoryStore, or None: no history
        self._history: HistoryStore | None = None
        self._api_server: ApiServer | None = None
        self._api_config: ApiConfig | None = None  # the API the user switched on: served on every local model
        self._lock = threading.Lock()
        self._submitted = 0  # decisions submitted so far (UI thread); each job is numbered by it
        self._cancel_upto = 0  # every job with an id <= this is cancelled
        self.request_load.connect(self._load_model, Qt.ConnectionType.QueuedConnection)
        self.request_remote.connect(self._use_remote, Qt.ConnectionType.QueuedConnection)
        self.request_decide.connect(self._decide_job, Qt.ConnectionType.QueuedConnection)
        self.request_api.connect(self._set_api, Qt.ConnectionType.QueuedConnection)
        self.request_shutdown.connect(self._shutdown, Qt.ConnectionType.QueuedConnection)

    # ----- called from the UI thread (ui.ports.EngineClient): each queues its work to the engine thread -----
    def load(self, path: str, options: DeviceOptions, is_demo: bool = False) -> None:
        """Load a local model folder (engine.devices.DeviceOptions) in place of the current engine."""
        self.request_load.emit(path, options, is_demo)

    def use_remote(self, config: RemoteConfig) -> None:
        """Decide on an OpenAI-compatible server (engine.remote.RemoteConfig) from now on."""
        self.request_remote.emit(config)

    def serve_api(self, enabled: bool, host: str = "127.0.0.1", port: int = 8765, api_key: str | None = None,
                  allow_origins: tuple[str, ...] = ()) -> None:
        """Serve the local API on the loaded model and each local model loaded after it (or stop serving)."""
        self.request_api.emit(enabled, ApiConfig(host, port, api_key or None, tuple(allow_origins)))

    def submit_decision(self, request: DecisionRequest) -> None:
        """Queue a decision. Nothing to keep: `cancel()` stops every decision submitted before it."""
        with self._lock:
            self._submitted += 1
            job = self._submitted  # its place in the queue, which cancel() compares against
        self.request_decide.emit(request, job)

    def cancel(self) -> None:
        """Cancel the running and every queued decision; one submitted afterwards runs (thread-safe, returns at once)."""
        with self._lock:
            self._cancel_upto = self._submitted

    def _is_cancelled(self, job: int) -> bool:
        with self._lock:
            return job <= self._cancel_upto

    # ----- slots (worker thread) -----
    @Slot(str, DeviceOptions, bool)
    def _load_model(self, path: str, options: DeviceOptions, is_demo: bool = False) -> None:
        self.busy.emit(True)
        try:
            from decider.engine.model.folder import inspect_folder

            from .config import demo_label, prompt_cache
            from .service import EngineService

            label = demo_label(path) or ("demo model" if is_demo else None)  # however it was chosen, a bundled model is labelled so
            is_demo = label is not None
            started = time.perf_counter()
            inspect_folder(path)  # plain-worded ModelError before any compile
            service = EngineService(path, options, self._history_store(), prompt_cache())
            self._stop_api()  # it serves the model being replaced
            self.service = service
            info = ModelInfo(
                path=str(Path(path)),
                name=label or service.model_name,
                device=service.runner.device,
                defaults=service.defaults,
                is_demo=is_demo,
                load_seconds=time.perf_counter() - started,
                engine=service.info,
                model_key=service.model_name,
                notices=tuple(service.runner.notices),
                sees_images=service.runner.vision is not None,
                capture_budget=service.capture_budget.budget if service.capture_budget is not None else None,
            )
            self.model_loaded.emit(info)
            if self._api_config is not None:
                self._start_api()
        except DeciderError as exc:
            self.model_failed.emit(str(exc))
        except Exception as exc:  # an engine bug must not take the window down
            log.error("model load failed:\n%s", traceback.format_exc())
            self.model_failed.emit(f"could not load {path}: {type(exc).__name__}: {exc}")
        finally:
            self.busy.emit(False)

    @Slot(object)
    def _use_remote(self, config: RemoteConfig) -> None:
        """Decide on an OpenAI-compatible server from now on (RemoteService); the server is asked for its
        models first, so an unreachable URL or a wrong key is reported now, not at the first decision."""
        self.busy.emit(True)
        try:
            from .service import RemoteService

            started = time.perf_counter()
            service = RemoteService(config, self._history_store())
            served = service.engine.models()
            name = service.model_name  # the configured name, else the server's first model
            if config.model and served and config.model not in served:
                raise SettingsError(
                    f"{config.base_url} does not serve {config.model!r} (it serves {', '.join(served[:8])}); "
                    "leave Model empty to use the first one"
                )
            self._stop_api()
            self.service = service
            info = ModelInfo(
                path=config.base_url, name=name, device="remote", defaults=service.defaults, is_demo=False, load_seconds=time.perf_counter() - started,
                engine=service.info, model_key=name,
            )
            self.model_loaded.emit(info)
            if self._api_config is not None:
                self._start_api()  # says why it does not serve
        except DeciderError as exc:
            self.model_failed.emit(str(exc))
        except Exception as exc:
            log.error("remote engine failed:\n%s", traceback.format_exc())
            self.model_failed.emit(f"could not use {config.base_url}: {type(exc).__name__}: {exc}")
        finally:
            self.busy.emit(False)

    def _history_store(self) -> HistoryStore | None:
        if self._history is None and self._history_factory is not None:
            try:
                self._history = self._history_factory()
            except Exception as exc:  # history is a convenience: never a reason not to load
                log.warning("decision history unavailable: %s", exc)
                self._history_factory = None
        return self._history

    @Slot(DecisionRequest, int)
    def _decide_job(self, request: DecisionRequest, job: int) -> None:
        if self._is_cancelled(job):
            self.cancelled.emit()
            return
        if self.service is None:
            self.failed.emit("no model is loaded: choose a model folder first")
            return
        self.busy.emit(True)
        try:
            result = self.service.decide(request, should_stop=lambda: self._is_cancelled(job), source="app",
                                         progress=self.progress.emit)
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
            self.busy.emit(False)

    # ----- the local API server on the loaded model -----
    @Slot(bool, ApiConfig)
    def _set_api(self, enabled: bool, config: ApiConfig) -> None:
        self._api_config = config if enabled else None
        if not enabled:
            self._stop_api()
            self.api_state.emit(False, "local API off")
            return
        self._start_api()

    def _start_api(self) -> None:
        """(Re)start the server the user asked for on the current engine, or say why it cannot run."""
        config = self._api_config
        self._stop_api()
        if config is None:
            return
        if self.service is None:
            self.api_state.emit(False, "local API waits for a model")
            return
        if self.service.info.remote:
            self.api_state.emit(False, "the local API serves local models only (the engine is a remote server)")
            return
        host, port = config.host, config.port
        try:
            from .api.server import ApiServer, is_loopback  # here: the window starts without the HTTP stack

            if not is_loopback(host) and not config.api_key:  # said in the app's words, not the CLI's flags
                self.api_state.emit(False, f"set an API key to serve on {host}: beyond this computer anyone could "
                                           "use the model (or serve on 127.0.0.1)")
                return
            server = ApiServer(self.service, host, port, api_key=config.api_key, allow_origins=config.allow_origins,
                               on_decision=self._on_api_decision)
            server.start()
            self._api_server = server
            url = server.url or f"http://{host}:{port}/v1"
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

    def _on_api_decision(self, decision: ApiDecision) -> None:
        """Called from the server's thread: hand the decision and its question to the UI (a queued signal)."""
        self.api_decided.emit(decision.request.question, decision.result)

    @Slot()
    def _shutdown(self) -> None:
        self._stop_api()
        self.service = None


class EngineThread:
    """The worker and its QThread, started together; `close()` cancels, stops and joins."""

    def __init__(self, history_factory: Callable[[], HistoryStore] | None = None) -> None:
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
