"""Grabbing the game's screen with Qt, and saying where the platform forbids it.

QScreen.grabWindow(0, …) reads the desktop on X11, Windows and macOS (there with the screen-recording
permission). On Wayland an application cannot read other windows without the desktop portal, which Qt's
screen grabbing does not use: there the capture says so and the user pastes a screenshot from their
desktop's own tool instead (the clipboard image works everywhere). The region is the screen under the
overlay unless the user picked one (`RegionPicker`), kept for the session.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QImage, QPainter, QPen
from PySide6.QtWidgets import QRubberBand, QWidget

WAYLAND_NOTE = ("Screen capture is not allowed on Wayland without the desktop portal: take a screenshot with your "
                "desktop's tool (it goes to the clipboard) and use Paste image, or decide with the clipboard hotkey.")


@dataclass(frozen=True)
class Capture:
    image: QImage | None
    message: str  # why there is no image, or what was grabbed
    area: QRect | None = None  # where the image was grabbed (global coordinates)


def capture_note() -> str | None:
    """Why this session cannot grab the screen, or None."""
    platform = QGuiApplication.platformName() if QGuiApplication.instance() else ""
    if platform.startswith("wayland"):
        return WAYLAND_NOTE
    if platform in ("minimal", "vnc", "linuxfb"):
        return f"Screen capture needs a desktop session (Qt platform '{platform}'); paste a screenshot instead."
    return None


def grab(region: QRect | None = None, near: QPoint | None = None) -> Capture:
    """The pixels of `region` (global coordinates), else of the whole screen at `near` (or the primary one)."""
    note = capture_note()
    if note:
        return Capture(None, note)
    screen = None
    if region is not None:
        screen = QGuiApplication.screenAt(region.center())
    if screen is None and near is not None:
        screen = QGuiApplication.screenAt(near)
    screen = screen or QGuiApplication.primaryScreen()
    if screen is None:
        return Capture(None, "No screen to capture.")
    geometry = screen.geometry()
    area = (region or geometry).intersected(geometry)
    if area.isEmpty():
        return Capture(None, "The picked region is off the screen; pick it again.")
    local = area.translated(-geometry.topLeft())
    pixmap = screen.grabWindow(0, local.x(), local.y(), local.width(), local.height())
    if pixmap.isNull() or pixmap.width() == 0:
        return Capture(None, "The screen could not be read (the platform refused); paste a screenshot instead.")
    return Capture(pixmap.toImage(), f"{pixmap.width()}×{pixmap.height()} from {screen.name() or 'the screen'}", area)


class RegionPicker(QWidget):
    """A full-screen veil: drag a rectangle over the game, release to keep it, Esc to cancel."""

    picked = Signal(QRect)  # global coordinates
    cancelled = Signal()

    def __init__(self) -> None:
        super().__init__(None, Qt.WindowType.FramelessWindowHint | Qt.WindowType.WindowStaysOnTopHint | Qt.WindowType.Tool)
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.setCursor(Qt.CursorShape.CrossCursor)
        self._band = QRubberBand(QRubberBand.Shape.Rectangle, self)
        self._origin = QPoint()

    def start(self) -> None:
        screen = QGuiApplication.screenAt(QGuiApplication.primaryScreen().geometry().center()) or QGuiApplication.primaryScreen()
        self.setGeometry(screen.geometry())
        self.show()
        self.activateWindow()

    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor(0, 0, 0, 60))
        painter.setPen(QPen(QColor(255, 255, 255)))
        painter.drawText(self.rect().adjusted(0, 40, 0, 0), Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop,
                         "Drag over the game to pick the capture region · Esc cancels")

    def mousePressEvent(self, event) -> None:  # noqa: N802
        self._origin = event.position().toPoint()
        self._band.setGeometry(QRect(self._origin, QSize()))
        self._band.show()

    def mouseMoveEvent(self, event) -> None:  # noqa: N802
        self._band.setGeometry(QRect(self._origin, event.position().toPoint()).normalized())

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802
        rect = QRect(self._origin, event.position().toPoint()).normalized()
        self.close()
        if rect.width() >= 16 and rect.height() >= 16:
            self.picked.emit(rect.translated(self.geometry().topLeft()))
        else:
            self.cancelled.emit()

    def keyPressEvent(self, event) -> None:  # noqa: N802
        if event.key() == Qt.Key.Key_Escape:
            self.close()
            self.cancelled.emit()
