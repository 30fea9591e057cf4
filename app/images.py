"""Image files and data URLs → the RGB pixel arrays the engine takes (Pillow decodes; the engine never opens files).

Only the documented formats are decoded (PNG, JPEG, WebP, BMP, GIF), each recognised by its own magic
bytes and opened with that one Pillow plugin: an EPS or TIFF labelled image/png never reaches
Ghostscript or another decoder. A request's pictures share one ImageBudget: its images and their
declared pixels are counted across all messages before anything is decoded, and each decoded image is
reduced right away (JPEG: while decoding) to no less than what the vision encoder will use.

Every failure is a SettingsError naming the image and what is wrong with it: a client's bad upload or a
mistyped path is their mistake, never a traceback.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import hashlib
import io
import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from decider.engine.core.errors import SettingsError
from decider.engine.core.files import NotARegularFile, read_regular

if TYPE_CHECKING:  # the runner (openvino) for the annotation only
    from decider.engine.runners.base import RunnerBase

MAX_PIXELS = 8192 * 8192  # the declared pixels of ONE request's images together (checked before decoding)
MAX_IMAGES = 8  # images in one request, over all its messages
MAX_BYTES = 32 * 1024 * 1024
DEFAULT_TARGET_PIXELS = 28 * 28 * 1280  # the Qwen2-VL processor's budget when the model's is not known
SHRINK_HINT = "scale it down (e.g. to 2048 pixels on the long side) or crop it"
FORMATS = "PNG, JPEG, WebP, BMP or GIF"
_DATA_URL = re.compile(r"^data:(?P<mime>image/[A-Za-z0-9.+-]+)?(?P<params>(;[^;,]*)*?);base64,(?P<data>.*)$", re.DOTALL)
_MIME = {"image/png": "PNG", "image/jpeg": "JPEG", "image/jpg": "JPEG", "image/pjpeg": "JPEG", "image/webp": "WEBP",
         "image/bmp": "BMP", "image/x-bmp": "BMP", "image/x-ms-bmp": "BMP", "image/gif": "GIF"}


def sniff(data: bytes) -> str | None:
    """The Pillow format name of a documented image format, from its magic bytes (None: anything else)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if data.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "GIF"
    if data.startswith(b"BM"):
        return "BMP"
    return None


@dataclass
class ImageBudget:
    """What one request may decode. `refusal`: why this model takes no image at all (None: it sees);
    `target_pixels`: the vision encoder's pixel budget, below which an image is never reduced."""

    refusal: str | None = None
    target_pixels: int = DEFAULT_TARGET_PIXELS
    images_left: int = MAX_IMAGES
    pixels_left: int = MAX_PIXELS

    def admit(self, name: str) -> None:
        if self.refusal is not None:
            raise SettingsError(f"{name}: {self.refusal}")
        if self.images_left <= 0:
            raise SettingsError(f"{name}: at most {MAX_IMAGES} images in one request")
        self.images_left -= 1

    def spend(self, name: str, width: int, height: int) -> None:
        if width * height > self.pixels_left:
            raise SettingsError(
                f"{name}: {width}×{height} pixels is too large: one request's images may have "
                f"{MAX_PIXELS:,} pixels together ({self.pixels_left:,} left); {SHRINK_HINT}")
        self.pixels_left -= width * height


def budget_for(runner: RunnerBase, model_name: str) -> ImageBudget:
    """A model's limits for one request's images (none at all when it cannot see)."""
    vision = runner.vision
    if vision is None:
        return ImageBudget(refusal=f"{model_name} cannot see images")
    return ImageBudget(target_pixels=vision.processor.max_pixels)


# The budget of the request being validated (the API's request classes decode images while validating).
current_budget: contextvars.ContextVar[ImageBudget | None] = contextvars.ContextVar("image_budget", default=None)


def _budget(budget: ImageBudget | None) -> ImageBudget:
    return budget or current_budget.get() or ImageBudget()


def decode_image(data: bytes, name: str, budget: ImageBudget | None = None, declared: str | None = None) -> np.ndarray:
    """Encoded image bytes (PNG, JPEG, WebP, BMP, GIF's first frame) → [H, W, 3] uint8 RGB, reduced to no
    less than the budget's target pixels. `declared`: the Pillow format a data URL's type names."""
    from PIL import Image

    budget = _budget(budget)
    budget.admit(name)
    if len(data) > MAX_BYTES:
        raise SettingsError(f"{name}: {len(data) / 1e6:.0f} MB is too large; images up to {MAX_BYTES // 2**20} MiB "
                            f"are accepted ({SHRINK_HINT})")
    kind = sniff(data)
    if kind is None:
        raise SettingsError(f"{name}: not an image Decider can read ({FORMATS})")
    if declared is not None and declared != kind:
        raise SettingsError(f"{name}: the data URL says {declared} but the bytes are {kind}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the budget below is the limit
            with Image.open(io.BytesIO(data), formats=[kind]) as image:
                width, height = image.size
                budget.spend(name, width, height)
                return _reduced_rgb(image, budget.target_pixels)
    except SettingsError:
        raise
    except Image.DecompressionBombError:
        raise SettingsError(f"{name}: too large (at most {MAX_PIXELS:,} pixels per request); {SHRINK_HINT}") from None
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise SettingsError(f"{name}: the image is damaged or truncated ({str(exc)[:120]})") from None


def _reduced_rgb(image, target_pixels: int) -> np.ndarray:
    """Decode, reduced by the largest whole factor that keeps at least `target_pixels` (the encoder
    resizes the rest of the way): a JPEG decodes at the reduced scale, others are reduced at once."""
    width, height = image.size
    factor = max(1, math.isqrt(width * height // max(target_pixels, 1)))
    factor = min(factor, width, height)
    if factor > 1 and image.format == "JPEG":
        image.draft("RGB", (math.ceil(width / factor), math.ceil(height / factor)))
    image.load()
    if factor > 1 and image.size == (width, height):
        try:
            image = image.reduce(factor)
        except ValueError:  # a mode reduce() does not take (palette, 1-bit …)
            image = image.convert("RGB").reduce(factor)
    return np.asarray(image.convert("RGB"))


def read_bounded(path: str | Path, limit: int, what: str = "", noun: str = "") -> bytes:
    """A regular file's bytes, at most `limit` of them (a device such as /dev/zero, a FIFO or a folder is
    refused at once, before anything is read: a FIFO is opened without waiting for a writer)."""
    path = Path(path).expanduser()
    try:
        data = read_regular(path, limit)
    except FileNotFoundError:
        raise SettingsError(f"{what}{path}: no such {noun}file") from None
    except IsADirectoryError:
        raise SettingsError(f"{what}{path}: a folder, not {'an ' + noun if noun else 'a '}file") from None
    except NotARegularFile:
        raise SettingsError(f"{what}{path}: not a regular file (a FIFO, a device or a socket)") from None
    except OSError as exc:
        raise SettingsError(f"{what}{path}: cannot read it ({exc.strerror})") from None
    if len(data) > limit:
        raise SettingsError(f"{what}{path}: larger than {limit // 2**20} MiB")
    return data


def load_image_file(path: str | Path, budget: ImageBudget | None = None) -> np.ndarray:
    data = read_bounded(path, MAX_BYTES, noun="image ")
    return decode_image(data, str(Path(path).expanduser()), budget)


def decode_data_url(url: object, name: str = "image_url", budget: ImageBudget | None = None) -> np.ndarray:
    """A `data:image/...;base64,...` URL (what OpenAI clients send for local images) → pixels."""
    if not isinstance(url, str):
        raise SettingsError(f"{name}: expected a data URL string")
    if url.startswith(("http://", "https://")):
        raise SettingsError(f"{name}: remote image URLs are not fetched; send the image inline as a base64 data URL "
                            "(data:image/png;base64,...)")
    match = _DATA_URL.match(url.strip())
    if match is None:
        raise SettingsError(f"{name}: expected a base64 data URL (data:image/png;base64,...)")
    mime = (match.group("mime") or "").lower()
    declared = _MIME.get(mime)
    if mime and declared is None:
        raise SettingsError(f"{name}: {mime} is not an image type Decider reads ({FORMATS})")
    budget = _budget(budget)
    if budget.refusal is not None:  # before the base64 is even decoded
        raise SettingsError(f"{name}: {budget.refusal}")
    if len(match.group("data")) > MAX_BYTES * 4 // 3 + 4:
        raise SettingsError(f"{name}: larger than {MAX_BYTES // 2**20} MiB ({SHRINK_HINT})")
    try:
        data = base64.b64decode(match.group("data"), validate=True)
    except (binascii.Error, ValueError):
        raise SettingsError(f"{name}: the base64 data is not valid") from None
    return decode_image(data, name, budget, declared)


def image_digest(pixels: np.ndarray) -> str:
    """sha256 of the decoded pixels (with their shape): what the history keeps instead of the screenshot."""
    h = hashlib.sha256(f"{pixels.shape}".encode())
    h.update(np.ascontiguousarray(pixels).data)
    return h.hexdigest()
