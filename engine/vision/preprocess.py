"""Image preprocessing for Qwen3.5's vision encoder, as the model's preprocessor_config.json says.

Qwen3.5 (like Qwen2-VL / Qwen3-VL) takes an image at (almost) its own aspect ratio: both sides are
rounded to a multiple of patch_size × merge_size, scaled into the [min_pixels, max_pixels] budget,
resized (bicubic), rescaled to [0, 1], normalised, repeated `temporal_patch_size` times (a still
image is a clip of identical frames) and cut into flattened patches ordered merge block by merge
block, which is the order the merger and the image tokens expect.

The engine takes pixel arrays (H×W×3 uint8, RGB); decoding files is the front end's job. The resize
is Pillow's, the same call transformers' (slow) Qwen2-VL image processor makes, so the pixels fed to
the encoder are the ones the reference implementation feeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.errors import ModelError, SettingsError
from ..model.folder import read_json_object

# transformers' Qwen2VLImageProcessor defaults, used where preprocessor_config.json is silent.
_DEFAULT_MIN_PIXELS = 56 * 56
_DEFAULT_MAX_PIXELS = 28 * 28 * 1280
_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
_BICUBIC = 3  # PIL.Image.Resampling.BICUBIC
MAX_ASPECT_RATIO = 200  # the processor refuses more elongated images


@dataclass(frozen=True)
class ProcessorConfig:
    patch_size: int = 16
    temporal_patch_size: int = 2
    merge_size: int = 2
    min_pixels: int = _DEFAULT_MIN_PIXELS
    max_pixels: int = _DEFAULT_MAX_PIXELS
    image_mean: tuple[float, float, float] = _CLIP_MEAN
    image_std: tuple[float, float, float] = _CLIP_STD
    rescale_factor: float = 1 / 255
    resample: int = _BICUBIC

    @property
    def factor(self) -> int:
        """Side lengths are multiples of this: one merged image token covers factor × factor pixels."""
        return self.patch_size * self.merge_size

    @classmethod
    def from_file(cls, path: Path, vision_config: dict) -> "ProcessorConfig":
        """Read preprocessor_config.json; the vision config (config.json) fills what it leaves out."""
        return cls.from_dict(read_json_object(path), vision_config, str(path))

    @classmethod
    def from_dict(cls, data: dict, vision_config: dict, where: str = "preprocessor config") -> "ProcessorConfig":
        size = data["size"] if isinstance(data.get("size"), dict) else {}
        values = dict(
            patch_size=data.get("patch_size", vision_config.get("patch_size", cls.patch_size)),
            temporal_patch_size=data.get("temporal_patch_size", vision_config.get("temporal_patch_size", cls.temporal_patch_size)),
            merge_size=data.get("merge_size", vision_config.get("spatial_merge_size", cls.merge_size)),
            # Newer files give the budget as size.{shortest,longest}_edge (in pixels, despite the names).
            min_pixels=data.get("min_pixels", size.get("shortest_edge", _DEFAULT_MIN_PIXELS)),
            max_pixels=data.get("max_pixels", size.get("longest_edge", _DEFAULT_MAX_PIXELS)),
            resample=data.get("resample", _BICUBIC),
        )
        for name, value in values.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < (0 if name == "resample" else 1):
                raise ModelError(f"{where}: {name} must be a positive integer (got {value!r})")
        if values["min_pixels"] > values["max_pixels"]:
            raise ModelError(f"{where}: the minimum pixel budget exceeds the maximum")
        mean = data.get("image_mean", list(_CLIP_MEAN)) if data.get("do_normalize", True) else [0.0, 0.0, 0.0]
        std = data.get("image_std", list(_CLIP_STD)) if data.get("do_normalize", True) else [1.0, 1.0, 1.0]
        scale = data.get("rescale_factor", 1 / 255) if data.get("do_rescale", True) else 1.0
        for name, triple in (("image_mean", mean), ("image_std", std)):
            if not (isinstance(triple, list) and len(triple) == 3 and all(isinstance(v, (int, float)) for v in triple)):
                raise ModelError(f"{where}: {name} must be three numbers")
        if any(v == 0 for v in std):
            raise ModelError(f"{where}: image_std must not contain 0")
        (m0, m1, m2), (s0, s1, s2) = map(float, mean), map(float, std)
        return cls(**values, image_mean=(m0, m1, m2), image_std=(s0, s1, s2), rescale_factor=float(scale))


@dataclass(frozen=True)
class Patches:
    """What the vision encoder eats: [grid_t·grid_h·grid_w, 3·temporal·patch·patch] float32."""

    values: np.ndarray
    grid: tuple[int, int, int]  # (t, h, w) in patches
    size: tuple[int, int]  # (height, width) in pixels after the resize

    @property
    def token_grid(self) -> tuple[int, int]:
        """(rows, cols) of image tokens: patches merged merge_size × merge_size."""
        return self.grid[1], self.grid[2]


def target_size(height: int, width: int, config: ProcessorConfig) -> tuple[int, int]:
    """The resized (height, width): multiples of the merge factor, within the pixel budget, aspect kept."""
    if min(height, width) < 1:
        raise SettingsError(f"the image is empty ({width}×{height} pixels)")
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise SettingsError(f"the image is {width}×{height} pixels; its sides may differ at most {MAX_ASPECT_RATIO}-fold")
    factor = config.factor
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > config.max_pixels:
        beta = math.sqrt(height * width / config.max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < config.min_pixels:
        beta = math.sqrt(config.min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def check_pixels(pixels: np.ndarray) -> np.ndarray:
    """An RGB uint8 array [H, W, 3]; grey [H, W] and RGBA [H, W, 4] are converted, the rest refused."""
    if not isinstance(pixels, np.ndarray):
        raise SettingsError("an image must be a pixel array")
    if pixels.dtype != np.uint8:
        raise SettingsError(f"image pixels must be uint8 (got {pixels.dtype})")
    if pixels.ndim == 2:
        pixels = np.repeat(pixels[:, :, None], 3, axis=2)
    elif pixels.ndim == 3 and pixels.shape[2] == 4:
        pixels = pixels[:, :, :3]  # alpha dropped, as PIL's convert("RGB") does
    if pixels.ndim != 3 or pixels.shape[2] != 3:
        raise SettingsError(f"an image must be [height, width, 3] RGB pixels (got shape {tuple(pixels.shape)})")
    return pixels


def resize(pixels: np.ndarray, height: int, width: int, resample: int = _BICUBIC) -> np.ndarray:
    if pixels.shape[:2] == (height, width):
        return pixels
    from PIL import Image  # only needed when the size changes

    image = Image.fromarray(np.ascontiguousarray(pixels), mode="RGB")
    return np.asarray(image.resize((width, height), resample=resample))


def preprocess(pixels: np.ndarray, config: ProcessorConfig) -> Patches:
    """Pixel array → normalised, temporally repeated, merge-ordered patches (and the grid)."""
    pixels = check_pixels(pixels)
    height, width = target_size(pixels.shape[0], pixels.shape[1], config)
    image = resize(pixels, height, width, config.resample)
    # Same arithmetic as the reference processor: rescale in float64, then normalise in float32.
    scaled = (image.astype(np.float64) * config.rescale_factor).astype(np.float32)
    normal = (scaled - np.array(config.image_mean, dtype=np.float32)) / np.array(config.image_std, dtype=np.float32)
    channels_first = normal.transpose(2, 0, 1)  # [C, H, W]
    temporal, patch, merge = config.temporal_patch_size, config.patch_size, config.merge_size
    grid_h, grid_w = height // patch, width // patch
    frames = np.broadcast_to(channels_first, (temporal, *channels_first.shape))  # [T, C, H, W]
    blocks = frames.reshape(temporal, 3, grid_h // merge, merge, patch, grid_w // merge, merge, patch)
    # → [block row, block col, row in block, col in block, C, T, patch y, patch x]
    ordered = blocks.transpose(2, 5, 3, 6, 1, 0, 4, 7)
    values = np.ascontiguousarray(ordered.reshape(grid_h * grid_w, 3 * temporal * patch * patch), dtype=np.float32)
    return Patches(values=values, grid=(1, grid_h, grid_w), size=(height, width))
