"""Shared pieces of the GUI tests: isolated settings/data dirs, a window on the real engine thread,
and the fixture model."""

from __future__ import annotations

import os

# Before any QApplication exists (pytest-qt creates it on first use): GUI tests never need a display.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from decider.app.preferences import GuiSettings  # noqa: E402
from decider.engine.core.settings import SamplingSettings  # noqa: E402

from support.models import model_dir  # noqa: E402

FIXTURE = str(model_dir("qwen35-text"))
GREEDY = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0)


@pytest.fixture
def gui_dirs(tmp_path, monkeypatch):
    """A fresh config dir per test (settings file), the session's data/cache dirs (compiled cache)."""
    monkeypatch.setenv("DECIDER_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    """Fresh config and data dirs per test: settings, saved temperatures and the history database."""
    monkeypatch.setenv("DECIDER_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("DECIDER_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


@pytest.fixture
def make_window(qtbot, dirs):
    from decider.app.gui import build_window, create_app

    create_app()
    made = []

    def make(settings: GuiSettings | None = None, **kwargs):
        settings = settings or GuiSettings(device="CPU")
        engine, window = build_window(settings, **kwargs)
        qtbot.addWidget(window)
        made.append((engine, window))
        return window

    yield make
    for engine, window in made:
        window.close()
        engine.close()


@pytest.fixture(scope="module")
def direct_service():
    from decider.app.service import EngineService
    from decider.engine.compile.devices import DeviceOptions

    return EngineService(FIXTURE, DeviceOptions(device="CPU"))


def load(qtbot, window, path: str = FIXTURE):
    with qtbot.waitSignal(window.model_ready, timeout=60_000) as blocker:
        window.load_model(path)
    return blocker.args[0]


def ask(window, question: str, options: list[str]) -> None:
    window.question.setPlainText(question)
    window.options.set_options(options)
