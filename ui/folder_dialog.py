"""Folder and file dialogs that show their toolbar on any desktop.

The platform's own dialog needs a platform theme; on a minimal Linux Qt falls back to its own widget
dialog, whose toolbar icons (back, forward, parent, new folder, list/detail view) come from the style
in black: on the dark theme they are invisible squares. This builds Qt's dialog explicitly
(DontUseNativeDialog, the same on every desktop) and draws those icons in the palette's text colour.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import QFileDialog, QStyle, QToolButton, QWidget

TOOLBAR_ICONS = {  # QFileDialog's own tool buttons (object names) and the style's icon for each
    "backButton": QStyle.SP_ArrowBack,
    "forwardButton": QStyle.SP_ArrowForward,
    "toParentButton": QStyle.SP_FileDialogToParent,
    "newFolderButton": QStyle.SP_FileDialogNewFolder,
    "listModeButton": QStyle.SP_FileDialogListView,
    "detailModeButton": QStyle.SP_FileDialogDetailedView,
}


def tinted(icon: QIcon, color: QColor, size: int = 16) -> QIcon:
    """The icon's shape filled with one colour (its alpha kept)."""
    out = QIcon()
    for scale in (1, 2):
        pixmap = icon.pixmap(size * scale, size * scale)
        painted = QPixmap(pixmap.size())
        painted.fill(Qt.transparent)
        painter = QPainter(painted)
        painter.drawPixmap(0, 0, pixmap)
        painter.setCompositionMode(QPainter.CompositionMode_SourceIn)
        painter.fillRect(painted.rect(), color)
        painter.end()
        painted.setDevicePixelRatio(scale)
        out.addPixmap(painted)
    return out


def file_dialog(parent: QWidget | None, title: str, start: str, *, folders: bool = True) -> QFileDialog:
    dialog = QFileDialog(parent, title, start)
    dialog.setOption(QFileDialog.DontUseNativeDialog, True)
    if folders:
        dialog.setFileMode(QFileDialog.Directory)
        dialog.setOption(QFileDialog.ShowDirsOnly, True)
    color = dialog.palette().color(QPalette.ButtonText)
    for button in dialog.findChildren(QToolButton):
        standard = TOOLBAR_ICONS.get(button.objectName())
        if standard is not None:
            button.setIcon(tinted(dialog.style().standardIcon(standard, None, dialog), color))
    return dialog


def choose_folder(parent: QWidget | None, title: str, start: str) -> str:
    """The folder picked, or "" when cancelled."""
    dialog = file_dialog(parent, title, start)
    if dialog.exec() and dialog.selectedFiles():
        return dialog.selectedFiles()[0]
    return ""
