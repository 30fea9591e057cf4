"""The settings schema: SamplingSettings (how tokens are drawn) and DecisionSettings (how a decision is
made: think, the reasoning budget, permute, ...), the dataclasses the engine takes, declare each setting in
its field's metadata (label, help, range, a form's decimals and step, whether a model's generation_config
may set it, its name on other servers), as vLLM's EngineArgs declares its flags. engine/decisions/types.py's
DecisionRequest is a DecisionSettings (it inherits the fields, their defaults and checks).

Front ends do not list these settings again: the defaults, the CLI's flags, the GUI's settings and form,
the remote request body and the history are derived from `SAMPLING_SETTINGS` and `DECISION_SETTINGS`,
which are read off the dataclasses' fields; a test adds one field here and finds it on every surface. The
API's request classes declare their fields in app/api/setting_fields.py, for type checkers; a test holds
them to this schema.
"""

from __future__ import annotations

import math
import types
from dataclasses import Field, asdict, dataclass, field, fields, replace
from typing import Any, Union, get_args, get_origin, get_type_hints

from .errors import SettingsError
from .logprobs import MAX_TOP_LOGPROBS

_DECLARATION = "decider.setting"  # the metadata key of a settings field's declaration
IMAGE_PIXELS_DEFAULT = 480 * 480  # the capture budget's default (see DECISION_SETTINGS' image_pixels)


@dataclass(frozen=True)
class Setting:
    """One sampling or decision setting, declared once: the CLI flags, the GUI form, the settings
    store, the API fields and the remote request are generated from or checked against these."""

    name: str
    kind: type  # int, float, bool, or str (one of `choices`)
    default: object
    label: str  # a form's label
    help: str  # one line: what it does
    low: float | None = None
    high: float | None = None
    low_open: bool = False  # the range excludes `low` (top_p)
    optional: bool = False  # None is a value too (seed: a fresh one per request)
    exposed: bool = True  # offered to users (flags, form, API, remote servers); False: an engine-internal knob
    decimals: int = 2  # a form's number field shows this many decimals ...
    step: float = 1  # ... and steps by this much
    from_model: bool = False  # a model's generation_config.json may set it (Qwen3.5's default otherwise)
    remote_names: tuple[tuple[str, str], ...] = ()  # (server kind, the field's name there) where not `name`
    tool_calls: bool = False  # a remote tool-calling request carries it too (engine/remote/tool_calls.py)
    choices: tuple[str, ...] = ()  # a str setting's values
    local: bool = False  # how this engine computes, not what: never sent to a remote server
    form_help: str = ""  # a form's longer tooltip, where the one-line help is too terse for it
    # A decision setting every Decider server's /v1/decide takes: sent even at its default. The others are sent
    # only when changed, since a server older than the setting refuses the field.
    always_sent: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def annotation(self) -> object:
        """The Python type of a field holding this setting (None allowed where it is optional)."""
        return self.kind | None if self.optional else self.kind

    @property
    def integer(self) -> bool:
        return self.kind is int

    @property
    def range(self) -> tuple[float, float, bool]:
        """(min, max, integer?) of a numeric setting."""
        if self.low is None or self.high is None:
            raise TypeError(f"{self.name} is not a number: it has no range")
        return self.low, self.high, self.integer

    def remote_name(self, server_kind: str) -> str:
        """The request field this kind of server reads the setting from."""
        return dict(self.remote_names).get(server_kind, self.name)

    def range_text(self) -> str:
        """The range as a form or a flag's help shows it, e.g. "0 – 2" or "(0 – 1]" (a choice's: "a | b")."""
        if self.kind is str:
            return " | ".join(self.choices)
        return range_text(*self.range, low_open=self.low_open)

    def check(self, value: object) -> None:
        """SettingsError naming the setting and its range when `value` is not allowed."""
        if value is None and self.optional:
            return
        if self.kind is bool:
            if not isinstance(value, bool):
                raise SettingsError(f"{self.name} must be true or false (got {value!r})")
            return
        if self.kind is str:
            if value not in self.choices:
                raise SettingsError(f"{self.name} must be one of {', '.join(self.choices)} (got {value!r})", field=self.name)
            return
        check_number(self.name, value, *self.range, low_open=self.low_open)


def setting(default: object, label: str, help: str, low: float | None = None, high: float | None = None,
            *, remote_names: dict[str, str] | None = None, **declared: Any) -> Any:
    """A settings dataclass field whose metadata declares the setting (Setting's fields but name,
    kind and default, which are the field's own)."""
    declared.update(label=label, help=help, low=low, high=high, remote_names=tuple((remote_names or {}).items()))
    return field(default=default, metadata={_DECLARATION: declared})


def declared_settings(cls: type) -> tuple[Setting, ...]:
    """The settings a dataclass declares in its fields' metadata, in field order."""
    hints = get_type_hints(cls)
    return tuple(_from_field(f, hints[f.name]) for f in fields(cls) if _DECLARATION in f.metadata)


def _from_field(f: Field, hint: object) -> Setting:
    kinds = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    kind = next(k for k in kinds if k is not type(None))
    return Setting(f.name, kind, f.default, optional=type(None) in kinds, **f.metadata[_DECLARATION])


def range_text(low: float, high: float, integer: bool, *, low_open: bool = False) -> str:
    def fmt(value: float) -> str:
        if integer or float(value).is_integer():
            return f"{int(value):,}".replace(",", " ")
        return f"{value:g}"

    return f"({fmt(low)} – {fmt(high)}]" if low_open else f"{fmt(low)} – {fmt(high)}"


def check_number(name: str, value: object, low: float, high: float, integer: bool, *, low_open: bool = False) -> None:
    kind = "an integer" if integer else "a number"
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if (number is None or (integer and not isinstance(number, int)) or (not integer and not math.isfinite(number))
            or number < low or number > high or (low_open and number == low)):
        raise SettingsError(f"{name} must be {kind} in {'(' if low_open else '['}{low}, {high}] (got {value!r})", field=name)


@dataclass(frozen=True)
class SamplingSettings:
    """Validated sampling settings, and the schema of every front end's sampling settings: each field
    declares its setting (`setting(...)`). The defaults are Qwen3.5's recommended sampling, as the seed
    runtime ships it; a model's generation_config.json overrides the ones marked from_model (it never
    names the OpenAI penalties)."""

    temperature: float = setting(
        0.7, "Temperature", "0 draws the most likely option (greedy); the bars do not depend on it", 0.0, 2.0,
        decimals=2, step=0.05, from_model=True, tool_calls=True)
    top_k: int = setting(20, "Top K", "keep the K most likely tokens before drawing; 0 = no limit", 0, 1_000_000,
                         from_model=True)
    top_p: float = setting(
        0.8, "Top P", "nucleus sampling: keep the smallest set holding this much probability; 1 = off", 0.0, 1.0,
        low_open=True, decimals=2, step=0.05, from_model=True, tool_calls=True)
    min_p: float = setting(
        0.0, "Min P", "drop tokens below this fraction of the best token's probability; 0 = off", 0.0, 1.0,
        decimals=3, step=0.01, from_model=True)
    # llama.cpp's servers ignore vLLM's `repetition_penalty` and apply their own `repeat_penalty` (default 1.1).
    repetition_penalty: float = setting(
        1.0, "Repetition penalty", "CTRL-style penalty on tokens seen in the window; 1 = off", 0.05, 10.0,
        decimals=2, step=0.05, from_model=True, remote_names={"llama.cpp": "repeat_penalty"})
    frequency_penalty: float = setting(
        1.0, "Frequency penalty", "OpenAI-style, subtracted per earlier occurrence", -2.0, 2.0, decimals=2, step=0.1)
    presence_penalty: float = setting(
        1.5, "Presence penalty", "OpenAI-style, subtracted once for any earlier occurrence", -2.0, 2.0,
        decimals=2, step=0.1)
    penalty_window: int = setting(
        64, "Penalty window", "how many of the last sampled tokens the penalties look at", 0, 4096, exposed=False)
    # Speculative decoding (engine/generation/speculative.py): drafts checked by the exact model, the same distribution.
    draft: str = setting(
        "none", "Drafts", "guess tokens ahead and verify them in one exact forward: lookup (repeats of earlier "
        "text), auto (lookup where the text repeats, else the model's MTP head where its export kept one; paused while its "
        "guesses do not pay), "
        "mtp (the model's MTP head); the text's "
        "distribution stays the exact model's", choices=("none", "lookup", "auto", "mtp"), local=True)
    seed: int | None = setting(
        None, "Seed", "a fixed seed makes sampled draws repeatable; none = a fresh seed per request", 0, 2**63 - 1,
        tool_calls=True)

    def __post_init__(self) -> None:
        for declared in SAMPLING_SETTINGS:
            value = getattr(self, declared.name)
            declared.check(value)
            if declared.kind is float:
                object.__setattr__(self, declared.name, float(value))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1

    def with_changes(self, **changes: Any) -> "SamplingSettings":
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise SettingsError(f"unknown sampling setting(s): {', '.join(sorted(unknown))}")
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)

    def request_fields(self, server_kind: str, *, tool_calls: bool = False) -> dict[str, object]:
        """The settings users set in the field names this kind of server reads; an unset seed is left out.
        tool_calls: only those a tool-calling request carries."""
        return {s.remote_name(server_kind): getattr(self, s.name) for s in SAMPLING_SETTINGS
                if s.exposed and not s.local and getattr(self, s.name) is not None and (s.tool_calls or not tool_calls)}

    def with_model_defaults(self, defaults: "SamplingSettings") -> "SamplingSettings":
        """A model's defaults (for_model) for every setting that shapes the distribution; draft (speed only: the
        text's distribution is the exact model's either way) and seed (repeatability) stay as the user set them."""
        return replace(defaults, draft=self.draft, seed=self.seed)

    @classmethod
    def for_model(cls, generation_config: dict) -> "SamplingSettings":
        """Qwen3.5 defaults, overridden by the model's generation_config.json where it has a value."""
        values: dict[str, Any] = {}
        for declared in SAMPLING_SETTINGS:
            value = generation_config.get(declared.name)
            if declared.from_model and isinstance(value, (int, float)) and not isinstance(value, bool):
                values[declared.name] = value
        if generation_config.get("do_sample") is False:
            values["temperature"] = 0.0
        try:
            return cls(**values)
        except SettingsError:
            return cls()


SAMPLING_SETTINGS: tuple[Setting, ...] = declared_settings(SamplingSettings)


@dataclass(frozen=True, kw_only=True)
class DecisionSettings:
    """Validated decision settings, and the schema of every front end's decision settings: each field declares
    its setting (`setting(...)`), in the order flags and form rows show them. Keyword-only, so that
    DecisionRequest (a DecisionSettings with a question and options) keeps its positional fields first."""

    think: bool = setting(False, "Think before answering", "let the model reason first", always_sent=True,
                          form_help="the model reasons first (slower); the reasoning is shown under the result")
    reasoning_budget: int = setting(512, "Reasoning budget", "most tokens the model may think for before it must answer",
                                    1, 32768, step=64, always_sent=True)
    permute: bool = setting(False, "Debias option order", "average over cyclic option orders (letter-prior debiasing)",
                            always_sent=True,
                            form_help="ask once per cyclic order of the options and average (n forwards): removes the "
                                      "letter prior")
    score_options: bool = setting(False, "Score whole options", "score each option's whole text instead of its letter",
                                  always_sent=True)
    sample_choice: bool = setting(
        False, "Sample the choice",
        "draw the choice at the sampling settings (variety) instead of taking the most likely option",
        form_help="draw the chosen option at the sampling settings (variety, e.g. for a game's characters) instead of "
                  "taking the most likely one; the result says it was drawn")
    fast_reasoning: bool = setting(
        True, "Fast reasoning", "think mode: draw the reasoning from a faster reduced-precision compile where the device "
        "has one (more memory); the bars stay exact",
        form_help="think mode: draw the reasoning from a second, faster compile of the model (more memory while it is "
                  "loaded); the bars are still computed exactly")
    alternatives: int = setting(10, "Alternatives", "how many most likely next tokens a decision lists", 0,
                                MAX_TOP_LOGPROBS, always_sent=True)
    # Qwen3.5's preprocessor takes 256² to 4096² pixels per image; a picture above the budget is scaled down (aspect
    # kept) before the vision encoder, so a screenshot costs fewer image tokens. The default: BENCHMARKS.md,
    # "Capture budget" (chosen by measurement).
    image_pixels: int = setting(
        IMAGE_PIXELS_DEFAULT, "Image pixel budget", "pictures above this many pixels are scaled down (aspect kept) "
        "before the vision encoder: fewer image tokens, a faster decision; the model's own budget caps it",
        256 * 256, 4096 * 4096, step=65536, local=True)  # local: a server is sent no pictures to scale

    def __post_init__(self) -> None:
        for declared in DECISION_SETTINGS:
            declared.check(getattr(self, declared.name))

    def to_dict(self) -> dict[str, Any]:
        return {s.name: getattr(self, s.name) for s in DECISION_SETTINGS}

    def request_fields(self) -> dict[str, object]:
        """The fields a Decider server's /v1/decide is sent: each setting declared always_sent, the others where
        they are not their default (none that is local)."""
        return {s.name: getattr(self, s.name) for s in DECISION_SETTINGS
                if not s.local and (s.always_sent or getattr(self, s.name) != s.default)}


DECISION_SETTINGS: tuple[Setting, ...] = declared_settings(DecisionSettings)
DECISION_NAMES: tuple[str, ...] = tuple(s.name for s in DECISION_SETTINGS)
# How much free-form generation (chat, the local API's completions) may write: a front end's setting beside the
# sampling ones, not a decision's (decisions use the reasoning budget).
MAX_TOKENS = Setting("max_tokens", int, 256, "Max tokens",
                     "cap for free-form generation (chat, local API); decisions use the reasoning budget", 1, 32768,
                     step=64)

SETTINGS: dict[str, Setting] = {s.name: s for s in SAMPLING_SETTINGS + DECISION_SETTINGS + (MAX_TOKENS,)}
# The sampling settings users set (CLI flags, GUI form, API fields, remote request), in declaration order.
SAMPLING_NAMES: tuple[str, ...] = tuple(s.name for s in SAMPLING_SETTINGS if s.exposed)
# name: (min, max, integer?) of every numeric setting
RANGES: dict[str, tuple[float, float, bool]] = {name: s.range for name, s in SETTINGS.items() if s.kind in (int, float)}
