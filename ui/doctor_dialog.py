"""The doctor: what OpenVINO sees on this computer and whether a folder will run, every problem with
its fix."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import QListWidget, QListWidgetItem, QProgressBar, QPushButton, QWidget

from .ports import ModelTools
from .task_dialog import TaskDialog, label
from .theme import color, set_role


STATUS_COLORS = {"ok": "good", "info": "muted", "warn": "warn", "fail": "error"}
STATUS_MARKS = {"ok": "✓", "info": "·", "warn": "!", "fail": "✗"}


class DoctorDialog(TaskDialog):
    def __init__(self, tools: ModelTools, path: str | None, parent: QWidget | None = None, options=None) -> None:
        super().__init__(
            tools,
            "Doctor",
            "What OpenVINO sees on this computer, and whether the folder will run: every problem with its fix.",
            parent,
        )
        self.path = path
        self.options = options
        self.checks: list = []  # app.doctor.Check rows (status, text, fix), shown as they are
        self.folder_label = label(f"Model folder: {path}" if path else "No model folder: OpenVINO and the devices only.", "Caption")
        self.folder_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._layout.addWidget(self.folder_label)
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)
        self.progress.setTextVisible(False)
        self._layout.addWidget(self.progress)
        self.lines = QListWidget()
        self.lines.setWordWrap(True)
        self.lines.setMinimumHeight(240)
        self.lines.setSelectionMode(QListWidget.SelectionMode.NoSelection)
        self.lines.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self._layout.addWidget(self.lines, 1)
        self.summary = label("", "InfoBox")
        self.summary.hide()
        self._layout.addWidget(self.summary)
        self.again_button = QPushButton("Run again")
        self._buttons(self.again_button)
        self.again_button.clicked.connect(self.start)
        self.resize(720, 460)
        self.start()

    def start(self) -> bool:
        if self.running:
            return False
        self.lines.clear()
        self.summary.hide()
        self.progress.show()
        self._start(self.tools.doctor_task(self.path, self.options))
        return True

    def line_texts(self) -> list[str]:
        return [self.lines.item(i).text() for i in range(self.lines.count())]

    def _on_success(self, checks) -> None:
        self.outcome = None
        self.checks = list(checks)
        self.progress.hide()
        for check in self.checks:
            text = f"{STATUS_MARKS.get(check.status, '·')}  {check.text}"
            if check.fix:
                text += f"\n     → fix: {check.fix}"
            item = QListWidgetItem(text)
            item.setForeground(QBrush(color(STATUS_COLORS.get(check.status, "muted"))))
            item.setData(Qt.ItemDataRole.UserRole, check.status)
            self.lines.addItem(item)
        problems = [c for c in self.checks if c.status == "fail"]
        warnings = [c for c in self.checks if c.status == "warn"]
        if problems:
            set_role(self.summary, "ErrorBox")
            self.summary.setText(f"{len(problems)} problem{'s' if len(problems) != 1 else ''}: each line marked ✗ says how to fix it.")
        else:
            set_role(self.summary, "WarnBox" if warnings else "InfoBox")
            self.summary.setText("No problems found." + (f" {len(warnings)} advice line{'s' if len(warnings) != 1 else ''} (!)." if warnings else ""))
            if self.path:
                from types import SimpleNamespace

                self.outcome = SimpleNamespace(path=self.path)
                self.load_button.show()
        self.summary.show()

    def _on_failure(self, message: str) -> None:
        self.progress.hide()
        set_role(self.summary, "ErrorBox")
        self.summary.setText(f"The doctor itself failed: {message}")
        self.summary.show()

    def _on_cancelled(self) -> None:
        self.progress.hide()
