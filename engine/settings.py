"""The sampling and decision settings, declared once (SAMPLING_SETTINGS, DECISION_SETTINGS: name, type,
range, default, help), and SamplingSettings, the validated dataclass the engine takes.

Front ends do not list these settings again: the CLI's flags, the GUI's form and the settings store
are generated from the declarations, and tests check the API's fields and the remote request against
them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

from .errors import SettingsError
from .logprobs import MAX_TOP_LOGPROBS

# Qwen3.5's recommended sampling, as the seed runtime ships it; a model's generation_config.json
# overrides what it names (it never names the OpenAI penalties).
QWEN35_DEFAULTS = dict(
    temperature=0.7,
    top_k=20,
    top_p=0.8,
    min_p=0.0,
    repetition_penalty=1.0,
    frequency_penalty=1.0,
    presence_penalty=1.5,
)


@dataclass(frozen=True)
class Setting:
    """One sampling or decision setting, declared once: the CLI flags, the GUI form, the settings
    store, the API fields and the remote request are generated from or checked against these."""

    name: str
    kind: type  # int, float or bool
    default: object
    label: str  # a form's label
    help: str  # one line: what it does
    low: float | None = None
    high: float | None = None
    low_open: bool = False  # the range excludes `low` (top_p)
    optional: bool = False  # None is a value too (seed: a fresh one per request)
    exposed: bool = True  # offered to users (flags, form, API); False: an engine-internal knob

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def integer(self) -> bool:
        return self.kind is int

    @property
    def range(self) -> tuple[float, float, bool]:
        """(min, max, integer?) of a numeric setting."""
        return self.low, self.high, self.integer

    def range_text(self) -> str:
        """The range as a form or a flag's help shows it, e.g. "0 – 2" or "(0 – 1]"."""
        return range_text(self.low, self.high, self.integer, low_open=self.low_open)

    def check(self, value: object) -> None:
        """SettingsError naming the setting and its range when `value` is not allowed."""
        if value is None and self.optional:
            return
        if self.kind is bool:
            if not isinstance(value, bool):
                raise SettingsError(f"{self.name} must be true or false (got {value!r})")
            return
        check_number(self.name, value, self.low, self.high, self.integer, low_open=self.low_open)


def range_text(low: float, high: float, integer: bool, *, low_open: bool = False) -> str:
    def fmt(value: float) -> str:
        if integer or float(value).is_integer():
            return f"{int(value):,}".replace(",", " ")
        return f"{value:g}"

    return f"({fmt(low)} – {fmt(high)}]" if low_open else f"{fmt(low)} – {fmt(high)}"


SAMPLING_SETTINGS: tuple[Setting, ...] = (
    Setting("temperature", float, QWEN35_DEFAULTS["temperature"], "Temperature",
            "0 draws the most likely option (greedy); the bars do not depend on it", 0.0, 2.0),
    Setting("top_k", int, QWEN35_DEFAULTS["top_k"], "Top K",
            "keep the K most likely tokens before drawing; 0 = no limit", 0, 1_000_000),
    Setting("top_p", float, QWEN35_DEFAULTS["top_p"], "Top P",
            "nucleus sampling: keep the smallest set holding this much probability; 1 = off", 0.0, 1.0, low_open=True),
    Setting("min_p", float, QWEN35_DEFAULTS["min_p"], "Min P",
            "drop tokens below this fraction of the best token's probability; 0 = off", 0.0, 1.0),
    Setting("repetition_penalty", float, QWEN35_DEFAULTS["repetition_penalty"], "Repetition penalty",
            "CTRL-style penalty on tokens seen in the window; 1 = off", 0.05, 10.0),
    Setting("frequency_penalty", float, QWEN35_DEFAULTS["frequency_penalty"], "Frequency penalty",
            "OpenAI-style, subtracted per earlier occurrence", -2.0, 2.0),
    Setting("presence_penalty", float, QWEN35_DEFAULTS["presence_penalty"], "Presence penalty",
            "OpenAI-style, subtracted once for any earlier occurrence", -2.0, 2.0),
    Setting("penalty_window", int, 64, "Penalty window",
            "how many of the last sampled tokens the penalties look at", 0, 4096, exposed=False),
    Setting("seed", int, None, "Seed",
            "a fixed seed makes sampled draws repeatable; none = a fresh seed per request", 0, 2**63 - 1, optional=True),
)

# How much to generate and how to decide (front ends give them beside the sampling settings).
DECISION_SETTINGS: tuple[Setting, ...] = (
    Setting("max_tokens", int, 256, "Max tokens",
            "cap for free-form generation (chat, local API); decisions use the reasoning budget", 1, 32768),
    Setting("think", bool, False, "Think before answering", "let the model reason first"),
    Setting("reasoning_budget", int, 512, "Reasoning budget",
            "most tokens the model may think for before it must answer", 1, 32768),
    Setting("permute", bool, False, "Debias option order",
            "average over cyclic option orders (letter-prior debiasing)"),
    Setting("score_options", bool, False, "Score whole options",
            "score each option's whole text instead of its letter"),
    Setting("sample_choice", bool, False, "Sample the choice",
            "draw the choice at the sampling settings (variety) instead of taking the most likely option"),
    Setting("fast_reasoning", bool, True, "Fast reasoning",
            "think mode: draw the reasoning from a faster reduced-precision compile where the device has one "
            "(more memory); the bars stay exact"),
    Setting("alternatives", int, 10, "Alternatives",
            "how many most likely next tokens a decision lists", 0, MAX_TOP_LOGPROBS),
)

SETTINGS: dict[str, Setting] = {s.name: s for s in SAMPLING_SETTINGS + DECISION_SETTINGS}
# The sampling settings users set (CLI flags, GUI form, API fields, remote request), in declaration order.
SAMPLING_NAMES: tuple[str, ...] = tuple(s.name for s in SAMPLING_SETTINGS if s.exposed)
# name: (min, max, integer?) of every numeric setting
RANGES: dict[str, tuple[float, float, bool]] = {name: s.range for name, s in SETTINGS.items() if s.kind is not bool}


def check_number(name: str, value: object, low: float, high: float, integer: bool, *, low_open: bool = False) -> None:
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or (not integer and not math.isfinite(value)):
        raise SettingsError(f"{name} must be {kind} in {'(' if low_open else '['}{low}, {high}] (got {value!r})", field=name)
    if value < low or value > high or (low_open and value == low):
        raise SettingsError(f"{name} must be {kind} in {'(' if low_open else '['}{low}, {high}] (got {value!r})", field=name)


@dataclass(frozen=True)
class SamplingSettings:
    """Validated sampling settings; the fields, defaults and ranges are SAMPLING_SETTINGS'."""

    temperature: float = SETTINGS["temperature"].default  # 0 = greedy
    top_k: int = SETTINGS["top_k"].default  # 0 = no limit
    top_p: float = SETTINGS["top_p"].default  # 1 = no limit
    min_p: float = SETTINGS["min_p"].default  # 0 = no limit
    repetition_penalty: float = SETTINGS["repetition_penalty"].default  # 1 = off (CTRL-style)
    frequency_penalty: float = SETTINGS["frequency_penalty"].default  # OpenAI-style, per occurrence
    presence_penalty: float = SETTINGS["presence_penalty"].default  # OpenAI-style, once per token
    penalty_window: int = SETTINGS["penalty_window"].default  # how many of the last kept tokens the penalties see
    seed: int | None = SETTINGS["seed"].default  # None = a fresh seed per request

    def __post_init__(self) -> None:
        for setting in SAMPLING_SETTINGS:
            value = getattr(self, setting.name)
            setting.check(value)
            if setting.kind is float:
                object.__setattr__(self, setting.name, float(value))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1

    def with_changes(self, **changes: object) -> "SamplingSettings":
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise SettingsError(f"unknown sampling setting(s): {', '.join(sorted(unknown))}")
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def for_model(cls, generation_config: dict) -> "SamplingSettings":
        """Qwen3.5 defaults, overridden by the model's generation_config.json where it has a value."""
        values = dict(QWEN35_DEFAULTS)
        for name in ("temperature", "top_k", "top_p", "min_p", "repetition_penalty"):
            value = generation_config.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values[name] = value
        if generation_config.get("do_sample") is False:
            values["temperature"] = 0.0
        try:
            return cls(**values)
        except SettingsError:
            return cls()
