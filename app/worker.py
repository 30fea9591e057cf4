"""The engine worker: a QObject living in its own QThread that owns the EngineService (a local model
folder) or the RemoteService (an OpenAI-compatible server, #10).

Widgets never call the engine. They emit requests (queued into this thread) and get results back as
signals. Cancellation does not go through the queue (the thread is busy then): `cancel()` is called
directly from the UI thread and sets a flag the engine's should_stop polls between tokens.

Every failure becomes a signal with a plain message; nothing raised here reaches Qt.

`Task` runs the slower side jobs (download, convert, doctor, a remote connection test) on a thread of
their own, so neither the window nor the engine waits for them; each reports progress, lines of text
and its outcome as signals, and can be cancelled.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QThread, Qt, Signal, Slot

from engine.errors import Cancelled, DeciderError, SettingsError

if TYPE_CHECKING:  # the API stack loads only when the API is switched on
    from .api.state import ApiDecision

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
    engine: dict = field(default_factory=dict)  # service.describe(): kind local/remote, logprobs exactness, …
    model_key: str = ""  # the model name history and calibration are filed under (service.model_name)

    @property
    def remote(self) -> bool:
        return self.engine.get("kind") == "remote"


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
    request_remote = Signal(object)  # engine.remote.RemoteConfig
    request_decide = Signal(object, int)
    request_api = Signal(bool, str, int)
    request_shutdown = Signal()

    def __init__(self, history_factory=None) -> None:
        super().__init__()
        self.service = None  # app.service.EngineService once a model is loaded
        self._history_factory = history_factory  # () -> app.history.HistoryStore, or None: no history
        self._history = None
        self._api_server = None
        self._lock = threading.Lock()
        self._submitted = 0  # job ids handed out (UI thread)
        self._cancel_upto = 0  # every job with an id <= this is cancelled
        self.request_load.connect(self._load_model, Qt.QueuedConnection)
        self.request_remote.connect(self._use_remote, Qt.QueuedConnection)
        self.request_decide.connect(self._decide_job, Qt.QueuedConnection)
        self.request_api.connect(self._set_api, Qt.QueuedConnection)
        self.request_shutdown.connect(self._shutdown, Qt.QueuedConnection)

    # ----- called from the UI thread (ui.ports.EngineClient): each queues its work to the engine thread -----
    def load(self, path: str, options, is_demo: bool = False) -> None:
        """Load a local model folder (engine.devices.DeviceOptions) in place of the current engine."""
        self.request_load.emit(path, options, is_demo)

    def use_remote(self, config) -> None:
        """Decide on an OpenAI-compatible server (engine.remote.RemoteConfig) from now on."""
        self.request_remote.emit(config)

    def serve_api(self, enabled: bool, host: str = "127.0.0.1", port: int = 8765) -> None:
        """Start (or stop) the local API on the loaded model."""
        self.request_api.emit(enabled, host, port)

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
    def _load_model(self, path: str, options, is_demo: bool = False) -> None:
        self.busy.emit(True)
        try:
            from engine.model_folder import inspect_folder

            from .config import is_demo_model
            from .service import EngineService

            is_demo = is_demo or is_demo_model(path)  # however it was chosen, the bundled model is labelled so
            started = time.perf_counter()
            inspect_folder(path)  # plain-worded ModelError before any compile
            service = EngineService(path, options, self._history_store())
            was_serving = self._api_server is not None
            if was_serving:
                self._stop_api()
            self.service = service
            folder = service.runner.folder
            info = ModelInfo(
                path=str(Path(path)),
                name="demo model" if is_demo else service.model_name,
                device=service.runner.device,
                defaults=service.defaults,
                layout=folder.layout,
                context_length=folder.context_length,
                is_demo=is_demo,
                load_seconds=time.perf_counter() - started,
                engine=service.describe(),
                model_key=service.model_name,
            )
            self.model_loaded.emit(info)
            if was_serving:
                self._set_api(True, *self._api_address)
        except DeciderError as exc:
            self.model_failed.emit(str(exc))
        except Exception as exc:  # an engine bug must not take the window down
            log.error("model load failed:\n%s", traceback.format_exc())
            self.model_failed.emit(f"could not load {path}: {type(exc).__name__}: {exc}")
        finally:
            self.busy.emit(False)

    @Slot(object)
    def _use_remote(self, config) -> None:
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
            if self._api_server is not None:
                self._stop_api()
                self.api_state.emit(False, "the local API serves local models only")
            self.service = service
            info = ModelInfo(
                path=config.base_url, name=name, device="remote", defaults=service.defaults, layout="remote",
                context_length=0, is_demo=False, load_seconds=time.perf_counter() - started,
                engine=service.describe(), model_key=name,
            )
            self.model_loaded.emit(info)
        except DeciderError as exc:
            self.model_failed.emit(str(exc))
        except Exception as exc:
            log.error("remote engine failed:\n%s", traceback.format_exc())
            self.model_failed.emit(f"could not use {getattr(config, 'base_url', config)}: {type(exc).__name__}: {exc}")
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

    @Slot(object, int)
    def _decide_job(self, request, job: int) -> None:
        if self._is_cancelled(job):
            self.cancelled.emit()
            return
        if self.service is None:
            self.failed.emit("no model is loaded: choose a model folder first")
            return
        self.busy.emit(True)
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
            self.busy.emit(False)

    # ----- the local API server -----
    _api_address: tuple[str, int] = ("127.0.0.1", 8765)

    @Slot(bool, str, int)
    def _set_api(self, enabled: bool, host: str = "127.0.0.1", port: int = 8765) -> None:
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
        if not hasattr(self.service, "runner"):
            self.api_state.emit(False, "the local API serves local models only (the engine is a remote server)")
            return
        try:
            from .api.server import ApiServer
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

    def _on_api_decision(self, decision: ApiDecision) -> None:
        """Called from the server's thread: hand the decision and its question to the UI (a queued signal)."""
        self.api_decided.emit(decision.request.question, decision.result)

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


# ---------------------------------------------------------------------------------------------------------------
# Side jobs: download, convert, doctor, connection test


class Task(QObject):
    """One job on a thread of its own. `fn(task)` does the work and may call `task.report(done, total)`,
    `task.log(line)` and `task.cancelled()`; it returns the outcome or raises (Cancelled, DeciderError…).

    Signals are emitted from the job's thread and reach widgets queued, on the UI thread.
    """

    progress = Signal(object, object)  # done, total (Python ints: byte counts beyond 2 GB); total 0 = unknown
    line = Signal(str)
    succeeded = Signal(object)
    failed = Signal(str)
    was_cancelled = Signal()
    finished = Signal()

    _running: set["Task"] = set()  # keeps every running task (and its QObject) alive until it ends

    def __init__(self, fn: Callable[["Task"], object], name: str = "task") -> None:
        super().__init__()
        self._fn = fn
        self.name = name
        self._cancel = threading.Event()
        self._on_cancel: list[Callable[[], None]] = []
        self._thread: threading.Thread | None = None
        self.outcome: object = None
        self.error: str | None = None
        self.state = "new"  # new, running, done, failed, cancelled

    # ----- the job's side -----
    def report(self, done: int, total: int) -> None:
        self.progress.emit(int(done), int(total))

    def log(self, text: str) -> None:
        self.line.emit(str(text))

    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def on_cancel(self, hook: Callable[[], None]) -> None:
        """Run hook (from the UI thread) when the task is cancelled, e.g. to kill a child process."""
        self._on_cancel.append(hook)
        if self._cancel.is_set():
            hook()

    # ----- the UI's side -----
    def start(self) -> "Task":
        self.state = "running"
        Task._running.add(self)
        self._thread = threading.Thread(target=self._run, name=f"decider-{self.name}", daemon=True)
        self._thread.start()
        return self

    def cancel(self) -> None:
        if self._cancel.is_set():
            return
        self._cancel.set()
        for hook in list(self._on_cancel):
            try:
                hook()
            except Exception:  # a hook that fails must not stop the others
                log.warning("cancel hook of %s failed:\n%s", self.name, traceback.format_exc())

    @property
    def running(self) -> bool:
        return self.state == "running"

    @classmethod
    def cancel_all(cls, timeout: float = 5.0) -> None:
        """At exit: cancel every running task (ending child processes) and give them a moment to stop."""
        tasks = list(cls._running)
        for task in tasks:
            task.cancel()
        deadline = time.monotonic() + timeout
        for task in tasks:
            task.wait(max(0.0, deadline - time.monotonic()))

    def wait(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def _run(self) -> None:
        try:
            outcome = self._fn(self)
        except Cancelled:
            self.state = "cancelled"
            self.was_cancelled.emit()
        except DeciderError as exc:
            if self.cancelled():  # e.g. a child process killed by cancel() fails on its way out
                self.state = "cancelled"
                self.was_cancelled.emit()
            else:
                self.state, self.error = "failed", str(exc)
                self.failed.emit(self.error)
        except Exception as exc:
            log.error("%s failed:\n%s", self.name, traceback.format_exc())
            self.state, self.error = "failed", f"{type(exc).__name__}: {exc}"
            self.failed.emit(self.error)
        else:
            if self.cancelled():
                self.state = "cancelled"
                self.was_cancelled.emit()
            else:
                self.state, self.outcome = "done", outcome
                self.succeeded.emit(outcome)
        finally:
            Task._running.discard(self)
            self.finished.emit()


@dataclass(frozen=True)
class ModelJobOutcome:
    """What a download or a conversion left behind."""

    path: str
    usable: bool  # a ready OpenVINO export Decider can load
    kind: str  # "export", "checkpoint", "broken", "incomplete"
    summary: str


def connection_task(config) -> Task:
    """engine.remote.RemoteEngine(config).test_connection() → ConnectionReport (models, logprobs?, detail)."""

    def run(task: Task):
        from engine.remote import RemoteEngine

        return RemoteEngine(config).test_connection()

    return Task(run, "connection-test")


def pull_task(repo_id: str, revision: str | None = None, dest_root: str | Path | None = None) -> Task:
    """app.pull.pull with byte progress and cancel (what arrived is kept: the next pull resumes)."""

    def run(task: Task) -> ModelJobOutcome:
        from .models import models_root
        from .pull import pull, summary

        root = Path(dest_root) if dest_root else models_root()
        task.log(f"downloading {repo_id}{f' @ {revision}' if revision else ''} into {root}")
        result = pull(repo_id, revision or None, root, progress=task.report, cancel=task.cancelled)
        usable, text = summary(result)
        kind = result.entry.kind if result.entry is not None else "broken"
        return ModelJobOutcome(str(result.path), usable and kind == "export", kind, text)

    return Task(run, "pull")


def _kill_tree(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            subprocess.run(["taskkill", "/F", "/T", "/PID", str(proc.pid)], capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        proc.kill()


def convert_task(hf_dir: str | Path, out_dir: str | Path, weights: str = "int4-npu",
                 command: list[str] | None = None) -> Task:
    """`decider convert` in a child process (optimum-intel runs in a grandchild): its lines stream to the
    task's log; cancel ends the whole process tree and removes the unfinished export.
    `command` replaces the child's command line (tests)."""

    hf_dir, out_dir = Path(hf_dir).expanduser(), Path(out_dir).expanduser()

    def run(task: Task) -> ModelJobOutcome:
        from .convert import INSTALL_HINT, WEIGHTS, ConvertError, check_checkpoint, optimum_available
        from .models import describe

        if weights not in WEIGHTS:
            raise SettingsError(f"weights must be one of {', '.join(WEIGHTS)} (got {weights!r})")
        check_checkpoint(hf_dir)
        if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
            raise SettingsError(f"{out_dir} exists and is not empty; choose a new folder")
        if not optimum_available():
            raise ConvertError(f"converting needs optimum-intel, which is not installed: {INSTALL_HINT}")
        existed = out_dir.exists()
        root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        argv = command or [sys.executable, "-m", "app.cli", "convert", str(hf_dir), str(out_dir), "--weights", weights]
        extra = {"start_new_session": True} if os.name == "posix" else {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
        proc = subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", bufsize=1, **extra)
        task.on_cancel(lambda: _kill_tree(proc))
        lines: list[str] = []
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                text = raw.rstrip("\n").split("\r")[-1].rstrip()
                if text.strip():
                    lines.append(text)
                    task.log(text)
            code = proc.wait()
        finally:
            if proc.poll() is None:
                _kill_tree(proc)
                proc.wait()
        if task.cancelled():
            if not existed:
                shutil.rmtree(out_dir, ignore_errors=True)  # the unfinished export; nothing of the user's
            raise Cancelled("conversion cancelled")
        if code != 0:
            reason = next((l for l in reversed(lines) if l.startswith("decider: error:")), None)
            raise ConvertError(reason.removeprefix("decider: error: ") if reason else f"the conversion failed (exit {code})")
        entry = describe(out_dir)
        tail = [l for l in lines if l.lstrip().startswith(("✓", "test decision", "next:")) or l.startswith("  ")]
        return ModelJobOutcome(str(out_dir), entry.kind == "export", entry.kind, "\n".join(tail[-4:]) or f"converted into {out_dir}")

    return Task(run, "convert")


def doctor_task(path: str | Path | None, options=None) -> Task:
    """app.doctor.run_doctor → list of app.doctor.Check (status ok/info/warn/fail, text, fix)."""

    def run(task: Task):
        from .doctor import run_doctor

        report = run_doctor(path, options)
        return list(report.checks)

    return Task(run, "doctor")
