"""Small parts the Calibration and History tabs share: captions, notes, read-only tables, and a view
that redraws from the history when shown after a change."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QLabel, QTableWidget, QTableWidgetItem, QWidget


def caption_label(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("SectionTitle")
    return label


def note_label(text: str = "", name: str = "Caption") -> QLabel:
    label = QLabel(text)
    label.setObjectName(name)
    label.setWordWrap(True)
    return label


# The mixin goes before a QWidget class (class HistoryView(RefreshWhenShown, QWidget)): the checker reads it as a
# widget; at run time it stays a plain class (two Qt bases in one hierarchy is what PySide6 does not want).
if TYPE_CHECKING:
    _WidgetBase = QWidget
else:
    _WidgetBase = object


class RefreshWhenShown(_WidgetBase):
    """A view over the history that redraws when shown, or at once if it is visible, after a change."""

    _dirty = True

    def refresh(self) -> None:
        raise NotImplementedError  # each view redraws itself

    def mark_dirty(self) -> None:
        self._dirty = True
        if self.isVisible():
            self.refresh()

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        if self._dirty:
            self.refresh()


def read_only_table(headers: list[str]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(headers)
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
    table.setShowGrid(False)
    table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
    table.setWordWrap(False)
    table.verticalHeader().setDefaultSectionSize(28)
    header = table.horizontalHeader()
    header.setHighlightSections(False)
    header.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
    return table


def cell(text: str, align=Qt.AlignmentFlag.AlignLeft, tip: str | None = None) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setFlags(Qt.ItemFlag.ItemIsEnabled)
    item.setTextAlignment(align | Qt.AlignmentFlag.AlignVCenter)
    if tip:
        item.setToolTip(tip)
    return item
