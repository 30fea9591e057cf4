"""The History tab: the recent decisions, with a right-answer combo per row (labels the decision for
calibration) and CSV / JSONL export. It reads and labels through the `History` it is given."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QComboBox, QFileDialog, QHBoxLayout, QHeaderView, QPushButton, QVBoxLayout, QWidget

from decider.engine.decisions.types import LABELS
from decider.engine.core.errors import SettingsError

from .bars import percent_text
from .ports import History, HistoryRecord
from .tab_parts import RefreshWhenShown, caption_label, cell, note_label, read_only_table
from .theme import set_role

MAX_HISTORY_ROWS = 200


def computed_by(entry: HistoryRecord) -> str:
    """Model, precision and whether a picture was seen: what a row's bars came from."""
    seen = f" · saw {entry.images_seen} image{'s' if entry.images_seen > 1 else ''}" if entry.images_seen else " · text only"
    return f"{entry.model} · {entry.precision}{seen}"


def _local_time(text: str) -> str:
    """Short local time: "today 14:05", else "Mar 03 14:05" (this year) or "2025-03-03"."""
    try:
        when = datetime.fromisoformat(text).astimezone()
    except ValueError:
        return text
    now = datetime.now().astimezone()
    if when.date() == now.date():
        return when.strftime("today %H:%M")
    if when.year == now.year:
        return when.strftime("%b %d %H:%M")
    return when.strftime("%Y-%m-%d")


class HistoryView(RefreshWhenShown, QWidget):
    """Recent decisions; the right-answer combo of a row labels that decision."""

    labelled = Signal(int, object)  # decision id, right index or None

    def __init__(self, store_factory: Callable[[], History] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._store_factory = store_factory
        self._store: History | None = None
        self._dirty = True
        self.rows: list[HistoryRecord] = []
        self.combos: dict[int, QComboBox] = {}
        self.setObjectName("Panel")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 14, 12, 14)
        layout.setSpacing(8)

        layout.addWidget(caption_label("RECENT DECISIONS"))
        head = QHBoxLayout()  # the buttons on their own line: the column stays narrow enough for the settings beside it
        self.csv_button = QPushButton("Export CSV…")
        self.jsonl_button = QPushButton("Export JSONL…")
        self.refresh_button = QPushButton("Refresh")
        for button in (self.csv_button, self.jsonl_button):
            head.addWidget(button)
        head.addStretch(1)
        layout.addLayout(head)
        self.hint = note_label(
            "Mark the right answer of past decisions (the last column): the Calibration tab then shows how often "
            "the chosen option was right at each confidence.", "RangeHint",
        )
        layout.addWidget(self.hint)
        self.message = note_label("", "InfoBox")
        self.message.hide()
        layout.addWidget(self.message)

        self.table = read_only_table(["Time", "Question", "Chosen", "Conf.", "Computed by", "Right answer"])
        self.table.verticalHeader().setDefaultSectionSize(40)
        self.table.setWordWrap(True)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(4, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(5, QHeaderView.ResizeMode.Interactive)
        header.resizeSection(2, 104)
        header.resizeSection(4, 150)
        header.resizeSection(5, 118)
        layout.addWidget(self.table, 1)
        self.count_label = note_label("", "Faint")
        foot = QHBoxLayout()
        foot.addWidget(self.count_label, 1)
        foot.addWidget(self.refresh_button)
        layout.addLayout(foot)

        self.csv_button.clicked.connect(lambda: self.export("csv"))
        self.jsonl_button.clicked.connect(lambda: self.export("jsonl"))
        self.refresh_button.clicked.connect(self.refresh)

    @property
    def store(self) -> History | None:
        if self._store is None and self._store_factory is not None:
            try:
                self._store = self._store_factory()
            except Exception as exc:  # noqa: BLE001
                self._store_factory = None
                self._show(f"The decision history cannot be opened: {exc}", error=True)
        return self._store

    def _show(self, text: str, error: bool = False) -> None:
        set_role(self.message, "ErrorBox" if error else "InfoBox")
        self.message.setText(text)
        self.message.setVisible(bool(text))

    def refresh(self) -> None:
        self._dirty = False
        store = self.store
        enabled = store is not None
        for button in (self.csv_button, self.jsonl_button, self.refresh_button):
            button.setEnabled(enabled)
        if store is None:
            if not self.message.isVisible():
                self._show("The decision history is off in this session.")
            self.rows = []
            self.table.setRowCount(0)
            return
        try:
            self.rows = list(store.rows(limit=MAX_HISTORY_ROWS, newest_first=True))
        except Exception as exc:  # noqa: BLE001
            self._show(f"The decision history cannot be read: {exc}", error=True)
            return
        self.message.hide()
        self.combos = {}
        table = self.table
        table.setRowCount(0)  # drops the old rows' combos
        table.setRowCount(len(self.rows))
        for row, entry in enumerate(self.rows):
            options = entry.options
            chosen = entry.choice_index
            result_options = entry.result.get("options") or []
            shown = None
            if 0 <= chosen < len(result_options):
                o = result_options[chosen]
                shown = o.get("debiased_probability") if o.get("debiased_probability") is not None else o.get("probability")
            mode = "think" if entry.think else "no think"
            table.setItem(row, 0, cell(_local_time(entry.created_at), tip=f"#{entry.id} · {entry.created_at} · {entry.source}"))
            table.setItem(row, 1, cell(" ".join(entry.question.split()),
                                        tip=f"{entry.question}\n\n{entry.model} · {mode} · {entry.device}"))
            chosen_text = f"{LABELS[chosen]}. {options[chosen]}" if 0 <= chosen < len(options) else "?"
            table.setItem(row, 2, cell(chosen_text, tip=chosen_text))
            doubt = " ?" if (entry.result.get("choice") or {}).get("uncertain") else ""  # an uncertain choice
            table.setItem(row, 3, cell((percent_text(shown) if isinstance(shown, (int, float)) else "—") + doubt,
                                        Qt.AlignmentFlag.AlignRight, tip="uncertain" if doubt else None))
            computed = computed_by(entry)
            table.setItem(row, 4, cell(computed, tip=computed))
            combo = QComboBox()
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(6)
            combo.addItem("unmarked", None)
            for index, text in enumerate(options):
                combo.addItem(f"{LABELS[index]}. {text}", index)
            combo.setCurrentIndex(0 if entry.right_index is None else entry.right_index + 1)
            combo.setToolTip("the option that turned out right (labels this decision for calibration)")
            combo.currentIndexChanged.connect(lambda _i, c=combo, d=entry.id: self.set_right(d, c.currentData()))
            table.setCellWidget(row, 5, combo)
            self.combos[entry.id] = combo
        labelled = sum(1 for r in self.rows if r.right_index is not None)
        more = f" (the newest {MAX_HISTORY_ROWS})" if len(self.rows) == MAX_HISTORY_ROWS else ""
        self.count_label.setText(
            f"{len(self.rows)} decisions{more} · {labelled} marked · stored in {store.path}"
            if self.rows else f"No decisions yet. They are recorded in {store.path} as you make them."
        )

    def set_right(self, decision_id: int, right: int | None) -> bool:
        """Label a decision (None clears it); the row's combo follows."""
        store = self.store
        if store is None:
            return False
        try:
            updated = store.label(decision_id, right)
        except (SettingsError, OSError) as exc:
            self._show(f"Not saved: {exc}", error=True)
            return False
        except Exception as exc:  # noqa: BLE001 - sqlite3 errors (locked, damaged)
            self._show(f"Not saved: {exc}", error=True)
            return False
        combo = self.combos.get(decision_id)
        if combo is not None:
            index = 0 if updated.right_index is None else updated.right_index + 1
            if combo.currentIndex() != index:
                combo.blockSignals(True)
                combo.setCurrentIndex(index)
                combo.blockSignals(False)
        self.rows = [updated if r.id == decision_id else r for r in self.rows]
        labelled = sum(1 for r in self.rows if r.right_index is not None)
        text = self.count_label.text()
        head, sep, tail = text.partition(" · ")
        if sep:
            rest = tail.partition(" · ")[2]
            self.count_label.setText(f"{head} · {labelled} marked · {rest}")
        self.labelled.emit(decision_id, updated.right_index)
        return True

    def export(self, fmt: str, path: str | None = None) -> str | None:
        """Write the whole history as CSV or JSONL; asks for the file when `path` is None."""
        store = self.store
        if store is None:
            return None
        suffix = ".csv" if fmt == "csv" else ".jsonl"
        if path is None:
            start = str(Path.home() / f"decider-history{suffix}")
            filters = "CSV (*.csv)" if fmt == "csv" else "JSON Lines (*.jsonl)"
            path, _ = QFileDialog.getSaveFileName(self, "Export the decision history", start, filters)
            if not path:
                return None
        try:
            text = store.export_csv() if fmt == "csv" else store.export_jsonl()
            Path(path).write_text(text, encoding="utf-8", newline="" if fmt == "csv" else None)
        except OSError as exc:
            self._show(f"Export failed: {exc.strerror or exc} ({path})", error=True)
            return None
        count = len(store.rows()) if fmt == "csv" else text.count("\n")
        self._show(f"Exported {count} decisions to {path}")
        return path
