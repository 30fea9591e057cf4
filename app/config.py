"""Where Decider keeps things (platformdirs) and which model it uses when none is named."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from engine.errors import ModelError

APP_NAME = "decider"


def config_dir() -> Path:
    return Path(os.environ.get("DECIDER_CONFIG_DIR") or platformdirs.user_config_dir(APP_NAME))


def data_dir() -> Path:
    return Path(os.environ.get("DECIDER_DATA_DIR") or platformdirs.user_data_dir(APP_NAME))


def cache_dir() -> Path:
    return Path(os.environ.get("DECIDER_CACHE_DIR") or platformdirs.user_cache_dir(APP_NAME))


def compiled_cache_dir() -> Path:
    path = cache_dir() / "compiled"
    path.mkdir(parents=True, exist_ok=True)
    return path


def resolve_model_dir(model: str | None) -> Path:
    if model:
        return Path(model).expanduser()
    raise ModelError("no model given: pass --model DIR (an optimum-intel OpenVINO export of Qwen3.5)")
