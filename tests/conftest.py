"""Pytest fixtures and hooks only: what test modules import (paths, the fixture models, helpers) lives in
tests/support/, so no module imports `conftest`."""

import atexit
import importlib.abc
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Before any QApplication exists (pytest-qt creates one for any test that takes qtbot): a test file run on its own
# needs no display either, not only the ones importing tests/support/gui.py.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def _import_this_checkout() -> None:
    """The repository root is the package `decider` (pyproject maps it), so the name to import it by is not a
    folder here. Tests must exercise *this* checkout, in subprocesses too, whatever checkout an editable
    install points at: a link named `decider` in a temporary folder goes first on sys.path and PYTHONPATH."""
    folder = Path(tempfile.mkdtemp(prefix="decider-tests-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    (folder / "decider").symlink_to(ROOT, target_is_directory=True)
    sys.path.insert(0, str(folder))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    for name in [m for m in sys.modules if m == "decider" or m.startswith("decider.")]:
        del sys.modules[name]
    sys.meta_path.insert(0, _NoBareLayers())


class _NoBareLayers(importlib.abc.MetaPathFinder):
    """`python -m pytest` puts the repository root on sys.path, where `engine` (say) imports as a top-level
    package that no installed copy has: code that names a layer without `decider.` would pass here and fail
    for users. Refuse those names in the test process."""

    def find_spec(self, name, path=None, target=None):
        if path is None and name in ("app", "engine", "ui"):
            raise ModuleNotFoundError(f"No module named {name!r} (the layers are decider.{name})", name=name)
        return None


_import_this_checkout()


from support.fast_pin import pin_fast_choice  # noqa: E402
from support.models import model_dir, npu_static_runner  # noqa: E402 (after the checkout is linked)


@pytest.fixture(autouse=True, scope="session")
def _isolated_dirs(tmp_path_factory):
    # Never touch the user's real config/data/cache from tests.
    root = tmp_path_factory.mktemp("decider-home")
    for name in ("CONFIG", "DATA", "CACHE"):
        os.environ[f"DECIDER_{name}_DIR"] = str(root / name.lower())
    yield


@pytest.fixture(autouse=True, scope="session")
def _pinned_fast_choice(_isolated_dirs):
    # The tests comparing --fast bars with exact ones need a reduced compile whichever wins on this CPU, and --fast
    # compiles exact where the measurement found nothing faster: the session's cache says the stated reduced default
    # won for every fixture model (tests/support/fast_pin.py says why and what else that fixes). Written where a
    # runner without a cache folder of its own and the app's front ends look (engine/compile/measurements.cache_file,
    # app/config.compiled_cache_dir).
    from decider.engine.compile.fast_tuning import CACHE_NAME

    pin_fast_choice(Path(os.environ["DECIDER_CACHE_DIR"]) / "compiled" / CACHE_NAME)
    yield


# Modules whose `text_runner` tests also run through the NPU plugin's static path (NPUW on the CPU).
NPU_PATH_MODULES = {"test_seed_behaviours", "test_decide"}


def pytest_generate_tests(metafunc):
    if "text_runner" in metafunc.fixturenames and metafunc.module.__name__ in NPU_PATH_MODULES:
        metafunc.parametrize("text_runner", ["dynamic", "npu-static"], indirect=True, scope="session")


@pytest.fixture(autouse=True)
def _fresh_npu_static_state(request):
    # The static runner computes prompts in fixed-size chunks, so a prompt continued from another test's
    # history is not bit-identical to the same prompt computed from its start; each test starts clean.
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("text_runner") == "npu-static":
        runner = request.getfixturevalue("text_runner")
        runner.reset()
        runner.clear_snapshots()
    yield


@pytest.fixture(scope="session")
def text_runner(request):
    from decider.engine.runners.runner import ModelRunner

    if getattr(request, "param", "dynamic") == "npu-static":
        # Two variants keep the NPUW compile short; prompts still run in several chunk shapes.
        return npu_static_runner(model_dir("qwen35-text"), static_chunks=(16, 1))
    return ModelRunner(model_dir("qwen35-text"))


@pytest.fixture(scope="session")
def vl_runner():
    from decider.engine.runners.runner import ModelRunner

    return ModelRunner(model_dir("qwen35-vl"))
