"""Confidence bars: one per option, the chosen one highlighted. Used by the window and the overlay."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPainterPath
from PySide6.QtWidgets import QSizePolicy, QVBoxLayout, QWidget

from decider.engine.decisions.labels import uncertain_text

from .theme import color

if TYPE_CHECKING:
    from decider.engine.decisions.types import DecisionResult, OptionResult


def percent_text(probability: float) -> str:
    """Exact to two decimals; never rounds a non-zero value to 0.00% or a non-certain one to 100.00%."""
    value = probability * 100
    if 0 < value < 0.01:
        return "<0.01%"
    if 99.99 < value < 100:
        return ">99.99%"
    return f"{value:.2f}%"


def bound_text(probability: float, bound: str | None) -> str:
    """percent_text, marked "< " when the value is only an upper bound (a remote server's top-20 left it out)."""
    return f"< {percent_text(probability)}" if bound == "upper" else percent_text(probability)


def shown_probability(option: OptionResult) -> float:
    """The value a bar shows: the order-debiased probability when permute ran, else the renormalised one."""
    return option.debiased_probability if option.debiased_probability is not None else option.probability


def choice_note(result: DecisionResult) -> str:
    """What the big letter is when it is not simply the longest bar: drawn (sample-choice mode) or uncertain
    (a server's bounds overlap); empty otherwise."""
    notes = []
    if result.drawn:
        likely = result.options[result.most_likely_index]
        notes.append(f"Drawn at the sampling settings (sample-choice mode) · most likely: {likely.label}. {likely.text} "
                     f"({bound_text(shown_probability(likely), likely.bound)})")
    if result.uncertain:  # near-tie, tiny coverage, overlapping bounds: the result says which
        text = uncertain_text(result)
        notes.append(text[:1].upper() + text[1:])
    return "\n".join(notes)


class ConfidenceBar(QWidget):
    def __init__(self, label: str, text: str, value: float, *, chosen: bool = False, raw: float | None = None,
                 logprob: float | None = None, compact: bool = False, bound: str | None = None,
                 calibrated: float | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.label = label
        self.text = text
        self.value = float(value)
        self.raw = raw
        self.chosen = chosen
        self.compact = compact
        self.bound = bound  # "upper": the server did not list this option; the value is at most this
        self.calibrated = calibrated  # the value at the applied temperature, shown beside (never instead of) it
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground, True)
        tip = [f"{label}. {text}", f"probability among the options: {'at most ' if bound == 'upper' else ''}{value:.6f}"]
        if bound == "upper":
            tip.append("not in the server's top-20 alternatives: an upper bound, not a measurement")
        if raw is not None:
            tip.append(f"single order (before debiasing): {raw:.6f}")
        if calibrated is not None:
            tip.append(f"calibrated (applied temperature): {calibrated:.6f}")
        if logprob is not None:
            what = "logprob (upper bound: the server list's lowest)" if bound == "upper" else "logprob"
            tip.append(f"{what}: {logprob:.4f}")
        self.setToolTip("\n".join(tip))

    def percent_text(self) -> str:
        return bound_text(self.value, self.bound)

    def side_text(self) -> str:
        """The small grey note left of the percentage: single-order value and/or calibrated value."""
        parts = []
        if self.raw is not None:
            parts.append(f"one order {percent_text(self.raw)}")
        if self.calibrated is not None:
            parts.append(f"calibrated {bound_text(self.calibrated, self.bound)}")
        return " · ".join(parts)

    def sizeHint(self) -> QSize:
        return QSize(260 if self.compact else 420, 22 if self.compact else 50)

    def minimumSizeHint(self) -> QSize:
        return QSize(140, 22 if self.compact else 50)

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if self.compact:
            self._paint_compact(painter)
        else:
            self._paint_full(painter)
        painter.end()

    def _fill_color(self):
        return color("accent") if self.chosen else color("bar")

    def _paint_track(self, painter: QPainter, rect: QRectF) -> None:
        radius = rect.height() / 2
        track = QPainterPath()
        track.addRoundedRect(rect, radius, radius)
        painter.fillPath(track, color("track"))
        width = rect.width() * max(0.0, min(1.0, self.value))
        if width > 0.5:
            fill = QPainterPath()
            fill.addRoundedRect(QRectF(rect.left(), rect.top(), max(width, rect.height()), rect.height()), radius, radius)
            painter.fillPath(fill, self._fill_color())

    def _paint_full(self, painter: QPainter) -> None:
        w = self.width()
        base = QFont(self.font())
        badge = QRectF(0, 4, 28, 28)
        path = QPainterPath()
        path.addRoundedRect(badge, 7, 7)
        painter.fillPath(path, color("accent") if self.chosen else color("raised"))
        font = QFont(base)
        font.setBold(True)
        painter.setFont(font)
        painter.setPen(color("window") if self.chosen else color("muted"))
        painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, self.label)

        left = badge.right() + 12
        percent_font = QFont(base)
        percent_font.setBold(True)
        percent_font.setPointSizeF(base.pointSizeF() + 1)
        percent = self.percent_text()
        pm = QFontMetrics(percent_font)
        percent_width = pm.horizontalAdvance(percent)
        raw_text = self.side_text()
        raw_font = QFont(base)
        raw_font.setPointSizeF(max(7.0, base.pointSizeF() - 1.5))
        raw_width = QFontMetrics(raw_font).horizontalAdvance(raw_text) + 10 if raw_text else 0

        text_font = QFont(base)
        text_font.setBold(self.chosen)
        painter.setFont(text_font)
        painter.setPen(color("text") if self.chosen else color("muted").lighter(115))
        text_rect = QRectF(left, 0, w - left - percent_width - raw_width - 12, 24)
        elided = QFontMetrics(text_font).elidedText(self.text, Qt.TextElideMode.ElideRight, int(text_rect.width()))
        painter.drawText(text_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, elided)

        if raw_text:
            painter.setFont(raw_font)
            painter.setPen(color("faint"))
            painter.drawText(QRectF(w - percent_width - raw_width - 4, 0, raw_width, 24), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, raw_text)
        painter.setFont(percent_font)
        painter.setPen(color("accent") if self.chosen else color("text"))
        painter.drawText(QRectF(w - percent_width - 2, 0, percent_width + 2, 24), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, percent)

        self._paint_track(painter, QRectF(left, 29, w - left - 2, 8))

    def _paint_compact(self, painter: QPainter) -> None:
        w, h = self.width(), self.height()
        base = QFont(self.font())
        small = QFont(base)
        small.setPointSizeF(max(7.5, base.pointSizeF() - 1))
        bold = QFont(small)
        bold.setBold(True)
        painter.setFont(bold)
        painter.setPen(color("accent") if self.chosen else color("muted"))
        painter.drawText(QRectF(0, 0, 16, h), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, self.label)
        percent = self.percent_text()
        percent_width = QFontMetrics(bold).horizontalAdvance("< 100.00%" if self.bound else "100.00%")
        text_width = int((w - 16 - percent_width) * 0.58)
        text_font = bold if self.chosen else small
        painter.setFont(text_font)
        painter.setPen(color("text") if self.chosen else color("muted").lighter(120))
        painter.drawText(QRectF(16, 0, text_width, h), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         QFontMetrics(text_font).elidedText(self.text, Qt.TextElideMode.ElideRight, text_width - 6))
        bar_left = 16 + text_width + 4
        bar_width = w - bar_left - percent_width - 8
        self._paint_track(painter, QRectF(bar_left, h / 2 - 3, max(bar_width, 10), 6))
        painter.setFont(bold)
        painter.setPen(color("accent") if self.chosen else color("text"))
        painter.drawText(QRectF(w - percent_width, 0, percent_width, h), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, percent)


class BarsView(QWidget):
    """A column of ConfidenceBars for one DecisionResult."""

    def __init__(self, compact: bool = False, parent: QWidget | None = None):
        super().__init__(parent)
        self.compact = compact
        self.bars: list[ConfidenceBar] = []
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(2 if compact else 8)
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground, True)

    def clear(self) -> None:
        for bar in self.bars:
            self._layout.removeWidget(bar)
            bar.hide()  # gone from the screen now, not when the event loop gets to deleting it
            bar.deleteLater()
        self.bars = []

    def set_result(self, result: DecisionResult, calibrated: list[float] | None = None) -> None:
        """One bar per option; `calibrated` (one value per option, at the applied temperature) adds a note."""
        self.clear()
        for index, option in enumerate(result.options):
            debiased = option.debiased_probability is not None
            bar = ConfidenceBar(
                option.label, option.text, shown_probability(option), chosen=index == result.choice_index,
                raw=option.probability if debiased else None, logprob=option.logprob, compact=self.compact,
                bound=option.bound, calibrated=None if calibrated is None else calibrated[index],
                parent=self,
            )
            self._layout.addWidget(bar)
            self.bars.append(bar)

    def values(self) -> list[float]:
        return [bar.value for bar in self.bars]
