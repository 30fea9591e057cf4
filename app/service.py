"""The decision services: one loaded model (EngineService) or a server (RemoteService), each serialising
its requests.

Front ends (CLI, GUI worker, API server) hold a `DecisionService` and ask it for decisions and for its
`EngineInfo`; only a local service also generates text (chat/completions), which `info.kind` tells.
Nothing here knows who asked.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Generator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from decider.engine.model.chat_template import Message, build_chat_prompt
from decider.engine.decisions.decide import DecisionRequest, DecisionResult, Progress, decide
from decider.engine.compile.devices import DeviceOptions, npu_emulated
from decider.engine.generation.generate import Completion, Delta, GenerationRequest, generate, stream_generation
from decider.engine.core.info import LOCAL_CONSTRAINT, EngineInfo
from decider.engine.core.logprobs import VOCABULARY
from decider.engine.runners.prompt_cache import PromptCache
from decider.engine.runners.choice import open_runner
from decider.engine.runners.scoring import PromptScorer, PromptScores
from decider.engine.remote.engine import RemoteConfig, RemoteEngine
from decider.engine.core.settings import SamplingSettings
from decider.engine.model.template_check import differences_note, template_differences
from decider.engine.decisions.tool_decide import decide_tools
from decider.engine.constrained.tools import Tool

from .config import cache_dir
from .history import HistoryStore
from .machine_capture import apply as apply_machine_budget, stored as stored_budget

log = logging.getLogger("decider")


class DecisionService(Protocol):
    """What every front end may ask of a decision engine, local or remote."""

    history: HistoryStore | None  # every decision is recorded here when set

    @property
    def model_name(self) -> str:
        """The name history and calibration are filed under."""
        ...

    @property
    def defaults(self) -> SamplingSettings:
        """The sampling settings a request starts from."""
        ...

    @property
    def info(self) -> EngineInfo:
        """Which engine this is and how exact its logprobs are."""
        ...

    def decide(
        self, request: DecisionRequest, should_stop: Callable[[], bool] | None = None, source: str = "app",
        progress: Progress | None = None,
    ) -> DecisionResult: ...


class EngineService:
    """A local model: decisions, and text generation for the API and the CLI."""

    def __init__(self, model_dir: str | Path, options: DeviceOptions | None = None, history: HistoryStore | None = None,
                 prompt_cache: PromptCache | None = None):
        # AUTO falls back NPU → GPU → CPU on a compile failure; runner.notices says what happened.
        self.runner = open_runner(model_dir, options)
        self.runner.use_prompt_cache(prompt_cache)  # shared contexts across processes (exact runners only)
        self.lock = threading.Lock()
        self.history = history  # every decision is recorded here when set
        self._scorer: PromptScorer | None = None  # compiled on the first echo request only
        # How prompt logprobs are normalised unless a request says (engine/core/logprobs.py NORMALIZATIONS).
        self.logprob_normalization = VOCABULARY
        # The folder's own chat template against Decider's rendering, once at load (engine/model/template_check.py)
        self.template_note = differences_note(template_differences(self.runner.folder.path, self.runner.tokenizer))
        # This machine's capture budget for the model, where `decider doctor --tune` measured one (app/machine_capture.py)
        self.capture_budget = stored_budget(self.runner, cache_dir()) if self.runner.vision is not None else None

    @property
    def model_name(self) -> str:
        return self.runner.folder.name

    @property
    def info(self) -> EngineInfo:
        # Exact only where the compiled model really runs f32 (read back, engine/compile/precision.py): never a real NPU,
        # never a fast compile, whatever the options asked for.
        precision = self.runner.precision
        emulated = npu_emulated()
        on_npu = self.runner.device.split(".")[0] == "NPU"
        return EngineInfo(
            kind="local", model=self.model_name, logprobs="exact" if precision.exact else "reduced",
            reduced_by=None if precision.exact else precision.label, precision=precision.label,
            emulated=f"NPUW on {emulated}" if on_npu and emulated else None,
            constraint=LOCAL_CONSTRAINT, device=self.runner.device, execution_path=self.runner.execution_path,
            template=self.template_note,
        )

    @property
    def defaults(self) -> SamplingSettings:
        return SamplingSettings.for_model(self.runner.folder.generation_config)

    def completion_request(
        self, prompt: str, sampling: SamplingSettings, max_tokens: int, logprobs: int | None, stop: tuple[str, ...] = ()
    ) -> GenerationRequest:
        ids = self.runner.tokenizer.encode_raw(prompt)
        return GenerationRequest(tuple(ids), sampling, max_tokens, think=False, top_logprobs=logprobs, stop=stop,
                                 end_of_turn_entry=True)

    def chat_request(
        self,
        messages: list[Message],
        think: bool,
        sampling: SamplingSettings,
        max_tokens: int,
        top_logprobs: int | None,
        stop: tuple[str, ...] = (),
        tools: tuple[Tool, ...] = (),
        image_pixels: int | None = None,
    ) -> GenerationRequest:
        """image_pixels: the pictures' pixel budget (None: the model's own)."""
        see = self.runner.image_tokens_within(image_pixels)
        prompt = build_chat_prompt(self.runner.tokenizer, messages, think, see=see, tools=tools)
        # A snapshot at the prompt's end too: another draw from the same prompt (n > 1, the next request) costs no prefill.
        return GenerationRequest(
            tuple(prompt.ids), sampling, max_tokens, think=think, top_logprobs=top_logprobs, stop=stop,
            checkpoints=(prompt.checkpoint, len(prompt.ids)),
        )

    def run(self, request: GenerationRequest, should_stop: Callable[[], bool] | None = None) -> Completion:
        with self.lock:
            return generate(self.runner, request, should_stop=should_stop)

    def stream(
        self, request: GenerationRequest, should_stop: Callable[[], bool] | None = None
    ) -> Generator[tuple[Delta, Completion], None, None]:
        with self.lock:
            yield from stream_generation(self.runner, request, should_stop=should_stop)

    def score(self, ids: Sequence[int], top_n: int = 0, normalization: str | None = None) -> PromptScores:
        """Every prompt token's logprob given the ones before it (the prompt is not generated from);
        normalization None: this service's default (`decider serve --logprob-normalization`)."""
        with self.lock:
            if self._scorer is None:
                self._scorer = PromptScorer(self.runner)
            return self._scorer.score(list(ids), top_n, normalization or self.logprob_normalization)

    def decide(
        self, request: DecisionRequest, should_stop: Callable[[], bool] | None = None, source: str = "app",
        progress: Progress | None = None,
    ) -> DecisionResult:
        request = apply_machine_budget(request, self.capture_budget)  # recorded as it ran
        with self.lock:
            if request.tools:  # functions as options (no reasoning: nothing to report)
                result = decide_tools(self.runner, request, should_stop=should_stop)
            else:
                result = decide(self.runner, request, should_stop=should_stop, progress=progress)
        engine = replace(self.info, reasoning=result.reasoning_precision)
        result = replace(result, engine=engine)
        if engine.logprobs == "reduced":  # --fast, an NPU's f16: no bar is exact (engine/decisions/labels.py)
            result = result.with_reduced_bars()
        return record(self, request, result, self.runner.device, source)


def record(service: DecisionService, request: DecisionRequest, result: DecisionResult, device: str, source: str) -> DecisionResult:
    """The result as saved in the service's history (with its history_id); a history that fails is logged, never
    the answer's failure (the result comes back without an id)."""
    if service.history is None:
        return result
    try:
        history_id = service.history.add(request, result, model=service.model_name, device=device, source=source)
    except (sqlite3.Error, OSError) as exc:
        log.warning("the decision was not saved in the history %s: %s", service.history.path, exc)
        return result
    return replace(result, history_id=history_id)


class RemoteService:
    """The same decision surface as EngineService, computed by an OpenAI-compatible server."""

    def __init__(self, config: RemoteConfig, history: HistoryStore | None = None):
        self.engine = RemoteEngine(config)
        self.history = history
        self.lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return self.engine.model

    @property
    def defaults(self) -> SamplingSettings:
        return SamplingSettings()

    @property
    def info(self) -> EngineInfo:
        return self.engine.info()

    def decide(
        self, request: DecisionRequest, should_stop: Callable[[], bool] | None = None, source: str = "app",
        progress: Progress | None = None,  # not reported: a server reasons in one call, no tokens to count here
    ) -> DecisionResult:
        with self.lock:
            result = self.engine.decide(request, should_stop)
        return record(self, request, result, "remote", source)


def open_local_service(model: str | None, options: DeviceOptions, *, history: bool = False,
                       announce: Callable[[str], None] | None = None) -> EngineService:
    """The service for a model folder (None: the configured or bundled demo model); `history`: record
    every decision in the default history store (off, with one line to `announce`, where it cannot be written)."""
    from .config import prompt_cache, resolve_model_dir
    from .history import open_history

    return EngineService(resolve_model_dir(model), options, open_history(announce) if history else None, prompt_cache())
