"""Sampling settings: one validated dataclass shared by the CLI, the GUI and the API."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

from .errors import SettingsError

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

# name: (min, max, integer?, help for the range)
RANGES: dict[str, tuple[float, float, bool]] = {
    "temperature": (0.0, 2.0, False),
    "top_k": (0, 1_000_000, True),
    "top_p": (0.0, 1.0, False),
    "min_p": (0.0, 1.0, False),
    "repetition_penalty": (0.05, 10.0, False),
    "frequency_penalty": (-2.0, 2.0, False),
    "presence_penalty": (-2.0, 2.0, False),
    "penalty_window": (0, 4096, True),
    "seed": (0, 2**63 - 1, True),
}


def check_number(name: str, value: object, low: float, high: float, integer: bool, *, low_open: bool = False) -> None:
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or (not integer and not math.isfinite(value)):
        raise SettingsError(f"{name} must be {kind} in {'(' if low_open else '['}{low}, {high}] (got {value!r})", field=name)
    if value < low or value > high or (low_open and value == low):
        raise SettingsError(f"{name} must be {kind} in {'(' if low_open else '['}{low}, {high}] (got {value!r})", field=name)


@dataclass(frozen=True)
class SamplingSettings:
    temperature: float = QWEN35_DEFAULTS["temperature"]  # 0 = greedy
    top_k: int = QWEN35_DEFAULTS["top_k"]  # 0 = no limit
    top_p: float = QWEN35_DEFAULTS["top_p"]  # 1 = no limit
    min_p: float = QWEN35_DEFAULTS["min_p"]  # 0 = no limit
    repetition_penalty: float = QWEN35_DEFAULTS["repetition_penalty"]  # 1 = off (CTRL-style)
    frequency_penalty: float = QWEN35_DEFAULTS["frequency_penalty"]  # OpenAI-style, per occurrence
    presence_penalty: float = QWEN35_DEFAULTS["presence_penalty"]  # OpenAI-style, once per token
    penalty_window: int = 64  # how many of the last sampled tokens the penalties look at
    seed: int | None = None  # None = a fresh seed per request

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "seed" and value is None:
                continue
            low, high, integer = RANGES[f.name]
            check_number(f.name, value, low, high, integer, low_open=f.name == "top_p")
            if not integer:
                object.__setattr__(self, f.name, float(value))

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
