"""What a forward of the language model is fed, by export layout: the inputs named in the compiled model, built from a
chunk of items and the number of positions before it (engine/runners/runner.py and scoring.py feed through these)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import openvino as ov

from ..graphs.logits import LOGITS_POSITIONS
from ..kernels.projection_op import KERNEL_TOKENS
from ..model.vision_tokens import Item
from ..vision.encoder import VisionEncoder
from ..vision.feed import ChunkEmbedder, position_ids


class TextLayout:
    """openvino_model.xml: input_ids in, 2-D position_ids."""

    def __init__(self, compiled: ov.CompiledModel):
        self.request = compiled.create_infer_request()
        self.names = {p.get_any_name() for p in compiled.inputs}
        self.kernel_tokens = np.zeros(1, dtype=np.int64)  # engine/kernels: which infers our int8 kernel takes

    def inputs(self, ids: np.ndarray | Sequence[Item], past: int, history=(), positions: int = 1) -> dict[str, np.ndarray]:
        ids = np.asarray(ids)  # token ids only (a text export sees no images): already an array
        length = ids.shape[0]
        feed = {
            "input_ids": ids[None, :],
            "attention_mask": np.ones((1, past + length), dtype=np.int64),
            "position_ids": np.arange(past, past + length, dtype=np.int64)[None, :],
            "beam_idx": np.zeros(1, dtype=np.int32),
            KERNEL_TOKENS: self.kernel_tokens,
            LOGITS_POSITIONS: np.array([positions], dtype=np.int64),
        }
        return {k: v for k, v in feed.items() if k in self.names}


class VisionLanguageLayout:
    """openvino_language_model.xml fed by openvino_text_embeddings_model.xml and, for image tokens,
    the vision encoder's features.

    position_ids are [4, B, S]: text positions then mrope T/H/W (all equal to the token index for
    text-only prompts; 3-D for image tokens and shifted after an image, see vision_tokens).
    """

    def __init__(
        self, compiled: ov.CompiledModel, embeddings: ov.CompiledModel, vision: VisionEncoder | None = None, image_pad: int | None = None
    ):
        self.request = compiled.create_infer_request()
        self.names = {p.get_any_name() for p in compiled.inputs}
        self.kernel_tokens = np.zeros(1, dtype=np.int64)
        self._embedder = ChunkEmbedder(embeddings, vision, image_pad)

    def inputs(self, chunk: Sequence[Item] | np.ndarray, past: int, history: Sequence[Item] = (),
               positions: int = 1) -> dict[str, np.ndarray]:
        """history: the items before the chunk, needed only when they may hold images (else past is enough).
        positions: how many last positions get logits (where the model has the counted head)."""
        feed = {
            "inputs_embeds": self._embedder.embeds(chunk),
            "attention_mask": np.ones((1, past + len(chunk)), dtype=np.int64),
            "position_ids": position_ids(chunk, past, history),
            "beam_idx": np.zeros(1, dtype=np.int32),
            KERNEL_TOKENS: self.kernel_tokens,
            LOGITS_POSITIONS: np.array([positions], dtype=np.int64),
        }
        return {k: v for k, v in feed.items() if k in self.names}
