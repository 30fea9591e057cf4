"""What every runner shares: loading checks, the token history, prefix reuse, snapshots, run-ahead steps.

A runner owns one conversation state. It remembers which tokens the state holds (`history`) and keeps
a few exact state snapshots, so a request that shares a prefix with an earlier one prefills only the
rest. The recurrent DeltaNet state cannot be rewound: going back means restoring a snapshot, and where
none fits (or the device has none) clearing and prefilling again. A request never runs an empty
prefill: a prompt that matches the history completely is recomputed from the last snapshot before its
end.

Subclasses say how state is held and how a forward runs (the stateful export's infer request, or host
caches fed to static-shape variants) through six small hooks; everything else lives here once.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import openvino as ov

from ..compile.devices import DeviceCaps, DeviceOptions
from ..core.errors import ContextLimitError, ModelError, SettingsError
from ..model.folder import ModelFolder
from ..compile.precision import Precision
from .prompt_cache import PromptCache, runner_identity
from ..model.tokenizer import ChatTokenizer
from ..model.vision_tokens import ImageToken, Item, has_images

if TYPE_CHECKING:
    from .mtp_head import MtpHead
    from ..vision.encoder import VisionEncoder

MAX_SNAPSHOTS = 4

REQUIRED_INPUTS = {
    "text": {"input_ids", "attention_mask", "position_ids"},
    "vl": {"inputs_embeds", "attention_mask", "position_ids"},
}


@dataclass(frozen=True)
class _Snapshot:
    states: dict[str, np.ndarray]
    logits: np.ndarray  # next-token logits at this point: a full match needs no forward at all


@dataclass(frozen=True)
class _Mark:
    past: int  # tokens the state held before the verify
    fed: int  # tokens the verify fed
    # the DeltaNet states before it (KV caches are trimmed instead); None: the verify left its tokens pending
    recurrent: dict[str, np.ndarray] | None


@dataclass
class RunnerStats:
    forwards: int = 0  # passes over new tokens since load: one per prefill segment, one per step
    infers: int = 0  # device calls: the static runner computes a segment in several fixed-size chunks
    last_prefill_tokens: int = 0  # tokens the last prefill actually computed
    last_prefill_reused: int = 0  # tokens the last prefill took from the existing/restored state
    last_prefill_s: float = 0.0  # wall time of the last prefill
    last_prefill_from_disk: int = 0  # of the reused tokens, how many came from the prompt cache on disk
    snapshots_restored: int = 0
    compile_s: float = 0.0  # wall time of compile_model (all variants) at load


class RunnerBase:
    """The shared conversation logic. Subclasses set the attributes below and implement the hooks."""

    folder: ModelFolder
    options: DeviceOptions
    device: str
    caps: DeviceCaps
    execution_path: str  # "dynamic", "static" or "npuw_llm": which path computes the results
    precision: Precision  # the arithmetic the compiled model runs, read back from it (engine/compile/precision.py)
    tokenizer: ChatTokenizer
    vocab_size: int
    logits_width: int
    vision: VisionEncoder | None = None  # where this runner can feed images (engine/vision/encoder.py)
    prompt_cache: PromptCache | None = None  # prefix states on disk, shared across processes (use_prompt_cache)
    _cache_identity = ""

    def _init_conversation(self) -> None:
        # Items: text ids, and image tokens naming their picture by digest (so prefix keys include the image).
        self.history: list[Item] = []
        self._snapshots: OrderedDict[tuple[Item, ...], _Snapshot] = OrderedDict()
        self._pending = False  # a start_step() not yet finished
        self._mark: _Mark | None = None  # where the last verify() started: what rewind() goes back to
        self.stats = RunnerStats()
        self.notices: list[str] = []  # things the user should see (e.g. a device fallback)
        # What `--draft auto` measured on this runner, kept for its next request: kind → engine/generation/drafts.
        # AutoState (held here, typed loosely: the runners sit below the generation layer)
        self.auto_states: dict = {}

    @property
    def verifies(self) -> bool:
        """A forward can return logits at several last positions and roll back (speculative decoding)."""
        return False

    def prepare_verify(self, width: int) -> None:
        """A drafted loop is about to verify `width` tokens at a time: a runner may prepare for that width (the CPU
        runner compiles its graph fixed at it, where its plan says so). Nothing here."""

    mtp: MtpHead | None = None  # the checkpoint's MTP draft head, where the export kept one and the runner runs it

    def hidden_rows(self, count: int) -> np.ndarray | None:
        """The last forward's final hidden states at its last `count` positions (what the MTP head reads); None here."""
        return None

    # ----- hooks -----
    def _clear_state(self) -> None:
        raise NotImplementedError

    def _capture_state(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _restore_state(self, states: dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    def _state_layout(self, length: int) -> dict[str, tuple[np.dtype, tuple[int, ...]]] | None:
        """The name, dtype and shape of each state _capture_state returns after `length` tokens (None: unknown,
        so a prompt-cache entry is checked without it)."""
        return None

    def _run(self, ids: np.ndarray | list[Item], past: int) -> np.ndarray:
        """Compute ids (token ids, or items with images) after `past` tokens of state; return the last position's logits (float64, real vocab)."""
        raise NotImplementedError

    def _start(self, token: int, past: int) -> None:
        raise NotImplementedError

    def _wait(self) -> np.ndarray:
        raise NotImplementedError

    def _run_counted(self, ids: np.ndarray, past: int, positions: int) -> np.ndarray:
        """One forward over ids after `past` tokens; the logits of its last `positions` positions [positions, vocab]."""
        raise NotImplementedError

    def _rollback_point(self, width: int) -> dict[str, np.ndarray] | None:
        """Before a verify of `width` tokens: a copy of the states a rollback cannot trim (the DeltaNet layers' recurrent
        and conv states), or None where the verify leaves its tokens pending until told how many were kept."""
        raise NotImplementedError

    def _roll_back(self, past: int, keep: int, recurrent: dict[str, np.ndarray] | None) -> int:
        """After a verify from `past` tokens, of which the first `keep` stay: KV caches trimmed, the recurrent states
        restored from `recurrent` (then it holds `past` tokens) or told to commit only `keep` (it holds past + keep).
        Returns how many of the kept tokens the state holds."""
        raise NotImplementedError

    # ----- loading checks shared by every runner -----
    @staticmethod
    def _read(core: ov.Core, xml) -> ov.Model:
        try:
            return core.read_model(xml)
        except RuntimeError as exc:
            raise ModelError(f"{xml}: OpenVINO cannot read it ({first_line(exc)})") from None

    def _check_inputs(self, model: ov.Model) -> None:
        names = {name for p in model.inputs for name in p.get_names()}
        missing = REQUIRED_INPUTS[self.folder.layout] - names
        if missing:
            raise ModelError(
                f"{self.folder.language_ir}: inputs {', '.join(sorted(missing))} missing; "
                "not a stateful optimum-intel Qwen3.5 export (export with --task text-generation-with-past)"
            )
        if not model.get_sinks():
            raise ModelError(f"{self.folder.language_ir}: the model has no state; export it with past (stateful)")

    def _load_vocabulary(self, model: ov.Model) -> None:
        try:
            shape = model.output("logits").get_partial_shape()
        except RuntimeError:
            raise ModelError(f"{self.folder.language_ir}: no 'logits' output") from None
        width = shape[shape.rank.get_length() - 1]
        if width.is_dynamic:
            raise ModelError(f"{self.folder.language_ir}: the logits width is not static")
        if width.get_length() != self.folder.vocab_size:
            raise ModelError(
                f"{self.folder.path / 'config.json'}: vocab_size {self.folder.vocab_size} does not match "
                f"the model's {width.get_length()} logits"
            )
        self.logits_width = width.get_length()
        self.tokenizer = ChatTokenizer(self.folder.tokenizer_json, logits_width=self.logits_width)
        # Ids past the tokenizer are padding rows of the head; they never take part in a softmax.
        self.vocab_size = self.tokenizer.size

    # ----- limits -----
    @property
    def context_length(self) -> int:
        limit = self.folder.context_length
        if self.caps.max_total_len is not None:
            limit = min(limit, self.caps.max_total_len)
        return limit

    def image_tokens(self, pixels: np.ndarray, max_pixels: int | None = None) -> list[ImageToken]:
        """An image's placeholder tokens for a prompt ([H, W, 3] uint8 RGB pixels); max_pixels: a pixel budget
        below the model's own (the picture is scaled into it)."""
        if self.vision is None:
            raise SettingsError(self._no_vision())
        return self.vision.tokens(pixels, max_pixels)

    def image_tokens_within(self, max_pixels: int | None = None) -> Callable[[np.ndarray], list[ImageToken]]:
        """image_tokens with a pixel budget fixed: what a chat prompt's builder calls for each picture."""
        return lambda pixels: self.image_tokens(pixels, max_pixels)

    def _no_vision(self) -> str:
        if not self.folder.has_vision:
            return f"{self.folder.name} cannot see images: the export has no vision encoder"
        return f"{self.folder.name} cannot see images on the {self.execution_path} execution path (use CPU or GPU)"

    def _items(self, ids: Sequence[Item]) -> list[Item]:
        items = [item if isinstance(item, ImageToken) else int(item) for item in ids]
        if self.vision is None and has_images(items):
            raise SettingsError(self._no_vision())
        return items

    def check_prompt(self, ids: Sequence[Item]) -> None:
        if len(ids) == 0:
            raise SettingsError("the prompt is empty")
        # An id past the table would make the embedding lookup read outside it: logits from whatever memory held.
        bad = next((i for i in ids if not isinstance(i, ImageToken) and not 0 <= i < self.vocab_size), None)
        if bad is not None:
            raise SettingsError(f"the prompt has token id {bad}, outside this model's 0..{self.vocab_size - 1}")
        if self.caps.max_prompt_len is not None and len(ids) > self.caps.max_prompt_len:
            raise ContextLimitError(
                f"the prompt has {len(ids)} tokens; {self.device} was compiled for at most {self.caps.max_prompt_len} "
                "(raise the NPU prompt limit in the settings and reload)"
            )
        if len(ids) >= self.context_length:
            raise ContextLimitError(
                f"the prompt has {len(ids)} tokens; the model's context limit is {self.context_length}"
            )

    # ----- state -----
    def reset(self) -> None:
        self.settle()
        self._mark = None
        self._clear_state()
        self.history = []

    def _restore(self, prefix: tuple[Item, ...]) -> np.ndarray:
        snapshot = self._snapshots[prefix]
        self._snapshots.move_to_end(prefix)
        self._restore_state(snapshot.states)
        self.history = list(prefix)
        self.stats.snapshots_restored += 1
        return snapshot.logits

    def _keep_snapshot(self, prefix: tuple[Item, ...], logits: np.ndarray) -> None:
        self._snapshots[prefix] = _Snapshot(self._capture_state(), logits.copy())
        self._snapshots.move_to_end(prefix)
        while len(self._snapshots) > MAX_SNAPSHOTS:
            self._snapshots.popitem(last=False)

    def use_prompt_cache(self, cache: PromptCache | None) -> None:
        """Keep the state after each shared prefix (a checkpoint before the prompt's end) on disk and take it
        from there in a later process. Only where snapshots are exact (caps.snapshots); elsewhere a no-op."""
        if cache is not None and not self.caps.snapshots:
            cache = None
        self.prompt_cache = cache
        self._cache_identity = runner_identity(self) if cache is not None else ""

    def _cacheable(self, prefix: Sequence[Item]) -> bool:
        return self.prompt_cache is not None and not has_images(prefix)

    def _resume_from_disk(self, ids: list[Item], checkpoints: Sequence[int], start: int) -> int:
        """Past `start`, restore the longest checkpoint prefix the prompt cache holds; return the new start."""
        cache = self.prompt_cache
        if cache is None:
            return start
        for cut in sorted((c for c in checkpoints if start < c < len(ids)), reverse=True):
            prefix = ids[:cut]
            if not self._cacheable(prefix):
                continue
            tokens = _text_ids(prefix)
            entry = cache.load(PromptCache.key(self._cache_identity, tokens), tokens, self._state_layout(len(tokens)))
            if entry is None:
                continue
            self._restore_state(entry.states)
            self.history = list(prefix)
            # in memory too: the next request in this process restores it without reading the file
            self._snapshots[tuple(prefix)] = _Snapshot(entry.states, entry.logits)
            self._snapshots.move_to_end(tuple(prefix))
            while len(self._snapshots) > MAX_SNAPSHOTS:
                self._snapshots.popitem(last=False)
            self.stats.last_prefill_from_disk = cut
            return cut
        return start

    def _persist(self, prefix: list[Item]) -> None:
        cache, tokens = self.prompt_cache, _text_ids(prefix)
        key = PromptCache.key(self._cache_identity, tokens)
        if cache is not None and not cache.has(key):
            snapshot = self._snapshots[tuple(prefix)]
            cache.store(key, tokens, snapshot.states, snapshot.logits)

    def clear_snapshots(self) -> None:
        self._snapshots.clear()

    def export_state(self) -> dict[str, np.ndarray]:
        """A copy of the state, which holds `history` (for a twin compile of the same model to adopt)."""
        self.settle()
        return self._capture_state()

    def adopt(self, ids: Sequence[Item], states: dict[str, np.ndarray], logits: np.ndarray) -> None:
        """Take over a state of this model holding `ids`, computed by another compile of it (e.g. an exact
        one's prompt state for a fast one), with its next-token logits: a later prefill of exactly `ids`
        restores it without a forward."""
        if not self.caps.snapshots:
            raise RuntimeError(f"{self.device} ({self.execution_path}) cannot take over a state")
        self.settle()
        key = tuple(self._items(ids))
        self._snapshots[key] = _Snapshot(states, logits.copy())
        self._snapshots.move_to_end(key)
        while len(self._snapshots) > MAX_SNAPSHOTS:
            self._snapshots.popitem(last=False)

    def _resume(self, ids: list[Item]) -> int:
        """Bring the state to the longest usable prefix of ids (strictly shorter); return its length."""
        if self.caps.prefix_reuse:
            history = self.history
            continuing = len(history) if len(history) < len(ids) and ids[: len(history)] == history else -1
            best = max(
                (p for p in self._snapshots if continuing < len(p) < len(ids) and tuple(ids[: len(p)]) == p),
                key=len,
                default=None,
            )
            if best is not None:
                self._restore(best)
                return len(best)
            if continuing > 0:
                return continuing
        self.reset()
        return 0

    # ----- forward -----
    def prefill(self, ids: Sequence[Item], checkpoints: Sequence[int] = ()) -> np.ndarray:
        """Make the state hold `ids` and return the next-token logits (float64, real vocabulary).

        The prompt is computed in chunks split at the checkpoints, and a snapshot (state + logits) is
        kept at each, so a later request sharing that prefix restores it. Splitting the same way
        whether or not a snapshot was used keeps warm and cold results bit-identical. A prompt equal to
        a snapshot's prefix restores it and costs no forward; otherwise a full match with the history
        recomputes from the last snapshot before its end, never from an empty chunk.
        """
        self.settle()
        started = time.perf_counter()
        try:
            return self._prefill(self._items(ids), checkpoints)
        finally:
            self.stats.last_prefill_s = time.perf_counter() - started

    def _prefill(self, ids: list[Item], checkpoints: Sequence[int]) -> np.ndarray:
        self.check_prompt(ids)
        self._mark = None
        self.stats.last_prefill_from_disk = 0
        key = tuple(ids)
        if self.caps.snapshots and key in self._snapshots:
            self.stats.last_prefill_reused, self.stats.last_prefill_tokens = len(ids), 0
            return self._restore(key).copy()
        start = self._resume(ids)
        if self.prompt_cache is not None:
            start = self._resume_from_disk(ids, checkpoints, start)
        self.stats.last_prefill_reused = start
        self.stats.last_prefill_tokens = len(ids) - start
        cuts = sorted({c for c in checkpoints if start < c < len(ids)}) + [len(ids)]
        position = start
        for cut in cuts:
            chunk = ids[position:cut]
            logits = self._run(chunk if has_images(chunk) else np.asarray(chunk, dtype=np.int64), position)
            self.stats.forwards += 1
            position = cut
            self.history = ids[:cut]
            if cut in checkpoints and self.caps.snapshots:
                self._keep_snapshot(tuple(ids[:cut]), logits)
                # a prefix a later prompt shares (not the prompt's own end) is worth keeping across processes
                if cut < len(ids) and self._cacheable(ids[:cut]):
                    self._persist(ids[:cut])
        return logits

    def step(self, token: int) -> np.ndarray:
        """Feed one token and return the next-token logits."""
        self.start_step(token)
        return self.finish_step()

    def start_step(self, token: int) -> None:
        """Start feeding one token without waiting: the device computes while the caller does host work
        (e.g. the previous token's logprobs). Exactly one finish_step() must follow before anything else."""
        if self._pending:
            raise RuntimeError("a step is already running")
        if len(self.history) + 1 >= self.context_length:
            raise ContextLimitError(f"the conversation reached the context limit of {self.context_length} tokens")
        self._start(int(token), len(self.history))
        self._mark = None
        self.stats.forwards += 1
        self.stats.infers += 1
        self.history.append(int(token))
        self._pending = True

    def verify(self, tokens: Sequence[int], positions: int) -> np.ndarray:
        """Feed `tokens` in one forward and return the next-token logits after each of the last `positions`
        of them ([positions, vocab], float64): a token and its drafts, checked at once. The state before it
        is marked: rewind() goes back there. Only where `verifies`."""
        if not self.verifies:
            raise RuntimeError(f"{self.device} ({self.execution_path}) cannot verify drafts")
        if not 1 <= positions <= len(tokens):
            raise ValueError(f"positions must be in 1..{len(tokens)} (got {positions})")
        self.settle()
        past = len(self.history)
        if past + len(tokens) >= self.context_length:
            raise ContextLimitError(f"the conversation reached the context limit of {self.context_length} tokens")
        self._mark = _Mark(past, len(tokens), self._rollback_point(len(tokens)))
        logits = self._run_counted(np.asarray(tokens, dtype=np.int64), past, positions)
        self.stats.forwards += 1
        self.stats.infers += 1
        self.history.extend(int(t) for t in tokens)
        return logits

    def rewind(self, keep: int = 0) -> list[int]:
        """Undo the last verify() but for its first `keep` tokens. Returns the kept tokens the state does not hold:
        where the verify left its tokens pending, none (the state and history hold the kept ones); else all of them,
        the state and history being as before the verify (a caller feeds them again with its next forward: no forward
        is spent on the replay alone)."""
        mark = self._mark
        if mark is None or len(self.history) != mark.past + mark.fed:
            raise RuntimeError("nothing to rewind: the state changed since the last verify")
        if not 0 <= keep <= mark.fed:
            raise ValueError(f"keep must be in 0..{mark.fed} (got {keep})")
        held = self._roll_back(mark.past, keep, mark.recurrent)
        fed = [t for t in self.history[mark.past :] if not isinstance(t, ImageToken)]  # verify fed token ids only
        self.history = self.history[: mark.past + held]
        self._mark = None
        return fed[held:keep]

    def settle(self) -> None:
        """A step a caller started and abandoned completes first: the state then matches the history."""
        if self._pending:
            self.finish_step()

    def finish_step(self) -> np.ndarray:
        """Wait for the step start_step() began and return its next-token logits."""
        self._pending = False
        return self._wait()


def split_chunks(length: int, sizes: Sequence[int]) -> list[int]:
    """Cut `length` tokens greedily into the given sizes (largest first; sizes include 1)."""
    pieces = []
    for size in sorted(sizes, reverse=True):
        count, length = divmod(length, size)
        pieces += [size] * count
    return pieces


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _text_ids(prefix: Sequence[Item]) -> list[int]:
    """A prefix the prompt cache keeps (no images, see _cacheable) as the token ids it is."""
    return [item for item in prefix if not isinstance(item, ImageToken)]
