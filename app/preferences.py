"""The desktop app's settings: one dataclass, persisted as JSON in the config dir.

Every value is validated by its rule in app.preference_rules (for the engine's settings, the rule
engine.settings declares; their fields here are made from those declarations too). A settings file edited by hand with a bad value never stops the app: that value falls
back to its default and a warning says which one and why.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields, make_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from decider.engine.compile.devices import DEFAULT_VISION_DEVICE, DeviceOptions
from decider.engine.core.errors import SettingsError
from decider.engine.remote.engine import CONSTRAINTS as REMOTE_CONSTRAINTS  # noqa: F401 (the form offers these)
from decider.engine.core.settings import DECISION_NAMES as DECISION_SETTING_NAMES
from decider.engine.core.settings import (
    RANGES, SAMPLING_NAMES, SETTINGS, DecisionSettings, SamplingSettings, range_text as format_range,
)

from .config import compiled_cache_dir, config_dir
from .json_files import JsonFileError, read_json_file
from .origins import parse_origin
from .preference_rules import APP_RANGES, DEFAULT_HOTKEY, PIXEL_FIELDS, field_rules

log = logging.getLogger(__name__)

SETTINGS_FILE = "gui-settings.json"
MAX_RECENT_MODELS = 8

# The decision settings the app keeps (their ranges, defaults and help are engine.settings'): generation's cap,
# then every declared decision setting.
DECISION_NAMES = ("max_tokens",) + DECISION_SETTING_NAMES
# The engine's settings the app keeps, first in the settings file: every sampling setting users set, then those.
ENGINE_NAMES = SAMPLING_NAMES + DECISION_NAMES


def setting_range(name: str) -> tuple[float, float, bool]:
    """(min, max, integer?) of a numeric setting, from the engine's table or the app's."""
    if name in RANGES:
        return RANGES[name]
    return APP_RANGES[name]


def range_text(name: str) -> str:
    """The range as shown next to a field, e.g. "0 – 2" or "(0 – 1]"."""
    if name in SETTINGS:
        return SETTINGS[name].range_text()
    return format_range(*APP_RANGES[name])


if TYPE_CHECKING:
    class _EngineSettings:
        def __getattr__(self, name: str) -> Any: ...  # the declared settings' fields, made below
else:
    # GuiSettings' engine fields, made from the declarations (name, type, default): a setting added to the
    # engine's schema is stored, validated and shown without a line here.
    _EngineSettings = make_dataclass(
        "_EngineSettings", [(name, SETTINGS[name].annotation, field(default=SETTINGS[name].default)) for name in ENGINE_NAMES],
        frozen=True)


@dataclass(frozen=True)
class GuiSettings(_EngineSettings):
    # The engine's settings (ENGINE_NAMES: sampling, then max_tokens and the decision settings) come first,
    # from _EngineSettings; the app's own follow.
    system_prompt: str = ""
    history_image_hashes: bool = True  # the history keeps each image's size and pixel sha256 (off: the size only)
    # model and device
    device: str = "AUTO"
    vision_device: str = DEFAULT_VISION_DEVICE  # the vision encoder's device (engine.devices.DeviceOptions)
    exact: bool = True
    last_model: str | None = None
    recent_models: tuple[str, ...] = ()
    # companion overlay
    overlay_enabled: bool = False
    overlay_opacity: float = 0.85
    overlay_position: tuple[int, int] | None = None
    overlay_click_through: bool = False
    hotkey: str = DEFAULT_HOTKEY
    # watch mode: the companion grabs the screen every watch_interval_ms and re-decides when it changed
    watch_enabled: bool = False
    watch_interval_ms: int = 1000
    watch_threshold: float = 0.02  # engine.frame_change.DEFAULT_CHANGE_THRESHOLD
    # local API
    api_enabled: bool = False
    api_host: str = "127.0.0.1"
    api_port: int = 8765
    api_key: str = ""  # empty: no key (loopback only); stored in this settings file in plain text
    api_allowed_origins: tuple[str, ...] = ()  # web pages (browser Origins) allowed to call the local API
    # engine: local model folder or a remote OpenAI-compatible server
    engine: str = "local"
    remote_url: str = ""
    remote_api_key: str = ""  # stored in this settings file in plain text
    remote_model: str = ""  # empty: the server's first model
    remote_timeout: float = 60.0
    remote_constraint: str = "none"
    # window
    show_settings: bool = True
    window_geometry: tuple[int, int, int, int] | None = None  # x, y, width, height of the main window
    window_maximized: bool = False
    extra: dict = field(default_factory=dict, compare=False)  # unknown keys kept for newer versions

    def __post_init__(self) -> None:
        for f in fields(self):
            _check_field(f.name, getattr(self, f.name))
        object.__setattr__(self, "device", self.device.upper())
        object.__setattr__(self, "vision_device", self.vision_device.upper())
        object.__setattr__(self, "recent_models", tuple(self.recent_models))
        # stored as the browser sends them, once each: "HTTP://LocalHost:80/" and "http://localhost" are one origin
        origins = dict.fromkeys(parse_origin(o) for o in self.api_allowed_origins)
        object.__setattr__(self, "api_allowed_origins", tuple(origins))
        for name in PIXEL_FIELDS:
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(int(v) for v in getattr(self, name)))
        floats = [n for n in ENGINE_NAMES if SETTINGS[n].kind is float] + ["overlay_opacity", "remote_timeout", "watch_threshold"]
        for name in floats:
            object.__setattr__(self, name, float(getattr(self, name)))

    # ----- views the engine understands -----
    def sampling(self) -> SamplingSettings:
        return SamplingSettings(**{name: getattr(self, name) for name in SAMPLING_NAMES})

    def decision(self) -> DecisionSettings:
        return DecisionSettings(**{name: getattr(self, name) for name in DECISION_SETTING_NAMES})

    def device_options(self, cache_dir: Path | None = None) -> DeviceOptions:
        return DeviceOptions(device=self.device, vision_device=self.vision_device, exact=self.exact,
                             cache_dir=cache_dir or compiled_cache_dir())

    def remote_config(self):
        """engine.remote.RemoteConfig for the remote fields; SettingsError when the URL is missing or wrong."""
        from decider.engine.remote.engine import RemoteConfig

        if not self.remote_url.strip():
            raise SettingsError("remote engine: enter the server's URL, e.g. http://gpu-box:8000/v1")
        return RemoteConfig(
            base_url=self.remote_url.strip(), api_key=self.remote_api_key.strip() or None,
            model=self.remote_model.strip() or None, timeout=float(self.remote_timeout),
            constraint=self.remote_constraint,
        )

    # ----- edits -----
    def with_changes(self, **changes: object) -> "GuiSettings":
        """A copy with the changes applied; raises SettingsError naming the setting and its range."""
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise SettingsError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        checked: dict[str, Any] = dict(changes)  # each value is checked by its field's rule in __post_init__
        return replace(self, **checked)

    def with_sampling(self, sampling: SamplingSettings) -> "GuiSettings":
        return self.with_changes(**{name: getattr(sampling, name) for name in SAMPLING_NAMES})

    def with_recent_model(self, path: str | Path) -> "GuiSettings":
        text = os.path.abspath(os.path.expanduser(str(path)))
        recent = (text,) + tuple(p for p in self.recent_models if p != text)
        return self.with_changes(recent_models=recent[:MAX_RECENT_MODELS], last_model=text)

    # ----- JSON -----
    def to_dict(self) -> dict:
        data = asdict(self)
        extra = data.pop("extra")
        data["recent_models"] = list(self.recent_models)
        data["api_allowed_origins"] = list(self.api_allowed_origins)
        for name in PIXEL_FIELDS:
            data[name] = list(getattr(self, name)) if getattr(self, name) is not None else None
        return {**extra, **data}

    @classmethod
    def from_dict(cls, data: object) -> tuple["GuiSettings", list[str]]:
        """Settings from JSON data plus one warning per value that was dropped to its default."""
        warnings: list[str] = []
        if not isinstance(data, dict):
            return cls(), ["the settings file does not hold a JSON object; using defaults"]
        names = {f.name for f in fields(cls)} - {"extra"}
        kept: dict[str, Any] = {}  # each value passed its field's rule
        for name, value in data.items():
            if name not in names:
                continue
            try:
                value = _coerce(name, value)
                _check_field(name, value)
            except SettingsError as exc:
                warnings.append(f"{exc}; using the default")
                continue
            kept[name] = value
        extra = {k: v for k, v in data.items() if k not in names and k != "extra"}
        try:
            settings = cls(**kept, extra=extra)
        except SettingsError as exc:  # a combination no single check caught
            warnings.append(f"{exc}; using defaults")
            settings = cls()
        return settings, warnings


def _coerce(name: str, value: object) -> object:
    """JSON shapes to field types: lists to tuples, integral floats to ints for integer fields."""
    if name in ("recent_models", "api_allowed_origins") and isinstance(value, list):
        return tuple(value)
    if name in PIXEL_FIELDS and isinstance(value, list):
        return tuple(value)
    if name in RANGES or name in APP_RANGES:
        integer = setting_range(name)[2]
        if integer and isinstance(value, float) and value.is_integer():
            return int(value)
    return value


FIELD_RULES = field_rules(ENGINE_NAMES)


def _check_field(name: str, value: object) -> None:
    """Raise SettingsError when one field's value is not allowed (each field's rule: FIELD_RULES)."""
    rule = FIELD_RULES.get(name)
    if rule is None:
        raise SettingsError(f"unknown setting {name}")
    rule(name, value)


def settings_path() -> Path:
    return config_dir() / SETTINGS_FILE


def load_settings(path: Path | None = None) -> tuple[GuiSettings, list[str]]:
    """Read the settings file; a missing file gives the defaults, a broken one defaults plus a warning."""
    path = path or settings_path()
    try:
        data = read_json_file(path)
    except FileNotFoundError:
        return GuiSettings(), []
    except JsonFileError as exc:
        warning = f"{path}: {exc}; using defaults"
        log.warning(warning)
        return GuiSettings(), [warning]
    settings, warnings = GuiSettings.from_dict(data)
    warnings = [f"{path.name}: {w}" for w in warnings]
    for warning in warnings:
        log.warning(warning)
    return settings, warnings


def save_settings(settings: GuiSettings, path: Path | None = None) -> Path:
    """Write atomically (temp file + rename) so a crash never leaves half a file."""
    path = path or settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(settings.to_dict(), indent=2, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".gui-settings-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
