"""Image tokens in a prompt and the 3-D rotary positions Qwen3.5 gives them.

A prompt is a sequence of items: an int is a text token, an ImageToken one of an image's
placeholder tokens (`<|image_pad|>` to the tokenizer, a row of the image's features to the model).
An ImageToken names its image by a digest of the pixels, so two prompts share a prefix only when
they share the pictures too: the runner's prefix reuse and snapshots need nothing else to be right.

Positions (transformers' `get_rope_index` for Qwen3.5, one image = one frame): a text token's
temporal/height/width positions are all its text position. An image of rows × cols tokens starting
at text position s puts token (r, c) at (s, s + r, s + c), and the text after it continues at
s + max(rows, cols) — not at s + rows·cols. Getting that last rule wrong is invisible on square
images, whose token count is larger than their side anyway, only in the positions' slope.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .tokenizer import ChatTokenizer

VISION_START = "<|vision_start|>"
VISION_END = "<|vision_end|>"
IMAGE_PAD = "<|image_pad|>"


@dataclass(frozen=True)
class ImageToken:
    digest: str  # of the pixels and the preprocessing: equal digests ⇒ equal features
    index: int  # row-major position in the token grid
    rows: int
    cols: int

    @property
    def last(self) -> bool:
        return self.index == self.rows * self.cols - 1


Item = int | ImageToken


def image_tokens(digest: str, rows: int, cols: int) -> list[ImageToken]:
    return [ImageToken(digest, i, rows, cols) for i in range(rows * cols)]


def image_block(tokenizer: ChatTokenizer, tokens: Sequence[ImageToken]) -> list[Item]:
    """`<|vision_start|>` the image's tokens `<|vision_end|>`, as Qwen3.5's chat template writes an image."""
    return [tokenizer.special_id(VISION_START), *tokens, tokenizer.special_id(VISION_END)]


def has_images(items: Sequence[Item]) -> bool:
    return any(isinstance(item, ImageToken) for item in items)


def token_ids(items: Sequence[Item], image_pad: int) -> np.ndarray:
    """The ids the text embedding sees: every image token is the placeholder id."""
    return np.fromiter((image_pad if isinstance(item, ImageToken) else item for item in items), dtype=np.int64, count=len(items))


def rope_positions(history: Sequence[Item], chunk: Sequence[Item]) -> np.ndarray:
    """[3, len(chunk)] temporal/height/width positions of `chunk` following `history`."""
    if not has_images(history) and not has_images(chunk):
        start = len(history)
        return np.broadcast_to(np.arange(start, start + len(chunk), dtype=np.int64), (3, len(chunk))).copy()
    out = np.empty((3, len(chunk)), dtype=np.int64)
    position = 0  # text position of the next token
    image_start = 0
    offset = len(history)
    for i, item in enumerate((*history, *chunk)):
        if not isinstance(item, ImageToken):
            t = h = w = position
            position += 1
        else:
            if item.index == 0:
                image_start = position
            t = image_start
            h = image_start + item.index // item.cols
            w = image_start + item.index % item.cols
            if item.last:
                position = image_start + max(item.rows, item.cols)
        if i >= offset:
            out[:, i - offset] = (t, h, w)
    return out
