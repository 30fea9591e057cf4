"""The decision controller without any widget: the real engine thread on the fixture model drives its
state machine (model loading → ready, idle → running → done / cancelled / failed)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from decider.app.preferences import GuiSettings  # noqa: E402
from decider.app.engine_thread import EngineThread  # noqa: E402
from decider.engine.compile.devices import DeviceOptions  # noqa: E402
from decider.engine.core.errors import SettingsError  # noqa: E402
from decider.ui.decision_controller import DecisionController, DecisionState, build_request  # noqa: E402

from support.models import model_dir  # noqa: E402

FIXTURE = str(model_dir("qwen35-text"))


@pytest.fixture
def controller(qtbot):
    engine = EngineThread()
    made = DecisionController(engine.worker)
    states: list[str] = []
    made.state_changed.connect(states.append)
    made.states = states
    yield made
    engine.close()


def load_fixture(qtbot, controller) -> object:
    with qtbot.waitSignal(controller.model_ready, timeout=60_000) as blocker:
        controller.load_model(FIXTURE, DeviceOptions(device="CPU"))
    return blocker.args[0]


def test_settings_make_the_request():
    settings = GuiSettings(temperature=0.4, top_k=7, think=True, reasoning_budget=99, permute=True, system_prompt="Be brief.")
    request = build_request("Which?", ["A thing", "Another"], settings)
    assert request.question == "Which?" and request.options == ("A thing", "Another")
    assert request.think and request.permute and request.reasoning_budget == 99 and request.system == "Be brief."
    assert request.sampling == settings.sampling() and request.sampling.top_k == 7
    assert build_request("Q", ["x", "y"], GuiSettings()).system is None
    with pytest.raises(SettingsError, match="only one option"):
        build_request("Q", ["x"], settings)


def test_load_then_decide_runs_idle_running_idle(qtbot, controller):
    request = build_request("Left or right?", ["Left", "Right"], GuiSettings(temperature=0.0))
    assert not controller.ready and controller.submit(request) is False  # no model yet
    controller.load_model(FIXTURE, DeviceOptions(device="CPU"))
    assert controller.loading == FIXTURE and not controller.ready
    with qtbot.waitSignal(controller.model_ready, timeout=60_000) as blocker:
        pass
    info = blocker.args[0]
    assert controller.model_info is info and controller.loading is None and controller.ready
    assert controller.model_key == "qwen35-text"

    with qtbot.waitSignal(controller.decided, timeout=30_000) as blocker:
        assert controller.submit(request, "hotkey")
        assert controller.state is DecisionState.RUNNING and controller.deciding
        assert controller.submit(request) is False  # one at a time
    decided_request, result, source = blocker.args
    assert decided_request is request and source == "hotkey"
    assert controller.state is DecisionState.IDLE and controller.last_result is result
    assert [o.text for o in result.options] == ["Left", "Right"]
    assert controller.states == ["running", "idle"]


def test_cancel_goes_through_cancelling_to_idle(qtbot, controller):
    load_fixture(qtbot, controller)
    settings = GuiSettings(think=True, reasoning_budget=32768, seed=3)
    request = build_request("Think about it for a long time", ["Now", "Later"], settings)
    progress: list[int] = []
    controller.progress.connect(lambda done, total: progress.append(done))
    assert controller.cancel() is False  # nothing runs
    assert controller.submit(request)
    qtbot.waitUntil(lambda: bool(progress), timeout=30_000)
    with qtbot.waitSignal(controller.cancelled, timeout=10_000) as blocker:
        assert controller.cancel()
        assert controller.state is DecisionState.CANCELLING
    assert blocker.args == ["window"]
    assert controller.states == ["running", "cancelling", "idle"] and controller.last_result is None


def test_a_bad_folder_fails_and_keeps_the_loaded_model(qtbot, controller, tmp_path):
    info = load_fixture(qtbot, controller)
    with qtbot.waitSignal(controller.model_failed, timeout=30_000) as blocker:
        controller.load_model(str(tmp_path / "missing"), DeviceOptions(device="CPU"))
    message, path = blocker.args
    assert "not a folder" in message and path == str(tmp_path / "missing")
    assert controller.model_info is info and controller.ready


def test_cancel_stops_every_decision_submitted_before_it_and_none_after(qtbot, controller):
    """submit_decision hands back nothing to keep: cancel() takes no job, it stops all submitted so far."""
    load_fixture(qtbot, controller)
    worker = controller.engine
    long = build_request("Think about it for a long time", ["Now", "Later"], GuiSettings(think=True, reasoning_budget=32768, seed=3))
    short = build_request("Left or right?", ["Left", "Right"], GuiSettings(temperature=0.0))
    cancelled: list[bool] = []
    decided: list[object] = []
    worker.cancelled.connect(lambda: cancelled.append(True))
    worker.decided.connect(lambda request, result: decided.append(request))
    progress: list[int] = []
    worker.progress.connect(lambda done, total: progress.append(done))
    assert worker.submit_decision(long) is None
    worker.submit_decision(short)  # queued behind the long one
    qtbot.waitUntil(lambda: bool(progress), timeout=30_000)  # the long one runs
    worker.cancel()
    worker.submit_decision(short)  # after the cancel: runs
    qtbot.waitUntil(lambda: len(cancelled) == 2 and len(decided) == 1, timeout=30_000)
    assert decided == [short]
