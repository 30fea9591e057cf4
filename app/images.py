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

MAX_PIXELS = 8192 * 8192  # larger files are refused before decoding (a decompression bomb costs nothing then)
MAX_BYTES = 32 * 1024 * 1024
_DATA_URL = re.compile(r"^data:(?P<mime>image/[A-Za-z0-9.+-]+)?(?P<params>(;[^;,]*)*?);base64,(?P<data>.*)$", re.DOTALL)


def decode_image(data: bytes, name: str) -> np.ndarray:
    """Encoded image bytes (PNG, JPEG, WebP, BMP, GIF's first frame …) → [H, W, 3] uint8 RGB."""
    from PIL import Image, UnidentifiedImageError

    if len(data) > MAX_BYTES:
        raise SettingsError(f"{name}: {len(data) / 1e6:.0f} MB; images up to {MAX_BYTES // 2**20} MiB are accepted")
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > MAX_PIXELS:
                raise SettingsError(f"{name}: {width}×{height} pixels is too large (at most {MAX_PIXELS:,} pixels)")
            return np.asarray(image.convert("RGB"))
    except UnidentifiedImageError:
        raise SettingsError(f"{name}: not an image Decider can read (PNG, JPEG, WebP, BMP or GIF)") from None
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise SettingsError(f"{name}: the image is damaged or truncated ({exc})") from None


def load_image_file(path: str | Path) -> np.ndarray:
    path = Path(path).expanduser()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SettingsError(f"{path}: no such image file") from None
    except IsADirectoryError:
        raise SettingsError(f"{path}: a folder, not an image file") from None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read it ({exc.strerror})") from None
    return decode_image(data, str(path))


def decode_data_url(url: str, name: str = "image_url") -> np.ndarray:
    """A `data:image/...;base64,...` URL (what OpenAI clients send for local images) → pixels."""
    if not isinstance(url, str):
        raise SettingsError(f"{name}: expected a data URL string")
    if url.startswith(("http://", "https://")):
        raise SettingsError(f"{name}: remote image URLs are not fetched; send the image inline as a base64 data URL "
                            "(data:image/png;base64,...)")
    match = _DATA_URL.match(url.strip())
    if match is None:
        raise SettingsError(f"{name}: expected a base64 data URL (data:image/png;base64,...)")
    try:
        data = base64.b64decode(match.group("data"), validate=True)
    except (binascii.Error, ValueError):
        raise SettingsError(f"{name}: the base64 data is not valid") from None
    return decode_image(data, name)


def image_digest(pixels: np.ndarray) -> str:
    """sha256 of the decoded pixels (with their shape): what the history keeps instead of the screenshot."""
    h = hashlib.sha256(f"{pixels.shape}".encode())
    h.update(np.ascontiguousarray(pixels).data)
    return h.hexdigest()
