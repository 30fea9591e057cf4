"""Calibration and history tabs (#8): can I trust the bar?

- `ReliabilityChart`: a reliability diagram painted with QPainter: one bar per equal-width confidence
  bin (height = how often the chosen option was right), the mean confidence of the bin as a tick, the
  diagonal of perfect calibration, and each bin's count under it.
- `CalibrationView`: per model and think mode, on labelled decisions: accuracy, Brier, NLL, ECE, the
  chart, temperature fitting (ECE before → after on held-out rows), "apply to displayed confidence",
  and the option-order bias table.
- `HistoryView`: the recent decisions, with a right-answer combo per row (labels the decision) and
  CSV / JSONL export.

Both read the decision history through the `History` interface they are given (ui.ports); the
calibration arithmetic and the applied temperatures come through `Calibration`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QBrush, QFont, QFontMetrics, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.decide import LABELS
from engine.errors import SettingsError

from .bars import percent_text
from .ports import Calibration, History
from .theme import color, set_role

THINK_MODES = (("no think", False), ("think", True))
MAX_HISTORY_ROWS = 200


def _title(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("SectionTitle")
    return label


def _note(text: str = "", name: str = "Caption") -> QLabel:
    label = QLabel(text)
    label.setObjectName(name)
    label.setWordWrap(True)
    return label


# ------------------------------------------------------------------------------------------------ the chart


class RefreshWhenShown:
    """A view over the history that redraws when shown, or at once if it is visible, after a change."""

    _dirty = True

    def mark_dirty(self) -> None:
        self._dirty = True
        if self.isVisible():
            self.refresh()

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        if self._dirty:
            self.refresh()


class ReliabilityChart(QWidget):
    """Accuracy per confidence bin against the diagonal; counts under the bars."""

    MARGINS = (60, 32, 18, 62)  # left, top, right, bottom (tick labels, counts, axis title)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.report = None
        self.caption = ""
        self.empty_text = "No labelled decisions for this model and mode yet."
        self.setMinimumHeight(280)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)

    def sizeHint(self) -> QSize:
        return QSize(520, 340)

    def set_report(self, report, caption: str = "") -> None:
        """engine.calibration.CalibrationReport, or None for the empty state."""
        self.report = report
        self.caption = caption
        self.setToolTip(caption)
        self.update()

    # ----- geometry (public so tests and tooltips can use it) -----
    def plot_rect(self) -> QRectF:
        left, top, right, bottom = self.MARGINS
        return QRectF(left, top, max(10.0, self.width() - left - right), max(10.0, self.height() - top - bottom))

    def to_point(self, x: float, y: float) -> QPointF:
        plot = self.plot_rect()
        return QPointF(plot.left() + x * plot.width(), plot.bottom() - y * plot.height())

    def bar_rects(self) -> list[tuple[int, QRectF]]:
        """(bin index, rectangle) of every non-empty bin's accuracy bar."""
        if self.report is None:
            return []
        plot = self.plot_rect()
        out = []
        for index, b in enumerate(self.report.bins):
            if not b.count:
                continue
            left = plot.left() + b.low * plot.width()
            width = (b.high - b.low) * plot.width()
            gap = min(3.0, width * 0.12)
            height = max(0.0, b.accuracy) * plot.height()
            out.append((index, QRectF(left + gap, plot.bottom() - height, max(1.0, width - 2 * gap), height)))
        return out

    def count_rects(self) -> list[tuple[int, QRectF]]:
        """Where each bin's count is written (under the axis)."""
        if self.report is None:
            return []
        plot = self.plot_rect()
        top = plot.bottom() + 22
        return [
            (i, QRectF(plot.left() + b.low * plot.width(), top, (b.high - b.low) * plot.width(), 16))
            for i, b in enumerate(self.report.bins)
        ]

    # ----- painting -----
    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.setRenderHint(QPainter.Antialiasing)
        frame = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        path = QPainterPath()
        path.addRoundedRect(frame, 10, 10)
        painter.fillPath(path, color("card"))
        painter.setPen(QPen(color("border"), 1))
        painter.drawPath(path)
        base = QFont(self.font())
        small = QFont(base)
        small.setPointSizeF(max(7.0, base.pointSizeF() - 2))
        plot = self.plot_rect()

        if self.report is None:
            painter.setPen(color("faint"))
            painter.drawText(QRectF(self.rect()).adjusted(20, 0, -20, 0), Qt.AlignCenter | Qt.TextWordWrap, self.empty_text)
            painter.end()
            return

        # grid and axes
        painter.setFont(small)
        for step in range(5):
            value = step / 4
            y = plot.bottom() - value * plot.height()
            painter.setPen(QPen(color("border"), 1))
            painter.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y))
            painter.setPen(color("faint"))
            painter.drawText(QRectF(0, y - 8, plot.left() - 8, 16), Qt.AlignRight | Qt.AlignVCenter, f"{value:.0%}")
        bins = self.report.bins
        fm = QFontMetrics(small)
        label_every = 1
        slot = plot.width() / max(1, len(bins))
        while label_every < len(bins) and slot * label_every < fm.horizontalAdvance("100%") + 6:
            label_every += 1
        edges = [b.low for b in bins] + [bins[-1].high if bins else 1.0]
        for i, edge in enumerate(edges):
            if i % label_every and i != len(edges) - 1:
                continue
            x = plot.left() + edge * plot.width()
            painter.setPen(QPen(color("border_strong"), 1))
            painter.drawLine(QPointF(x, plot.bottom()), QPointF(x, plot.bottom() + 4))
            painter.setPen(color("faint"))
            painter.drawText(QRectF(x - 24, plot.bottom() + 4, 48, 16), Qt.AlignCenter, f"{edge:.0%}")

        # the diagonal: perfect calibration
        pen = QPen(color("muted"), 1.4, Qt.DashLine)
        painter.setPen(pen)
        painter.drawLine(self.to_point(0, 0), self.to_point(1, 1))

        # accuracy bars, the gap to the bin's mean confidence, its tick
        gap_color = color("error", 70)
        for index, rect in self.bar_rects():
            b = bins[index]
            bar = QPainterPath()
            radius = min(4.0, rect.width() / 3, rect.height() / 2) if rect.height() > 0 else 0
            bar.addRoundedRect(rect, radius, radius)
            painter.fillPath(bar, color("accent"))
            conf_y = plot.bottom() - b.confidence * plot.height()
            if abs(conf_y - rect.top()) > 1:
                painter.fillRect(QRectF(rect.left(), min(conf_y, rect.top()), rect.width(), abs(conf_y - rect.top())), gap_color)
            painter.setPen(QPen(color("warn"), 2))
            painter.drawLine(QPointF(rect.left(), conf_y), QPointF(rect.right(), conf_y))

        # counts under the axis
        painter.setFont(small)
        painter.setPen(color("faint"))
        painter.drawText(QRectF(0, plot.bottom() + 22, plot.left() - 8, 16), Qt.AlignRight | Qt.AlignVCenter, "n")
        for index, rect in self.count_rects():
            count = bins[index].count
            text = str(count)
            if fm.horizontalAdvance(text) > rect.width() + 2:
                continue
            painter.setPen(color("text") if count else color("faint"))
            painter.drawText(rect, Qt.AlignCenter, text)

        # axis titles and legend
        painter.setPen(color("muted"))
        painter.drawText(QRectF(plot.left(), self.height() - 22, plot.width(), 18), Qt.AlignCenter,
                         "confidence of the chosen option (equal-width bins)")
        painter.save()
        painter.translate(16, plot.center().y())
        painter.rotate(-90)
        painter.drawText(QRectF(-plot.height() / 2, -9, plot.height(), 18), Qt.AlignCenter, "accuracy")
        painter.restore()
        self._legend(painter, small)
        painter.end()

    def _legend(self, painter: QPainter, font: QFont) -> None:
        painter.setFont(font)
        fm = QFontMetrics(font)
        x = self.plot_rect().left()
        y = 8.0
        items = [("box", color("accent"), "accuracy"), ("tick", color("warn"), "mean confidence"),
                 ("box", color("error", 90), "gap"), ("dash", color("muted"), "perfect calibration")]
        for kind, fill, text in items:
            if kind == "box":
                painter.fillRect(QRectF(x, y + 3, 10, 10), fill)
            elif kind == "tick":
                painter.setPen(QPen(fill, 2))
                painter.drawLine(QPointF(x, y + 8), QPointF(x + 12, y + 8))
            else:
                painter.setPen(QPen(fill, 1.4, Qt.DashLine))
                painter.drawLine(QPointF(x, y + 8), QPointF(x + 14, y + 8))
            x += 18
            painter.setPen(color("muted"))
            painter.drawText(QRectF(x, y, fm.horizontalAdvance(text) + 4, 16), Qt.AlignLeft | Qt.AlignVCenter, text)
            x += fm.horizontalAdvance(text) + 16


# ------------------------------------------------------------------------------------------------ calibration


def _figure(caption: str) -> tuple[QFrame, QLabel, QLabel]:
    card = QFrame()
    card.setObjectName("FigureCard")
    layout = QVBoxLayout(card)
    layout.setContentsMargins(9, 7, 8, 7)
    layout.setSpacing(0)
    title = _title(caption)
    value = QLabel("—")
    value.setObjectName("Figure")
    hint = QLabel("")
    hint.setObjectName("RangeHint")
    hint.setWordWrap(True)
    layout.addWidget(title)
    layout.addWidget(value)
    layout.addWidget(hint)
    return card, value, hint


def _table(headers: list[str]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(headers)
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QAbstractItemView.NoEditTriggers)
    table.setSelectionMode(QAbstractItemView.NoSelection)
    table.setShowGrid(False)
    table.setFocusPolicy(Qt.NoFocus)
    table.setWordWrap(False)
    table.verticalHeader().setDefaultSectionSize(28)
    header = table.horizontalHeader()
    header.setHighlightSections(False)
    header.setDefaultAlignment(Qt.AlignLeft | Qt.AlignVCenter)
    return table


def _item(text: str, align=Qt.AlignLeft, tip: str | None = None) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setFlags(Qt.ItemIsEnabled)
    item.setTextAlignment(align | Qt.AlignVCenter)
    if tip:
        item.setToolTip(tip)
    return item


class CalibrationView(RefreshWhenShown, QScrollArea):
    """The Calibration tab. `store_factory()` opens the History (None: history is off)."""

    temperature_applied = Signal(str, bool, object)  # model, think, temperature or None

    def __init__(self, store_factory: Callable[[], History] | None, calibration: Calibration,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._store_factory = store_factory
        self.calibration = calibration
        self._store = None
        self._dirty = True
        self.rows = []
        self.report = None
        self.fit_result = None  # the temperature fit of the current model/mode, this session
        self._preferred: tuple[str | None, bool] = (None, False)
        self.setWidgetResizable(True)
        body = QWidget()
        body.setObjectName("Panel")
        self.setWidget(body)
        layout = QVBoxLayout(body)
        layout.setContentsMargins(18, 14, 18, 18)
        layout.setSpacing(8)

        controls = QHBoxLayout()
        controls.setSpacing(8)
        self.model_box = QComboBox()
        self.model_box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.model_box.setMinimumContentsLength(10)
        self.model_box.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
        self.model_box.setToolTip("the model the decisions were made with (as recorded in the history)")
        self.think_box = QComboBox()
        for text, value in THINK_MODES:
            self.think_box.addItem(text, value)
        self.think_box.setToolTip("calibration is per think mode: reasoning changes how confident the answer is")
        self.bins = QSpinBox()
        self.bins.setRange(2, 50)
        self.bins.setValue(10)
        self.bins.setPrefix("bins ")
        self.bins.setKeyboardTracking(False)
        self.bins.setAlignment(Qt.AlignRight)
        self.bins.setFixedWidth(92)
        self.bins.setToolTip("number of equal-width confidence bins for ECE and the chart (2 – 50)")
        self.refresh_button = QPushButton("Refresh")
        controls.addWidget(self.model_box, 1)
        controls.addWidget(self.think_box)
        controls.addWidget(self.bins)
        self.refresh_button.setToolTip("read the history again")
        controls.addWidget(self.refresh_button)
        layout.addLayout(controls)

        self.message = _note("", "InfoBox")
        self.message.hide()
        layout.addWidget(self.message)

        figures = QGridLayout()
        figures.setHorizontalSpacing(6)
        self.figures: dict[str, QLabel] = {}
        self.figure_hints: dict[str, QLabel] = {}
        for column, (key, caption) in enumerate(
            (("count", "LABELLED"), ("accuracy", "ACCURACY"), ("brier", "BRIER"), ("nll", "NLL"), ("ece", "ECE"))
        ):
            card, value, hint = _figure(caption)
            figures.addWidget(card, 0, column)
            self.figures[key] = value
            self.figure_hints[key] = hint
        layout.addLayout(figures)

        self.chart_title = _note("", "Faint")
        layout.addWidget(self.chart_title)
        self.chart = ReliabilityChart()
        layout.addWidget(self.chart, 1)

        layout.addSpacing(6)
        layout.addWidget(_title("TEMPERATURE SCALING"))
        row = QHBoxLayout()
        self.fit_button = QPushButton("Fit temperature")
        self.fit_button.setToolTip(
            "find the temperature T that minimises the negative log-likelihood of the right answers on two "
            "thirds of the labelled decisions, and check it on the other third"
        )
        self.apply_box = QCheckBox("Apply to displayed confidence")
        self.apply_box.setToolTip(
            "show a calibrated percentage next to the raw one for this model and think mode (the raw value stays)"
        )
        self.chart_at_t = QCheckBox("Chart at T")
        self.chart_at_t.setToolTip("draw the chart and figures with the temperature applied")
        row.addWidget(self.fit_button)
        row.addSpacing(6)
        row.addWidget(self.apply_box)
        row.addWidget(self.chart_at_t)
        row.addStretch(1)
        layout.addLayout(row)
        self.fit_label = _note("Fit a temperature on 15 or more labelled decisions.", "Caption")
        self.fit_label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        layout.addWidget(self.fit_label)
        self.applied_label = _note("", "RangeHint")
        layout.addWidget(self.applied_label)

        layout.addSpacing(6)
        layout.addWidget(_title("OPTION-ORDER BIAS"))
        layout.addWidget(_note("How often the model chose each letter vs how often that letter was right. A letter "
                               "chosen much more often than it is right is a position prior: try “Debias order”.",
                               "RangeHint"))
        self.bias_table = _table(["Letter", "Chosen", "Right", "Chosen %", "Right %", "Chosen − right"])
        header = self.bias_table.horizontalHeader()
        for column in range(6):
            header.setSectionResizeMode(column, QHeaderView.Stretch if column == 0 else QHeaderView.ResizeToContents)
        self.bias_table.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        layout.addWidget(self.bias_table)
        layout.addStretch(0)

        self.model_box.currentIndexChanged.connect(lambda _: self._selection_changed())
        self.think_box.currentIndexChanged.connect(lambda _: self._selection_changed())
        self.bins.valueChanged.connect(lambda _: self._update_report())
        self.refresh_button.clicked.connect(self.refresh)
        self.fit_button.clicked.connect(self.fit_temperature)
        self.apply_box.toggled.connect(self._apply_toggled)
        self.chart_at_t.toggled.connect(lambda _: self._update_report())
        self._update_report()

    # ----- data -----
    @property
    def store(self):
        if self._store is None and self._store_factory is not None:
            try:
                self._store = self._store_factory()
            except Exception as exc:  # noqa: BLE001 - a damaged database must not take the window down
                self._store_factory = None
                self._show_message(f"The decision history cannot be opened: {exc}", error=True)
        return self._store

    def selection(self) -> tuple[str | None, bool]:
        return self.model_box.currentData(), bool(self.think_box.currentData())

    def set_current(self, model: str | None, think: bool) -> None:
        """Select the model and mode the window is using (when the history has it)."""
        self._preferred = (model, think)
        self._select(model, think)

    def _select(self, model: str | None, think: bool) -> None:
        if model is not None:
            index = self.model_box.findData(model)
            if index >= 0:
                self.model_box.setCurrentIndex(index)
        self.think_box.setCurrentIndex(1 if think else 0)

    def refresh(self) -> None:
        self._dirty = False
        store = self.store
        if store is None:
            self._show_message("The decision history is off in this session, so there is nothing to calibrate.")
            self.rows = []
            self._update_report()
            return
        current = self.model_box.currentData() or self._preferred[0]
        try:
            models = store.models()
        except Exception as exc:  # noqa: BLE001
            self._show_message(f"The decision history cannot be read: {exc}", error=True)
            return
        self.model_box.blockSignals(True)
        self.model_box.clear()
        for model in models:
            self.model_box.addItem(model, model)
        index = self.model_box.findData(current)
        self.model_box.setCurrentIndex(index if index >= 0 else (0 if models else -1))
        self.model_box.blockSignals(False)
        self._selection_changed()

    def _selection_changed(self) -> None:
        self.fit_result = None
        self._load_rows()
        self._update_report()

    def _load_rows(self) -> None:
        model, think = self.selection()
        store = self.store
        if store is None or model is None:
            self.rows = []
            return
        self.rows = list(store.rows(model=model, think=think, labelled=True))

    def _applied(self) -> float | None:
        model, think = self.selection()
        if model is None:
            return None
        return self.calibration.saved_temperature(model, think)

    # ----- view -----
    def _show_message(self, text: str, error: bool = False) -> None:
        set_role(self.message, "ErrorBox" if error else "InfoBox")
        self.message.setText(text)
        self.message.setVisible(bool(text))

    def _update_report(self) -> None:
        model, think = self.selection()
        applied = self._applied()
        fitted = self.fit_result.temperature if self.fit_result is not None else None
        temperature = fitted or applied
        self.chart_at_t.setEnabled(temperature is not None)
        at_t = self.chart_at_t.isChecked() and temperature is not None
        self.apply_box.blockSignals(True)
        self.apply_box.setChecked(applied is not None)
        self.apply_box.setEnabled(model is not None and (applied is not None or fitted is not None))
        self.apply_box.blockSignals(False)
        if applied is not None:
            self.applied_label.setText(
                f"Applied: T = {applied:.3f} for {model} ({'think' if think else 'no think'}): the Decision tab shows a "
                "calibrated percentage next to the raw one."
            )
        else:
            self.applied_label.setText("No temperature applied for this model and mode: the bars show raw confidence only.")
        if self.fit_result is None:
            self.fit_label.setText(
                "Fit a temperature on 15 or more labelled decisions; it is checked on the third held out."
                if model is not None else ""
            )

        total = None
        if self.store is not None and model is not None:
            try:
                total = len(self.store.rows(model=model, think=think))
            except Exception:  # noqa: BLE001
                total = None
        if not self.rows:
            self.report = None
            for value in self.figures.values():
                value.setText("—")
            for hint in self.figure_hints.values():
                hint.setText("")
            if total:
                self.figure_hints["count"].setText(f"of {total}")
            if model is None and self.store is not None:
                self.chart.empty_text = (
                    "No decisions recorded yet. Every decision is kept in the history; mark its right answer in the "
                    "History tab to see how far the bars can be trusted."
                )
            else:
                self.chart.empty_text = (
                    "No labelled decisions for this model and mode yet: mark the right answers in the History tab."
                )
            self.chart.set_report(None)
            self.chart_title.setText("Reliability diagram")
            self._fill_bias([])
            self.fit_button.setEnabled(False)
            return
        if self.store is not None:
            self.message.hide()
        bins = self.bins.value()
        self.report = self.calibration.report(self.rows, bins, temperature if at_t else 1.0)
        r = self.report
        self.figures["count"].setText(str(r.count))
        self.figure_hints["count"].setText(f"of {total}" if total is not None else "")
        self.figures["accuracy"].setText(f"{r.accuracy:.1%}")
        self.figure_hints["accuracy"].setText("chosen right")
        self.figures["brier"].setText(f"{r.brier:.4f}")
        self.figure_hints["brier"].setText("0 is perfect")
        self.figures["nll"].setText(f"{r.nll:.4f}")
        self.figure_hints["nll"].setText("−log p(right)")
        self.figures["ece"].setText(f"{r.ece:.4f}")
        self.figure_hints["ece"].setText(f"{bins} bins")
        mode = "think" if think else "no think"
        caption = f"{model} · {mode} · {r.count} labelled" + (f" · at T = {temperature:.3f}" if at_t else " · raw")
        self.chart.set_report(r, caption)
        self.chart_title.setText(f"Reliability diagram · {caption}")
        self._fill_bias(self.calibration.bias(self.rows))
        self.fit_button.setEnabled(True)

    def _fill_bias(self, entries: list[dict]) -> None:
        table = self.bias_table
        table.setRowCount(len(entries))
        for row, entry in enumerate(entries):
            difference = entry["chosen_rate"] - entry["right_rate"]
            table.setItem(row, 0, _item(entry["label"]))
            table.setItem(row, 1, _item(str(entry["chosen"]), Qt.AlignRight))
            table.setItem(row, 2, _item(str(entry["right"]), Qt.AlignRight))
            table.setItem(row, 3, _item(f"{entry['chosen_rate']:.0%}", Qt.AlignRight))
            table.setItem(row, 4, _item(f"{entry['right_rate']:.0%}", Qt.AlignRight))
            item = _item(f"{difference:+.0%}", Qt.AlignRight)
            if abs(difference) >= 0.1:
                item.setForeground(QBrush(color("warn")))
            table.setItem(row, 5, item)
        header = max(table.horizontalHeader().sizeHint().height(), 26)
        table.setFixedHeight(header + 28 * max(1, len(entries)) + 2 * table.frameWidth() + 2)

    # ----- temperature -----
    def fit_temperature(self) -> bool:
        try:
            self.fit_result = self.calibration.fit(self.rows, self.bins.value())
        except SettingsError as exc:
            self.fit_result = None
            self.fit_label.setText(str(exc))
            set_role(self.fit_label, "WarnText")
            return False
        set_role(self.fit_label, "Caption")
        f = self.fit_result
        self.fit_label.setText(
            f"T = {f.temperature:.3f}  ·  fitted on {f.fitted_on} decisions, checked on {f.held_out} held out:  "
            f"ECE {f.before.ece:.4f} → {f.after.ece:.4f}  ·  NLL {f.before.nll:.4f} → {f.after.nll:.4f}  ·  "
            f"Brier {f.before.brier:.4f} → {f.after.brier:.4f}"
            + ("  (T > 1 softens over-confident bars)" if f.temperature > 1 else "  (T < 1 sharpens timid bars)")
            + ("  · T is at the search's upper limit: the bars carry little information about the right answer"
               if f.temperature >= 19.5 else "")
        )
        self._update_report()
        return True

    def _apply_toggled(self, on: bool) -> None:
        model, think = self.selection()
        if model is None:
            return
        if on:
            temperature = self.fit_result.temperature if self.fit_result is not None else self._applied()
            if temperature is None:
                return
        else:
            temperature = None
        try:
            self.calibration.save_temperature(model, think, temperature)
        except OSError as exc:
            self._show_message(f"The temperature could not be saved: {exc.strerror or exc}", error=True)
            return
        self._update_report()
        self.temperature_applied.emit(model, think, temperature)


# ------------------------------------------------------------------------------------------------ history


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
        self._store = None
        self._dirty = True
        self.rows = []
        self.combos: dict[int, QComboBox] = {}
        self.setObjectName("Panel")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(18, 14, 18, 14)
        layout.setSpacing(8)

        head = QHBoxLayout()
        head.addWidget(_title("RECENT DECISIONS"))
        head.addStretch(1)
        self.csv_button = QPushButton("Export CSV…")
        self.jsonl_button = QPushButton("Export JSONL…")
        self.refresh_button = QPushButton("Refresh")
        for button in (self.csv_button, self.jsonl_button, self.refresh_button):
            head.addWidget(button)
        layout.addLayout(head)
        self.hint = _note(
            "Mark the right answer of past decisions (the last column): the Calibration tab then shows how often "
            "the chosen option was right at each confidence.", "RangeHint",
        )
        layout.addWidget(self.hint)
        self.message = _note("", "InfoBox")
        self.message.hide()
        layout.addWidget(self.message)

        self.table = _table(["Time", "Question", "Chosen", "Conf.", "Right answer"])
        self.table.verticalHeader().setDefaultSectionSize(40)
        self.table.setWordWrap(True)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setTextElideMode(Qt.ElideRight)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.Stretch)
        header.setSectionResizeMode(2, QHeaderView.Interactive)
        header.setSectionResizeMode(3, QHeaderView.ResizeToContents)
        header.setSectionResizeMode(4, QHeaderView.Interactive)
        header.resizeSection(2, 104)
        header.resizeSection(4, 118)
        layout.addWidget(self.table, 1)
        self.count_label = _note("", "Faint")
        layout.addWidget(self.count_label)

        self.csv_button.clicked.connect(lambda: self.export("csv"))
        self.jsonl_button.clicked.connect(lambda: self.export("jsonl"))
        self.refresh_button.clicked.connect(self.refresh)

    @property
    def store(self):
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
            self.rows = store.rows(limit=MAX_HISTORY_ROWS, newest_first=True)
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
            table.setItem(row, 0, _item(_local_time(entry.created_at), tip=f"#{entry.id} · {entry.created_at} · {entry.source}"))
            table.setItem(row, 1, _item(" ".join(entry.question.split()),
                                        tip=f"{entry.question}\n\n{entry.model} · {mode} · {entry.device}"))
            chosen_text = f"{LABELS[chosen]}. {options[chosen]}" if 0 <= chosen < len(options) else "?"
            table.setItem(row, 2, _item(chosen_text, tip=chosen_text))
            table.setItem(row, 3, _item(percent_text(shown) if isinstance(shown, (int, float)) else "—", Qt.AlignRight))
            combo = QComboBox()
            combo.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(6)
            combo.addItem("unmarked", None)
            for index, text in enumerate(options):
                combo.addItem(f"{LABELS[index]}. {text}", index)
            combo.setCurrentIndex(0 if entry.right_index is None else entry.right_index + 1)
            combo.setToolTip("the option that turned out right (labels this decision for calibration)")
            combo.currentIndexChanged.connect(lambda _i, c=combo, d=entry.id: self.set_right(d, c.currentData()))
            table.setCellWidget(row, 4, combo)
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
