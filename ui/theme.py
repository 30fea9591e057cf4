"""One dark theme for every window: Fusion style, a palette and a style sheet."""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QPalette
from PySide6.QtWidgets import QApplication

COLORS = {
    "window": "#121419",
    "panel": "#1a1d24",
    "card": "#20242d",
    "raised": "#272c37",
    "border": "#2e3440",
    "border_strong": "#3b4252",
    "text": "#e7e9ee",
    "muted": "#9aa3b2",
    "faint": "#6b7383",
    "accent": "#7c8cff",
    "accent_hover": "#95a2ff",
    "accent_dim": "#3d4680",
    "track": "#2a2f3a",
    "bar": "#55607a",
    "good": "#4ade80",
    "warn": "#fbbf24",
    "error": "#f87171",
    "error_bg": "#3a1f24",
}


def color(name: str, alpha: int | None = None) -> QColor:
    value = QColor(COLORS[name])
    if alpha is not None:
        value.setAlpha(alpha)
    return value


def set_role(widget, name: str) -> None:
    """Give a widget another style-sheet role (object name) and re-apply the style sheet."""
    widget.setObjectName(name)
    widget.style().unpolish(widget)
    widget.style().polish(widget)
    widget.update()


def heat(probability: float) -> QColor:
    """Background for a table cell by probability: transparent at 0, accent at 1."""
    p = max(0.0, min(1.0, probability))
    value = QColor(COLORS["accent"])
    value.setAlpha(int(18 + 170 * p ** 0.5) if p > 0.0005 else 0)
    return value


STYLE = """
QWidget { color: %(text)s; }
QMainWindow, QDialog { background: %(window)s; }
QToolTip { background: %(raised)s; color: %(text)s; border: 1px solid %(border_strong)s; padding: 4px 6px; }

#Header { background: %(panel)s; border-bottom: 1px solid %(border)s; }
#Wordmark { font-size: 15pt; font-weight: 700; color: %(text)s; }
#Logo { background: %(accent)s; color: #0d1020; border-radius: 7px; font-size: 12pt; font-weight: 800; }
#ChoiceCard { background: %(card)s; border: 1px solid %(border)s; border-radius: 12px; }

#Panel { background: %(window)s; }
#Card { background: %(card)s; border: 1px solid %(border)s; border-radius: 10px; }
#SideCard { background: %(panel)s; border-left: 1px solid %(border)s; }
#SectionTitle { color: %(muted)s; font-size: 8pt; font-weight: 700; letter-spacing: 1px; }
#Caption { color: %(muted)s; }
#Faint { color: %(faint)s; }
#RangeHint { color: %(faint)s; font-size: 8pt; }
#FieldError { color: %(error)s; font-size: 8pt; }
#WarnText { color: %(warn)s; font-size: 8pt; }
#Note { color: %(warn)s; }
#GoodText { color: %(good)s; font-size: 8pt; }
#Calibrated { color: %(muted)s; font-size: 9pt; font-weight: 600; }
#Figure { color: %(text)s; font-size: 13pt; font-weight: 700; }
#FigureCard { background: %(card)s; border: 1px solid %(border)s; border-radius: 10px; }
#ErrorBox { background: %(error_bg)s; border: 1px solid #6b2c35; border-radius: 8px; color: #fecaca; padding: 8px 10px; }
#WarnBox { background: #35301c; border: 1px solid #6b5a22; border-radius: 8px; color: #fde68a; padding: 6px 10px; }
#InfoBox { background: %(raised)s; border: 1px solid %(border)s; border-radius: 8px; color: %(muted)s; padding: 6px 10px; }
#ChoiceText { font-size: 21pt; font-weight: 700; color: %(text)s; }
#ChoiceBadge { background: %(accent)s; color: #0d1020; border-radius: 8px; font-size: 15pt; font-weight: 800; }
#BigPercent { color: %(accent)s; font-size: 17pt; font-weight: 700; }
#Percent { color: %(accent)s; font-size: 12pt; font-weight: 700; }
#EmptyTitle { font-size: 14pt; font-weight: 600; color: %(text)s; }
#LetterBadge { background: %(raised)s; color: %(muted)s; border-radius: 6px; font-weight: 700; }

QPlainTextEdit, QTextEdit, QLineEdit, QSpinBox, QDoubleSpinBox, QComboBox, QKeySequenceEdit {
    background: %(card)s; border: 1px solid %(border)s; border-radius: 7px; padding: 5px 7px;
    selection-background-color: %(accent_dim)s;
}
QPlainTextEdit:focus, QTextEdit:focus, QLineEdit:focus, QSpinBox:focus, QDoubleSpinBox:focus, QComboBox:focus {
    border: 1px solid %(accent)s;
}
QLineEdit[invalid="true"], QSpinBox[invalid="true"], QDoubleSpinBox[invalid="true"] { border: 1px solid %(error)s; }
QSpinBox::up-button, QDoubleSpinBox::up-button, QSpinBox::down-button, QDoubleSpinBox::down-button {
    subcontrol-origin: border; width: 0px; border: none;
}
QComboBox::drop-down { border: none; width: 18px; }
QComboBox QAbstractItemView { background: %(raised)s; border: 1px solid %(border_strong)s; selection-background-color: %(accent_dim)s; }

QPushButton, QToolButton {
    background: %(raised)s; border: 1px solid %(border_strong)s; border-radius: 7px; padding: 6px 12px;
}
QPushButton:hover, QToolButton:hover { background: #313745; }
QPushButton:pressed, QToolButton:pressed { background: #252a34; }
QPushButton:disabled, QToolButton:disabled { color: %(faint)s; background: %(card)s; border-color: %(border)s; }
QPushButton#Primary { background: %(accent)s; color: #0d1020; border: none; font-weight: 700; padding: 9px 18px; }
QPushButton#Primary:hover { background: %(accent_hover)s; }
QPushButton#Primary:disabled { background: %(accent_dim)s; color: #8e96c8; }
QPushButton#Danger { background: #4a2229; border: 1px solid #7a3440; color: #fecaca; font-weight: 600; padding: 9px 18px; }
QPushButton#Danger:hover { background: #5a2830; }
QPushButton#ModelButton {
    background: %(card)s; border: 1px solid %(border_strong)s; border-radius: 9px; padding: 7px 16px; font-weight: 600;
}
QPushButton#ModelButton:hover { border-color: %(accent)s; }
QToolButton#Flat, QPushButton#Flat { background: transparent; border: none; color: %(muted)s; padding: 4px 6px; }
QToolButton#Flat:hover, QPushButton#Flat:hover { color: %(text)s; background: %(raised)s; }
QToolButton#Toggle:checked, QPushButton#Toggle:checked { background: %(accent_dim)s; border-color: %(accent)s; }

QCheckBox { spacing: 8px; }
QCheckBox::indicator { width: 16px; height: 16px; border-radius: 4px; border: 1px solid %(border_strong)s; background: %(card)s; }
QCheckBox::indicator:checked { background: %(accent)s; border-color: %(accent)s; image: none; }
QCheckBox::indicator:hover { border-color: %(accent)s; }

QTabWidget::pane { border: none; top: -1px; }
QTabBar::tab { background: transparent; color: %(muted)s; padding: 8px 14px; border: none; border-bottom: 2px solid transparent; }
QTabBar::tab:selected { color: %(text)s; border-bottom: 2px solid %(accent)s; }
QTabBar::tab:hover { color: %(text)s; }
QTabBar QToolButton { padding: 0px; border-radius: 4px; }
QTabBar::scroller { width: 48px; }

QTableWidget, QTableView, QListWidget {
    background: %(card)s; border: 1px solid %(border)s; border-radius: 8px; gridline-color: %(border)s;
    alternate-background-color: %(card)s; selection-background-color: %(accent_dim)s;
}
QListWidget::item { padding: 7px 8px; border-bottom: 1px solid %(border)s; }
QListWidget::item:selected { background: %(accent_dim)s; }
QHeaderView::section { background: %(panel)s; color: %(muted)s; border: none; border-bottom: 1px solid %(border)s; padding: 4px 6px; font-weight: 600; font-size: 9pt; }
QTableWidget { font-size: 9pt; }
QTableCornerButton::section { background: %(panel)s; border: none; }

QScrollArea { background: transparent; border: none; }
QScrollBar:vertical { background: transparent; width: 10px; margin: 2px; }
QScrollBar::handle:vertical { background: %(border_strong)s; border-radius: 4px; min-height: 24px; }
QScrollBar::add-line, QScrollBar::sub-line { height: 0; width: 0; }
QScrollBar:horizontal { background: transparent; height: 10px; margin: 2px; }
QScrollBar::handle:horizontal { background: %(border_strong)s; border-radius: 4px; min-width: 24px; }

QSlider::groove:horizontal { height: 4px; background: %(track)s; border-radius: 2px; }
QSlider::sub-page:horizontal { background: %(accent)s; border-radius: 2px; }
QSlider::handle:horizontal { background: %(text)s; width: 14px; height: 14px; margin: -5px 0; border-radius: 7px; }

QProgressBar { background: %(track)s; border: none; border-radius: 3px; max-height: 6px; min-height: 6px; }
QProgressBar::chunk { background: %(accent)s; border-radius: 3px; }

QStatusBar { background: %(panel)s; border-top: 1px solid %(border)s; color: %(muted)s; }
QStatusBar::item { border: none; }
QStatusBar QLabel { color: %(muted)s; padding: 0 8px; }
QSplitter::handle { background: %(border)s; }
QSplitter::handle:horizontal { width: 1px; }
QMenu { background: %(raised)s; border: 1px solid %(border_strong)s; padding: 4px; }
QMenu::item { padding: 6px 18px; border-radius: 5px; }
QMenu::item:selected { background: %(accent_dim)s; }
""" % COLORS


def _check_mark_image(cache_dir: str) -> str | None:
    """A check mark for checked boxes, drawn once into the cache dir (style sheets need a file)."""
    import os

    from PySide6.QtCore import QPointF, Qt
    from PySide6.QtGui import QPainter, QPen, QPixmap

    path = os.path.join(cache_dir, "ui", "check-v1.png")
    if os.path.isfile(path):
        return path.replace("\\", "/")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        pixmap = QPixmap(32, 32)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        pen = QPen(QColor("#0d1020"), 4.2)
        pen.setCapStyle(Qt.PenCapStyle.RoundCap)
        pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
        painter.setPen(pen)
        painter.drawPolyline([QPointF(8, 16.5), QPointF(13.5, 22), QPointF(24, 10)])
        painter.end()
        if not pixmap.save(path):
            return None
    except OSError:
        return None
    return path.replace("\\", "/")


def apply_theme(app: QApplication, cache_dir: str | None = None) -> None:
    """The dark theme; `cache_dir` holds the check-mark picture (None: boxes keep Qt's own mark)."""
    app.setStyle("Fusion")
    palette = QPalette()
    palette.setColor(QPalette.ColorRole.Window, color("window"))
    palette.setColor(QPalette.ColorRole.WindowText, color("text"))
    palette.setColor(QPalette.ColorRole.Base, color("card"))
    palette.setColor(QPalette.ColorRole.AlternateBase, color("panel"))
    palette.setColor(QPalette.ColorRole.Text, color("text"))
    palette.setColor(QPalette.ColorRole.Button, color("raised"))
    palette.setColor(QPalette.ColorRole.ButtonText, color("text"))
    palette.setColor(QPalette.ColorRole.Highlight, color("accent_dim"))
    palette.setColor(QPalette.ColorRole.HighlightedText, color("text"))
    palette.setColor(QPalette.ColorRole.ToolTipBase, color("raised"))
    palette.setColor(QPalette.ColorRole.ToolTipText, color("text"))
    palette.setColor(QPalette.ColorRole.PlaceholderText, color("faint"))
    palette.setColor(QPalette.ColorRole.Link, color("accent"))
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, color("faint"))
    app.setPalette(palette)
    font = QFont(app.font())
    if font.pointSizeF() < 10:
        font.setPointSizeF(10)
    app.setFont(font)
    style = STYLE
    check = _check_mark_image(cache_dir) if cache_dir else None
    if check:
        style += "QCheckBox::indicator:checked { image: url(%s); }\n" % check
    app.setStyleSheet(style)
