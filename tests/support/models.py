"""The fixture models and their reference outputs (tests/fixtures), as test modules name them.

Imported by test files and by conftest.py's fixtures alike: conftest holds pytest fixtures and hooks only,
so no module ever imports `conftest` (pytest loads it itself, and a second import would be a second copy)."""

from __future__ import annotations

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
MODELS = FIXTURES / "models"
REFERENCE = FIXTURES / "reference"


def model_dir(name: str) -> Path:
    return MODELS / name


def reference(name: str) -> dict:
    return json.loads((REFERENCE / f"{name}.json").read_text())


def case(name: str, model: str = "qwen35-text") -> dict:
    for c in reference(model)["cases"]:
        if c["name"] == name:
            return c
    raise KeyError(name)


def npu_static_runner(folder, **options):
    """A static runner through the NPU plugin with NPUW on the CPU: the NPU path without an NPU."""
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.runners.static import StaticRunner

    previous = os.environ.get("DECIDER_NPUW_DEVICES")
    os.environ["DECIDER_NPUW_DEVICES"] = "CPU"
    try:
        return StaticRunner(folder, DeviceOptions(device="NPU", **options))
    finally:
        if previous is None:
            del os.environ["DECIDER_NPUW_DEVICES"]
        else:
            os.environ["DECIDER_NPUW_DEVICES"] = previous
