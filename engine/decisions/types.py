"""The decision vocabulary every front end shares: a request, its options' results, the result.

Light on purpose (no openvino, no tokenizers): the window, the API's request classes and the CLI import these
without loading the engine that computes them (engine/decisions/decide.py does, and re-exports them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ..core.errors import SettingsError
from ..core.info import EngineInfo
from .labels import reduced_ranges, uncertain_reasons
from ..core.logprobs import Alternative
from ..core.settings import DecisionSettings, SamplingSettings
from ..constrained.tools import Tool, ToolCall
from ..vision.preprocess import check_pixels

LABELS = "ABCDEFGHIJ"
MAX_OPTIONS = len(LABELS)
MAX_IMAGES = 8


@dataclass(frozen=True)
class DecisionRequest(DecisionSettings):
    """A question, its options and what to show the model, with the decision settings it inherits
    (engine/core/settings.py's DecisionSettings: think, reasoning_budget, permute, ... by keyword, checked there)."""

    question: str
    options: tuple[str, ...]
    system: str | None = None
    context: str | None = None
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    # Pixel arrays ([H, W, 3] uint8 RGB) shown before the context; not compared (arrays have no ==).
    images: tuple[np.ndarray, ...] = field(default=(), compare=False)
    # Functions as the options (engine/decisions/tool_decide.py): the options are their names, in order; the bars are how
    # likely the model calls each, and the result carries the chosen call's arguments.
    tools: tuple[Tool, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.question, str) or not self.question.strip():
            raise SettingsError("the question is empty")
        options = tuple(o.strip() if isinstance(o, str) else o for o in self.options)
        if not options:
            raise SettingsError("no options: give 2 to 10")
        if any(not isinstance(o, str) or not o for o in options):
            raise SettingsError("an option is empty")
        if len(options) == 1:
            raise SettingsError("only one option: give 2 to 10")
        if len(options) > MAX_OPTIONS:
            raise SettingsError(f"{len(options)} options: at most {MAX_OPTIONS}")
        seen = set()
        for option in options:
            if option.casefold() in seen:
                raise SettingsError(f"duplicate option {option!r}")
            seen.add(option.casefold())
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "question", self.question.strip())
        for name in ("system", "context"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise SettingsError(f"{name} must be text")
            object.__setattr__(self, name, value.strip() or None if isinstance(value, str) else None)
        super().__post_init__()  # the decision settings' declared checks
        if not isinstance(self.images, (tuple, list)) or len(self.images) > MAX_IMAGES:
            raise SettingsError(f"images: give at most {MAX_IMAGES}")
        object.__setattr__(self, "images", tuple(check_pixels(image) for image in self.images))
        if self.think and self.score_options:
            raise SettingsError("word-option scoring reads the answer right after the prompt: turn think off")
        if self.tools:
            if tuple(t.name for t in self.tools) != options:
                raise SettingsError("with functions as the options, the options are the functions' names, in order")
            clashes = [name for name in ("think", "permute", "score_options", "sample_choice", "context") if getattr(self, name)]
            if clashes or self.images:
                raise SettingsError(f"functions as options: not with {', '.join(clashes or ['images'])}")

    @property
    def reasoning_limit(self) -> int:
        """The most reasoning tokens this decision may draw: the budget once per option order it reads (every
        cyclic order with permute, each thinking again); 0 without think."""
        return self.reasoning_budget * (len(self.options) if self.permute else 1) if self.think else 0


@dataclass(frozen=True)
class OptionResult:
    label: str
    text: str
    logprob: float  # full-vocabulary logprob of the option (its letter, or its whole sequence)
    probability: float  # renormalised over the options
    debiased_probability: float | None = None  # averaged over cyclic rotations (permute)
    token_count: int = 1
    normalized_logprob: float | None = None  # per-token mean (word-option scoring)
    bound: str | None = None  # "upper": a remote server did not list it; logprob is the list's floor
    # what the bar is: "exact", "reduced" (a reduced-precision compile's number), "estimate" (a server's
    # unconfirmed number) or "upper" (a bound)
    bar: str = "exact"
    low: float | None = None  # the bar's possible range when it is not exact (bounds, a precision's allowance), else None
    high: float | None = None

    @property
    def shown(self) -> float:
        """The value every surface shows for this option: debiased when permute ran, else the renormalised one."""
        return self.debiased_probability if self.debiased_probability is not None else self.probability


MODES = ("letters", "words", "tools")  # how the bars were read: option letters, whole option texts, function calls
CHOICE_MODES = ("argmax", "sampled")


@dataclass(frozen=True)
class DecisionResult:
    """Built through `build` (or `from_dict` for a Decider server's JSON), never field by field: one place
    holds what every engine's result must satisfy. Frozen: a later stage (the service's engine label, the
    history's id, a server's choice) derives a new result with `dataclasses.replace`, which runs the same
    checks again in `__post_init__`."""

    choice_index: int
    options: list[OptionResult]
    coverage: float
    mode: str  # "letters" or "words"
    reasoning: str | None
    alternatives: list[Alternative]
    timings: dict[str, float]
    usage: dict[str, int]
    history_id: int | None = None  # the app's history row, once recorded (app/service.record)
    engine: EngineInfo | None = None  # which engine computed it and how exact its logprobs are (set by the service)
    choice_mode: str = "argmax"  # "argmax": the shown bars' favourite; "sampled": drawn (sample_choice)
    uncertain: bool = False  # the bars do not settle which option is most likely (uncertain_why says why)
    uncertain_why: list[str] = field(default_factory=list)  # engine/decisions/labels.py's reasons, and an engine's own
    reasoning_precision: str | None = None  # which precision drew the reasoning tokens (think mode; the service puts it in engine)
    tool_call: ToolCall | None = None  # functions as options: the chosen function's call (None: cut short by max_tokens)
    tool_probabilities: dict | None = None  # functions as options: engine/constrained/tools.choice_probabilities at the answer

    def __post_init__(self) -> None:
        """What holds of every result, however derived (a ValueError names what does not); the choice is
        marked uncertain wherever engine/decisions/labels.py says it is not settled (reasons kept, not repeated)."""
        if not 0 <= self.choice_index < len(self.options):
            raise ValueError(f"choice {self.choice_index} is not one of the {len(self.options)} options")
        if self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.choice_mode not in CHOICE_MODES:
            raise ValueError(f"choice mode {self.choice_mode!r} is not one of {', '.join(CHOICE_MODES)}")
        options = list(self.options)
        reasons = uncertain_reasons([o.shown for o in options], [o.low for o in options], [o.high for o in options],
                                    self.coverage, self.mode)
        why = list(self.uncertain_why)
        why += [r for r in reasons if r not in why]
        # copies: a result shares no list with the one it was derived from
        for name, value in (("options", options), ("coverage", float(self.coverage)), ("alternatives", list(self.alternatives)),
                            ("uncertain_why", why), ("uncertain", bool(self.uncertain) or bool(why))):
            object.__setattr__(self, name, value)

    @classmethod
    def build(
        cls,
        request: DecisionRequest,
        options: Sequence[OptionResult],
        choice_index: int,
        *,
        mode: str,
        coverage: float,
        timings: dict[str, float],
        usage: dict[str, int],
        reasoning: str | None = None,
        alternatives: Sequence[Alternative] = (),
        choice_mode: str | None = None,
        uncertain: bool = False,
        uncertain_why: Sequence[str] = (),
        engine: EngineInfo | None = None,
        reasoning_precision: str | None = None,
        tool_call: ToolCall | None = None,
        tool_probabilities: dict | None = None,
    ) -> DecisionResult:
        """The one constructor every engine uses (local letters and words, functions, a server's reading).

        The options must be the request's, in order, under their letters (the rest `__post_init__` checks);
        choice_mode follows the request (drawn only when it asked for sample_choice) unless given, as a
        Decider server's answer says which it did. A ValueError names what does not hold.
        """
        if [(o.label, o.text) for o in options] != list(zip(LABELS, request.options)):
            raise ValueError("the result's options are not the request's, in order, under their letters")
        return cls(
            choice_index=choice_index, options=list(options), coverage=coverage, mode=mode, reasoning=reasoning,
            alternatives=list(alternatives), timings=timings, usage=usage, engine=engine,
            choice_mode=choice_mode or ("sampled" if request.sample_choice else "argmax"),
            uncertain=uncertain, uncertain_why=list(uncertain_why), reasoning_precision=reasoning_precision,
            tool_call=tool_call, tool_probabilities=tool_probabilities,
        )

    def with_reduced_bars(self) -> DecisionResult:
        """This result with bars from a reduced-precision compile: none is exact; each gets the stated allowance's range."""
        shown = [o.shown for o in self.options]
        low, high = reduced_ranges([math.log(p) if p > 0 else -math.inf for p in shown])
        return replace(self, options=[replace(o, bar="reduced", low=float(lo), high=float(hi)) if o.bar == "exact" else o
                                      for o, lo, hi in zip(self.options, low, high)])

    @classmethod
    def from_dict(cls, body: dict, request: DecisionRequest) -> DecisionResult:
        """A result from its to_dict() JSON (a Decider server's /v1/decide answer) for the request that asked.

        KeyError, TypeError or ValueError when the body is not such an answer; the engine, history id and
        function call are not read back (the caller labels what computed it).
        """
        known = set(OptionResult.__dataclass_fields__)
        choice = body["choice"]
        return cls.build(
            request,
            [OptionResult(**{k: v for k, v in o.items() if k in known}) for o in body["options"]],
            int(choice["index"]),
            mode=str(body["mode"]),
            coverage=float(body["coverage"]),
            timings=dict(body.get("timings") or {}),
            usage=dict(body.get("usage") or {}),
            reasoning=body.get("reasoning"),
            alternatives=[Alternative(str(a["token"]), int(a["token_id"]), float(a["logprob"]))
                          for a in body.get("alternatives") or []],
            choice_mode=str(choice.get("mode") or "argmax"),
            uncertain=bool(choice.get("uncertain", False)),
            uncertain_why=[str(w) for w in choice.get("uncertain_why") or []],
        )

    @property
    def choice(self) -> OptionResult:
        return self.options[self.choice_index]

    @property
    def drawn(self) -> bool:
        return self.choice_mode == "sampled"

    @property
    def most_likely_index(self) -> int:
        """The option with the largest shown bar (the first on a tie)."""
        return int(np.argmax([o.shown for o in self.options]))

    @property
    def shown_field(self) -> str:
        """Which OptionResult field the bars show: where two exist, every surface names the one it shows."""
        return "debiased_probability" if any(o.debiased_probability is not None for o in self.options) else "probability"

    def to_dict(self) -> dict:
        likely = self.options[self.most_likely_index]
        return {
            "choice": {
                "label": self.choice.label, "index": self.choice_index, "text": self.choice.text,
                "probability": self.choice.shown, "mode": self.choice_mode, "uncertain": self.uncertain,
                "uncertain_why": list(self.uncertain_why),
                "most_likely": {"label": likely.label, "index": self.most_likely_index, "text": likely.text,
                                "probability": likely.shown},
            },
            "shown": self.shown_field,
            "options": [asdict(o) for o in self.options],
            "coverage": self.coverage,
            "mode": self.mode,
            "reasoning": self.reasoning,
            "alternatives": [a.to_dict() for a in self.alternatives],
            "timings": self.timings,
            "usage": self.usage,
            "history_id": self.history_id,
            "engine": self.engine.to_dict() if self.engine is not None else {},
            **({"tool_call": self.tool_call.to_openai() if self.tool_call else None,
                "tool_choice_probabilities": self.tool_probabilities} if self.tool_probabilities is not None else {}),
        }


