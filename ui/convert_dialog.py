"""Convert a Hugging Face Qwen3.5 checkpoint to an OpenVINO export: optimum-intel in a child process whose
lines stream into the dialog; cancel ends its whole process tree."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from .folder_dialog import choose_folder
from .ports import ModelTools
from .task_dialog import TaskDialog, label
from .theme import set_role

WEIGHT_CHOICES = (
    ("int4-npu", "int4 symmetric, channel-wise, every layer: the NPU's preferred format (smallest)"),
    ("int8", "int8 weights: a middle ground for CPU and GPU"),
    ("int8-sym", "int8 symmetric weights: the CPU's exact decoding ~10% faster than int8"),
    ("fp16", "16-bit weights: the most faithful, twice the size of int8"),
)


class ConvertDialog(TaskDialog):
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
            self.weights.setItemData(self.weights.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        self.weights.setToolTip("\n".join(f"{v}: {t}" for v, t in WEIGHT_CHOICES))
        grid.addWidget(QLabel("Checkpoint"), 0, 0)
        grid.addWidget(self.hf_dir, 0, 1)
        grid.addWidget(hf_browse, 0, 2)
        grid.addWidget(QLabel("Output folder"), 1, 0)
        grid.addWidget(self.out_dir, 1, 1)
        grid.addWidget(out_browse, 1, 2)
        grid.addWidget(QLabel("Weights"), 2, 0)
        grid.addWidget(self.weights, 2, 1, Qt.AlignmentFlag.AlignLeft)
        grid.setColumnStretch(1, 1)
        self._layout.addSpacing(4)
        self._layout.addLayout(grid)
        self.weights_hint = label(WEIGHT_CHOICES[0][1], "RangeHint")
        self.weights.currentIndexChanged.connect(lambda i: self.weights_hint.setText(WEIGHT_CHOICES[i][1]))
        self._layout.addWidget(self.weights_hint)

        self._build_missing_note()

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
        self.status = label("", "InfoBox")
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.hide()
        self._layout.addWidget(self.status)
        self.convert_button = QPushButton("Convert")
        self._buttons(self.convert_button)
        self.convert_button.setEnabled(self.optimum)
        if not self.optimum:
            self.convert_button.setToolTip("install optimum-intel first (the command above)")
        self.convert_button.clicked.connect(self.start)
        self.hf_dir.textChanged.connect(self._hf_changed)

    def _build_missing_note(self) -> None:
        """Shown when optimum-intel is not installed: the command that installs it, with a copy button."""
        self.missing = QWidget()
        box = QVBoxLayout(self.missing)
        box.setContentsMargins(0, 4, 0, 0)
        box.setSpacing(4)
        box.addWidget(label("Converting needs optimum-intel (with torch and transformers 5.2), which is not installed "
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

    def _hf_changed(self, text: str) -> None:
        if text.strip() and (not self.out_dir.text().strip() or self.out_dir.text().endswith("-ov")):
            self.out_dir.setText(f"{text.strip().rstrip('/')}-ov")

    def _browse_hf(self) -> None:
        path = choose_folder(self, "Hugging Face checkpoint folder", self.hf_dir.text() or str(Path.home()))
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
