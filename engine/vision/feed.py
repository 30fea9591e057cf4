"""What a vision-language language model is fed for a chunk of prompt items: input embeddings with the
image tokens' rows replaced by the vision encoder's features, and the [4, 1, n] position ids.

Shared by the dynamic runner and the static one: both feed openvino_language_model.xml the same way
and differ only in how they hold the caches.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import openvino as ov

from .encoder import VisionEncoder
from ..model.vision_tokens import ImageToken, Item, has_images, rope_positions, token_ids


class ChunkEmbedder:
    """Text embeddings (openvino_text_embeddings_model.xml) plus image features for a chunk of items."""

    def __init__(self, embeddings: ov.CompiledModel, vision: VisionEncoder | None, image_pad: int | None):
        self._request = embeddings.create_infer_request()
        self._input = embeddings.inputs[0].get_any_name()
        self.vision = vision
        self.image_pad = image_pad

    def embeds(self, chunk: Sequence[Item] | np.ndarray) -> np.ndarray:
        """[1, n, hidden] float32."""
        items: Sequence[Item] = chunk.tolist() if isinstance(chunk, np.ndarray) else chunk
        pad = self.image_pad  # set whenever a vision encoder is
        vision = self.vision if pad is not None and has_images(items) else None
        ids = token_ids(items, pad) if vision is not None and pad is not None else np.asarray(items, dtype=np.int64)
        self._request.infer({self._input: ids[None, :]})
        embeds = self._request.get_output_tensor(0).data.copy()
        if vision is not None:
            features: dict[str, np.ndarray] = {}
            for i, item in enumerate(items):
                if isinstance(item, ImageToken):
                    if item.digest not in features:
                        features[item.digest] = vision.features(item.digest)
                    embeds[0, i] = features[item.digest][item.index]
        return embeds


def position_ids(chunk: Sequence[Item] | np.ndarray, past: int, history: Sequence[Item] = ()) -> np.ndarray:
    """[4, 1, n]: the plain text index, then the mrope T/H/W rows (3-D for image tokens, see vision_tokens).

    history: the items before the chunk, needed only when they may hold images (else `past` is enough)."""
    items: Sequence[Item] = chunk.tolist() if isinstance(chunk, np.ndarray) else chunk
    length = len(items)
    text = np.arange(past, past + length, dtype=np.int64)
    rope = rope_positions(history, items) if has_images(items) or has_images(history) else np.broadcast_to(text, (3, length))
    return np.concatenate([text[None], rope])[:, None, :]
