"""The model picker: recent models, a folder browser, and the folder check in plain words.

Checking a folder only reads its JSON files and IR headers (engine.model_folder, no OpenVINO), so it
runs here; loading and compiling run in the engine thread after the dialog closes.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.errors import ModelError
from engine.model_folder import inspect_folder

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


class ModelPickerDialog(QDialog):
    def __init__(self, recent: list[str], current: str | None = None, demo: str | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Choose a model")
        self.setMinimumSize(620, 420)
        self.chosen: str | None = None
        self._checked: str | None = None
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
        entries = list(recent)
        if demo and demo not in entries:
            entries.append(demo)
        for path in entries:
            name = "demo model" if path == demo else Path(path).name
            item = QListWidgetItem(f"{name}\n{path}")
            item.setData(Qt.UserRole, path)
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
        self.details.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.details.hide()
        layout.addWidget(self.details)

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
        layout.addLayout(buttons)

        self.list.currentItemChanged.connect(self._selected)
        self.list.itemDoubleClicked.connect(lambda item: self._accept_selected())
        if entries:
            self.list.setCurrentRow(0)

    def _selected(self, item: QListWidgetItem | None) -> None:
        if item is None:
            self.details.hide()
            self.load_button.setEnabled(False)
            return
        self.check(item.data(Qt.UserRole))

    def check(self, path: str) -> bool:
        ok, text = describe_folder(path)
        set_role(self.details, "InfoBox" if ok else "ErrorBox")
        self.details.setText(text if ok else f"This folder cannot be used: {text}")
        self.details.show()
        self.load_button.setEnabled(ok)
        self._checked = path if ok else None
        return ok

    def browse(self) -> None:
        start = str(Path(self._checked).parent) if self._checked else str(Path.home())
        path = QFileDialog.getExistingDirectory(self, "Model folder", start)
        if not path:
            return
        self.list.clearSelection()
        self.list.setCurrentItem(None)
        if self.check(path):
            self.chosen = path
            self.accept()

    def _accept_selected(self) -> None:
        item = self.list.currentItem()
        path = self._checked
        if item is not None and item.data(Qt.UserRole) == path and path:
            self.chosen = path
            self.accept()
