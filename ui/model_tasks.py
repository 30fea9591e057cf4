"""Model management from the model picker (#9): download, convert, doctor.

Each dialog runs its job as a task from the application's ModelTools (a thread of its own, never the UI thread nor the
engine's), shows its progress, can cancel it, and on success offers to load the model: the dialog's
`chosen` is then the folder to load.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QGuiApplication
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.errors import SettingsError

from .ports import ModelTools
from .theme import color, set_role

WEIGHT_CHOICES = (
    ("int4-npu", "int4 symmetric, channel-wise, every layer: the NPU's preferred format (smallest)"),
    ("int8", "int8 weights: a middle ground for CPU and GPU"),
    ("fp16", "16-bit weights: the most faithful, twice the size of int8"),
)


def _label(text: str = "", name: str | None = None, wrap: bool = True) -> QLabel:
    label = QLabel(text)
    if name:
        label.setObjectName(name)
    label.setWordWrap(wrap)
    return label


class _TaskDialog(QDialog):
    """A dialog that runs one task (ui.ports.TaskHandle) at a time and cancels it when closed."""

    def __init__(self, tools: ModelTools, title: str, subtitle: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tools = tools
        self.setWindowTitle(title)
        self.setMinimumWidth(640)
        self.task = None
        self._busy = False  # from start until the task's `finished` reaches this (UI) thread
        self.chosen: str | None = None  # the folder to load after a successful job
        self.outcome = None
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(20, 18, 20, 18)
        self._layout.setSpacing(8)
        head = QLabel(title)
        head.setStyleSheet("font-size: 14pt; font-weight: 700;")
        self._layout.addWidget(head)
        self._layout.addWidget(_label(subtitle, "Caption"))

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
    def _start(self, task) -> None:
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
        layout = self.layout()
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
        if self.running:
            self.task.cancel()  # what a download fetched is kept for the next pull
        self._detach()
        super().reject()

    def done(self, code: int) -> None:
        if code == QDialog.Accepted:
            self._detach()
        super().done(code)


# ------------------------------------------------------------------------------------------------ download


class DownloadDialog(_TaskDialog):
    def __init__(self, tools: ModelTools, parent: QWidget | None = None, dest_root: str | None = None) -> None:
        super().__init__(
            tools,
            "Download a model",
            "From the Hugging Face Hub (or the mirror in HF_ENDPOINT). A ready OpenVINO export can be loaded at once; "
            "a Qwen3.5 checkpoint needs Convert… first. An interrupted download resumes where it stopped.",
            parent,
        )
        self.dest_root = str(dest_root or tools.models_root())
        grid = QGridLayout()
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(6)
        self.repo = QLineEdit()
        self.repo.setPlaceholderText("owner/name")
        self.repo.setToolTip("the repository id on the hub, e.g. an OpenVINO export of a Qwen3.5 model")
        self.revision = QLineEdit()
        self.revision.setPlaceholderText("main")
        self.revision.setToolTip("branch, tag or commit (empty: main)")
        grid.addWidget(QLabel("Repository"), 0, 0)
        grid.addWidget(self.repo, 0, 1)
        grid.addWidget(QLabel("Revision"), 1, 0)
        grid.addWidget(self.revision, 1, 1)
        grid.setColumnStretch(1, 1)
        self._layout.addSpacing(4)
        self._layout.addLayout(grid)
        self.where = _label(f"Saved under {self.dest_root}", "RangeHint")
        self._layout.addWidget(self.where)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self._layout.addWidget(self.progress)
        self.progress_label = _label("", "Caption")
        self.progress_label.hide()
        self._layout.addWidget(self.progress_label)
        self.status = _label("", "InfoBox")
        self.status.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.status.hide()
        self._layout.addWidget(self.status)
        self._layout.addStretch(1)
        self.download_button = QPushButton("Download")
        self._buttons(self.download_button)
        self.convert_button = QPushButton("Convert…")
        self.convert_button.setToolTip("this download is a checkpoint: convert it to an OpenVINO export")
        self.convert_button.clicked.connect(self._convert)
        self.convert_button.hide()
        self.extra_buttons.addWidget(self.convert_button)
        self.download_button.clicked.connect(self.start)
        self.repo.returnPressed.connect(self.start)
        self.repo.textChanged.connect(lambda text: self.download_button.setEnabled(bool(text.strip()) and not self.running))
        self.download_button.setEnabled(False)

    def _say(self, text: str, role: str = "InfoBox") -> None:
        set_role(self.status, role)
        self.status.setText(text)
        self.status.setVisible(bool(text))
        self._grow()

    def start(self) -> bool:
        if self.running:
            return False
        try:
            repo_id = self.tools.check_repo_id(self.repo.text())
        except SettingsError as exc:
            self._say(str(exc), "ErrorBox")
            return False
        self.convert_button.hide()
        self.progress.setRange(0, 0)
        self.progress.show()
        self.progress_label.setText(f"Asking the hub about {repo_id}…")
        self.progress_label.show()
        self._say("")
        self._start(self.tools.pull_task(repo_id, self.revision.text().strip() or None, self.dest_root))
        return True

    def _on_progress(self, done, total) -> None:
        if total > 0:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * min(done, total) / total))
            self.progress_label.setText(f"{self.tools.human_size(done)} of {self.tools.human_size(total)} · {done / total:.0%}")

    def _on_line(self, text: str) -> None:
        self.progress_label.setText(text)

    def _on_success(self, outcome) -> None:
        super()._on_success(outcome)
        self.progress.setRange(0, 1000)
        self.progress.setValue(1000)
        self.progress_label.hide()
        if outcome.usable:
            self._say(outcome.summary, "InfoBox")
            self.load_button.show()
            self.load_button.setFocus()
        elif outcome.kind == "checkpoint":
            self._say(outcome.summary, "WarnBox")
            self.convert_button.show()
        else:
            self._say(outcome.summary, "ErrorBox")

    def _on_failure(self, message: str) -> None:
        self.progress.hide()
        self.progress_label.hide()
        self._say(f"Download failed: {message}", "ErrorBox")

    def _on_cancelled(self) -> None:
        self.progress.hide()
        self.progress_label.hide()
        self._say("Cancelled. What arrived is kept: download the same repository again to resume.", "WarnBox")

    def _convert(self) -> None:
        path = getattr(self.outcome, "path", None)
        dialog = ConvertDialog(self.tools, self, hf_dir=path)
        if dialog.exec() and dialog.chosen:
            self.chosen = dialog.chosen
            self.accept()


# ------------------------------------------------------------------------------------------------ convert


class ConvertDialog(_TaskDialog):
    def __init__(self, tools: ModelTools, parent: QWidget | None = None, hf_dir: str | None = None,
                 optimum: bool | None = None) -> None:
        super().__init__(
            tools,
            "Convert a checkpoint",
            "A Hugging Face Qwen3.5 checkpoint (config.json, *.safetensors, tokenizer.json) to an OpenVINO export, "
            "with optimum-intel in a separate process, then one test decision on the CPU.",
            parent,
        )
        self.optimum = tools.optimum_available() if optimum is None else optimum
        self.install_hint = tools.install_hint
        grid = QGridLayout()
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(6)
        self.hf_dir = QLineEdit(hf_dir or "")
        self.hf_dir.setPlaceholderText("checkpoint folder")
        self.out_dir = QLineEdit(f"{hf_dir}-ov" if hf_dir else "")
        self.out_dir.setPlaceholderText("new folder for the export")
        hf_browse = QPushButton("Browse…")
        hf_browse.clicked.connect(self._browse_hf)
        out_browse = QPushButton("Browse…")
        out_browse.clicked.connect(self._browse_out)
        self.weights = QComboBox()
        for value, tip in WEIGHT_CHOICES:
            self.weights.addItem(value, value)
            self.weights.setItemData(self.weights.count() - 1, tip, Qt.ToolTipRole)
        self.weights.setToolTip("\n".join(f"{v}: {t}" for v, t in WEIGHT_CHOICES))
        grid.addWidget(QLabel("Checkpoint"), 0, 0)
        grid.addWidget(self.hf_dir, 0, 1)
        grid.addWidget(hf_browse, 0, 2)
        grid.addWidget(QLabel("Output folder"), 1, 0)
        grid.addWidget(self.out_dir, 1, 1)
        grid.addWidget(out_browse, 1, 2)
        grid.addWidget(QLabel("Weights"), 2, 0)
        grid.addWidget(self.weights, 2, 1, Qt.AlignLeft)
        grid.setColumnStretch(1, 1)
        self._layout.addSpacing(4)
        self._layout.addLayout(grid)
        self.weights_hint = _label(WEIGHT_CHOICES[0][1], "RangeHint")
        self.weights.currentIndexChanged.connect(lambda i: self.weights_hint.setText(WEIGHT_CHOICES[i][1]))
        self._layout.addWidget(self.weights_hint)

        self.missing = QWidget()
        box = QVBoxLayout(self.missing)
        box.setContentsMargins(0, 4, 0, 0)
        box.setSpacing(4)
        box.addWidget(_label("Converting needs optimum-intel (with torch and transformers 5.2), which is not installed "
                             "in this Python. Install it, then open this dialog again:", "WarnBox"))
        command_row = QHBoxLayout()
        self.pip_command = QLineEdit(self.install_hint)
        self.pip_command.setReadOnly(True)
        self.pip_command.setCursorPosition(0)
        copy = QPushButton("Copy")
        copy.setToolTip("copy the command")
        copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.install_hint.split("  (")[0]))
        command_row.addWidget(self.pip_command, 1)
        command_row.addWidget(copy)
        box.addLayout(command_row)
        self.missing.setVisible(not self.optimum)
        self._layout.addWidget(self.missing)

        self.progress = QProgressBar()
        self.progress.setRange(0, 0)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self._layout.addWidget(self.progress)
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setMinimumHeight(150)
        self.log.setPlaceholderText("The exporter's output appears here.")
        self.log.setVisible(self.optimum)
        self._layout.addWidget(self.log, 1)
        self.status = _label("", "InfoBox")
        self.status.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.status.hide()
        self._layout.addWidget(self.status)
        self.convert_button = QPushButton("Convert")
        self._buttons(self.convert_button)
        self.convert_button.setEnabled(self.optimum)
        if not self.optimum:
            self.convert_button.setToolTip("install optimum-intel first (the command above)")
        self.convert_button.clicked.connect(self.start)
        self.hf_dir.textChanged.connect(self._hf_changed)

    def _hf_changed(self, text: str) -> None:
        if text.strip() and (not self.out_dir.text().strip() or self.out_dir.text().endswith("-ov")):
            self.out_dir.setText(f"{text.strip().rstrip('/')}-ov")

    def _browse_hf(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Hugging Face checkpoint folder", self.hf_dir.text() or str(Path.home()))
        if path:
            self.hf_dir.setText(path)

    def _browse_out(self) -> None:
        start = str(Path(self.out_dir.text()).parent) if self.out_dir.text() else str(Path.home())
        path, _ = QFileDialog.getSaveFileName(self, "New folder for the export", start)
        if path:
            self.out_dir.setText(path)

    def _say(self, text: str, role: str = "InfoBox") -> None:
        set_role(self.status, role)
        self.status.setText(text)
        self.status.setVisible(bool(text))
        self._grow()

    def start(self) -> bool:
        if self.running or not self.optimum:
            return False
        hf, out = self.hf_dir.text().strip(), self.out_dir.text().strip()
        if not hf or not out:
            self._say("Choose the checkpoint folder and a new output folder.", "ErrorBox")
            return False
        self.log.clear()
        self.progress.show()
        self._say("")
        self._start(self.tools.convert_task(hf, out, self.weights.currentData()))
        return True

    def _on_line(self, text: str) -> None:
        self.log.appendPlainText(text)

    def _on_success(self, outcome) -> None:
        super()._on_success(outcome)
        self.progress.hide()
        if outcome.usable:
            self._say(f"Converted: {outcome.path}\n{outcome.summary}", "InfoBox")
            self.load_button.show()
        else:
            self._say(f"The export in {outcome.path} is not usable ({outcome.kind}).", "ErrorBox")

    def _on_failure(self, message: str) -> None:
        self.progress.hide()
        if "optimum-intel" in message and "not installed" in message:
            self.missing.show()
        self._say(f"Conversion failed: {message}", "ErrorBox")

    def _on_cancelled(self) -> None:
        self.progress.hide()
        self._say("Cancelled: the exporter was stopped and the unfinished output folder removed.", "WarnBox")


# ------------------------------------------------------------------------------------------------ doctor


STATUS_COLORS = {"ok": "good", "info": "muted", "warn": "warn", "fail": "error"}
STATUS_MARKS = {"ok": "✓", "info": "·", "warn": "!", "fail": "✗"}


class DoctorDialog(_TaskDialog):
    def __init__(self, tools: ModelTools, path: str | None, parent: QWidget | None = None, options=None) -> None:
        super().__init__(
            tools,
            "Doctor",
            "What OpenVINO sees on this computer, and whether the folder will run: every problem with its fix.",
            parent,
        )
        self.path = path
        self.options = options
        self.checks = []
        self.folder_label = _label(f"Model folder: {path}" if path else "No model folder: OpenVINO and the devices only.", "Caption")
        self.folder_label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self._layout.addWidget(self.folder_label)
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)
        self.progress.setTextVisible(False)
        self._layout.addWidget(self.progress)
        self.lines = QListWidget()
        self.lines.setWordWrap(True)
        self.lines.setMinimumHeight(240)
        self.lines.setSelectionMode(QListWidget.NoSelection)
        self.lines.setFocusPolicy(Qt.NoFocus)
        self._layout.addWidget(self.lines, 1)
        self.summary = _label("", "InfoBox")
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
            item.setData(Qt.UserRole, check.status)
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
