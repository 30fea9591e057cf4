"""Download a model from the Hugging Face Hub (or the mirror in HF_ENDPOINT), with byte progress and
cancel; a checkpoint that arrives can go on to Convert…."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGridLayout, QLabel, QLineEdit, QProgressBar, QPushButton, QWidget

from decider.engine.core.errors import SettingsError

from .convert_dialog import ConvertDialog
from .ports import ModelTools
from .task_dialog import TaskDialog, label
from .theme import set_role


class DownloadDialog(TaskDialog):
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
        self.where = label(f"Saved under {self.dest_root}", "RangeHint")
        self._layout.addWidget(self.where)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self._layout.addWidget(self.progress)
        self.progress_label = label("", "Caption")
        self.progress_label.hide()
        self._layout.addWidget(self.progress_label)
        self.status = label("", "InfoBox")
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
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
