"""The decision card's head: the chosen option's letter, its text in large type and its confidence (with the
calibrated one under it), and a line about the choice.

Wide, the confidence sits right of the text; when the card is too narrow for the text's longest word beside
it, the confidence moves under the text and the text takes a smaller type (instead of being cut off at the
card's edge; a word wider still scrolls, with the page).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

NARROW_WIDTH = 460  # below this card width the confidence goes under the text


class ChoiceCard(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ChoiceCard")
        card = QVBoxLayout(self)
        card.setContentsMargins(14, 14, 14, 12)
        card.setSpacing(8)
        self.badge = QLabel("")
        self.badge.setObjectName("ChoiceBadge")
        self.badge.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.badge.setFixedSize(46, 46)
        self.text = QLabel("")
        self.text.setObjectName("ChoiceText")
        self.text.setWordWrap(True)
        self.text.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.percent = QLabel("")
        self.percent.setObjectName("BigPercent")
        self.calibrated = QLabel("")
        self.calibrated.setObjectName("Calibrated")
        self.calibrated.hide()
        self.percents = QWidget()
        percents = QVBoxLayout(self.percents)
        percents.setContentsMargins(0, 0, 0, 0)
        percents.setSpacing(0)
        percents.addStretch(1)
        percents.addWidget(self.percent)
        percents.addWidget(self.calibrated)
        percents.addStretch(1)
        self.grid = QGridLayout()
        self.grid.setHorizontalSpacing(14)
        self.grid.setVerticalSpacing(4)
        self.grid.addWidget(self.badge, 0, 0, Qt.AlignmentFlag.AlignVCenter)
        self.grid.addWidget(self.text, 0, 1)
        self.grid.setColumnStretch(1, 1)
        card.addLayout(self.grid)
        self.meta = QLabel("")
        self.meta.setObjectName("Caption")
        self.meta.setWordWrap(True)
        card.addWidget(self.meta)
        self.narrow: bool | None = None
        self._place_percents(False)

    def _place_percents(self, narrow: bool) -> None:
        if narrow == self.narrow:
            return
        self.narrow = narrow
        self.grid.removeWidget(self.percents)
        if narrow:  # under the text, left-aligned with it
            self.grid.addWidget(self.percents, 1, 1)
            alignment = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
        else:
            self.grid.addWidget(self.percents, 0, 2)
            alignment = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
        self.percent.setAlignment(alignment)
        self.calibrated.setAlignment(alignment)
        # a smaller type when narrow: a long word then still fits beside the letter
        self.text.setStyleSheet("font-size: 16pt;" if narrow else "")

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._place_percents(self.width() < NARROW_WIDTH)
