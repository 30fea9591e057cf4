"""The mechanics of a settings form, apart from which settings it shows: sections of rows (label and
range hint on the left, the field on the right, the field's error under both), and showing a settings
object's values in the fields without announcing them as edits.

A field is registered under the setting's name; `_edit(name, value)` (the subclass's) takes an edit.
"""

from __future__ import annotations

from typing import TypeVar

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QGridLayout,
    QHBoxLayout,
    QKeySequenceEdit,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QScrollArea,
    QSlider,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from .ports import Settings

_T = TypeVar("_T")

LIST_SEPARATOR = ", "  # how a list setting reads in its one-line field


def split_list(text: str) -> tuple[str, ...]:
    """A one-line list field's entries: separated by commas or spaces (neither occurs in an origin)."""
    return tuple(part for part in text.replace(",", " ").split() if part)


class SettingsForm(QScrollArea):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.fields: dict[str, QWidget] = {}
        self.errors: dict[str, QLabel] = {}
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget()
        body.setObjectName("Panel")
        self.setWidget(body)
        self._layout = QVBoxLayout(body)
        self._layout.setContentsMargins(16, 14, 14, 16)
        self._layout.setSpacing(6)

    def _edit(self, name: str, value: object) -> bool:
        raise NotImplementedError

    # ----- building -----
    def _section(self, title: str) -> QGridLayout:
        label = QLabel(title)
        label.setObjectName("SectionTitle")
        self._layout.addSpacing(10)
        self._layout.addWidget(label)
        grid = QGridLayout()
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(4)
        grid.setColumnStretch(0, 1)
        self._layout.addLayout(grid)
        return grid

    def _box_grid(self, box: QWidget) -> QGridLayout:
        """A grid inside its own widget (shown or hidden as a whole), laid out like a section's."""
        grid = QGridLayout(box)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(4)
        grid.setColumnStretch(0, 1)
        return grid

    def _wide_row(self, grid: QGridLayout, name: str, text: str, widget: QWidget, hint: str) -> None:
        """Label and hint on one line, the field across the whole width under them (URLs, keys)."""
        row = grid.rowCount()
        line = QHBoxLayout()
        line.setSpacing(8)
        label = QLabel(text)
        label.setToolTip(widget.toolTip())
        line.addWidget(label)
        line.addStretch(1)
        if hint:
            hint_label = QLabel(hint)
            hint_label.setObjectName("RangeHint")
            line.addWidget(hint_label)
        grid.addLayout(line, row, 0, 1, 2)
        grid.addWidget(widget, row + 1, 0, 1, 2)
        self._register(grid, name, widget, row + 2)

    def _row(self, grid: QGridLayout, name: str, text: str, widget: QWidget, hint: str, width: int = 108) -> None:
        """Label with its range underneath on the left, the field on the right, errors below both."""
        row = grid.rowCount()
        cell = QWidget()
        stack = QVBoxLayout(cell)
        stack.setContentsMargins(0, 0, 0, 0)
        stack.setSpacing(0)
        label = QLabel(text)
        label.setToolTip(widget.toolTip())
        stack.addWidget(label)
        if hint:
            hint_label = QLabel(hint)
            hint_label.setObjectName("RangeHint")
            stack.addWidget(hint_label)
        widget.setFixedWidth(width)
        grid.addWidget(cell, row, 0)
        grid.addWidget(widget, row, 1, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self._register(grid, name, widget, row + 1)

    def _register(self, grid: QGridLayout, name: str, widget: QWidget, error_row: int) -> None:
        """The field under its setting's name, and its error line (hidden until a value is refused)."""
        error = QLabel("")
        error.setObjectName("FieldError")
        error.setWordWrap(True)
        error.hide()
        grid.addWidget(error, error_row, 0, 1, 2)
        self.fields[name] = widget
        self.errors[name] = error

    def _check(self, grid: QGridLayout, name: str, text: str, tip: str) -> QCheckBox:
        box = QCheckBox(text)
        box.setToolTip(tip)
        box.toggled.connect(lambda checked, n=name: self._edit(n, bool(checked)))
        grid.addWidget(box, grid.rowCount(), 0, 1, 2)
        self.fields[name] = box
        return box

    # ----- values -----
    def _show_values(self, settings: Settings) -> None:
        """Every field shows its setting's value (no signals: these are not edits); errors are cleared."""
        for name, widget in self.fields.items():
            widget.blockSignals(True)
            try:
                _show_value(widget, getattr(settings, name))
            finally:
                widget.blockSignals(False)
            self._show_error(name, None)

    def _show_error(self, name: str, message: str | None) -> None:
        widget = self.fields.get(name)
        label = self.errors.get(name)
        if widget is not None:
            widget.setProperty("invalid", message is not None)
            widget.style().unpolish(widget)
            widget.style().polish(widget)
        if label is not None:
            label.setText(message or "")
            label.setVisible(message is not None)


def _show_value(widget: QWidget, value: object) -> None:
    if isinstance(widget, QSpinBox):
        widget.setValue(int(_number(value)))  # Qt takes a whole float here too
    elif isinstance(widget, QDoubleSpinBox):
        widget.setValue(_number(value))
    elif isinstance(widget, QCheckBox):
        widget.setChecked(bool(value))
    elif isinstance(widget, QComboBox) and widget.property("byData"):
        index = widget.findData(value)
        if index >= 0:
            widget.setCurrentIndex(index)
    elif isinstance(widget, QComboBox) and widget.property("editableText"):
        widget.setEditText("" if value is None else str(value))
    elif isinstance(widget, QComboBox):
        text = _kind(str, value)
        if widget.findText(text) < 0:
            widget.addItem(text)
        widget.setCurrentText(text)
    elif isinstance(widget, QSlider):
        widget.setValue(int(round(_number(value) * 100)))
    elif isinstance(widget, QKeySequenceEdit):
        widget.setKeySequence(QKeySequence(_kind(str, value)))
    elif isinstance(widget, QPlainTextEdit):
        if widget.toPlainText() != value:
            widget.setPlainText(_kind(str, value))
    elif isinstance(widget, QLineEdit) and isinstance(value, (tuple, list)):
        widget.setText(LIST_SEPARATOR.join(value))
    elif isinstance(widget, QLineEdit):
        widget.setText("" if value is None else str(value))


# A field's value arrives as the settings store holds it (object); the widget takes one kind. A mismatch is a
# programming error, raised as the TypeError Qt would have raised for it.
def _kind(kind: type[_T], value: object) -> _T:
    if not isinstance(value, kind):
        raise TypeError(f"a {kind.__name__} field was given {value!r}")
    return value


def _number(value: object) -> float:
    if not isinstance(value, (int, float)):
        raise TypeError(f"a number field was given {value!r}")
    return value
