"""The frame the model-management dialogs share: one task (ui.ports.TaskHandle) at a time, its progress
and outcome, Cancel while it runs (and on close), and "Load model" when it left a usable folder."""

from __future__ import annotations

from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from .ports import ModelTools, TaskHandle


def label(text: str = "", name: str | None = None, wrap: bool = True) -> QLabel:
    label = QLabel(text)
    if name:
        label.setObjectName(name)
    label.setWordWrap(wrap)
    return label


class TaskDialog(QDialog):
    """A dialog that runs one task (ui.ports.TaskHandle) at a time and cancels it when closed."""

    def __init__(self, tools: ModelTools, title: str, subtitle: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tools = tools
        self.setWindowTitle(title)
        self.setMinimumWidth(640)
        self.task: TaskHandle | None = None
        self._busy = False  # from start until the task's `finished` reaches this (UI) thread
        self.chosen: str | None = None  # the folder to load after a successful job
        self.outcome: object = None  # what the finished task gave (its `succeeded` value)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(20, 18, 20, 18)
        self._layout.setSpacing(8)
        head = QLabel(title)
        head.setStyleSheet("font-size: 14pt; font-weight: 700;")
        self._layout.addWidget(head)
        self._layout.addWidget(label(subtitle, "Caption"))

    def _buttons(self, primary: QPushButton) -> None:
        """Close / Cancel / the primary action / Load model, right-aligned."""
        row = QHBoxLayout()
        self.extra_buttons = QHBoxLayout()
        row.addLayout(self.extra_buttons)
        row.addStretch(1)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.reject)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("Danger")
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.hide()
        self.primary_button = primary
        primary.setObjectName("Primary")
        self.load_button = QPushButton("Load model")
        self.load_button.setObjectName("Primary")
        self.load_button.clicked.connect(self._load)
        self.load_button.hide()
        for button in (self.close_button, self.cancel_button, primary, self.load_button):
            row.addWidget(button)
        self._layout.addLayout(row)

    # ----- the task -----
    def _start(self, task: TaskHandle) -> None:
        self.task = task
        self._busy = True
        self.outcome = None
        self.load_button.hide()
        self.primary_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.cancel_button.setText("Cancel")
        self.cancel_button.show()
        task.progress.connect(self._on_progress)
        task.line.connect(self._on_line)
        task.succeeded.connect(self._on_success)
        task.failed.connect(self._on_failure)
        task.was_cancelled.connect(self._on_cancelled)
        task.finished.connect(self._on_finished)
        task.start()

    @property
    def running(self) -> bool:
        # Not task.running: the job's thread ends before its queued signals (the outcome) arrive here.
        return self.task is not None and self._busy

    def cancel(self) -> None:
        if self.running:
            self.cancel_button.setEnabled(False)
            self.cancel_button.setText("Cancelling…")
            if self.task is not None:
                self.task.cancel()

    def _detach(self) -> None:
        task, self.task = self.task, None
        if task is None:
            return
        for signal in (task.progress, task.line, task.succeeded, task.failed, task.was_cancelled, task.finished):
            try:
                signal.disconnect()
            except (RuntimeError, TypeError):
                pass

    def _on_finished(self) -> None:
        self._busy = False
        self.cancel_button.hide()
        self.primary_button.setEnabled(True)
        self._grow()

    def _grow(self) -> None:
        """Make room for text that appeared (word-wrapped labels do not resize a shown dialog)."""
        layout = self._layout
        layout.activate()
        needed = layout.totalHeightForWidth(self.width()) if layout.hasHeightForWidth() else layout.sizeHint().height()
        if self.height() < needed:
            self.resize(self.width(), needed)

    def _on_progress(self, done, total) -> None:
        pass

    def _on_line(self, text: str) -> None:
        pass

    def _on_success(self, outcome) -> None:
        self.outcome = outcome

    def _on_failure(self, message: str) -> None:
        pass

    def _on_cancelled(self) -> None:
        pass

    def _load(self) -> None:
        path = getattr(self.outcome, "path", None)
        if path:
            self.chosen = str(path)
            self.accept()

    def reject(self) -> None:
        if self.running and self.task is not None:
            self.task.cancel()  # what a download fetched is kept for the next pull
        self._detach()
        super().reject()

    def done(self, code: int) -> None:
        if code == QDialog.DialogCode.Accepted:
            self._detach()
        super().done(code)
