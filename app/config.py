"""Where Decider keeps things (platformdirs) and which model it uses when none is named."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from decider.engine.core.errors import ModelError

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


PROMPT_CACHE_MB = 256  # the prompt cache's bound (DECIDER_PROMPT_CACHE_MB overrides; 0 turns it off)


def prompt_cache():
    """The disk cache of shared-context states every local front end uses (None when turned off)."""
    from decider.engine.runners.prompt_cache import PromptCache

    try:
        megabytes = float(os.environ.get("DECIDER_PROMPT_CACHE_MB", PROMPT_CACHE_MB))
    except ValueError:
        megabytes = PROMPT_CACHE_MB
    if megabytes <= 0:
        return None
    return PromptCache(cache_dir() / "prompts", int(megabytes * 1024 * 1024))


DEMO_MODEL_DIR = Path(__file__).resolve().parents[1] / "resources" / "demo-model"
SEEING_DEMO_MODEL_DIR = Path(__file__).resolve().parents[1] / "resources" / "demo-vl-model"


def demo_model_dir() -> Path | None:
    """The bundled demo model, when this checkout ships one."""
    return DEMO_MODEL_DIR if (DEMO_MODEL_DIR / "config.json").is_file() else None


def _bundled() -> tuple[tuple[Path, str], ...]:
    # Read at call time: tests point the folders elsewhere.
    return (DEMO_MODEL_DIR, "demo model"), (SEEING_DEMO_MODEL_DIR, "seeing demo model")


def demo_models() -> list[tuple[Path, str]]:
    """The bundled demo models this checkout ships, each with the label it is shown under."""
    return [(path, label) for path, label in _bundled() if (path / "config.json").is_file()]


def demo_label(path: str | Path) -> str | None:
    """"demo model" / "seeing demo model" for a bundled model's folder, else None."""
    where = Path(path).resolve()
    return next((label for folder, label in _bundled() if where == folder), None)


def resolve_model_dir(model: str | None) -> Path:
    """--model, else $DECIDER_MODEL, else the bundled demo model."""
    chosen = model or os.environ.get("DECIDER_MODEL")
    if chosen:
        return Path(chosen).expanduser()
    demo = demo_model_dir()
    if demo is not None:
        return demo
    raise ModelError("no model given: pass --model DIR (an optimum-intel OpenVINO export of Qwen3.5; see `decider pull`)")
