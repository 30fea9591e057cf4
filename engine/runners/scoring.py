"""Prompt log-probabilities (OpenAI `echo` with `logprobs`): every prompt token scored in one pass.

The runner's compiled model computes logits for the last position only (that is what makes a decision
one cheap forward). Scoring a prompt needs the logits of every position, so the scorer compiles the
export a second time without that edit — lazily, on the first request that asks, and on the CPU when the
runner's device has static shapes. It runs the prompt in fixed chunks through its own stateful request,
so the all-position logits held at once are bounded (CHUNK × vocabulary × 4 bytes).

Definition, the same as for generated tokens: logit − logsumexp over the real vocabulary (padding ids
excluded) in float64; a client may ask for the padded head instead (engine/core/logprobs.py, PADDED_HEAD),
and the padding rows' largest share of the mass is measured either way. Penalties do not apply to
prompt tokens (nothing was generated yet), nor does temperature. The first prompt token has no logprob (nothing precedes it), as in OpenAI's legacy shape.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import numpy as np
import openvino as ov

from ..compile.measurements import read_host
from ..compile.planner import compile_properties
from ..core.errors import DeviceError
from ..core.logprobs import VOCABULARY, Distribution, TokenLogprob
from .input_layouts import TextLayout, VisionLanguageLayout

CHUNK = 64  # positions per forward: 64 × 248,320 × 4 B ≈ 61 MiB of logits at Qwen3.5's vocabulary


@dataclass(frozen=True)
class PromptScores:
    entries: list[TokenLogprob]  # one per prompt token after the first
    next_logits: np.ndarray | None  # float64 logits after the whole prompt (what a generation would draw from); None: empty
    padded_mass: float = 0.0  # the largest share of the padded head's mass its padding rows held at a scored position


class PromptScorer:
    """All-position scoring beside a runner: same folder, same exactness, its own compiled model."""

    def __init__(self, runner, core: ov.Core | None = None) -> None:
        self._runner = runner
        self._core = core
        self._layout: TextLayout | VisionLanguageLayout | None = None
        self._lock = threading.Lock()

    @property
    def device(self) -> str:
        # A static-shape device compiles a fixed sequence length: score on the CPU instead.
        return "CPU" if self._runner.device.startswith("NPU") else self._runner.device

    def _load(self):
        core = self._core or ov.Core()
        folder, options = self._runner.folder, self._runner.options
        try:
            compiled = core.compile_model(core.read_model(folder.language_ir), self.device,
                                          compile_properties(self.device, options, read_host(core).capabilities))
            if folder.layout == "vl":
                embeddings = core.compile_model(core.read_model(folder.embeddings_ir), "CPU",
                                                compile_properties("CPU", replace(options, exact=True)))
                return VisionLanguageLayout(compiled, embeddings)
        except RuntimeError as exc:
            raise DeviceError(f"{self.device} could not compile the scoring model: {str(exc).splitlines()[0]}") from None
        return TextLayout(compiled)

    def score(self, ids: list[int], top_n: int = 0, normalization: str = VOCABULARY) -> PromptScores:
        """Logprob of each prompt token given the ones before it, with the top_n alternatives; normalised
        over the real vocabulary or the padded head (engine/core/logprobs.py NORMALIZATIONS)."""
        with self._lock:
            if self._layout is None:
                self._layout = self._load()
            layout = self._layout
            vocab = self._runner.vocab_size
            request = layout.request
            request.reset_state()
            entries: list[TokenLogprob] = []
            tokens = np.asarray(ids, dtype=np.int64)
            last: np.ndarray | None = None
            padded_mass = 0.0
            for start in range(0, len(ids), CHUNK):
                chunk = tokens[start : start + CHUNK]
                request.infer(layout.inputs(chunk, start))
                head = request.get_tensor("logits").data[0]
                logits, padding = head[:, :vocab], head[:, vocab:]
                for row in range(chunk.shape[0]):
                    position = start + row  # logits at `position` predict token position + 1
                    dist = Distribution(logits[row].astype(np.float64), padding[row], normalization)
                    if position + 1 < len(ids):
                        entries.append(dist.entry(int(tokens[position + 1]), top_n))
                        padded_mass = max(padded_mass, dist.padded_mass)
                    else:
                        last = dist.logits
            request.reset_state()  # nothing of a scored prompt stays in memory between requests
            return PromptScores(entries, last, padded_mass)
