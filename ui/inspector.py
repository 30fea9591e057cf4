"""The token inspector: what the model saw at the answer position of the last decision.

- the option distribution: each option letter's full-vocabulary logprob and probability, the
  renormalised probability the bar shows, and the order-debiased one when permute ran;
- the top alternatives outside the options (tokens the model wanted instead of a letter);
- timings and token counts; the reasoning text when think was on.
Cells are tinted by probability.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QScrollArea,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from decider.engine.decisions.labels import usage_text

from .bars import percent_text
from .theme import heat

if TYPE_CHECKING:
    from decider.engine.decisions.types import DecisionRequest, DecisionResult


def token_display(token: str) -> str:
    """A token as readable text: whitespace and control characters made visible."""
    out = []
    for char in token:
        if char == " ":
            out.append("␣")
        elif char == "\n":
            out.append("↵")
        elif char == "\t":
            out.append("⇥")
        elif ord(char) < 32 or ord(char) == 127:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return "".join(out) or "∅"


def _item(text: str, probability: float | None = None, align=Qt.AlignmentFlag.AlignLeft) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
    item.setTextAlignment(align | Qt.AlignmentFlag.AlignVCenter)
    if probability is not None:
        item.setBackground(QBrush(heat(probability)))
    return item


def logprob_text(value: float) -> str:
    """Three decimals, or three significant digits where those would read "-0.000" (a near-certain token)."""
    if value == 0:
        return "0.000"
    if abs(value) < 0.0005:
        return f"{value:.2e}"
    return f"{value:.3f}"


def _table(headers: list[str]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(headers)
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setShowGrid(False)
    table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
    table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    table.setWordWrap(False)
    table.setTextElideMode(Qt.TextElideMode.ElideRight)
    table.verticalHeader().setDefaultSectionSize(28)
    header = table.horizontalHeader()
    header.setHighlightSections(False)
    header.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
    return table


def _fit_height(table: QTableWidget) -> None:
    """Show every row: the table is as tall as its header plus its rows (the page scrolls, not the table)."""
    header = max(table.horizontalHeader().sizeHint().height(), table.horizontalHeader().height())
    rows = table.verticalHeader().length()
    table.setFixedHeight(header + rows + 2 * table.frameWidth() + 2)


class TokenInspector(QScrollArea):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        body = QWidget()
        body.setObjectName("Panel")
        self.setWidget(body)
        layout = QVBoxLayout(body)
        layout.setContentsMargins(18, 14, 18, 18)
        layout.setSpacing(8)

        self.empty = QLabel("Make a decision to inspect the answer position's tokens.")
        self.empty.setObjectName("Faint")
        layout.addWidget(self.empty)

        self.summary = QLabel("")
        self.summary.setObjectName("Caption")
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)

        self.options_title = self._title("ANSWER POSITION · OPTION DISTRIBUTION", layout)
        self.options_table = _table(["Option", "logprob", "p (vocab)", "p (options)", "debiased"])
        header = self.options_table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in range(1, 5):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        layout.addWidget(self.options_table)

        self.alts_title = self._title("TOP ALTERNATIVES OUTSIDE THE OPTIONS", layout)
        self.alts_note = QLabel("")
        self.alts_note.setObjectName("RangeHint")
        self.alts_note.setWordWrap(True)
        layout.addWidget(self.alts_note)
        self.alts_table = _table(["#", "Token", "id", "logprob", "p"])
        header = self.alts_table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Fixed)
        header.resizeSection(0, 34)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        for column in range(2, 5):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        layout.addWidget(self.alts_table)

        self.timing_title = self._title("TIMINGS AND TOKENS", layout)
        self.timings = QLabel("")
        self.timings.setObjectName("Caption")
        self.timings.setWordWrap(True)
        self.timings.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.timings)

        self.reasoning_title = self._title("REASONING TOKENS", layout)
        self.reasoning_note = QLabel("")
        self.reasoning_note.setObjectName("RangeHint")
        self.reasoning_note.setWordWrap(True)
        layout.addWidget(self.reasoning_note)
        self.reasoning = QPlainTextEdit()
        self.reasoning.setReadOnly(True)
        self.reasoning.setMinimumHeight(120)
        layout.addWidget(self.reasoning)
        layout.addStretch(1)
        self._sections = [
            self.summary, self.options_title, self.options_table, self.alts_title, self.alts_note, self.alts_table,
            self.timing_title, self.timings,
        ]
        self._reasoning_widgets = [self.reasoning_title, self.reasoning_note, self.reasoning]
        self.clear()

    @staticmethod
    def _title(text: str, layout: QVBoxLayout) -> QLabel:
        label = QLabel(text)
        label.setObjectName("SectionTitle")
        layout.addSpacing(8)
        layout.addWidget(label)
        return label

    def clear(self) -> None:
        self.empty.show()
        for widget in self._sections + self._reasoning_widgets:
            widget.hide()

    def set_result(self, result: DecisionResult, request: DecisionRequest | None = None) -> None:
        self.empty.hide()
        for widget in self._sections:
            widget.show()
        chosen = result.options[result.choice_index]
        mode = "letter at the answer position" if result.mode == "letters" else "whole option text scored"
        self.summary.setText(
            f"Chosen: {chosen.label}. {chosen.text} · coverage {percent_text(result.coverage)} "
            f"(probability mass on the option {'letters' if result.mode == 'letters' else 'texts'}) · {mode}"
        )

        table = self.options_table
        debiased = any(o.debiased_probability is not None for o in result.options)
        table.setColumnHidden(4, not debiased)
        table.setRowCount(len(result.options))
        for row, option in enumerate(result.options):
            full = math.exp(option.logprob)
            mark = "  ◂ chosen" if row == result.choice_index else ""
            item = _item(f"{option.label}   {option.text}{mark}", option.probability)
            item.setToolTip(f"{option.label}. {option.text}")
            table.setItem(row, 0, item)
            upper = option.bound == "upper"
            mark = "≤ " if upper else ""  # a remote server did not list it: the list's lowest logprob bounds it
            # every cell of a row carries its shade: a gap reads as a missing value
            table.setItem(row, 1, _item(f"{mark}{logprob_text(option.logprob)}", option.probability, Qt.AlignmentFlag.AlignRight))
            table.setItem(row, 2, _item(f"{mark}{full:.2e}", option.probability, Qt.AlignmentFlag.AlignRight))
            table.setItem(row, 3, _item(f"{'< ' if upper else ''}{percent_text(option.probability)}", option.probability, Qt.AlignmentFlag.AlignRight))
            if upper:
                item.setToolTip(f"{option.label}. {option.text}\nnot in the server's top-20 alternatives: the values are upper bounds")
            if debiased:
                value = option.debiased_probability or 0.0
                table.setItem(row, 4, _item(percent_text(value), value, Qt.AlignmentFlag.AlignRight))
        _fit_height(table)

        labels = {o.label for o in result.options}
        alts = [a for a in result.alternatives if a.token.strip() not in labels]
        hidden = len(result.alternatives) - len(alts)
        self.alts_note.setText(
            (f"The {len(result.alternatives)} most likely next tokens the server listed (its top-20)"
             if result.engine is not None and result.engine.remote
             else f"The {len(result.alternatives)} most likely next tokens over the whole vocabulary")
            + (f", minus {hidden} option letter{'s' if hidden != 1 else ''}" if hidden else "")
            + ". High mass here means the model wanted to say something other than a letter."
        )
        table = self.alts_table
        table.setRowCount(len(alts))
        for row, alt in enumerate(alts):
            p = math.exp(alt.logprob)
            table.setItem(row, 0, _item(str(row + 1), p, Qt.AlignmentFlag.AlignCenter))
            item = _item(token_display(alt.token), p)
            item.setToolTip(repr(alt.token))
            table.setItem(row, 1, item)
            table.setItem(row, 2, _item(str(alt.token_id) if alt.token_id >= 0 else "—", p, Qt.AlignmentFlag.AlignRight))
            table.setItem(row, 3, _item(logprob_text(alt.logprob), p, Qt.AlignmentFlag.AlignRight))
            table.setItem(row, 4, _item(percent_text(p), p, Qt.AlignmentFlag.AlignRight))
        _fit_height(table)

        timings = result.timings
        parts = [f"{name.removesuffix('_s')} {value * 1000:.0f} ms" for name, value in timings.items() if name != "total_s"]
        usage = result.usage
        self.timings.setText(
            f"total {timings.get('total_s', 0.0) * 1000:.0f} ms ({', '.join(parts)})\n"
            f"{usage_text(usage)}"
        )

        show_reasoning = bool(result.reasoning)
        for widget in self._reasoning_widgets:
            widget.setVisible(show_reasoning)
        if show_reasoning:
            count = max(0, usage.get("completion_tokens", 1) - 1)
            self.reasoning_note.setText(
                f"About {count} tokens of reasoning (including the forced end of the think block). "
                "Per-token logprobs are not recorded for decisions; only the answer position is."
            )
            self.reasoning.setPlainText(result.reasoning or "")
