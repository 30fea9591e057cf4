"""The Calibration tab: can I trust the bar? Per model and think mode, on labelled decisions: accuracy,
Brier, NLL, ECE, the reliability chart, temperature fitting (ECE before → after on held-out rows),
"apply to displayed confidence", and the option-order bias table.

It reads the decision history through the `History` it is given and does the arithmetic through
`Calibration` (ui/ports.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from decider.engine.core.errors import SettingsError

from .ports import Calibration, History, HistoryRecord
from .reliability_chart import ReliabilityChart
from .tab_parts import RefreshWhenShown, caption_label, cell, note_label, read_only_table
from .theme import color, set_role

if TYPE_CHECKING:
    from decider.engine.decisions.calibration import CalibrationReport, TemperatureFit

THINK_MODES = (("no think", False), ("think", True))


def figure(caption: str) -> tuple[QFrame, QLabel, QLabel]:
    card = QFrame()
    card.setObjectName("FigureCard")
    layout = QVBoxLayout(card)
    layout.setContentsMargins(9, 7, 8, 7)
    layout.setSpacing(0)
    title = caption_label(caption)
    value = QLabel("—")
    value.setObjectName("Figure")
    hint = QLabel("")
    hint.setObjectName("RangeHint")
    hint.setWordWrap(True)
    layout.addWidget(title)
    layout.addWidget(value)
    layout.addWidget(hint)
    return card, value, hint


class CalibrationView(RefreshWhenShown, QScrollArea):
    """The Calibration tab. `store_factory()` opens the History (None: history is off)."""

    temperature_applied = Signal(str, bool, object)  # model, think, temperature or None

    def __init__(self, store_factory: Callable[[], History] | None, calibration: Calibration,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._store_factory = store_factory
        self.calibration = calibration
        self._store: History | None = None
        self._dirty = True
        self.rows: list[HistoryRecord] = []
        self.by_precision: dict[str, list[HistoryRecord]] = {}  # the selected model and mode's labelled rows
        self.report: CalibrationReport | None = None
        self.fit_result: TemperatureFit | None = None  # the temperature fit of the current model/mode, this session
        self._preferred: tuple[str | None, bool] = (None, False)
        self.setWidgetResizable(True)
        body = QWidget()
        body.setObjectName("Panel")
        self.setWidget(body)
        layout = QVBoxLayout(body)
        layout.setContentsMargins(18, 14, 18, 18)
        layout.setSpacing(8)
        self._build_controls(layout)
        self._build_figures(layout)
        self._build_temperature(layout)
        self._build_bias(layout)
        layout.addStretch(0)

        self.model_box.currentIndexChanged.connect(lambda _: self._selection_changed())
        self.think_box.currentIndexChanged.connect(lambda _: self._selection_changed())
        self.bins.valueChanged.connect(lambda _: self._update_report())
        self.refresh_button.clicked.connect(self.refresh)
        self.fit_button.clicked.connect(self.fit_temperature)
        self.apply_box.toggled.connect(self._apply_toggled)
        self.chart_at_t.toggled.connect(lambda _: self._update_report())
        self._update_report()

    def _build_controls(self, layout: QVBoxLayout) -> None:
        """Which model and think mode, how many bins, refresh."""
        controls = QHBoxLayout()
        controls.setSpacing(8)
        self.model_box = QComboBox()
        self.model_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.model_box.setMinimumContentsLength(10)
        self.model_box.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.model_box.setToolTip("the model the decisions were made with (as recorded in the history)")
        self.think_box = QComboBox()
        for text, value in THINK_MODES:
            self.think_box.addItem(text, value)
        self.think_box.setToolTip("calibration is per think mode: reasoning changes how confident the answer is")
        self.precision_box = QComboBox()
        self.precision_box.setToolTip("calibration is per precision: an f32 bar and a reduced compile's (or a server's) "
                                      "are never pooled")
        self.precision_box.currentIndexChanged.connect(lambda _: self._precision_changed())
        self.bins = QSpinBox()
        self.bins.setRange(2, 50)
        self.bins.setValue(10)
        self.bins.setPrefix("bins ")
        self.bins.setKeyboardTracking(False)
        self.bins.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.bins.setFixedWidth(92)
        self.bins.setToolTip("number of equal-width confidence bins for ECE and the chart (2 – 50)")
        self.refresh_button = QPushButton("Refresh")
        controls.addWidget(self.model_box, 1)
        controls.addWidget(self.think_box)
        controls.addWidget(self.precision_box)
        controls.addWidget(self.bins)
        self.refresh_button.setToolTip("read the history again")
        controls.addWidget(self.refresh_button)
        layout.addLayout(controls)

    def _build_figures(self, layout: QVBoxLayout) -> None:
        """A message line, the five figures and the reliability chart."""
        self.message = note_label("", "InfoBox")
        self.message.hide()
        layout.addWidget(self.message)

        figures = QGridLayout()
        figures.setHorizontalSpacing(6)
        self.figures: dict[str, QLabel] = {}
        self.figure_hints: dict[str, QLabel] = {}
        for column, (key, caption) in enumerate(
            (("count", "LABELLED"), ("accuracy", "ACCURACY"), ("brier", "BRIER"), ("nll", "NLL"), ("ece", "ECE"))
        ):
            card, value, hint = figure(caption)
            figures.addWidget(card, 0, column)
            self.figures[key] = value
            self.figure_hints[key] = hint
        layout.addLayout(figures)

        self.chart_title = note_label("", "Faint")
        layout.addWidget(self.chart_title)
        self.chart = ReliabilityChart()
        layout.addWidget(self.chart, 1)


    def _build_temperature(self, layout: QVBoxLayout) -> None:
        """Fitting a temperature and applying it."""
        layout.addSpacing(6)
        layout.addWidget(caption_label("TEMPERATURE SCALING"))
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
        self.fit_label = note_label("Fit a temperature on 15 or more labelled decisions.", "Caption")
        self.fit_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.fit_label)
        self.applied_label = note_label("", "RangeHint")
        layout.addWidget(self.applied_label)


    def _build_bias(self, layout: QVBoxLayout) -> None:
        """How often each letter was chosen against how often it was right."""
        layout.addSpacing(6)
        layout.addWidget(caption_label("OPTION-ORDER BIAS"))
        layout.addWidget(note_label("How often the model chose each letter vs how often that letter was right. A letter "
                               "chosen much more often than it is right is a position prior: try “Debias order”.",
                               "RangeHint"))
        self.bias_table = read_only_table(["Letter", "Chosen", "Right", "Chosen %", "Right %", "Chosen − right"])
        header = self.bias_table.horizontalHeader()
        for column in range(6):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Stretch if column == 0 else QHeaderView.ResizeMode.ResizeToContents)
        self.bias_table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        layout.addWidget(self.bias_table)

    # ----- data -----
    @property
    def store(self) -> History | None:
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
        """The labelled rows of the selected model and mode, split by precision: one precision's rows at a time."""
        model, think = self.selection()
        store = self.store
        self.by_precision = {}
        if store is not None and model is not None:
            for row in store.rows(model=model, think=think, labelled=True):
                self.by_precision.setdefault(row.precision, []).append(row)
        current = self.precision_box.currentData()
        self.precision_box.blockSignals(True)
        self.precision_box.clear()
        for precision, rows in sorted(self.by_precision.items(), key=lambda kv: -len(kv[1])):
            self.precision_box.addItem(f"{precision} ({len(rows)})", precision)
        index = self.precision_box.findData(current)
        self.precision_box.setCurrentIndex(index if index >= 0 else (0 if self.by_precision else -1))
        self.precision_box.blockSignals(False)
        self.precision_box.setVisible(len(self.by_precision) > 1)
        self.rows = list(self.by_precision.get(self.precision_box.currentData(), []))

    def _precision_changed(self) -> None:
        self.fit_result = None
        self.rows = list(self.by_precision.get(self.precision_box.currentData(), []))
        self._update_report()

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
        at_t = self.chart_at_t.isChecked()
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
        self.report = self.calibration.report(self.rows, bins, temperature if at_t and temperature is not None else 1.0)
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
        precision = self.precision_box.currentData()
        caption = f"{model} · {mode} · {precision} · {r.count} labelled" + (f" · at T = {temperature:.3f}" if at_t else " · raw")
        self.chart.set_report(r, caption)
        self.chart_title.setText(f"Reliability diagram · {caption}")
        self._fill_bias(self.calibration.bias(self.rows))
        self.fit_button.setEnabled(True)

    def _fill_bias(self, entries: list[dict]) -> None:
        table = self.bias_table
        table.setRowCount(len(entries))
        for row, entry in enumerate(entries):
            difference = entry["chosen_rate"] - entry["right_rate"]
            table.setItem(row, 0, cell(entry["label"]))
            table.setItem(row, 1, cell(str(entry["chosen"]), Qt.AlignmentFlag.AlignRight))
            table.setItem(row, 2, cell(str(entry["right"]), Qt.AlignmentFlag.AlignRight))
            table.setItem(row, 3, cell(f"{entry['chosen_rate']:.0%}", Qt.AlignmentFlag.AlignRight))
            table.setItem(row, 4, cell(f"{entry['right_rate']:.0%}", Qt.AlignmentFlag.AlignRight))
            item = cell(f"{difference:+.0%}", Qt.AlignmentFlag.AlignRight)
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
