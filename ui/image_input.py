"""The picture a decision looks at: pasted, dropped, opened or captured; shown as a thumbnail beside the form.

Qt decodes (QImage); the engine gets an RGB uint8 array. Nothing here knows about models: the window asks
`pixels()` when it builds a request, and a model that cannot see says so when the decision runs.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QMimeData, QSize, Qt, Signal
from PySide6.QtGui import QGuiApplication, QImage, QImageReader, QPixmap
from PySide6.QtWidgets import QFileDialog, QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from .elided import ElidedLabel

THUMB_WIDTH, THUMB_HEIGHT = 160, 90
# The API's limits (app/images.py; ui does not import app): the documented formats only, by content,
# at most this many pixels per picture, decoded at most this large (the vision encoder uses far fewer).
FORMATS = {b"png", b"jpeg", b"jpg", b"webp", b"bmp", b"gif"}
MAX_PIXELS = 8192 * 8192
DECODE_PIXELS = 4096 * 4096


def read_image(path: str) -> tuple[QImage | None, str]:
    """An image file, checked by its header before it is decoded; (None, why) when it is refused."""
    name = path.rsplit("/", 1)[-1]
    reader = QImageReader(path)
    reader.setDecideFormatFromContent(True)
    if bytes(reader.format().data()).lower() not in FORMATS:
        return None, f"{name} is not an image Decider can read (PNG, JPEG, WebP, BMP or GIF)"
    size = reader.size()
    pixels = size.width() * size.height()
    if pixels > MAX_PIXELS:
        return None, (f"{name}: {size.width()}×{size.height()} pixels is too large (at most {MAX_PIXELS:,}); "
                      "scale it down or crop it")
    if pixels > DECODE_PIXELS:  # decoded smaller straight away (JPEG decodes at the reduced scale)
        scale = (DECODE_PIXELS / pixels) ** 0.5
        reader.setScaledSize(QSize(max(1, int(size.width() * scale)), max(1, int(size.height() * scale))))
    image = reader.read()
    if image.isNull():
        return None, f"{name} is not an image Qt can read ({reader.errorString()})"
    return image, name


def qimage_to_pixels(image: QImage) -> np.ndarray:
    """[H, W, 3] uint8 RGB copy of a QImage (any format; alpha dropped)."""
    rgb = image.convertToFormat(QImage.Format.Format_RGB888)
    height, width, stride = rgb.height(), rgb.width(), rgb.bytesPerLine()
    buffer = np.frombuffer(rgb.constBits(), dtype=np.uint8, count=stride * height)
    return buffer.reshape(height, stride)[:, : width * 3].reshape(height, width, 3).copy()


def image_from_mime(mime: QMimeData) -> tuple[QImage | None, str]:
    """An image carried by a drop or the clipboard: image data, or the first local image file."""
    if mime.hasImage():
        image = QImage(mime.imageData())
        if not image.isNull() and image.width() * image.height() > MAX_PIXELS:
            return None, f"the picture is {image.width()}×{image.height()} pixels, too large (at most {MAX_PIXELS:,})"
        if not image.isNull():
            return image, "pasted"
    for url in mime.urls() if mime.hasUrls() else []:
        if url.isLocalFile():
            return read_image(url.toLocalFile())
    return None, "no image there"


class ImageSlot(QFrame):
    """Thumbnail + Paste / Open / Clear; accepts dropped images and image files."""

    changed = Signal()
    capture_requested = Signal()
    region_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("imageSlot")
        self.setAcceptDrops(True)
        self._image: QImage | None = None
        self._pixels: np.ndarray | None = None
        self._origin = ""
        self.thumbnail = QLabel()
        self.thumbnail.setFixedSize(THUMB_WIDTH, THUMB_HEIGHT)
        self.thumbnail.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.thumbnail.setFrameShape(QFrame.Shape.StyledPanel)
        # each line whole or elided in the middle (a file name keeps its end), the full text in the tooltip
        self.caption = ElidedLabel(mode=Qt.TextElideMode.ElideMiddle)
        self.paste_button = QPushButton("Paste image")
        self.paste_button.setToolTip("Use the image on the clipboard (a screenshot, a copied picture)")
        self.open_button = QPushButton("Open…")
        self.capture_button = QPushButton("Capture screen")
        self.capture_button.setToolTip("Grab the screen (or the region picked once) and decide on it")
        self.region_button = QPushButton("Pick region…")
        self.region_button.setToolTip("Drag over the game once; captures then grab only that region")
        self.clear_button = QPushButton("Clear")
        self.paste_button.clicked.connect(self.paste)
        self.open_button.clicked.connect(self.open_file)
        self.capture_button.clicked.connect(self.capture_requested.emit)
        self.region_button.clicked.connect(self.region_requested.emit)
        self.clear_button.clicked.connect(self.clear)
        buttons = QVBoxLayout()
        for button in (self.paste_button, self.open_button, self.capture_button, self.region_button, self.clear_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.thumbnail, 0, Qt.AlignmentFlag.AlignTop)
        row.addLayout(buttons, 1)
        # the caption under both, the slot's whole width: a size, a file name and a line of help fit there
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addLayout(row)
        layout.addWidget(self.caption)
        self._show()

    # ---------------------------------------------------------------- state
    def image(self) -> QImage | None:
        return self._image

    def pixels(self) -> tuple[np.ndarray, ...]:
        """What a request carries: () without an image."""
        return () if self._pixels is None else (self._pixels,)

    def summary(self) -> str:
        """The picture in a few words: size and where it came from ("" without one)."""
        if self._image is None:
            return ""
        return f"{self._image.width()}×{self._image.height()}" + (f" · {self._origin}" if self._origin else "")

    def set_image(self, image: QImage | None, origin: str = "") -> None:
        if image is None or image.isNull():
            self._image, self._pixels = None, None
        else:
            self._image, self._pixels = image, qimage_to_pixels(image)
        self._origin = origin if self._image is not None else ""
        self._show(origin)
        self.changed.emit()

    def clear(self) -> None:
        self.set_image(None)

    def show_note(self, text: str) -> None:
        """Say why no image came (nothing on the clipboard, capture forbidden) without dropping the current one."""
        self.caption.setText(text)

    def _show(self, origin: str = "") -> None:
        image = self._image
        self.clear_button.setEnabled(image is not None)
        if image is None:
            self.thumbnail.setPixmap(QPixmap())
            self.thumbnail.setText("no image")
            self.caption.setText("Decide from a picture:\npaste, drop or capture one.")
            return
        thumb = QPixmap.fromImage(image).scaled(THUMB_WIDTH, THUMB_HEIGHT, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)
        self.thumbnail.setPixmap(thumb)
        where = f" · {origin}" if origin else ""
        self.caption.setText(f"{image.width()}×{image.height()}{where}\nsent with the next decision")

    # ---------------------------------------------------------------- sources
    def paste(self) -> bool:
        image, origin = image_from_mime(QGuiApplication.clipboard().mimeData())
        if image is None:
            self.show_note(f"Clipboard: {origin}.")
            return False
        self.set_image(image, "from the clipboard" if origin == "pasted" else origin)
        return True

    def open_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open image", "", "Images (*.png *.jpg *.jpeg *.bmp *.webp *.gif)")
        if path:
            image, why = read_image(path)
            if image is None:
                self.show_note(f"{why}.")
            else:
                self.set_image(image, why)

    def dragEnterEvent(self, event) -> None:  # noqa: N802
        mime = event.mimeData()
        if mime.hasImage() or mime.hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        self.drop(event.mimeData())
        event.acceptProposedAction()

    def drop(self, mime: QMimeData) -> bool:
        image, origin = image_from_mime(mime)
        if image is None:
            self.show_note(f"Dropped: {origin}.")
            return False
        self.set_image(image, origin if origin != "pasted" else "dropped")
        return True
