"""The dynamic runner: the stateful export compiled as it is, its state kept by the infer request.

CPU and GPU run this path ("dynamic"); on the NPU the same class compiles through NPUW_LLM
("npuw_llm"), which hides the DeltaNet state (no snapshots) and has a static prompt limit. The
conversation logic (history, prefix reuse, snapshots, run-ahead steps) is in runner_base.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace

import numpy as np
import openvino as ov

from ..compile.plan import CompilePlan
from ..compile.devices import DeviceOptions, device_caps, npu_emulated
from ..core.errors import DeviceError, ModelError
from ..compile.probe import safe_compile  # never a compile that killed a test process, or one OpenVINO dies of
from ..graphs.decode import one_token_deltanet
from ..graphs.few_tokens import FEW_TOKENS
from ..graphs.lazy_commit import commit_lazily
from ..graphs.one_token import fixed_width_graph
from ..graphs.int8_pieces import DESCRIPTION as PIECES_DESCRIPTION, rewrite_int8_projections
from ..graphs.logits import (LAST_HIDDEN, LOGITS_POSITIONS, expose_hidden, lm_head_weight, slice_to_counted_positions,
                             slice_to_last_position)
from ..kernels.adoption import adopt as adopt_kernel, route as route_kernel
from ..kernels import verdicts as kernel_verdicts
from ..kernels.adoption import KernelPlan, asked_for as kernel_asked_for, without_cache_if_routed
from ..kernels import native_steps
from ..kernels.native_op import description as native_description
from ..model.folder import ModelFolder, inspect_folder
from .mtp_head import MtpHead, draft_vocabulary, load_head
from ..compile.planner import plan_for
from ..compile.precision import (cpu_capabilities, draft_properties, gpu_precision, int8_activations_run, npu_precision,
                                 read_cpu_precision)
from .prefill_chunks import chunk_sizes, prefill_plan
from .base import RunnerBase, RunnerStats, first_line
from .lazy_verify import LazyVerifyRequest
from .input_layouts import TextLayout, VisionLanguageLayout
from .step_request import StepRequest
from ..vision.device import apply_host, open_vision_encoder
from ..model.vision_tokens import IMAGE_PAD, Item

__all__ = ["ModelRunner", "RunnerStats"]


def _loaded_from_cache(compiled: ov.CompiledModel) -> bool:
    try:
        return bool(compiled.get_property("LOADED_FROM_CACHE"))
    except RuntimeError:  # a plugin without the property
        return False


def _slice_head(model: ov.Model, execution_path: str) -> None:
    if execution_path == "npuw_llm":
        slice_to_last_position(model)  # NPUW_LLM reshapes the model itself: no extra input
    else:
        # Logits at the last N positions, N fed per forward: 1 for prefill and steps, k + 1 to verify k drafts.
        slice_to_counted_positions(model)


def _head_weight(model: ov.Model) -> tuple[ov.Output, bool] | None:
    """The lm head's weight for the draft head, or None where it cannot be found (load_head then says why)."""
    try:
        return lm_head_weight(model)
    except ModelError:
        return None


def _as_list(items) -> list[Item]:
    return items.tolist() if isinstance(items, np.ndarray) else list(items)


class ModelRunner(RunnerBase):
    _model: ov.Model | None  # the IR while a twin may compile it again (None: imported from the compiled cache)
    _embeddings: ov.CompiledModel | None  # the text embeddings of a vision-language export
    _layout: TextLayout | VisionLanguageLayout

    # Verify forwards' own compile (prepare_verify), made once a request drafts; the width it is fixed at (or was
    # refused at: not tried again)
    _verifier: StepRequest | None = None
    _verify_width = 0
    # Whether the one-token steps run our native int8 operation, and why (_one_token_steps)
    native_steps = False
    native_note = ""
    _unpieced: ov.Model | None = None  # the graph before the integer pieces, until the native steps are timed on it

    def __init__(
        self, folder: ModelFolder | str, options: DeviceOptions | None = None, core: ov.Core | None = None,
        *, plan: CompilePlan | None = None, _twin_of: ModelRunner | None = None,
    ):
        """plan: what to compile and how (engine/runners/choice.measured_plan measures --fast first); without one, the
        plan for `options` from what this machine measured so far (engine/compile/planner.plan_for: it never measures)."""
        self.folder = folder if isinstance(folder, ModelFolder) else inspect_folder(folder)
        core = core or ov.Core()
        self._init_conversation()
        self._stepper: StepRequest | None = None  # one-token steps' own compile (_compile_step), where planned
        self.plan = plan or plan_for(self.folder, options or DeviceOptions(), core, notices=self.notices)
        self.options, self.device, self.execution_path = self.plan.options, self.plan.device, self.plan.path
        self.caps = device_caps(self.device, self.options)
        # How prompt segments are split (engine/runners/prefill_chunks.py); prefill_chunk None: one infer per segment,
        # the bench's peer for the chunking.
        self.prefill_chunk, self.prefill_base = prefill_plan(self.folder.text_config)
        # A twin compiles the parent's already checked and sliced ov.Model on the same Core (see twin()), or reads
        # the IR again where the parent let it go (imported from the compiled cache, or rewritten in integer pieces:
        # below) and edits it as its own plan says.
        model = _twin_of._model if _twin_of is not None else None
        fresh = model is None
        if fresh:
            model = self._read(core, self.folder.language_ir)
            self._check_inputs(model)
        self._load_vocabulary(model)  # before the slice: it names a missing logits output plainly
        # The MTP draft head reads the last hidden state at each position with logits (engine/runners/mtp_head.py); dynamic
        # path only, where drafts are verified. A twin drafts with its parent's head.
        parent_head = getattr(_twin_of, "mtp", None)
        wants_mtp = fresh and parent_head is None and self.folder.mtp_ir is not None and self.execution_path == "dynamic"
        self.int8_pieces = 0  # int8 MatMuls computed in integer pieces (_edit_graph; a twin of a parent's model: none)
        if fresh:
            self._unpieced = self._edit_graph(model, wants_mtp or parent_head is not None, keep_unpieced=True)
        self.kernel_plan: KernelPlan = self._route_kernel(model, core, _twin_of)
        self._core, self._model = core, model
        # Every property is the plan's (engine/compile/planner.py), --fast's measured choice included.
        apply_host(core, self.plan.language)
        started = time.perf_counter()
        try:
            compiled, properties = safe_compile(self, model, without_cache_if_routed(self.plan.language.properties, model),
                                                self.plan.twin)
            if self.folder.layout == "vl" and _twin_of is not None:
                embeddings = _twin_of._embeddings  # one table lookup: the exact one serves both
            elif self.folder.layout == "vl":
                assert self.plan.embeddings is not None, "a vision-language export's plan has its embeddings"
                embeddings = core.compile_model(self._read(core, self.folder.embeddings_ir), "CPU", self.plan.embeddings.properties)
        except RuntimeError as exc:
            raise DeviceError(f"{self.device} could not compile {self.folder.language_ir.name}: {first_line(exc)}") from None
        self.stats.compile_s = time.perf_counter() - started
        self.compiled = compiled
        family = self.device.split(".")[0]
        self.precision = (
            npu_precision(core, self.plan.language.host_properties, emulated=npu_emulated() is not None) if family == "NPU"
            else gpu_precision(compiled) if family == "GPU"
            else read_cpu_precision(compiled, int8_activations=int8_activations_run(core, model, properties))
        )
        if _loaded_from_cache(compiled) or self.int8_pieces:
            # The imported model holds its own weights; the IR's memory-mapped weights were read only to hash the
            # model for the cache. Kept, they would be resident twice (0.8B int8: +717 MiB RSS once a warm start
            # has decided). The integer pieces' i8 weights are a copy of ours the compiled model has its own of
            # (+0.75 GiB at 0.8B): a twin reads the IR again.
            self._model = None
        self._embeddings = embeddings if self.folder.layout == "vl" else None
        if self.int8_pieces:
            self.precision = replace(self.precision, projections=PIECES_DESCRIPTION)
        self.mtp = self._load_mtp(core, model, properties) if wants_mtp else parent_head
        self._hidden_fresh = False  # whether the request's last_hidden output belongs to the last forward
        if _twin_of is not None:
            self.vision = _twin_of.vision
        elif self.folder.has_vision:
            self.vision = open_vision_encoder(core, self.folder, self.options, self.notices, self.plan.vision)
        if self.folder.layout == "text":
            self._layout = TextLayout(compiled)
        else:
            image_pad = self.tokenizer.special_id(IMAGE_PAD) if self.vision is not None else None
            self._layout = VisionLanguageLayout(compiled, embeddings, self.vision, image_pad)
        self._take_request()
        self._properties = properties  # what the side compiles (steps, verifies) are compiled with too
        self._adopt_kernel(compiled)
        if self.plan.one_token_steps and not self.kernel_plan.routed:  # routed, our kernel takes them (or _adopt_kernel)
            self._stepper = self._one_token_steps(model)  # one-token steps on a compile of their own

    def _edit_graph(self, model: ov.Model, hidden: bool, keep_unpieced: bool = False) -> ov.Model | None:
        """The load-time edits of a freshly read IR: the counted head, the hidden-state output, the decode step, and
        the integer pieces where planned. keep_unpieced: returns a copy made before the pieces (its constants shared,
        not copied) where our native steps will be timed against theirs, else None."""
        _slice_head(model, self.execution_path)
        if hidden:
            expose_hidden(model)
        if self.device.startswith("CPU"):
            # A one-token step of each DeltaNet layer as matrix-vector products; prefill chunks keep the plugin's
            # fused kernel (engine/graphs/decode.py). CPU only: the routing relies on the CPU plugin skipping a node
            # with an empty input.
            one_token_deltanet(model)
        # The draft head shares the lm head's weights as exported: taken before the pieces replace its MatMul.
        self._lm_head = _head_weight(model) if hidden else None
        unpieced = None
        if self.plan.integer_pieces and not kernel_asked_for():  # our int8 kernel, where asked for, takes them instead
            if keep_unpieced and self.plan.one_token_steps and native_steps.runner_reason(self.device, self.options.exact) is None:
                unpieced = model.clone()
            self.int8_pieces = rewrite_int8_projections(model)
        return unpieced

    def _one_token_steps(self, model: ov.Model) -> StepRequest | None:
        """The one-token step compile: with our native int8 operation where it can run and measured faster here
        (engine/kernels/native_steps.py), else the plugin's."""
        # Where the integer pieces took the int8 MatMuls, ours is timed against them on the graph as it was before them
        source, self._unpieced = self._unpieced or model, None

        def key(isa: str) -> str:
            return f"{self._kernel_key(self._core)}/native-{isa}-vs-{'pieces' if self.int8_pieces else 'widened'}"

        chosen = native_steps.adopt(source, self.device, self.options.exact, lambda: self._compile_step(model, 1),
                                    lambda isa: self._compile_step(source, 1, native=isa), self._scratch_step,
                                    lambda isa: kernel_verdicts.known(self, key(isa)),
                                    lambda isa, won: kernel_verdicts.keep(self, key(isa), won))
        self.native_note, self.native_steps = chosen.note, chosen.native
        if chosen.native:  # prompts keep the plan's projections (the pieces' or the plugin's)
            ours = native_description(chosen.isa)
            self.precision = replace(self.precision, projections="; ".join(filter(None, (self.precision.projections, ours))))
        return chosen.steps

    def _compile_step(self, model: ov.Model, tokens: int, native: str = "") -> StepRequest | None:
        """The edited graph fixed at `tokens` tokens (engine/graphs/one_token.py), compiled as the runner's own was. One
        that does not compile is a notice: those forwards then run on the runner's compile. native: with our native
        operations, the int8 projections on that instruction set (native_steps.native_step_graph); None where the
        graph has no int8 projection."""
        try:
            graph = fixed_width_graph(model, tokens)
            weights = native_steps.native_step_graph(graph, native) if native else None
            if native and weights is None:
                return None
            pending = commit_lazily(graph, tokens) if tokens > 1 and self.plan.lazy_commits else []
            compiled, _ = safe_compile(self, graph, self._properties, self.plan.twin)
        except RuntimeError as exc:
            what = "one-token steps" if tokens == 1 else f"{tokens}-token verifies"
            if not native:  # the native one's failure is the adoption's note: the plugin's steps are compiled instead
                self.notices.append(f"{what} run on the main compile: their own did not compile ({first_line(exc)})")
            return None
        step = LazyVerifyRequest(compiled, pending, tokens) if pending else StepRequest(compiled)
        step.constants_memory = weights  # the native operations' weights: the compiled graph's constants share this buffer
        return step

    def prepare_verify(self, width: int) -> None:
        """Verify forwards of `width` tokens (a drafted loop's fixed width) on a compile of their own, where the plan
        says so: made here, once (the IR read and edited again where the runner let its model go)."""
        if not self.plan.own_verifies or self.kernel_plan.routed or width == self._verify_width or not 2 <= width <= FEW_TOKENS:
            return
        if self._verifier is not None:
            self._verifier.give_back(self._request)
        self._verifier, self._verify_width = None, width
        # the plugin's projections: our native operation measured slower from two tokens on (BENCHMARKS.md)
        self._verifier = self._compile_step(self._model if self._model is not None else self._edited_again(), width)

    def _edited_again(self) -> ov.Model:
        """The IR read and edited as at load (its graph edits only: what they noted about the runner stays)."""
        noted = self._lm_head, self.int8_pieces
        model = self._read(self._core, self.folder.language_ir)
        self._edit_graph(model, self.mtp is not None)
        self._lm_head, self.int8_pieces = noted
        return model

    @property
    def compiles(self) -> tuple[ov.CompiledModel, ...]:
        """Every compile of the language model that runs forwards: its own, the one-token steps' and the verifies' where
        planned."""
        return (self.compiled, *(side.compiled for side in self._sides()))

    def _sides(self) -> tuple[StepRequest, ...]:
        return tuple(side for side in (self._stepper, self._verifier) if side is not None)

    def _main(self) -> ov.InferRequest:
        """The runner's own infer request, holding the conversation's state (moved back from a side compile's)."""
        for side in self._sides():
            side.give_back(self._request)
        return self._request

    def _holding(self, side: StepRequest) -> ov.InferRequest:
        """`side`'s request, holding the conversation's state (moved from wherever it is)."""
        for other in self._sides():
            if other is not side:
                other.give_back(self._request)
        return side.take(self._request)

    def _live(self) -> ov.InferRequest:
        """The request holding the state now, without moving it."""
        return next((side.request for side in self._sides() if side.live), self._request)

    def _load_mtp(self, core: ov.Core, model: ov.Model, properties: dict) -> MtpHead | None:
        """The draft head on this runner's device, compiled as the main model is but in the CPU's fastest float
        arithmetic and over the most frequent ids (engine/runners/mtp_head.py: it only drafts, so both change which
        drafts are proposed, never which tokens are kept). A head that cannot load is a notice: the model runs without
        it (--draft mtp then says so)."""
        embeddings = self._read(core, self.folder.embeddings_ir) if self.folder.embeddings_ir is not None else None
        if self.device.startswith("CPU"):  # drafts only: the CPU's fastest float arithmetic, stated
            properties = draft_properties(properties, cpu_capabilities(core))
        try:
            # the head's rows can be cut only where it is stored [vocabulary, hidden] (as optimum exports it)
            vocabulary = draft_vocabulary(self.vocab_size) if self._lm_head is not None and self._lm_head[1] else None
            return load_head(core, self.folder.mtp_ir, model, embeddings, self.device, properties, self.vocab_size,
                             vocabulary, head=self._lm_head)
        except (RuntimeError, ModelError) as exc:
            self.notices.append(f"the MTP draft head was not loaded: {first_line(exc)}")
            return None
        finally:
            self._lm_head = None  # the head holds what it needs

    def hidden_rows(self, count: int) -> np.ndarray | None:
        """The main model's last hidden state at the last `count` positions of the last forward ([count, H]); None
        where the runner has no MTP head or no forward ran since the state was restored."""
        if self.mtp is None or not self._hidden_fresh:
            return None
        return self._last.get_tensor(LAST_HIDDEN).data[0, -count:].copy()

    def _take_request(self) -> None:
        """The layout's infer request, and its states' dtypes and shapes while it is fresh (before any infer): what
        a prompt-cache entry must match (_state_layout)."""
        self._request = self._layout.request
        self._last = self._request  # the request of the last forward: its logits and hidden states are read
        self._fresh_states = self._states_now() if self.caps.snapshots else {}

    def _route_kernel(self, model: ov.Model, core: ov.Core, twin_of: ModelRunner | None) -> KernelPlan:
        """The int8 projections routed to our kernel (engine/kernels) unless it measured slower here before."""
        return route_kernel(model, self.device, self.options.exact, twin_of.kernel_plan if twin_of else None,
                            lost_before=self._kernel_verdict(core) is False)

    def _adopt_kernel(self, compiled: ov.CompiledModel) -> None:
        """Exact few-token infers through our int8 kernel where it can run and measured faster (engine/kernels); a
        twin compiles its parent's model, routed already, and feeds it 0 unless it is exact too. Where the plan has
        one-token steps, the kernel is timed against them (what the runner runs without it), and where it loses they
        are this runner's steps."""
        plain: StepRequest | None = None

        def plain_steps() -> ov.CompiledModel | None:
            nonlocal plain
            if self.plan.one_token_steps:  # the IR read again: the runner's model is routed
                plain = self._compile_step(self._edited_again(), 1)
            return plain.compiled if plain is not None else None

        adoption = adopt_kernel(self.kernel_plan, compiled, self._scratch_step, won_before=self._kernel_verdict(self._core) is True,
                                plain=plain_steps)
        if adoption.measured:  # kept for later runs, which then compile only the path that won
            kernel_verdicts.keep(self, self._kernel_key(self._core), bool(adoption.tokens))
        self.kernel_note = adoption.note
        self._layout.kernel_tokens[0] = adoption.tokens
        if adoption.tokens:
            self.precision = replace(self.precision, projections=self.kernel_plan.description)
        elif plain is not None:
            self._stepper = plain

    @property
    def verifies(self) -> bool:
        return LOGITS_POSITIONS in self._layout.names  # the counted head (not on the NPU's NPUW_LLM path)

    def _kernel_key(self, core: ov.Core) -> str:
        threads = int(core.get_property("CPU", "INFERENCE_NUM_THREADS") or 0) if self.device.startswith("CPU") else 0
        return kernel_verdicts.verdict_key(self.folder.path, self.device, threads or len(os.sched_getaffinity(0)))

    def _kernel_verdict(self, core: ov.Core) -> bool | None:
        """What the kernel's adoption measured for this model here before (None: never, or not an exact CPU runner)."""
        if not (self.device.startswith("CPU") and self.options.exact) or not kernel_asked_for():
            return None  # no file to read, no key to hash, where the kernel is not asked for
        return kernel_verdicts.known(self, self._kernel_key(core))

    def _scratch_step(self, past: int) -> dict[str, np.ndarray]:
        """A one-token feed at position `past`, for timing on a request of its own."""
        return self._layout.inputs(np.zeros(1, dtype=np.int64), past, ())

    def twin(self, options: DeviceOptions, extra: dict[str, object] | None = None) -> ModelRunner:
        """The same model compiled again on the same device with other options (plus `extra` compile
        properties), from the same ov.Model on the same Core so the plugin can share what it does not
        repack; the embeddings and the vision encoder are this runner's. Its conversation is its own. Without `extra`
        it is a runner of these options (--fast: the measured choice); with it, a twin's plan: those properties."""
        plan = plan_for(self.folder, replace(options, device=self.device), self._core, overrides=extra)
        return ModelRunner(self.folder, core=self._core, plan=plan, _twin_of=self)

    # ----- hooks -----
    def _clear_state(self) -> None:
        self._request.reset_state()
        for side in self._sides():
            side.forget()

    def _capture_state(self) -> dict[str, np.ndarray]:
        return {s.name: s.state.data.copy() for s in self._main().query_state()}

    def _states_now(self) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        """Each state's dtype and shape; on a fresh request a 0 where a size grows (batch on axis 0, else the sequence)."""
        return {s.name: (s.state.element_type.to_dtype(), tuple(s.state.shape)) for s in self._request.query_state()}

    def _state_layout(self, length: int) -> dict[str, tuple[np.dtype, tuple[int, ...]]] | None:
        if not self._fresh_states:
            return None
        return {name: (dtype, tuple((1 if axis == 0 else length) if size == 0 else size for axis, size in enumerate(shape)))
                for name, (dtype, shape) in self._fresh_states.items()}

    def _restore_state(self, states: dict[str, np.ndarray]) -> None:
        self._hidden_fresh = False
        for side in self._sides():
            side.forget()  # every state is overwritten here
        for state in self._request.query_state():
            # The snapshot's own memory: set_state copies it in (the plugin never writes into what it is given:
            # tests/test_runner.py checks it, as a snapshot may be restored again). A copy here cost a second pass.
            state.state = ov.Tensor(states[state.name], shared_memory=True)

    def _run(self, ids: np.ndarray | list[Item], past: int) -> np.ndarray:
        # NPUW_LLM takes a prompt whole (it pads to its static length itself); dynamic shapes are chunked.
        one_shot = self.execution_path == "npuw_llm" or self.prefill_chunk is None
        sizes = [len(ids)] if one_shot else chunk_sizes(len(ids), self.prefill_chunk, self.prefill_base)
        position = 0
        request = self._last = self._main()
        for size in sizes:
            # The items before the chunk: image positions depend on the images earlier in the prompt.
            before = self.history[:past] + _as_list(ids[:position]) if self.vision is not None else ()
            request.infer(self._layout.inputs(ids[position : position + size], past + position, before))
            self.stats.infers += 1
            position += size
        self._hidden_fresh = True
        return self._logits()

    def _start(self, token: int, past: int) -> None:
        request = self._holding(self._stepper) if self._stepper is not None else self._request
        self._last = request
        feed = self._layout.inputs(np.asarray([token], dtype=np.int64), past, self.history)
        if self._stepper is not None:  # one-token steps compiled unrouted beside a routed model take no kernel input
            feed = {name: value for name, value in feed.items() if name in self._stepper.inputs}
        request.start_async(feed)

    def _wait(self) -> np.ndarray:
        self._last.wait()
        self._hidden_fresh = True
        return self._logits()

    def _verify_request(self, width: int) -> ov.InferRequest:
        """The request a verify of `width` tokens runs on (its own compile's at the drafts' width), holding the state."""
        verifier = self._verifier if self._verifier is not None and width == self._verify_width else None
        return self._holding(verifier) if verifier is not None else self._main()

    def _lazy(self, request: ov.InferRequest) -> LazyVerifyRequest | None:
        verifier = self._verifier
        return verifier if isinstance(verifier, LazyVerifyRequest) and request is verifier.request else None

    def _run_counted(self, ids: np.ndarray, past: int, positions: int) -> np.ndarray:
        # start_async + wait, not infer(): on the demo model a synchronous infer of the same feed measured 5-8 ms
        # against ~1 ms (the plugin's executor thread instead of the caller's; bench/w_draft --task costs)
        request = self._last = self._verify_request(len(ids))
        request.start_async(self._layout.inputs(ids, past, self.history[:past], positions))  # (+ the pending chunk)
        request.wait()
        lazy = self._lazy(request)
        if lazy is not None:
            lazy.received()
        self._hidden_fresh = True
        return request.get_tensor("logits").data[0, -positions:, : self.vocab_size].astype(np.float64)

    def _rollback_point(self, width: int) -> dict[str, np.ndarray] | None:
        # the state moved first to where the verify runs (consecutive verifies of a drafted loop never move it)
        request = self._verify_request(width)
        if self._lazy(request) is not None:
            return None  # the verify leaves its tokens pending: nothing to copy
        return {s.name: s.state.data.copy() for s in request.query_state() if not is_kv_state(s.name)}

    def _roll_back(self, past: int, keep: int, recurrent: dict[str, np.ndarray] | None) -> int:
        request = self._live()  # the request the verify ran on
        lazy = self._lazy(request)
        if recurrent is None and lazy is None:
            raise RuntimeError("nothing to rewind: the state moved since the last verify")
        held = keep if recurrent is None else 0
        for state in request.query_state():
            if is_kv_state(state.name):
                # [B, heads, seq, dim]; shared: the trimmed copy is made here, set_state copies it in
                state.state = ov.Tensor(np.ascontiguousarray(state.state.data[:, :, : past + held]), shared_memory=True)
            elif recurrent is not None:
                state.state = ov.Tensor(recurrent[state.name], shared_memory=True)
        if lazy is not None:
            lazy.keep(keep)  # the next forward commits these first; the rest of the chunk is dropped
        return held

    def _logits(self) -> np.ndarray:
        return self._last.get_tensor("logits").data[0, -1, : self.vocab_size].astype(np.float64)


def is_kv_state(name: str) -> bool:
    """A full-attention layer's key or value cache (trimmed on a rollback); the rest are DeltaNet conv/ssm states."""
    return ".key." in name or ".value." in name or name.endswith((".key", ".value"))
