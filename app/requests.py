"""The one place where a CLI flag, a JSON field or a widget value becomes an engine setting."""

from __future__ import annotations

from collections.abc import Mapping
from decider.engine.core.errors import SettingsError
from decider.engine.core.settings import SAMPLING_NAMES, SETTINGS, SamplingSettings

# setting name → type accepted from outside (JSON numbers: ints are accepted for floats)
SAMPLING_FIELDS: dict[str, type] = {name: SETTINGS[name].kind for name in SAMPLING_NAMES}


def sampling_from(values: Mapping[str, object], base: SamplingSettings) -> SamplingSettings:
    """Override `base` with every non-None value named in SAMPLING_FIELDS; validation is the dataclass's."""
    changes = {}
    for name, kind in SAMPLING_FIELDS.items():
        value = values.get(name)
        if value is None:
            continue
        if kind is str:
            if not isinstance(value, str):
                raise SettingsError(f"{name} must be one of {SETTINGS[name].range_text()} (got {value!r})", field=name)
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
            if kind is int and isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise SettingsError(f"{name} must be {'an integer' if kind is int else 'a number'} (got {value!r})", field=name)
        changes[name] = value
    return base.with_changes(**changes)
