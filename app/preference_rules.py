"""What each desktop setting accepts: one rule per field, in a table (`FIELD_RULES`), so a field without
a rule is an error and adding one is a row, not a branch.

The engine's settings use their declared rule (engine.settings); the app's own fields use the small
checks here. Every refusal is a SettingsError naming the field and what it takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from decider.engine.compile.devices import DEVICES, DeviceOptions
from decider.engine.core.errors import SettingsError
from decider.engine.remote.engine import CONSTRAINTS as REMOTE_CONSTRAINTS
from decider.engine.core.settings import SETTINGS, check_number

from .origins import parse_origin

Rule = Callable[[str, object], None]  # (field name, value) -> None, or SettingsError

DEFAULT_HOTKEY = "Ctrl+Shift+D"
ENGINES = ("local", "remote")  # the in-process OpenVINO engine, or an OpenAI-compatible server

# Ranges for the app's own numbers: name -> (min, max, integer?)
APP_RANGES: dict[str, tuple[float, float, bool]] = {
    "overlay_opacity": (0.2, 1.0, False),
    "api_port": (1, 65535, True),
    "remote_timeout": (0.5, 3600, False),
    "watch_interval_ms": (100, 60_000, True),  # watch mode grabs the screen this often
    "watch_threshold": (0.001, 0.5, False),  # the picture change (engine/vision/frame_change.py) that re-decides
}

# Screen positions and sizes kept between runs, with the parts each holds.
PIXEL_FIELDS = {"overlay_position": ("x", "y"), "window_geometry": ("x", "y", "width", "height")}

BOOLEANS = ("exact", "history_image_hashes", "overlay_enabled", "overlay_click_through", "api_enabled", "show_settings",
            "window_maximized", "watch_enabled")


def declared(name: str, value: object) -> None:
    SETTINGS[name].check(value)  # the engine's declared rule and message


def app_number(name: str, value: object) -> None:
    check_number(name, value, *APP_RANGES[name])  # the engine's number check, over the app's range


def boolean(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise SettingsError(f"{name} must be true or false (got {value!r})")


def one_of(choices: Iterable[str]) -> Rule:
    choices = tuple(choices)

    def check(name: str, value: object) -> None:
        if value not in choices:
            raise SettingsError(f"{name} must be one of {', '.join(choices)} (got {value!r})")

    return check


def device(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise SettingsError(f"{name} must be one of {', '.join(DEVICES)} (got {value!r})")
    DeviceOptions(device=value) if name == "device" else DeviceOptions(vision_device=value)


def url(name: str, value: object) -> None:
    if not isinstance(value, str) or any(c.isspace() for c in value.strip()):
        raise SettingsError(f"{name} must be a URL without spaces (got {value!r})")
    if value.strip() and not value.strip().lower().startswith(("http://", "https://")):
        raise SettingsError(f"{name} must start with http:// or https:// (got {value!r})")


def one_line(name: str, value: object) -> None:
    if not isinstance(value, str) or "\n" in value:
        raise SettingsError(f"{name} must be one line of text")


def text(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise SettingsError(f"{name} must be text (got {type(value).__name__})")


def hotkey(name: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip() or len(value) > 64:
        raise SettingsError(f"{name} must be a key sequence such as {DEFAULT_HOTKEY!r} (got {value!r})")


def host(name: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value):
        raise SettingsError(f"{name} must be a host name or address (got {value!r})")


def origins(name: str, value: object) -> None:
    if not isinstance(value, (tuple, list)) or not all(isinstance(o, str) for o in value):
        raise SettingsError(f"{name} must be a list of origins such as http://localhost:3000")
    for origin in value:
        parse_origin(origin)


def folder(name: str, value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise SettingsError(f"{name} must be a folder path (got {value!r})")


def folders(name: str, value: object) -> None:
    if not isinstance(value, (tuple, list)) or not all(isinstance(p, str) and p for p in value):
        raise SettingsError(f"{name} must be a list of folder paths")


def pixels(name: str, value: object) -> None:
    shape = PIXEL_FIELDS[name]
    if value is None:
        return
    if (
        not isinstance(value, (tuple, list)) or len(value) != len(shape)
        or not all(isinstance(v, int) and not isinstance(v, bool) and abs(v) < 100_000 for v in value)
        or any(v <= 0 for v, part in zip(value, shape) if part in ("width", "height"))
    ):
        raise SettingsError(f"{name} must be [{', '.join(shape)}] in pixels (got {value!r})")


def json_object(name: str, value: object) -> None:
    if not isinstance(value, dict):
        raise SettingsError(f"{name} must be an object")


# The app's own fields and their rules; the engine's settings GuiSettings keeps are added by `field_rules`.
APP_RULES: dict[str, Rule] = {
    **dict.fromkeys(APP_RANGES, app_number),
    **dict.fromkeys(BOOLEANS, boolean),
    **dict.fromkeys(PIXEL_FIELDS, pixels),
    "device": device, "vision_device": device,
    "engine": one_of(ENGINES),
    "remote_constraint": one_of(REMOTE_CONSTRAINTS),
    "remote_url": url,
    "remote_api_key": one_line, "remote_model": one_line, "api_key": one_line,
    "system_prompt": text,
    "hotkey": hotkey,
    "api_host": host,
    "api_allowed_origins": origins,
    "last_model": folder,
    "recent_models": folders,
    "extra": json_object,
}


def field_rules(engine_settings: Iterable[str]) -> dict[str, Rule]:
    """Every field's rule: the engine's declared settings by name, then the app's own."""
    return {**dict.fromkeys(engine_settings, declared), **APP_RULES}
