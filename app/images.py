"""Image files and data URLs → the RGB pixel arrays the engine takes (Pillow decodes; the engine never opens files).

Every failure is a SettingsError naming the image and what is wrong with it: a client's bad upload or a
mistyped path is their mistake, never a traceback.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
from pathlib import Path

import numpy as np

from decider.engine.errors import SettingsError

MAX_PIXELS = 8192 * 8192  # one image, refused before decoding above this (a decompression bomb costs nothing then)
REQUEST_PIXELS = 8192 * 8192  # all the images of one request or decision together, counted before decoding
DECODED_PIXELS = 4096 * 4096  # kept after decoding: larger pictures are scaled down while decoding (JPEG's draft)
MAX_BYTES = 32 * 1024 * 1024
# The documented formats, and only these: Pillow's other plugins (EPS runs Ghostscript, TIFF, ICO, PCX, TGA…) never
# see a byte. Each with the magic bytes its files start with and the MIME types a data URL may declare.
FORMATS = {
    "PNG": ((b"\x89PNG\r\n\x1a\n",), ("image/png", "image/apng")),
    "JPEG": ((b"\xff\xd8\xff",), ("image/jpeg", "image/jpg", "image/pjpeg")),
    "WEBP": ((b"RIFF",), ("image/webp",)),
    "BMP": ((b"BM",), ("image/bmp", "image/x-bmp", "image/x-ms-bmp")),
    "GIF": ((b"GIF87a", b"GIF89a"), ("image/gif",)),
}
FORMAT_NAMES = "PNG, JPEG, WebP, BMP or GIF"
_DATA_URL = re.compile(r"^data:(?P<mime>image/[A-Za-z0-9.+-]+)?(?P<params>(;[^;,]*)*?);base64,(?P<data>.*)$", re.DOTALL)


class PixelBudget:
    """The pixels one request may still decode, and whether its model can see at all: checked from each image's
    header, before its pixels are decoded (a text-only model decodes nothing; 24 huge images cost nothing)."""

    def __init__(self, total: int = REQUEST_PIXELS, can_see: bool = True, model: str = "this model"):
        self.remaining, self.can_see, self.model = total, can_see, model
        self.images = 0  # counted by the API across all of a request's messages

    def take(self, name: str, width: int, height: int) -> None:
        if not self.can_see:
            raise SettingsError(f"{name}: {self.model} cannot see images (a text-only export): send text only")
        if width * height > self.remaining:
            raise SettingsError(
                f"{name}: {width}×{height} is too large: the images of one request may have {REQUEST_PIXELS:,} pixels "
                "in all; send fewer or smaller images (the model scales every picture down to its own budget anyway)")
        self.remaining -= width * height


def sniff(data: bytes) -> str | None:
    """The documented format the bytes start with (WebP: RIFF….WEBP), else None."""
    for name, (magics, _) in FORMATS.items():
        if any(data.startswith(m) for m in magics) and (name != "WEBP" or data[8:12] == b"WEBP"):
            return name
    return None


def decode_image(data: bytes, name: str, declared: str | None = None, budget: PixelBudget | None = None) -> np.ndarray:
    """Encoded image bytes (PNG, JPEG, WebP, BMP, GIF's first frame) → [H, W, 3] uint8 RGB.

    declared: a data URL's MIME type, which must agree with the bytes. The header is read first: the size
    checks and the request's budget apply before any pixel is decoded; large pictures are decoded scaled down."""
    import warnings

    from PIL import Image, UnidentifiedImageError

    if len(data) > MAX_BYTES:
        raise SettingsError(f"{name}: {len(data) / 1e6:.0f} MB; images up to {MAX_BYTES // 2**20} MiB are accepted")
    found = sniff(data)
    if found is None:
        raise SettingsError(f"{name}: not an image Decider reads ({FORMAT_NAMES})")
    if declared is not None and declared.lower() not in FORMATS[found][1]:
        raise SettingsError(f"{name}: declared {declared} but the data is {found}")
    if budget is not None and not budget.can_see:
        budget.take(name, 0, 0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # our own limits apply, stated plainly
            with Image.open(io.BytesIO(data), formats=[found]) as image:
                width, height = image.size
                if width * height > MAX_PIXELS:
                    raise SettingsError(f"{name}: {width}×{height} pixels is too large: at most {MAX_PIXELS:,} pixels "
                                        "(8192×8192); scale it down first")
                if budget is not None:
                    budget.take(name, width, height)
                if width * height > DECODED_PIXELS:
                    scale = (DECODED_PIXELS / (width * height)) ** 0.5
                    image.draft("RGB", (max(1, int(width * scale)), max(1, int(height * scale))))  # JPEG: decoded smaller
                image.load()
                rgb = image if image.mode == "RGB" else image.convert("RGB")  # no second full-size copy
                if rgb.width * rgb.height > DECODED_PIXELS:
                    factor = int(np.ceil((rgb.width * rgb.height / DECODED_PIXELS) ** 0.5))
                    rgb = rgb.reduce(factor)
                return np.asarray(rgb)
    except SettingsError:
        raise  # our own refusals (sizes, budget) as they are: a ValueError too, not "damaged"
    except UnidentifiedImageError:
        raise SettingsError(f"{name}: not an image Decider reads ({FORMAT_NAMES})") from None
    except Image.DecompressionBombError:
        raise SettingsError(f"{name}: too large to decode (at most {MAX_PIXELS:,} pixels); scale it down first") from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise SettingsError(f"{name}: the image is damaged or truncated ({exc})") from None


def load_image_file(path: str | Path, budget: PixelBudget | None = None) -> np.ndarray:
    """A picture file; only a regular file, and at most MAX_BYTES of it are read (/dev/zero is refused)."""
    path = Path(path).expanduser()
    try:
        if path.is_dir():
            raise SettingsError(f"{path}: a folder, not an image file")
        if not path.is_file():
            raise SettingsError(f"{path}: no such image file" if not path.exists() else f"{path}: not a regular file")
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read it ({exc.strerror})") from None
    return decode_image(data, str(path), budget=budget)


def decode_data_url(url: str, name: str = "image_url", budget: PixelBudget | None = None) -> np.ndarray:
    """A `data:image/...;base64,...` URL (what OpenAI clients send for local images) → pixels."""
    if not isinstance(url, str):
        raise SettingsError(f"{name}: expected a data URL string")
    if url.startswith(("http://", "https://", "file:")):
        raise SettingsError(f"{name}: image URLs are not fetched; send the image inline as a base64 data URL "
                            "(data:image/png;base64,...)")
    match = _DATA_URL.match(url.strip())
    if match is None:
        raise SettingsError(f"{name}: expected a base64 data URL (data:image/png;base64,...)")
    if budget is not None and not budget.can_see:
        budget.take(name, 0, 0)  # refused before the base64 is even decoded
    if len(match.group("data")) > MAX_BYTES * 4 // 3 + 4:
        raise SettingsError(f"{name}: images up to {MAX_BYTES // 2**20} MiB are accepted")
    try:
        data = base64.b64decode(match.group("data"), validate=True)
    except (binascii.Error, ValueError):
        raise SettingsError(f"{name}: the base64 data is not valid") from None
    return decode_image(data, name, match.group("mime"), budget)


def image_digest(pixels: np.ndarray) -> str:
    """sha256 of the decoded pixels (with their shape): what the history keeps instead of the screenshot."""
    h = hashlib.sha256(f"{pixels.shape}".encode())
    h.update(np.ascontiguousarray(pixels).data)
    return h.hexdigest()
