"""The options list: one row per option (letter, text, move up/down, remove), 2 to 10 rows.

Pasting text with several lines into any row splits it into several options (list markers such as
"A." or "-" are stripped).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication, QKeySequence
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QPushButton, QToolButton, QVBoxLayout, QWidget

from decider.engine.decisions.types import LABELS

from .clipboard import strip_marker


MAX_OPTIONS = len(LABELS)  # one per answer letter


class _OptionLine(QLineEdit):
    pasted_lines = Signal(list)

    def keyPressEvent(self, event) -> None:  # noqa: N802
        if event.matches(QKeySequence.StandardKey.Paste):
            text = QGuiApplication.clipboard().text()
            lines = [strip_marker(line) for line in text.splitlines() if line.strip()]
            if len(lines) > 1:
                self.pasted_lines.emit(lines)
                return
        super().keyPressEvent(event)


class _OptionRow(QWidget):
    def __init__(self, editor: "OptionsEditor", text: str = "") -> None:
        super().__init__()
        self.editor = editor
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        self.badge = QLabel()
        self.badge.setObjectName("LetterBadge")
        self.badge.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.badge.setFixedSize(26, 26)
        self.badge.setContentsMargins(0, 0, 0, 0)
        self.line = _OptionLine(text)
        self.line.setCursorPosition(0)
        self.line.setPlaceholderText("an option")
        self.line.setClearButtonEnabled(False)
        self.up = self._tool("↑", "Move up")
        self.down = self._tool("↓", "Move down")
        self.remove = self._tool("✕", "Remove this option")
        layout.addWidget(self.badge)
        layout.addWidget(self.line, 1)
        layout.addWidget(self.up)
        layout.addWidget(self.down)
        layout.addWidget(self.remove)
        self.up.clicked.connect(lambda: editor.move_row(self, -1))
        self.down.clicked.connect(lambda: editor.move_row(self, +1))
        self.remove.clicked.connect(lambda: editor.remove_row(self))
        self.line.pasted_lines.connect(lambda lines: editor.paste_lines(self, lines))
        self.line.textChanged.connect(editor.changed)
        self.line.returnPressed.connect(lambda: editor.next_row(self))

    def _tool(self, text: str, tip: str) -> QToolButton:
        button = QToolButton()
        button.setObjectName("Flat")
        button.setText(text)
        button.setToolTip(tip)
        button.setFixedSize(20, 26)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        return button


class OptionsEditor(QWidget):
    changed = Signal()
    submit = Signal()  # Enter on the last row with text

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[_OptionRow] = []
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(6)
        self._rows_layout = QVBoxLayout()
        self._rows_layout.setSpacing(6)
        outer.addLayout(self._rows_layout)
        buttons = QHBoxLayout()
        buttons.setSpacing(6)
        self.add_button = QPushButton("+  Add option")
        self.add_button.setObjectName("Flat")
        self.add_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.add_button.clicked.connect(lambda: self.add_option("", focus=True))
        self.paste_button = QPushButton("Paste lines")
        self.paste_button.setObjectName("Flat")
        self.paste_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.paste_button.setToolTip("Replace the options with the clipboard's lines (one option per line)")
        self.paste_button.clicked.connect(self.paste_from_clipboard)
        self.count_label = QLabel()
        self.count_label.setObjectName("Faint")
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.paste_button)
        buttons.addStretch(1)
        # count_label is not laid out here: its owner puts it beside the list's caption, where it has room
        outer.addLayout(buttons)
        self.changed.connect(self._update_count)
        self.set_options(["", ""])

    # ----- content -----
    def options(self) -> list[str]:
        """Non-empty options in order (the request validates duplicates and the count)."""
        return [row.line.text().strip() for row in self.rows if row.line.text().strip()]

    def set_options(self, options: list[str]) -> None:
        for row in list(self.rows):
            self._rows_layout.removeWidget(row)
            row.deleteLater()
        self.rows = []
        for text in list(options)[:MAX_OPTIONS]:
            self._insert(len(self.rows), text)
        while len(self.rows) < 2:
            self._insert(len(self.rows), "")
        self._refresh()

    def add_option(self, text: str = "", focus: bool = False) -> None:
        if len(self.rows) >= MAX_OPTIONS:
            return
        # Fill an empty trailing row first.
        if self.rows and not self.rows[-1].line.text().strip() and text:
            self.rows[-1].line.setText(text)
            row = self.rows[-1]
        else:
            row = self._insert(len(self.rows), text)
        self._refresh()
        if focus:
            row.line.setFocus()

    def _insert(self, index: int, text: str) -> _OptionRow:
        row = _OptionRow(self, text)
        self.rows.insert(index, row)
        self._rows_layout.insertWidget(index, row)
        return row

    def remove_row(self, row: _OptionRow) -> None:
        if len(self.rows) <= 2:
            row.line.clear()
            return
        index = self.rows.index(row)
        self.rows.remove(row)
        self._rows_layout.removeWidget(row)
        row.deleteLater()
        self._refresh()
        self.rows[min(index, len(self.rows) - 1)].line.setFocus()

    def move_row(self, row: _OptionRow, delta: int) -> None:
        index = self.rows.index(row)
        target = index + delta
        if not 0 <= target < len(self.rows):
            return
        texts = [r.line.text() for r in self.rows]
        texts[index], texts[target] = texts[target], texts[index]
        for r, text in zip(self.rows, texts):
            r.line.blockSignals(True)
            r.line.setText(text)
            r.line.setCursorPosition(0)
            r.line.blockSignals(False)
        self.rows[target].line.setFocus()
        self._refresh()

    def next_row(self, row: _OptionRow) -> None:
        index = self.rows.index(row)
        if index + 1 < len(self.rows):
            self.rows[index + 1].line.setFocus()
        elif row.line.text().strip() and len(self.rows) < MAX_OPTIONS:
            self.add_option("", focus=True)
        else:
            self.submit.emit()

    def paste_lines(self, row: _OptionRow, lines: list[str]) -> None:
        """Several pasted lines: the first goes into this row, the rest into new rows after it."""
        index = self.rows.index(row)
        row.line.setText(lines[0])
        for offset, text in enumerate(lines[1:], start=1):
            position = index + offset
            if position < len(self.rows) and not self.rows[position].line.text().strip():
                self.rows[position].line.setText(text)
            elif len(self.rows) < MAX_OPTIONS:
                self._insert(position, text)
        self._refresh()

    def paste_from_clipboard(self) -> None:
        lines = [strip_marker(line) for line in QGuiApplication.clipboard().text().splitlines() if line.strip()]
        if lines:
            self.set_options(lines)

    def _refresh(self) -> None:
        count = len(self.rows)
        for index, row in enumerate(self.rows):
            row.badge.setText(LABELS[index])
            row.up.setEnabled(index > 0)
            row.down.setEnabled(index < count - 1)
            row.line.setPlaceholderText(f"option {LABELS[index]}")
        self.add_button.setEnabled(count < MAX_OPTIONS)
        self.changed.emit()

    def _update_count(self) -> None:
        count = len(self.options())
        self.count_label.setText(f"{count} option{'' if count == 1 else 's'} · 2 to {MAX_OPTIONS}")
