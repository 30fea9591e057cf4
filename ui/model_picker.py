"""The model picker: recent and downloaded models, a folder browser, and the folder check in plain words;
Download…, Convert… and Doctor (ui/download_dialog.py, convert_dialog.py, doctor_dialog.py) for getting a model in the first place.

Checking a folder only reads its JSON files and IR headers (engine.model_folder, no OpenVINO), so it
runs here; loading and compiling run in the engine thread after the dialog closes.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from decider.engine.core.errors import ModelError
from decider.engine.model.folder import inspect_folder

from .folder_dialog import choose_folder
from .ports import ModelTools
from .theme import set_role


def describe_folder(path: str | Path) -> tuple[bool, str]:
    """(usable?, one plain paragraph about the folder)."""
    try:
        folder = inspect_folder(path)
    except ModelError as exc:
        return False, str(exc)
    except OSError as exc:
        return False, f"{path}: cannot read ({exc.strerror or exc})"
    text = folder.text_config
    layers = text.get("num_hidden_layers", "?")
    hidden = text.get("hidden_size", "?")
    kind = "mixture of experts" if folder.is_moe else "dense"
    layout = "text export" if folder.layout == "text" else "vision-language export (text use)"
    return True, (
        f"{folder.model_type} · {kind} · {layers} layers × {hidden} · vocabulary {folder.vocab_size:,} · "
        f"context {folder.context_length:,} tokens · {layout}"
    )


def _entries(recent: list[str], fetched: list[str], demo: str | None,
             bundled: dict[str, str] | None) -> list[tuple[str, str]]:
    """(folder, name) the picker lists: the recent models, then the bundled ones, then what downloads stored."""
    labels = dict(bundled or {})
    if demo and demo not in labels:
        labels[demo] = "demo model"
    paths = list(recent)
    paths += [p for p in labels if p not in paths]
    paths += [p for p in fetched if p not in paths]
    entries = []
    for path in paths:
        name = labels.get(path) or Path(path).name
        if path in fetched and path not in recent:
            name += "  · downloaded"
        entries.append((path, name))
    return entries


class ModelPickerDialog(QDialog):
    def __init__(self, tools: ModelTools, recent: list[str], current: str | None = None, demo: str | None = None,
                 parent: QWidget | None = None, *, downloaded: list[str] | None = None, doctor_options=None,
                 bundled: dict[str, str] | None = None) -> None:
        """bundled: the models this checkout ships, folder -> label ("demo model", "seeing demo model"); always listed."""
        super().__init__(parent)
        self.tools = tools
        self.setWindowTitle("Choose a model")
        self.setMinimumSize(660, 460)
        self.chosen: str | None = None
        self._checked: str | None = None
        self._doctor_options = doctor_options
        self.task_dialog = None  # the Download / Convert / Doctor dialog while it is open
        layout = QVBoxLayout(self)
        layout.setContentsMargins(20, 18, 20, 18)
        layout.setSpacing(10)

        title = QLabel("Choose a model")
        title.setStyleSheet("font-size: 14pt; font-weight: 700;")
        subtitle = QLabel(
            "A Qwen3.5 model exported to OpenVINO IR with optimum-intel: a folder with config.json, "
            "openvino_model.xml/.bin (or the vision-language pair) and tokenizer.json."
        )
        subtitle.setObjectName("Caption")
        subtitle.setWordWrap(True)
        layout.addWidget(title)
        layout.addWidget(subtitle)

        caption = QLabel("RECENT MODELS")
        caption.setObjectName("SectionTitle")
        layout.addSpacing(4)
        layout.addWidget(caption)
        self.list = QListWidget()
        self.list.setUniformItemSizes(False)
        fetched = tools.downloaded() if downloaded is None else list(downloaded)
        entries = _entries(recent, fetched, demo, bundled)
        for path, name in entries:
            item = QListWidgetItem(f"{name}\n{path}")
            item.setData(Qt.ItemDataRole.UserRole, path)
            if path == current:
                item.setText(f"{name}  (loaded)\n{path}")
            self.list.addItem(item)
        self.empty = QLabel("No recent models yet: browse for a model folder.")
        self.empty.setObjectName("Faint")
        self.empty.setVisible(not entries)
        self.list.setVisible(bool(entries))
        layout.addWidget(self.list, 1)
        layout.addWidget(self.empty)

        self.details = QLabel("")
        self.details.setWordWrap(True)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details.hide()
        layout.addWidget(self.details)

        layout.addLayout(self._build_tool_buttons())
        layout.addLayout(self._build_buttons())

        self.list.currentItemChanged.connect(self._selected)
        self.list.itemDoubleClicked.connect(lambda item: self._accept_selected())
        if entries:
            self.list.setCurrentRow(0)

    def _build_tool_buttons(self) -> QHBoxLayout:
        """Download, Convert, Doctor: getting a model the list does not have."""
        row = QHBoxLayout()
        row.setSpacing(6)
        self.download_button = QPushButton("Download…")
        self.download_button.setToolTip("download an OpenVINO export (or a Qwen3.5 checkpoint) from the Hugging Face Hub")
        self.download_button.clicked.connect(self.download)
        self.convert_button = QPushButton("Convert…")
        self.convert_button.setToolTip("turn a Hugging Face Qwen3.5 checkpoint into an OpenVINO export (optimum-intel)")
        self.convert_button.clicked.connect(self.convert)
        self.doctor_button = QPushButton("Doctor")
        self.doctor_button.setToolTip("what OpenVINO sees, and whether the selected folder will run (with fixes)")
        self.doctor_button.clicked.connect(self.doctor)
        manage = QLabel("GET A MODEL")
        manage.setObjectName("SectionTitle")
        row.addWidget(manage)
        row.addSpacing(6)
        row.addWidget(self.download_button)
        row.addWidget(self.convert_button)
        row.addWidget(self.doctor_button)
        row.addStretch(1)
        return row

    def _build_buttons(self) -> QHBoxLayout:
        """Browse, Cancel, Load."""
        buttons = QHBoxLayout()
        self.browse_button = QPushButton("Browse for a folder…")
        self.browse_button.clicked.connect(self.browse)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.reject)
        self.load_button = QPushButton("Load model")
        self.load_button.setObjectName("Primary")
        self.load_button.setEnabled(False)
        self.load_button.clicked.connect(self._accept_selected)
        buttons.addWidget(self.browse_button)
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.load_button)
        return buttons

    def _selected(self, item: QListWidgetItem | None) -> None:
        if item is None:
            self.details.hide()
            self.load_button.setEnabled(False)
            return
        self.check(item.data(Qt.ItemDataRole.UserRole))

    def check(self, path: str) -> bool:
        ok, text = describe_folder(path)
        if not ok and self.tools.is_checkpoint(path):
            set_role(self.details, "WarnBox")
            self.details.setText("A Hugging Face checkpoint, not an OpenVINO export yet: Convert… turns it into one.")
        else:
            set_role(self.details, "InfoBox" if ok else "ErrorBox")
            self.details.setText(text if ok else f"This folder cannot be used: {text}")
        self.details.show()
        self.load_button.setEnabled(ok)
        self._checked = path if ok else None
        return ok

    def browse(self) -> None:
        start = str(Path(self._checked).parent) if self._checked else str(Path.home())
        path = choose_folder(self, "Model folder", start)
        if not path:
            return
        self.list.clearSelection()
        self.list.setCurrentRow(-1)
        if self.check(path):
            self.chosen = path
            self.accept()

    # ----- model management -----
    def selected_path(self) -> str | None:
        item = self.list.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else self._checked

    def _run_dialog(self, dialog) -> bool:
        self.task_dialog = dialog
        try:
            accepted = dialog.exec() and dialog.chosen
        finally:
            self.task_dialog = None
        if accepted and self.check(dialog.chosen):
            self.chosen = dialog.chosen
            self.accept()
            return True
        return False

    def download(self) -> bool:
        from .download_dialog import DownloadDialog

        return self._run_dialog(DownloadDialog(self.tools, self))

    def convert(self) -> bool:
        from .convert_dialog import ConvertDialog

        selected = self.selected_path()
        checkpoint = selected if selected and self.tools.is_checkpoint(selected) else None
        return self._run_dialog(ConvertDialog(self.tools, self, hf_dir=checkpoint))

    def doctor(self) -> bool:
        from .doctor_dialog import DoctorDialog

        return self._run_dialog(DoctorDialog(self.tools, self.selected_path(), self, self._doctor_options))

    def _accept_selected(self) -> None:
        item = self.list.currentItem()
        path = self._checked
        if item is not None and item.data(Qt.ItemDataRole.UserRole) == path and path:
            self.chosen = path
            self.accept()
