"""Qwen3.5's vision encoder from an optimum-intel export: patches in, one feature row per image token out.

The export splits the vision tower in three IRs, and the host does what sits between them
(what transformers' `Qwen3_5VisionModel.forward` does inside one module):

1. `openvino_vision_embeddings_model.xml`: the patch embedding (a Conv3d over temporal × patch × patch).
2. `openvino_vision_embeddings_pos_model.xml`: rows of the learned num_grid × num_grid position table,
   looked up at the four grid neighbours of each patch; the host weights and sums them (bilinear
   interpolation of the table to the image's own grid) and adds them to the patch embeddings.
3. `openvino_vision_embeddings_merger_model.xml`: the transformer blocks with 2-D rotary positions
   (row and column of each patch, given as angles) under an attention mask, then the 2×2 merger.

Features are cached by image digest: the same screenshot asked about twice is encoded once.

With `static_patches` (the NPU, which compiles static shapes only) the three IRs are reshaped once to
that many patches: every image is scaled into the matching pixel budget, its patches padded with
zeros, and the padding hidden from the real patches by the attention mask (the padded rows' own
outputs are dropped). Patch embedding, norms and MLPs act row by row and the merger groups four
consecutive rows, so the real rows come out as the unpadded encoder computes them.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import openvino as ov

from ..core.errors import ModelError, SettingsError
from ..model.folder import VL_VISION_IRS
from .preprocess import Patches, ProcessorConfig, preprocess
from ..model.vision_tokens import ImageToken, image_tokens

VISION_IRS = dict(zip(("patches", "positions", "merger"), VL_VISION_IRS))
PREPROCESSOR_CONFIG = "preprocessor_config.json"
MAX_CACHED_IMAGES = 8
_ROPE_THETA = 10000.0  # the vision tower's rotary base (fixed in the architecture, not in config.json)


@dataclass
class VisionStats:
    encodes: int = 0  # images run through the encoder since load
    cache_hits: int = 0
    last_encode_s: float = 0.0
    last_preprocess_s: float = 0.0
    # The last encode's parts: patch embedding IR, position embeddings (IR + host interpolation), merger IR.
    last_split: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class VisionGeometry:
    hidden_size: int
    num_heads: int
    merge_size: int
    grid_side: int  # the learned position table is grid_side × grid_side

    @classmethod
    def from_config(cls, vision_config: dict, where: str) -> "VisionGeometry":
        try:
            hidden, heads = int(vision_config["hidden_size"]), int(vision_config["num_heads"])
            merge = int(vision_config.get("spatial_merge_size", 2))
            table = int(vision_config["num_position_embeddings"])
        except (KeyError, TypeError, ValueError):
            raise ModelError(f"{where}: vision_config needs hidden_size, num_heads and num_position_embeddings") from None
        side = int(round(table**0.5))
        if side * side != table or hidden % heads or (hidden // heads) % 4:
            raise ModelError(f"{where}: vision_config geometry is inconsistent")
        return cls(hidden, heads, merge, side)


@dataclass
class _Pending:
    patches: Patches
    features: np.ndarray | None = None


class VisionEncoder:
    def __init__(
        self, core: ov.Core, folder: Path, vision_config: dict, device: str, properties: dict[str, object],
        static_pixels: int | None = None,
    ):
        self.geometry = VisionGeometry.from_config(vision_config, str(folder / "config.json"))
        config_path = folder / PREPROCESSOR_CONFIG
        if config_path.is_file():
            self.processor = ProcessorConfig.from_file(config_path, vision_config)
        else:
            # Real exports ship the file; without it the architecture's own sizes and the processor's defaults apply.
            self.processor = ProcessorConfig.from_dict({}, vision_config)
        if self.processor.merge_size != self.geometry.merge_size:
            raise ModelError(f"{config_path}: merge_size {self.processor.merge_size} ≠ the model's {self.geometry.merge_size}")
        self.device = device
        self.static_patches = None if static_pixels is None else self._static_budget(static_pixels)
        requests = {}
        for role, name in VISION_IRS.items():
            try:
                model = core.read_model(folder / name)
                if self.static_patches is not None:
                    model.reshape(self._static_shapes(role, model))
                requests[role] = core.compile_model(model, device, properties).create_infer_request()
            except RuntimeError as exc:
                # OpenVINO's message ends with the cause; its first lines are only source locations.
                cause = [line for line in str(exc).strip().splitlines() if line.strip()][-1]
                raise ModelError(f"{folder / name}: cannot compile on {device} ({cause})") from None
        self._patches, self._positions, self._merger = requests["patches"], requests["positions"], requests["merger"]
        head_dim = self.geometry.hidden_size // self.geometry.num_heads
        rotary = head_dim // 2  # half the head rotates with the row, half with the column
        self._inv_freq = (1.0 / _ROPE_THETA ** (np.arange(0, rotary, 2, dtype=np.float32) / rotary)).astype(np.float32)
        self._images: OrderedDict[str, _Pending] = OrderedDict()
        # API handlers prepare images (tokens) on their threads while the engine thread encodes.
        self._lock = threading.RLock()
        self.stats = VisionStats()

    # ----- the prompt side: tokens now, features when the language model needs them -----
    def tokens(self, pixels: np.ndarray, max_pixels: int | None = None) -> list[ImageToken]:
        """Preprocess an image and return its placeholder tokens; encoding waits until they are fed.
        max_pixels: scale the image into this budget where it is below the model's own (never above it, nor
        below the model's minimum); the budget is part of the digest, so each budget's features are its own."""
        started = time.perf_counter()
        processor = self.processor
        if max_pixels is not None and max_pixels < processor.max_pixels:
            processor = replace(processor, max_pixels=max(int(max_pixels), processor.min_pixels))
        digest = self.digest(pixels, processor)
        with self._lock:
            pending = self._images.get(digest)
            if pending is not None:
                self._images.move_to_end(digest)
        if pending is None:
            pending = _Pending(preprocess(pixels, processor))
            self._pad(pending.patches.values)  # an image the static shapes cannot hold is refused here, not mid-prompt
            with self._lock:
                self._remember(digest, pending)
        self.stats.last_preprocess_s = time.perf_counter() - started
        rows, cols = (side // self.geometry.merge_size for side in pending.patches.token_grid)
        return image_tokens(digest, rows, cols)

    def digest(self, pixels: np.ndarray, processor: ProcessorConfig | None = None) -> str:
        if not isinstance(pixels, np.ndarray):
            raise SettingsError("an image must be a pixel array")
        h = hashlib.blake2b(digest_size=16)
        h.update(repr((pixels.shape, pixels.dtype.str, processor or self.processor)).encode())
        h.update(np.ascontiguousarray(pixels).data)
        return h.hexdigest()

    def features(self, digest: str) -> np.ndarray:
        """[rows·cols, text hidden] float32 features of a prepared image (encoded once, then cached)."""
        with self._lock:
            return self._features(digest)

    def _features(self, digest: str) -> np.ndarray:
        pending = self._images.get(digest)
        if pending is None:
            raise SettingsError("an image token refers to an image this model has not prepared (or has forgotten)")
        self._images.move_to_end(digest)
        if pending.features is None:
            started = time.perf_counter()
            pending.features = self.encode(pending.patches)
            self.stats.encodes += 1
            self.stats.last_encode_s = time.perf_counter() - started
        else:
            self.stats.cache_hits += 1
        return pending.features

    def clear(self) -> None:
        """Forget every prepared image and its features."""
        with self._lock:
            self._images.clear()

    def _remember(self, digest: str, pending: _Pending) -> None:
        self._images[digest] = pending
        while len(self._images) > MAX_CACHED_IMAGES:
            self._images.popitem(last=False)

    # ----- static shapes -----
    def _static_budget(self, pixels: int) -> int:
        """Scale images into `pixels` (or the model's smaller budget); the patch count every image is padded to."""
        config, factor = self.processor, self.processor.factor
        budget = min(pixels, config.max_pixels)
        if budget < factor * factor:
            raise ModelError(f"a static vision budget of {pixels} pixels holds no {factor}×{factor} image token")
        self.processor = replace(config, max_pixels=budget, min_pixels=min(config.min_pixels, budget))
        return budget // factor**2 * config.merge_size**2

    def _static_shapes(self, role: str, model: ov.Model) -> dict:
        count = self.static_patches
        if role == "positions":
            return {model.inputs[0]: ov.PartialShape([4, count])}
        if role == "patches":  # a flattened patch: channels × temporal × patch × patch values
            config = self.processor
            return {model.inputs[0]: ov.PartialShape([count, 3 * config.temporal_patch_size * config.patch_size**2])}
        shapes = {}
        for port in model.inputs:
            name, shape = port.get_any_name(), port.get_partial_shape()
            shapes[port] = ov.PartialShape([1, count, count] if name == "attention_mask" else [count, shape[1]])
        return shapes

    def _pad(self, rows: np.ndarray, axis: int = 0) -> np.ndarray:
        if self.static_patches is None:
            return rows
        count = rows.shape[axis]
        if count > self.static_patches:
            raise SettingsError(f"the image needs {count} patches; the vision encoder on {self.device} is compiled for "
                                f"{self.static_patches} (static shapes)")
        widths = [(0, 0)] * rows.ndim
        widths[axis] = (0, self.static_patches - count)
        return np.pad(rows, widths)

    # ----- the encoder itself -----
    def encode(self, patches: Patches) -> np.ndarray:
        count = patches.values.shape[0]
        started = time.perf_counter()
        self._patches.infer({0: self._pad(patches.values)})
        hidden = self._patches.get_output_tensor(0).data.copy()
        embedded = time.perf_counter()
        hidden[:count] += self._position_embeddings(patches.grid)
        positioned = time.perf_counter()
        size = hidden.shape[0]
        # One image attends to itself only: no masking within it; static padding is masked out as keys.
        mask = np.zeros((1, size, size), dtype=np.float32)
        mask[:, :, count:] = np.finfo(np.float32).min
        self._merger.infer({"hidden_states": hidden, "attention_mask": mask, "rotary_pos_emb": self._pad(self._rotary(patches.grid))})
        features = self._merger.get_output_tensor(0).data[: count // self.geometry.merge_size**2].copy()
        self.stats.last_split = {"patch_embed_s": embedded - started, "positions_s": positioned - embedded,
                                 "merger_s": time.perf_counter() - positioned}
        return features

    def _position_embeddings(self, grid: tuple[int, int, int]) -> np.ndarray:
        """Bilinear interpolation of the learned side × side table to grid_h × grid_w, in merge-block order."""
        t, h, w = grid
        side, merge = self.geometry.grid_side, self.geometry.merge_size
        # float32 like the reference's torch.linspace, so the floor/weight split falls the same way.
        ys = np.linspace(0, side - 1, h, dtype=np.float32)
        xs = np.linspace(0, side - 1, w, dtype=np.float32)
        y0, x0 = ys.astype(np.int64), xs.astype(np.int64)
        y1, x1 = np.minimum(y0 + 1, side - 1), np.minimum(x0 + 1, side - 1)
        dy, dx = (ys - y0)[:, None], (xs - x0)[None, :]
        corners = [(y0, x0), (y0, x1), (y1, x0), (y1, x1)]
        index = np.stack([(ry[:, None] * side + cx[None, :]).ravel() for ry, cx in corners])
        weight = np.stack([((1 - dy) * (1 - dx)).ravel(), ((1 - dy) * dx).ravel(), (dy * (1 - dx)).ravel(), (dy * dx).ravel()])
        self._positions.infer({0: self._pad(index, axis=1)})
        rows = self._positions.get_output_tensor(0).data[:, : h * w]  # [4, h·w, hidden]
        table = (rows * weight[:, :, None].astype(np.float32)).sum(axis=0)
        blocks = table.reshape(h // merge, merge, w // merge, merge, -1).transpose(0, 2, 1, 3, 4)
        return np.tile(blocks.reshape(h * w, -1), (t, 1))

    def _rotary(self, grid: tuple[int, int, int]) -> np.ndarray:
        """Per patch: row angles then column angles ([count, head_dim / 2]), in merge-block order."""
        t, h, w = grid
        merge = self.geometry.merge_size
        rows = np.arange(h).reshape(h // merge, 1, merge, 1)
        cols = np.arange(w).reshape(1, w // merge, 1, merge)
        row_of, col_of = (np.broadcast_to(a, (h // merge, w // merge, merge, merge)).ravel() for a in (rows, cols))
        angles = np.concatenate([np.outer(row_of, self._inv_freq), np.outer(col_of, self._inv_freq)], axis=1)
        return np.tile(angles.astype(np.float32), (t, 1))
