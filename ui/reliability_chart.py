"""A reliability diagram painted with QPainter: one bar per equal-width confidence bin (height = how
often the chosen option was right), the mean confidence of the bin as a tick, the diagonal of perfect
calibration, and each bin's count under it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from .theme import color

if TYPE_CHECKING:
    from decider.engine.decisions.calibration import ReliabilityBin


class ReliabilityChart(QWidget):
    """Accuracy per confidence bin against the diagonal; counts under the bars."""

    MARGINS = (60, 32, 18, 62)  # left, top, right, bottom (tick labels, counts, axis title)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.report = None
        self.caption = ""
        self.empty_text = "No labelled decisions for this model and mode yet."
        self.setMinimumHeight(280)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

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
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
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
            painter.drawText(QRectF(self.rect()).adjusted(20, 0, -20, 0), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self.empty_text)
            painter.end()
            return

        bins = self.report.bins
        self._paint_axes(painter, plot, small, bins)
        self._paint_bars(painter, plot, bins)
        self._paint_counts(painter, plot, small, bins)
        self._paint_titles(painter, plot, small)
        painter.end()

    def _paint_axes(self, painter: QPainter, plot: QRectF, small: QFont, bins: Sequence[ReliabilityBin]) -> None:
        """The grid, the accuracy axis and the bin edges (as many labelled as fit)."""
        painter.setFont(small)
        for step in range(5):
            value = step / 4
            y = plot.bottom() - value * plot.height()
            painter.setPen(QPen(color("border"), 1))
            painter.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y))
            painter.setPen(color("faint"))
            painter.drawText(QRectF(0, y - 8, plot.left() - 8, 16), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, f"{value:.0%}")
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
            painter.drawText(QRectF(x - 24, plot.bottom() + 4, 48, 16), Qt.AlignmentFlag.AlignCenter, f"{edge:.0%}")

    def _paint_bars(self, painter: QPainter, plot: QRectF, bins: Sequence[ReliabilityBin]) -> None:
        """The diagonal (perfect calibration); per bin, its accuracy bar, the gap to its mean confidence and a tick there."""
        pen = QPen(color("muted"), 1.4, Qt.PenStyle.DashLine)
        painter.setPen(pen)
        painter.drawLine(self.to_point(0, 0), self.to_point(1, 1))

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

    def _paint_counts(self, painter: QPainter, plot: QRectF, small: QFont, bins: Sequence[ReliabilityBin]) -> None:
        """How many decisions each bin holds, under the axis (where the number fits)."""
        fm = QFontMetrics(small)
        painter.setFont(small)
        painter.setPen(color("faint"))
        painter.drawText(QRectF(0, plot.bottom() + 22, plot.left() - 8, 16), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, "n")
        for index, rect in self.count_rects():
            count = bins[index].count
            text = str(count)
            if fm.horizontalAdvance(text) > rect.width() + 2:
                continue
            painter.setPen(color("text") if count else color("faint"))
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)

    def _paint_titles(self, painter: QPainter, plot: QRectF, small: QFont) -> None:
        """The axis titles and the legend."""
        painter.setPen(color("muted"))
        painter.drawText(QRectF(plot.left(), self.height() - 22, plot.width(), 18), Qt.AlignmentFlag.AlignCenter,
                         "confidence of the chosen option (equal-width bins)")
        painter.save()
        painter.translate(16, plot.center().y())
        painter.rotate(-90)
        painter.drawText(QRectF(-plot.height() / 2, -9, plot.height(), 18), Qt.AlignmentFlag.AlignCenter, "accuracy")
        painter.restore()
        self._legend(painter, small)

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
                painter.setPen(QPen(fill, 1.4, Qt.PenStyle.DashLine))
                painter.drawLine(QPointF(x, y + 8), QPointF(x + 14, y + 8))
            x += 18
            painter.setPen(color("muted"))
            painter.drawText(QRectF(x, y, fm.horizontalAdvance(text) + 4, 16), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text)
            x += fm.horizontalAdvance(text) + 16
