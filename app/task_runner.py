"""One side job on a thread of its own (download, convert, doctor, a connection test), so neither the
window nor the engine waits for it: it reports progress, lines of text and its outcome as signals,
and can be cancelled. The jobs themselves are in app/model_jobs.py."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from decider.engine.core.errors import Cancelled, DeciderError

log = logging.getLogger(__name__)


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
                self.state = "failed"
                self.failed.emit(str(exc))
        except Exception as exc:
            log.error("%s failed:\n%s", self.name, traceback.format_exc())
            self.state = "failed"
            self.failed.emit(f"{type(exc).__name__}: {exc}")
        else:
            if self.cancelled():
                self.state = "cancelled"
                self.was_cancelled.emit()
            else:
                self.state = "done"
                self.succeeded.emit(outcome)
        finally:
            Task._running.discard(self)
            self.finished.emit()
