"""A label that never cuts its text silently: each line shows whole or ends in "…" (or loses its middle, for
file names), and whenever anything is elided the full text is the tooltip. It is as tall as all its lines.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class ElidedLabel(QLabel):
    def __init__(self, text: str = "", mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self._mode = mode
        self.setWordWrap(False)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)  # any width: it elides to fit
        self.setText(text)

    def text(self) -> str:  # noqa: D401 - the full text, whatever is shown
        return self._full

    def shown_text(self) -> str:
        return super().text()

    def elided(self) -> bool:
        return self.shown_text() != self._full

    def setText(self, text: str) -> None:  # noqa: N802
        self._full = text or ""
        self.updateGeometry()
        self._refresh()

    def _lines_width(self) -> int:
        return max(0, self.contentsRect().width() - 2 * self.margin())

    def _refresh(self) -> None:
        metrics = self.fontMetrics()
        width = self._lines_width()
        lines = [metrics.elidedText(line, self._mode, width) if width > 0 else line for line in self._full.split("\n")]
        shown = "\n".join(lines)
        super().setText(shown)
        self.setToolTip(self._full if shown != self._full else "")

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._refresh()

    def sizeHint(self) -> QSize:  # noqa: N802
        metrics = self.fontMetrics()
        lines = self._full.split("\n")
        margins = self.contentsMargins()
        width = max((metrics.horizontalAdvance(line) for line in lines), default=0)
        # the glyphs' box, as QLabel lays the lines out: n line spacings can clip the last line's descenders
        height = metrics.boundingRect(QRect(0, 0, 1 << 20, 1 << 20), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop, self._full or " ").height()
        extra = 2 * self.margin()
        return QSize(width + margins.left() + margins.right() + extra + 2,
                     height + margins.top() + margins.bottom() + extra)

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        # every line's height, any width (the text elides)
        return QSize(min(self.sizeHint().width(), self.fontMetrics().horizontalAdvance("…") * 4), self.sizeHint().height())
