import json
import os
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
MODELS = FIXTURES / "models"
REFERENCE = FIXTURES / "reference"


@pytest.fixture(autouse=True, scope="session")
def _isolated_dirs(tmp_path_factory):
    # Never touch the user's real config/data/cache from tests.
    root = tmp_path_factory.mktemp("decider-home")
    for name in ("CONFIG", "DATA", "CACHE"):
        os.environ[f"DECIDER_{name}_DIR"] = str(root / name.lower())
    yield


def model_dir(name: str) -> Path:
    return MODELS / name


def reference(name: str) -> dict:
    return json.loads((REFERENCE / f"{name}.json").read_text())


def case(name: str, model: str = "qwen35-text") -> dict:
    for c in reference(model)["cases"]:
        if c["name"] == name:
            return c
    raise KeyError(name)


@pytest.fixture(scope="session")
def text_runner():
    from engine.runner import ModelRunner

    return ModelRunner(model_dir("qwen35-text"))


@pytest.fixture(scope="session")
def vl_runner():
    from engine.runner import ModelRunner

    return ModelRunner(model_dir("qwen35-vl"))
