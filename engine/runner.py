"""The dynamic runner: the stateful export compiled as it is, its state kept by the infer request.

CPU and GPU run this path ("dynamic"); on the NPU the same class compiles through NPUW_LLM
("npuw_llm"), which hides the DeltaNet state (no snapshots) and has a static prompt limit. The
conversation logic (history, prefix reuse, snapshots, run-ahead steps) is in runner_base.
"""

from __future__ import annotations

import time

import numpy as np
import openvino as ov

from .devices import DeviceOptions, choose_device, compile_properties, device_caps, visible_devices
from .errors import DeviceError
from .graph import slice_to_last_position
from .model_folder import ModelFolder, inspect_folder
from .runner_base import RunnerBase, RunnerStats, first_line

__all__ = ["ModelRunner", "RunnerStats"]


class _TextLayout:
    """openvino_model.xml: input_ids in, 2-D position_ids."""

    def __init__(self, compiled: ov.CompiledModel):
        self.request = compiled.create_infer_request()
        self.names = {p.get_any_name() for p in compiled.inputs}

    def inputs(self, ids: np.ndarray, past: int) -> dict[str, np.ndarray]:
        length = ids.shape[0]
        feed = {
            "input_ids": ids[None, :],
            "attention_mask": np.ones((1, past + length), dtype=np.int64),
            "position_ids": np.arange(past, past + length, dtype=np.int64)[None, :],
            "beam_idx": np.zeros(1, dtype=np.int32),
        }
        return {k: v for k, v in feed.items() if k in self.names}


class _VisionLanguageLayout:
    """openvino_language_model.xml fed by openvino_text_embeddings_model.xml (text-only use).

    position_ids are [4, B, S]: text positions then mrope T/H/W, all equal to the token index for text.
    """

    def __init__(self, compiled: ov.CompiledModel, embeddings: ov.CompiledModel):
        self.request = compiled.create_infer_request()
        self.names = {p.get_any_name() for p in compiled.inputs}
        self._embed = embeddings.create_infer_request()
        self._embed_input = embeddings.inputs[0].get_any_name()

    def inputs(self, ids: np.ndarray, past: int) -> dict[str, np.ndarray]:
        length = ids.shape[0]
        self._embed.infer({self._embed_input: ids[None, :]})
        embeds = self._embed.get_output_tensor(0).data.copy()
        positions = np.arange(past, past + length, dtype=np.int64)
        feed = {
            "inputs_embeds": embeds,
            "attention_mask": np.ones((1, past + length), dtype=np.int64),
            "position_ids": np.broadcast_to(positions, (4, 1, length)).copy(),
            "beam_idx": np.zeros(1, dtype=np.int32),
        }
        return {k: v for k, v in feed.items() if k in self.names}


# The CPU plugin keeps compiled kernels and their buffers for every prompt length it has run: a process fed
# prompts of many lengths grew by ≈1.6 MB per new length on the demo model, without bound (bench/soak.py).
# Prefill therefore runs in chunks whose lengths come from a fixed set — powers of two up to PREFILL_CHUNK —
# so the plugin sees at most log2(PREFILL_CHUNK) + 1 prompt shapes, whatever the traffic. Each extra chunk
# costs one more pass over the weights (a few per prompt); a prompt length already seen would have cost a
# kernel compile instead. The split depends only on the segment's length, so warm and cold runs of the same
# tokens stay bit-identical.
PREFILL_CHUNK = 256


def chunk_sizes(length: int, largest: int = PREFILL_CHUNK) -> list[int]:
    """`length` as full chunks of `largest` then the binary digits of the rest, largest first."""
    sizes = [largest] * (length // largest)
    rest = length % largest
    bit = largest // 2
    while rest:
        if rest >= bit:
            sizes.append(bit)
            rest -= bit
        bit //= 2
    return sizes


class ModelRunner(RunnerBase):
    def __init__(self, folder: ModelFolder | str, options: DeviceOptions | None = None, core: ov.Core | None = None):
        self.folder = folder if isinstance(folder, ModelFolder) else inspect_folder(folder)
        self.options = options or DeviceOptions()
        core = core or ov.Core()
        self.device = choose_device(self.options.device, visible_devices(core.available_devices))
        self.caps = device_caps(self.device, self.options)
        self.execution_path = "npuw_llm" if self.device.startswith("NPU") else "dynamic"
        self._init_conversation()
        model = self._read(core, self.folder.language_ir)
        self._check_inputs(model)
        self._load_vocabulary(model)
        slice_to_last_position(model)
        properties = compile_properties(self.device, self.options)
        started = time.perf_counter()
        try:
            compiled = core.compile_model(model, self.device, properties)
            if self.folder.layout == "vl":
                cpu_properties = compile_properties("CPU", self.options)
                embeddings = core.compile_model(self._read(core, self.folder.embeddings_ir), "CPU", cpu_properties)
        except RuntimeError as exc:
            raise DeviceError(f"{self.device} could not compile {self.folder.language_ir.name}: {first_line(exc)}") from None
        self.stats.compile_s = time.perf_counter() - started
        self._layout = _TextLayout(compiled) if self.folder.layout == "text" else _VisionLanguageLayout(compiled, embeddings)
        self._request = self._layout.request

    # ----- hooks -----
    def _clear_state(self) -> None:
        self._request.reset_state()

    def _capture_state(self) -> dict[str, np.ndarray]:
        return {s.name: s.state.data.copy() for s in self._request.query_state()}

    def _restore_state(self, states: dict[str, np.ndarray]) -> None:
        for state in self._request.query_state():
            # A copy: the plugin writes into the state it is given, and a snapshot may be restored again.
            state.state = ov.Tensor(states[state.name].copy())

    def _run(self, ids: np.ndarray, past: int) -> np.ndarray:
        # NPUW_LLM takes a prompt whole (it pads to its static length itself); dynamic shapes are chunked.
        sizes = [len(ids)] if self.execution_path == "npuw_llm" else chunk_sizes(len(ids))
        position = 0
        for size in sizes:
            self._request.infer(self._layout.inputs(ids[position : position + size], past + position))
            self.stats.infers += 1
            position += size
        return self._logits()

    def _start(self, token: int, past: int) -> None:
        self._request.start_async(self._layout.inputs(np.asarray([token], dtype=np.int64), past))

    def _wait(self) -> np.ndarray:
        self._request.wait()
        return self._logits()

    def _logits(self) -> np.ndarray:
        return self._request.get_tensor("logits").data[0, -1, : self.vocab_size].astype(np.float64)
