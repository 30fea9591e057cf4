"""Folder and file dialogs that show their toolbar on any desktop.

The platform's own dialog needs a platform theme; on a minimal Linux Qt falls back to its own widget
dialog, whose toolbar icons (back, forward, parent, new folder, list/detail view) come from the style
in black, and the theme's button padding squeezes them to a dot: blank squares. This builds Qt's dialog explicitly
(DontUseNativeDialog, the same on every desktop), draws those icons in the palette's text colour and
gives its tool buttons room for them.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QIcon, QImage, QPalette, QPixmap
from PySide6.QtWidgets import QFileDialog, QStyle, QToolButton, QWidget

TOOLBAR_ICONS = {  # QFileDialog's own tool buttons (object names) and the style's icon for each
    "backButton": QStyle.StandardPixmap.SP_ArrowBack,
    "forwardButton": QStyle.StandardPixmap.SP_ArrowForward,
    "toParentButton": QStyle.StandardPixmap.SP_FileDialogToParent,
    "newFolderButton": QStyle.StandardPixmap.SP_FileDialogNewFolder,
    "listModeButton": QStyle.StandardPixmap.SP_FileDialogListView,
    "detailModeButton": QStyle.StandardPixmap.SP_FileDialogDetailedView,
}


def tinted(icon: QIcon, color: QColor, size: int = 16) -> QIcon:
    """The icon redrawn for a dark background: its black strokes in `color`, its white fills (the list/detail
    view icons' paper) left out, the colours between (the new-folder icon's folder) kept."""
    out = QIcon()
    for scale in (1, 2):
        image = icon.pixmap(size * scale, size * scale).toImage().convertToFormat(QImage.Format.Format_ARGB32)
        for y in range(image.height()):
            for x in range(image.width()):
                pixel = image.pixelColor(x, y)
                if pixel.alpha() == 0:
                    continue
                lightness = pixel.lightnessF()
                if lightness < 0.5:
                    stroke = QColor(color)
                    stroke.setAlpha(pixel.alpha())
                    image.setPixelColor(x, y, stroke)
                elif lightness > 0.85:
                    image.setPixelColor(x, y, QColor(0, 0, 0, 0))
        pixmap = QPixmap.fromImage(image)
        pixmap.setDevicePixelRatio(scale)
        out.addPixmap(pixmap)
    return out


def file_dialog(parent: QWidget | None, title: str, start: str, *, folders: bool = True) -> QFileDialog:
    dialog = QFileDialog(parent, title, start)
    dialog.setOption(QFileDialog.Option.DontUseNativeDialog, True)
    if folders:
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
    # the theme pads buttons 12 px a side: on these 29 px tool buttons that leaves the icon 3 px (a dot)
    dialog.setStyleSheet("QToolButton { padding: 3px; }")
    color = dialog.palette().color(QPalette.ColorRole.ButtonText)
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
