"""The decision card: the chosen option large, one bar per option, coverage, collapsible reasoning.

States: no model (choose a folder), ready (nothing asked yet), running (with think progress),
result, error.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from decider.engine.decisions.labels import COVERED_MODES, TINY_COVERAGE

from .choice_card import ChoiceCard
from .bars import BarsView, bound_text, choice_note, percent_text, shown_probability
from .theme import set_role

if TYPE_CHECKING:
    from decider.engine.core.info import EngineInfo
    from decider.engine.decisions.types import DecisionResult


def engine_summary(engine: EngineInfo | None) -> tuple[str, str]:
    """(short text for the status bar, sentence for the result footer) about which engine computed a
    result and how exact its logprobs are (result.engine / service.info)."""
    if engine is None:
        return "", ""
    if engine.remote:
        where = engine.url or "a server"
        model = engine.model
        constraint = engine.constraint or "none"
        method = engine.method or ""
        listed = {"decide": "exact logprobs (a Decider server)",
                  "forced letters": "the server's logprob of every option letter"}.get(method, f"server top-{engine.top_logprobs} logprobs")
        bars = engine.bars_text
        server = engine.server
        long = (
            f"Computed by the remote {f'{server} ' if server and server != 'unknown' else ''}server {where}"
            f"{f' ({model})' if model else ''} · {listed}"
            + ("" if method in ("decide", "forced letters") else ", not exact full-vocabulary values")
            + (f" · method: {method}" if method and method != "auto" else "")
            + (f" · answer constraint: {constraint}" if constraint != "none" else "")
            + (f" · bars {bars}" if bars else "")
        )
        return listed, long
    # The arithmetic is always named: "exact (f32)" only where the compiled model really ran f32.
    short = f"exact logprobs ({engine.precision})" if engine.exact and engine.precision else (
        "exact full-vocabulary logprobs" if engine.exact else f"reduced precision: {engine.precision or engine.reduced_by}")
    return short, f"Computed locally: {engine.summary}"


def _label(text: str = "", name: str | None = None, wrap: bool = True) -> QLabel:
    label = QLabel(text)
    if name:
        label.setObjectName(name)
    label.setWordWrap(wrap)
    return label


class ResultView(QStackedWidget):
    choose_model = Signal()

    def __init__(self, calibrate: Callable[[list[float], float], list[float]] | None = None,
                 parent: QWidget | None = None) -> None:
        """`calibrate(option logprobs, T)`: the calibrated confidences shown beside the raw ones."""
        super().__init__(parent)
        self._calibrate = calibrate
        self.result: DecisionResult | None = None
        self.temperature: float | None = None
        self.calibrated: list[float] | None = None
        self._think_budget = 0
        self._build_no_model_page()
        self._build_loading_page()
        self._build_main_page()
        self.show_ready()

    def _build_no_model_page(self) -> None:
        """The page before any model: what a model folder is, and the button to choose one."""
        self.no_model_page = QWidget()
        layout = QVBoxLayout(self.no_model_page)
        layout.setContentsMargins(40, 40, 40, 40)
        layout.addStretch(1)
        title = _label("Choose a model folder to start", "EmptyTitle")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.no_model_text = _label(
            "Decider runs Qwen3.5 models exported to OpenVINO with optimum-intel — a folder with config.json, "
            "openvino_model.xml/.bin and tokenizer.json. Nothing leaves this computer.",
            "Caption",
        )
        self.no_model_text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.choose_button = QPushButton("Choose a model folder…")
        self.choose_button.setObjectName("Primary")
        self.choose_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.choose_button.clicked.connect(self.choose_model.emit)
        self.no_model_error = _label("", "ErrorBox")
        self.no_model_error.hide()
        layout.addWidget(title)
        layout.addSpacing(6)
        layout.addWidget(self.no_model_text)
        layout.addSpacing(14)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.choose_button)
        row.addStretch(1)
        layout.addLayout(row)
        layout.addSpacing(10)
        layout.addWidget(self.no_model_error)
        layout.addStretch(2)
        self.addWidget(self.no_model_page)

    def _build_loading_page(self) -> None:
        """The page while a model loads."""
        self.loading_page = QWidget()
        layout = QVBoxLayout(self.loading_page)
        layout.setContentsMargins(40, 40, 40, 40)
        layout.addStretch(1)
        self.loading_title = _label("Loading model…", "EmptyTitle")
        self.loading_title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.loading_text = _label("Compiling for the device. On an NPU the first load can take a minute; "
                                   "later loads use the compiled cache.", "Caption")
        self.loading_text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        spinner = QProgressBar()
        spinner.setRange(0, 0)
        spinner.setTextVisible(False)
        spinner.setFixedWidth(220)
        layout.addWidget(self.loading_title)
        layout.addSpacing(6)
        layout.addWidget(self.loading_text)
        layout.addSpacing(14)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(spinner)
        row.addStretch(1)
        layout.addLayout(row)
        layout.addStretch(2)
        self.addWidget(self.loading_page)

    def _build_main_page(self) -> None:
        """Ready, running, the result and errors share one scrollable page."""
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        # sideways only when a word of the chosen option is wider than a narrow column: scrolled, never cut off
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        page = QWidget()
        page.setObjectName("Panel")
        scroll.setWidget(page)
        layout = QVBoxLayout(page)
        layout.setContentsMargins(14, 18, 14, 18)
        layout.setSpacing(10)

        self.caption = _label("DECISION", "SectionTitle")
        layout.addWidget(self.caption)

        self.placeholder = _label(
            "Write a situation, give it 2 to 10 options and press Decide (Ctrl+Enter). "
            "Each option gets a bar: the model's probability for it, renormalised over the options.",
            "Caption",
        )
        layout.addWidget(self.placeholder)

        self.running_box = QWidget()
        running = QVBoxLayout(self.running_box)
        running.setContentsMargins(0, 6, 0, 6)
        running.setSpacing(8)
        self.running_label = _label("Deciding…", "EmptyTitle")
        self.running_bar = QProgressBar()
        self.running_bar.setTextVisible(False)
        self.running_bar.setRange(0, 0)
        running.addWidget(self.running_label)
        running.addWidget(self.running_bar)
        layout.addWidget(self.running_box)

        self.error_box = _label("", "ErrorBox")
        self.error_box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.error_box)

        layout.addWidget(self._build_choice_card())

        self.bars_title = _label("CONFIDENCE PER OPTION", "SectionTitle")
        layout.addSpacing(6)
        layout.addWidget(self.bars_title)
        self.bars = BarsView()
        layout.addWidget(self.bars)

        self.bound_note = _label("", "Note")
        layout.addWidget(self.bound_note)

        self.coverage = _label("", "Faint")
        layout.addWidget(self.coverage)

        self.engine_note = _label("", "Faint")
        self.engine_note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.engine_note)

        self._add_reasoning(layout)
        layout.addStretch(1)
        self.main_page = scroll
        self.addWidget(scroll)

    def _build_choice_card(self) -> QFrame:
        """The chosen option: its letter, text, confidence (and calibrated confidence), and a line about it."""
        card = ChoiceCard()
        self.choice_row = card
        self.choice_badge, self.choice_text, self.choice_meta = card.badge, card.text, card.meta
        self.choice_percent, self.choice_calibrated = card.percent, card.calibrated
        return card

    def _add_reasoning(self, layout: QVBoxLayout) -> None:
        """The reasoning, folded under a toggle."""
        self.reasoning_toggle = QToolButton()
        self.reasoning_toggle.setObjectName("Flat")
        self.reasoning_toggle.setCheckable(True)
        self.reasoning_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.reasoning_toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.reasoning_toggle.setText("Reasoning")
        self.reasoning_toggle.toggled.connect(self._toggle_reasoning)
        self.reasoning = QPlainTextEdit()
        self.reasoning.setReadOnly(True)
        self.reasoning.setMinimumHeight(140)
        layout.addSpacing(4)
        layout.addWidget(self.reasoning_toggle, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.reasoning)

    # ----- states -----
    def _only(self, *visible: QWidget) -> None:
        widgets = [
            self.placeholder, self.running_box, self.error_box, self.choice_row, self.choice_meta, self.bars_title,
            self.bars, self.bound_note, self.coverage, self.engine_note, self.reasoning_toggle, self.reasoning,
        ]
        for widget in widgets:
            widget.setVisible(widget in visible)
        self.setCurrentWidget(self.main_page)

    def show_no_model(self, error: str | None = None) -> None:
        self.no_model_error.setText(error or "")
        self.no_model_error.setVisible(bool(error))
        self.setCurrentWidget(self.no_model_page)

    def show_loading(self, name: str) -> None:
        self.loading_title.setText(f"Loading {name}…")
        self.setCurrentWidget(self.loading_page)

    def show_ready(self) -> None:
        self.result = None
        self._only(self.placeholder)

    def show_running(self, think: bool, budget: int) -> None:
        self._think_budget = budget if think else 0
        self.running_label.setText("Thinking…" if think else "Deciding…")
        if think:
            self.running_bar.setRange(0, budget)
            self.running_bar.setValue(0)
        else:
            self.running_bar.setRange(0, 0)
        self._only(self.running_box)

    def show_progress(self, done: int, total: int) -> None:
        """The engine's count: reasoning tokens drawn so far, of the most the decision may draw."""
        if self._think_budget:
            self.running_label.setText(f"Thinking… {done} of at most {total} tokens")
            self.running_bar.setValue(min(done, total))

    def show_cancelled(self) -> None:
        if self.result is not None:
            self.show_result(self.result)
            set_role(self.error_box, "WarnBox")
            self.error_box.setText("Cancelled — showing the previous decision.")
            self.error_box.show()
        else:
            set_role(self.error_box, "WarnBox")
            self.error_box.setText("Cancelled.")
            self._only(self.error_box, self.placeholder)

    def show_error(self, message: str) -> None:
        """The error alone: a previous result under it would read as this question's answer."""
        set_role(self.error_box, "ErrorBox")
        self.error_box.setText(message)
        self.result = None
        self._only(self.error_box, self.placeholder)

    def show_result(self, result: DecisionResult, temperature: float | None = None) -> None:
        """Show a result; with `temperature` (the one applied for this model and think mode) every raw
        percentage gets its calibrated value beside it, labelled "calibrated"."""
        self.result = result
        self.temperature = temperature
        chosen = result.choice
        self.choice_badge.setText(chosen.label)
        self.choice_text.setText(chosen.text)
        shown = shown_probability(chosen)
        debiased = chosen.debiased_probability is not None
        how = "averaged over every option order" if debiased else "renormalised over the options"
        bound = chosen.bound
        self.choice_percent.setText(bound_text(shown, bound))
        drawn = result.drawn
        verb = "Drawn" if drawn else "Chosen"
        meta = f"{verb} with {bound_text(shown, bound)} confidence · {how} · {result.mode} mode"
        call = result.tool_call
        if call is not None:  # functions as options: the chosen function's call, its arguments under its schema
            meta += f"\nCall: {call.name}({call.arguments})"
        self.calibrated = self._calibrated(result, temperature)
        if self.calibrated is not None:
            value = bound_text(self.calibrated[result.choice_index], bound)
            self.choice_calibrated.setText(f"{value} calibrated")
            self.choice_calibrated.setToolTip(
                f"The raw {bound_text(shown, bound)} rescaled by the temperature T = {temperature:.3g} fitted on your "
                "labelled decisions (Calibration tab). The raw value stays the model's own."
            )
            meta += f" · {value} calibrated (T = {temperature:.3g})"
        self.choice_calibrated.setVisible(self.calibrated is not None)
        note = choice_note(result)
        self.choice_meta.setText(meta + (f"\n{note}" if note else ""))
        self.bars.set_result(result, self.calibrated)
        bounded = [o for o in result.options if o.bound == "upper"]
        if bounded:
            names = ", ".join(o.label for o in bounded)
            one = len(bounded) == 1
            self.bound_note.setText(
                f"{names} {'was' if one else 'were'} below the server's top-20 alternatives: "
                f"{'its bar is an upper bound' if one else 'their bars are upper bounds'} (shown as “< x%”), "
                "computed from the lowest logprob the server listed."
            )
        else:
            self.bound_note.setText("")
        estimates = [o.label for o in result.options if o.bar == "estimate"]
        if estimates:  # the server's numbers that Decider could not confirm: said under the bars, never hidden
            notes = result.engine.notes if result.engine is not None else None
            self.bound_note.setText(" ".join(filter(None, [
                self.bound_note.text(),
                f"{', '.join(estimates)}: {'an estimate' if len(estimates) == 1 else 'estimates'}, not exact values"
                + (f" ({'; '.join(notes)})" if notes else "") + ".",
            ])))
        tiny = result.mode in COVERED_MODES and result.coverage < TINY_COVERAGE
        self.coverage.setText(
            f"Coverage {f'{result.coverage:.2g} (tiny)' if tiny else percent_text(result.coverage)}: the share of the "
            f"model's next-token probability that fell on the option {'texts' if result.mode == 'words' else 'letters'}"
            f"{' or calls' if result.mode == 'tools' else ''}. The bars renormalise over it"
            + (": almost nothing, so they say little." if tiny else ".")
        )
        self.engine_note.setText(engine_summary(result.engine)[1])
        visible = [self.choice_row, self.choice_meta, self.bars_title, self.bars, self.coverage]
        visible += [w for w in (self.bound_note, self.engine_note) if w.text()]
        if result.reasoning:
            words = len(result.reasoning.split())
            self.reasoning_toggle.setText(f"Reasoning · {words} words")
            self.reasoning.setPlainText(result.reasoning)
            visible.append(self.reasoning_toggle)
            if self.reasoning_toggle.isChecked():
                visible.append(self.reasoning)
        self._only(*visible)

    def _calibrated(self, result, temperature: float | None) -> list[float] | None:
        if temperature is None or not result.options or self._calibrate is None:
            return None
        try:
            # the log of the shown bars: with permute the debiased values are calibrated, not one order's
            return self._calibrate([math.log(o.shown) if o.shown > 0 else -math.inf for o in result.options], temperature)
        except (ValueError, FloatingPointError):
            return None

    def _toggle_reasoning(self, open_: bool) -> None:
        self.reasoning_toggle.setArrowType(Qt.ArrowType.DownArrow if open_ else Qt.ArrowType.RightArrow)
        self.reasoning.setVisible(open_ and self.result is not None and bool(self.result.reasoning))
