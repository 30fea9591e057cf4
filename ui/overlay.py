"""The companion overlay: a small frameless, always-on-top, translucent window beside a game.

It shows the last decision (chosen option and compact bars). Drag it anywhere; it remembers where.
Opacity is the panel's background opacity (the text stays fully opaque so it reads over any game).
Click-through makes it ignore the mouse entirely (then it cannot be dragged: turn it off to move it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QPoint, QRectF, Qt, Signal
from PySide6.QtGui import QFontMetrics, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from .bars import BarsView, bound_text, choice_note, shown_probability
from .theme import color

if TYPE_CHECKING:
    from decider.engine.decisions.types import DecisionResult

OVERLAY_WIDTH = 360


class CompanionOverlay(QWidget):
    moved = Signal(int, int)  # new top-left position after a drag
    close_requested = Signal()

    def __init__(self, opacity: float = 0.85, click_through: bool = False, parent: QWidget | None = None):
        super().__init__(parent, Qt.WindowType.Tool | Qt.WindowType.FramelessWindowHint | Qt.WindowType.WindowStaysOnTopHint)
        self.setObjectName("CompanionOverlay")
        self.setWindowTitle("Decider overlay")
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground, True)
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating, True)
        self.setFixedWidth(OVERLAY_WIDTH)
        self._opacity = opacity
        self._drag_offset: QPoint | None = None
        self.click_through = False
        self.shown: tuple[str, DecisionResult, str] | None = None  # (question, result, source) of the decision on display

        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 12)
        layout.setSpacing(4)

        top = QHBoxLayout()
        top.setSpacing(6)
        self.title = QLabel("DECIDER")
        self.title.setStyleSheet(f"color: {color('accent').name()}; font-size: 7.5pt; font-weight: 800; letter-spacing: 1px; background: transparent;")
        self.source = QLabel("")
        self.source.setStyleSheet(f"color: {color('faint').name()}; font-size: 7.5pt; background: transparent;")
        self.close_button = QToolButton()
        self.close_button.setText("✕")
        self.close_button.setToolTip("Hide the overlay (show it again from the window's Overlay button)")
        self.close_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.close_button.setStyleSheet(
            f"QToolButton {{ background: transparent; border: none; color: {color('faint').name()}; padding: 0 2px; font-size: 8pt; }}"
            f"QToolButton:hover {{ color: {color('text').name()}; }}"
        )
        self.close_button.clicked.connect(self.close_requested.emit)
        # watch mode's state and the shown decision's age ("watching · decided 3 s ago"), empty when not watching
        self.watch_status = QLabel("")
        self.watch_status.setStyleSheet(f"color: {color('good').name()}; font-size: 7.5pt; background: transparent;")
        self.watch_status.hide()
        top.addWidget(self.title)
        top.addWidget(self.source)
        top.addStretch(1)
        top.addWidget(self.watch_status)
        top.addWidget(self.close_button)
        layout.addLayout(top)

        self.question = QLabel("")
        self.question.setStyleSheet(f"color: {color('muted').name()}; font-size: 8.5pt; background: transparent;")
        self.question.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.question)

        choice_row = QHBoxLayout()
        choice_row.setSpacing(8)
        self.choice = QLabel("")
        self.choice.setStyleSheet(f"color: {color('text').name()}; font-size: 14pt; font-weight: 700; background: transparent;")
        self.choice.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.choice.setWordWrap(True)
        self.choice_percent = QLabel("")
        self.choice_percent.setStyleSheet(f"color: {color('accent').name()}; font-size: 13pt; font-weight: 700; background: transparent;")
        choice_row.addWidget(self.choice, 1)
        choice_row.addWidget(self.choice_percent, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(choice_row)

        self.bars = BarsView(compact=True, parent=self)
        layout.addSpacing(2)
        layout.addWidget(self.bars)

        self.hint = QLabel("")
        self.hint.setWordWrap(True)
        self.hint.setStyleSheet(f"color: {color('faint').name()}; font-size: 8pt; background: transparent;")
        layout.addWidget(self.hint)

        self.set_click_through(click_through)
        self.show_idle("Copy a situation and its options (one per line), then press the hotkey.")

    # ----- content -----
    def _set_text(self, label: QLabel, text: str, width: int = OVERLAY_WIDTH - 30) -> None:
        label.setToolTip(text)
        if label.wordWrap():
            label.setText(text)
            label.setVisible(bool(text))
            return
        label.setText(QFontMetrics(label.font()).elidedText(text.replace("\n", " "), Qt.TextElideMode.ElideRight, width))
        label.setVisible(bool(text))

    def show_idle(self, hint: str) -> None:
        self.shown = None
        self.source.setText("")
        self._set_text(self.question, "")
        self._set_text(self.choice, "Waiting for a decision")
        self.choice_percent.setText("")
        self.bars.clear()
        self.bars.hide()
        self.hint.setText(hint)
        self.hint.show()
        self.adjustSize()

    def show_running(self, question: str, source: str = "") -> None:
        self.shown = None
        self.source.setText(source)
        self._set_text(self.question, question)
        self._set_text(self.choice, "Deciding…")
        self.choice_percent.setText("")
        self.hint.hide()
        self.adjustSize()

    def set_watch_status(self, text: str) -> None:
        """Watch mode's state and the decision's age; while it shows, it stands where the source note was."""
        self.watch_status.setText(text)
        self.watch_status.setVisible(bool(text))
        self.source.setVisible(not text)

    def show_progress(self, tokens: int) -> None:
        self._set_text(self.choice, f"Thinking… {tokens} tokens")

    def show_error(self, message: str, source: str = "") -> None:
        self.shown = None
        self.source.setText(source)
        self._set_text(self.choice, "Could not decide")
        self.choice_percent.setText("")
        self.bars.clear()
        self.bars.hide()
        self.hint.setText(message)
        self.hint.show()
        self.adjustSize()

    def show_result(self, question: str, result: DecisionResult, source: str = "", calibrated: list[float] | None = None) -> None:
        """`calibrated`: one value per option at the temperature applied in the Calibration tab (shown beside
        the raw percentage, as in the window). A decision between functions shows the chosen call under the bars."""
        self.shown = (question, result, source)
        self.source.setText(source)
        self._set_text(self.question, question)
        chosen = result.choice
        bound = chosen.bound
        percent = bound_text(shown_probability(chosen), bound)
        if calibrated is not None:
            percent += f" · {bound_text(calibrated[result.choice_index], bound)} cal."
        self.choice_percent.setText(percent)
        self.choice_percent.setToolTip("raw · calibrated (the temperature applied in the Calibration tab)" if calibrated else "")
        drawn = result.drawn
        self._set_text(self.choice, f"{chosen.label}. {chosen.text}" + (" (drawn)" if drawn else ""))
        self.bars.set_result(result, calibrated)
        self.bars.show()
        note = choice_note(result)
        if chosen.debiased_probability is not None:
            note = "\n".join(filter(None, [note, "Bars averaged over every option order (debiased)"]))
        call = result.tool_call
        if call is not None:
            note = "\n".join(filter(None, [f"Call: {call.name}({call.arguments})", note]))
        engine = result.engine
        if engine is not None and not engine.remote and not engine.exact:
            # the bars' arithmetic is named wherever it is not exact f32 (a fast compile, a real NPU's f16)
            note = "\n".join(filter(None, [note, f"Reduced precision: {engine.precision or engine.reduced_by}"]))
        self.hint.setText(note)
        self.hint.setVisible(bool(note))
        self.adjustSize()

    # ----- appearance -----
    @property
    def opacity(self) -> float:
        return self._opacity

    def set_opacity(self, opacity: float) -> None:
        self._opacity = max(0.2, min(1.0, float(opacity)))
        self.update()

    def set_click_through(self, enabled: bool) -> None:
        enabled = bool(enabled)
        if enabled == self.click_through and self.testAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents) == enabled:
            return
        visible = self.isVisible()
        self.click_through = enabled
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents, enabled)
        self.setWindowFlag(Qt.WindowType.WindowTransparentForInput, enabled)  # changing flags hides the window
        self.close_button.setVisible(not enabled)
        self.setCursor(Qt.CursorShape.ArrowCursor if enabled else Qt.CursorShape.SizeAllCursor)
        if visible:
            self.show()

    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        path = QPainterPath()
        path.addRoundedRect(rect, 12, 12)
        painter.fillPath(path, color("window", int(255 * self._opacity)))
        painter.setPen(QPen(color("border_strong", int(255 * min(1.0, self._opacity + 0.1))), 1))
        painter.drawPath(path)
        painter.end()

    # ----- dragging -----
    def mousePressEvent(self, event) -> None:  # noqa: N802
        if event.button() == Qt.MouseButton.LeftButton:
            self._drag_offset = event.globalPosition().toPoint() - self.frameGeometry().topLeft()
            event.accept()

    def mouseMoveEvent(self, event) -> None:  # noqa: N802
        if self._drag_offset is not None and event.buttons() & Qt.MouseButton.LeftButton:
            self.move(event.globalPosition().toPoint() - self._drag_offset)
            event.accept()

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802
        if self._drag_offset is not None and event.button() == Qt.MouseButton.LeftButton:
            self._drag_offset = None
            self.moved.emit(self.x(), self.y())
            event.accept()
