"""The static-shape runner: the export made stateless, compiled in a few fixed shapes, caches on the host.

Devices that need static shapes (the NPU) run this path ("static"); CPU and GPU can run it too, which
is how it is tested. Each variant computes a fixed number of new tokens (e.g. 64, 8 and 1) over a
KV window of fixed size W; a prompt of any length is cut greedily into those sizes, its last token
always alone (only the one-token variant has a logits output), so nothing is ever recompiled. Chunks
are never padded: a padded token would still pass through the DeltaNet layers and change their
recurrent and conv states.

Layout of one forward of n tokens after `past` tokens: the KV inputs hold the window (slots
[0, past) valid), the model appends the n new entries after the window, and the attention mask
[1, W + n] marks the valid slots plus the new ones; position ids are the true positions
past..past+n-1. The graph returns only the new KV entries, which the host writes into slots
[past, past + n). Snapshots are host copies of the caches (KV up to `past`), restored exactly.
"""

from __future__ import annotations

import time

import numpy as np
import openvino as ov

from ..compile.plan import CompilePlan
from ..compile.devices import DeviceCaps, DeviceOptions, npu_emulated
from ..compile.planner import plan_for
from ..compile.precision import gpu_precision, int8_activations_run, npu_precision, read_cpu_precision
from ..core.errors import DeviceError, SettingsError
from ..model.folder import ModelFolder, inspect_folder
from .base import RunnerBase, first_line, split_chunks
from ..graphs.static import CacheSpec, cache_specs, prepare_stateless, static_variant
from ..vision.device import apply_host, open_vision_encoder
from ..vision.feed import ChunkEmbedder, position_ids
from ..model.vision_tokens import IMAGE_PAD, Item


class _Variant:
    def __init__(self, compiled: ov.CompiledModel, tokens: int):
        self.tokens = tokens
        self.request = compiled.create_infer_request()


def segment_chunks(length: int, sizes: tuple[int, ...]) -> list[int]:
    """The chunks one prefill segment runs in: the tokens before its last cut greedily into the sizes,
    then the last token alone. Only the one-token variant returns logits (static_graph.static_variant)."""
    return split_chunks(length - 1, sizes) + [1]


class StaticRunner(RunnerBase):
    execution_path = "static"

    def __init__(self, folder: ModelFolder | str, options: DeviceOptions | None = None, core: ov.Core | None = None,
                 *, plan: CompilePlan | None = None):
        """plan: what to compile and how (the static path's); without one, planned here for `options`."""
        self.folder = folder if isinstance(folder, ModelFolder) else inspect_folder(folder)
        core = core or ov.Core()
        self._init_conversation()
        self.plan = plan or plan_for(self.folder, options or DeviceOptions(), core, static=True, notices=self.notices)
        self.options, self.device = self.plan.options, self.plan.device
        self.window = min(self.options.static_window, self.folder.context_length)
        self.chunks = tuple(sorted({c for c in self.options.static_chunks if c < self.window}, reverse=True))
        if 1 not in self.chunks:
            raise SettingsError(f"static_chunks must include 1 and sizes below the window of {self.window}")
        # Host caches: snapshots, prefix reuse and the KV window all live here.
        self.caps = DeviceCaps(self.device, snapshots=True, prefix_reuse=True, max_prompt_len=None, max_total_len=self.window)
        model = self._read(core, self.folder.language_ir)
        self._check_inputs(model)
        self._load_vocabulary(model)
        prepare_stateless(model, self.folder.layout)
        self._specs: list[CacheSpec] = cache_specs(model, self.window)
        hidden = self.folder.text_config.get("hidden_size")
        properties = self.plan.language.properties
        apply_host(core, self.plan.language)
        started = time.perf_counter()
        try:
            self._variants = {
                n: _Variant(core.compile_model(static_variant(model, self._specs, self.folder.layout, hidden, n, self.window), self.device, properties), n)
                for n in self.chunks
            }
            embeddings = None
            if self.folder.layout == "vl":
                assert self.plan.embeddings is not None, "a vision-language export's plan has its embeddings"
                embeddings = core.compile_model(self._read(core, self.folder.embeddings_ir), "CPU", self.plan.embeddings.properties)
        except RuntimeError as exc:
            raise DeviceError(f"{self.device} could not compile {self.folder.language_ir.name} (static shapes): {first_line(exc)}") from None
        self.stats.compile_s = time.perf_counter() - started
        family = self.device.split(".")[0]
        compiled = next(iter(self._variants.values())).request.get_compiled_model()
        # The host keeps the caches (in the export's f32): the KV precision is the host's, not a plugin's.
        self.precision = (
            npu_precision(core, self.plan.language.host_properties, emulated=npu_emulated() is not None) if family == "NPU"
            else gpu_precision(compiled) if family == "GPU"
            else read_cpu_precision(compiled, kv_cache="host",
                                    int8_activations=int8_activations_run(core, model, properties))
        )
        self._embed = None
        if embeddings is not None:
            if self.folder.has_vision:
                self.vision = open_vision_encoder(core, self.folder, self.options, self.notices, self.plan.vision)
            image_pad = self.tokenizer.special_id(IMAGE_PAD) if self.vision is not None else None
            self._embed = ChunkEmbedder(embeddings, self.vision, image_pad)
        self._caches = {s.input_name: np.zeros(s.shape, dtype=s.dtype) for s in self._specs}
        # The DeltaNet states are replaced wholesale each forward: the plugin writes them into a second
        # host buffer bound as the output, and the two buffers swap roles (no copy per step).
        self._spare = {s.input_name: np.zeros(s.shape, dtype=s.dtype) for s in self._specs if not s.is_kv}
        self._running: _Variant | None = None
        self._running_feed: dict[str, np.ndarray] | None = None
        self._running_past = 0

    # ----- feeding -----
    def _feed(self, ids: np.ndarray | list[Item], past: int, before: list[Item] | None = None) -> dict[str, np.ndarray]:
        """before: the items ahead of `ids` when they are not all in self.history yet (a prompt run in chunks)."""
        n = len(ids)
        if past + n > self.window:
            raise SettingsError(f"{past + n} tokens do not fit the static window of {self.window}")
        mask = np.zeros((1, self.window + n), dtype=np.int64)
        mask[0, :past] = 1
        mask[0, self.window:] = 1
        positions = np.arange(past, past + n, dtype=np.int64)
        feed: dict[str, np.ndarray] = {"attention_mask": mask}
        if self._embed is None:
            feed["input_ids"] = np.asarray(ids)[None, :]  # token ids (a text export): already an array
            feed["position_ids"] = positions[None, :]
        else:
            # Image tokens: the encoder's features as their embeddings, 3-D positions (which depend on the images before).
            feed["inputs_embeds"] = self._embed.embeds(ids)
            history = (self.history[:past] if before is None else before) if self.vision is not None else ()
            feed["position_ids"] = position_ids(ids, past, history)
        feed.update(self._caches)
        return feed

    def _bind_outputs(self, variant: _Variant) -> None:
        # Binding the spare state buffers as the requests' outputs (zero-copy) made buffers alternate between
        # being one request's output and the next one's input; the NPU-path tests then failed now and then with
        # wrong or NaN logits. The plugin's own outputs are copied instead (_collect), a few MB per step.
        return

    def _collect(self, variant: _Variant, past: int) -> np.ndarray | None:
        request, n = variant.request, variant.tokens
        for spec in self._specs:
            out = request.get_tensor(spec.output_name).data
            if spec.is_kv:
                self._caches[spec.input_name][:, :, past : past + n] = out
            else:
                name = spec.input_name
                if not np.shares_memory(out, self._spare[name]):  # a plugin that kept its own output buffer
                    np.copyto(self._spare[name], out)
                self._caches[name], self._spare[name] = self._spare[name], self._caches[name]
        if n > 1:
            return None  # prefill chunks have no logits output (static_graph.static_variant)
        return request.get_tensor("logits").data[0, -1, : self.vocab_size].astype(np.float64)

    # ----- hooks -----
    def _clear_state(self) -> None:
        # The KV window needs no clearing (the mask hides stale slots); the DeltaNet states start at zero.
        for spec in self._specs:
            if not spec.is_kv:
                self._caches[spec.input_name].fill(0)

    def _capture_state(self) -> dict[str, np.ndarray]:
        past = len(self.history)
        return {s.input_name: (self._caches[s.input_name][:, :, :past] if s.is_kv else self._caches[s.input_name]).copy() for s in self._specs}

    def _state_layout(self, length: int) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return {s.input_name: (np.dtype(s.dtype), (*s.shape[:2], length, *s.shape[3:]) if s.is_kv else tuple(s.shape))
                for s in self._specs}

    def _restore_state(self, states: dict[str, np.ndarray]) -> None:
        for spec in self._specs:
            saved = states[spec.input_name]
            if spec.is_kv:
                self._caches[spec.input_name][:, :, : saved.shape[2]] = saved
            else:
                np.copyto(self._caches[spec.input_name], saved)

    def _run(self, ids: np.ndarray | list[Item], past: int) -> np.ndarray:
        logits = None
        before = list(self.history[:past]) if self.vision is not None else None
        for n in segment_chunks(len(ids), self.chunks):
            variant = self._variants[n]
            self._bind_outputs(variant)
            # Inputs are copied into the request (not shared): see _bind_outputs.
            variant.request.infer(self._feed(ids[:n], past, before), share_inputs=False)
            self.stats.infers += 1
            logits = self._collect(variant, past)
            if before is not None:
                before.extend(ids[:n].tolist() if isinstance(ids, np.ndarray) else ids[:n])
            ids, past = ids[n:], past + n
        assert logits is not None  # _prefill never runs an empty chunk
        return logits

    def _start(self, token: int, past: int) -> None:
        variant = self._variants[1]
        self._bind_outputs(variant)
        # Kept until the wait: the request must never read memory the host has freed or reused meanwhile.
        self._running_feed = self._feed(np.asarray([token], dtype=np.int64), past)
        variant.request.start_async(self._running_feed, share_inputs=False)
        self._running, self._running_past = variant, past

    def _wait(self) -> np.ndarray:
        variant, self._running = self._running, None
        assert variant is not None, "_wait follows _start"
        variant.request.wait()
        self._running_feed = None
        logits = self._collect(variant, self._running_past)
        assert logits is not None, "a step is one token, which has logits"
        return logits
