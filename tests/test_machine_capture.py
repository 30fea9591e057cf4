"""This machine's capture budget (issue 39 item 3, app/machine_capture.py): `decider doctor --tune` times screen
decisions on the model here at a ladder of budgets, keeps the largest that fits the wait, and a decision left at the
committed default then runs at it.

The decisions are real (the fixture vision model, given real Qwen3.5's 256² to 4096² budget as
tests/test_capture_budget.py does); the wait a budget must fit is a parameter, so a test can make every budget fit
or none. A fake timer stands in only for a machine too busy to measure on (an error path).
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from decider.app import machine_capture
from decider.app.capture_budget import FLOOR
from decider.app.capture_timing import CaptureTiming, game_screen
from decider.app.doctor import Report, _check_capture
from decider.engine.compile.devices import DeviceOptions
from decider.engine.core.settings import IMAGE_PIXELS_DEFAULT, SamplingSettings
from decider.engine.decisions.types import DecisionRequest
from support.gui import dirs, make_window  # noqa: F401 - fixtures
from support.models import model_dir

QWEN_MAX_PIXELS = 4096 * 4096


@pytest.fixture(scope="module")
def runner():
    from decider.engine.runners.runner import ModelRunner

    runner = ModelRunner(model_dir("qwen35-vl"), DeviceOptions(device="CPU"))
    runner.vision.processor = replace(runner.vision.processor, max_pixels=QWEN_MAX_PIXELS)
    return runner


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DECIDER_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_the_ladder_holds_only_budgets_that_give_the_model_another_picture():
    assert machine_capture.rungs(QWEN_MAX_PIXELS) == list(machine_capture.LADDER)
    assert machine_capture.rungs(300_000) == [300_000, 230_400, 147_456, 102_400, FLOOR]
    assert machine_capture.rungs(FLOOR) == [FLOOR]
    assert machine_capture.rungs(128 * 128) == []  # the seeing demo's own budget: every setting is the same picture
    assert IMAGE_PIXELS_DEFAULT in machine_capture.LADDER  # the walk starts at the committed default


def test_a_fast_machine_climbs_to_the_full_grab_and_a_slow_one_falls_to_the_floor(runner):
    fast, line = machine_capture.measure(runner, target_s=1e9, require_quiet=False)
    # measured upwards from the default: 230,400, then 460,800, then the full 921,600 pixels
    assert [row[0] for row in fast.rows] == [1280 * 720, 640 * 720, IMAGE_PIXELS_DEFAULT]
    assert fast.budget == 1280 * 720 and "the largest budget whose capture-to-bars fits" in fast.reason
    assert all(seconds > 0 for _, seconds, _ in fast.rows) and line == fast.summary()
    slow, _ = machine_capture.measure(runner, target_s=1e-9, require_quiet=False)
    assert [row[0] for row in slow.rows] == [IMAGE_PIXELS_DEFAULT, 147_456, 102_400, FLOOR]  # down to the floor
    assert slow.budget == FLOOR and "no quiet row fits" in slow.reason
    # the larger picture took longer than the floor's (880 against 56 image tokens): real decisions were timed
    assert fast.rows[0][1] > slow.rows[-1][1]


def test_a_budget_between_stops_where_the_next_one_would_not_fit(runner):
    """The walk stops at the first budget past the wait: a target between two measured budgets' times keeps the
    smaller budget and measures nothing beyond the larger one."""
    times = {1280 * 720: 9.0, 640 * 720: 4.0, IMAGE_PIXELS_DEFAULT: 2.0, 147_456: 1.5, 102_400: 1.0, FLOOR: 0.5}
    measured, _ = machine_capture.measure(runner, target_s=3.0, timer=_timer(times, busy=0.0))
    assert measured.budget == IMAGE_PIXELS_DEFAULT and [r[0] for r in measured.rows] == [640 * 720, IMAGE_PIXELS_DEFAULT]
    times[IMAGE_PIXELS_DEFAULT] = 3.5
    measured, _ = machine_capture.measure(runner, target_s=3.0, timer=_timer(times, busy=0.0))
    assert measured.budget == 147_456 and [r[0] for r in measured.rows] == [IMAGE_PIXELS_DEFAULT, 147_456]


def _timer(times: dict[int, float], busy: float):
    def timer(runner, budget):
        return CaptureTiming(budget, QWEN_MAX_PIXELS, (1, 1), 1, times[budget], 0.0, 0.0, 0.0, 0.0, 2, busy)
    return timer


def test_a_busy_machine_keeps_nothing_and_says_to_measure_again():
    measured, line = machine_capture.measure(_VisionOnly(), timer=_timer({IMAGE_PIXELS_DEFAULT: 1.0, 640 * 720: 1.5,
                                                                          1280 * 720: 2.0}, busy=1.5))
    assert measured is None and "busy" in line and "again on a quiet machine" in line


class _VisionOnly:
    class vision:
        class processor:
            max_pixels = QWEN_MAX_PIXELS


def test_a_text_model_and_a_model_under_the_floor_have_nothing_to_measure(runner):
    class Text:
        vision = None

    assert machine_capture.measure(Text())[0] is None
    small = _VisionOnly()
    small.vision = type("V", (), {"processor": type("P", (), {"max_pixels": 128 * 128})})
    measured, line = machine_capture.measure(small)
    assert measured is None and "under the setting's floor" in line


def test_a_kept_budget_is_read_back_for_its_model_only_and_a_broken_file_is_measured_again(runner, cache):
    measured = machine_capture.MachineBudget(102_400, "why", ((230_400, 3.5, 0.0), (102_400, 1.2, 0.0)), 2)
    path = machine_capture.store(runner, cache, measured)
    assert machine_capture.stored(runner, cache) == measured
    assert len(json.loads(path.read_text())) == 1
    other = type("R", (), {"folder": type("F", (), {"path": model_dir("qwen35-text")}), "device": "CPU"})
    assert machine_capture.stored(other, cache) is None  # another model: not measured
    path.write_text("{not json")
    assert machine_capture.stored(runner, cache) is None
    machine_capture.store(runner, cache, measured)  # the broken file is replaced
    assert machine_capture.stored(runner, cache) == measured
    entries = json.loads(path.read_text())
    [key] = entries
    entries[key]["budget"] = 10  # below the setting's range: never used
    path.write_text(json.dumps(entries))
    assert machine_capture.stored(runner, cache) is None


def test_only_a_picture_decision_left_at_the_default_takes_the_machines_budget():
    measured = machine_capture.MachineBudget(102_400, "why", (), 2)
    picture = np.zeros((32, 32, 3), np.uint8)
    at_default = DecisionRequest(question="q", options=("a", "b"), images=(picture,))
    assert machine_capture.apply(at_default, measured).image_pixels == 102_400
    chosen = replace(at_default, image_pixels=500_000)
    assert machine_capture.apply(chosen, measured) is chosen
    words = DecisionRequest(question="q", options=("a", "b"))
    assert machine_capture.apply(words, measured) is words
    assert machine_capture.apply(at_default, None) is at_default


def test_the_service_runs_and_records_a_screen_decision_at_this_machines_budget(runner, cache, tmp_path):
    from decider.app.history import HistoryStore
    from decider.app.service import EngineService

    machine_capture.store(runner, cache, machine_capture.MachineBudget(102_400, "why", (), 2))
    service = EngineService(model_dir("qwen35-vl"), DeviceOptions(device="CPU"), HistoryStore(tmp_path / "h.sqlite"))
    assert service.capture_budget is not None and service.capture_budget.budget == 102_400
    request = DecisionRequest(question="What now?", options=("Attack", "Defend"), images=(game_screen(),),
                              sampling=SamplingSettings(temperature=0.0))
    result = service.decide(request)
    assert service.history.get(result.history_id).settings["image_pixels"] == 102_400
    asked = service.decide(replace(request, image_pixels=300_000))
    assert service.history.get(asked.history_id).settings["image_pixels"] == 300_000


def test_doctor_tune_measures_keeps_and_then_states_this_machines_default(runner, cache):
    report = Report()
    _check_capture(report, runner, tune=True)
    budget_line = next(c for c in report.checks if c.text.startswith("capture budget for this machine"))
    [timing] = [c.text for c in report.checks if c.text.startswith("capture-to-bars")]
    kept = machine_capture.stored(runner, cache)
    if kept is not None:  # measured on a quiet machine
        assert budget_line.status == "ok" and f"{kept.budget:,} pixels" in budget_line.text and "kept in" in budget_line.text
        assert timing.startswith("capture-to-bars at this machine's measured image budget")
        assert f"at a budget of {kept.budget:,} pixels" in timing
    else:  # other work on the CPU: nothing kept, the committed default stated
        assert budget_line.status == "warn" and "again on a quiet machine" in budget_line.text
        assert f"at a budget of {IMAGE_PIXELS_DEFAULT:,} pixels" in timing and "doctor --tune" in timing


def test_the_window_says_what_a_screen_decision_runs_at_on_this_machine(qtbot, make_window, runner, cache):
    from support.gui import load

    machine_capture.store(runner, cache, machine_capture.MachineBudget(102_400, "why", (), 2))
    window = make_window()
    info = load(qtbot, window, str(model_dir("qwen35-vl")))
    assert info.capture_budget == 102_400
    field = window.settings_panel.fields["image_pixels"]
    assert "102,400 pixels" in field.toolTip() and "doctor --tune" in field.toolTip()
    assert "screen pictures at 102,400 pixels (this machine's measured budget)" in window.status.current_message()
    info = load(qtbot, window, str(model_dir("qwen35-text")))  # no pictures, no budget: the field says no more
    assert info.capture_budget is None and "102,400" not in field.toolTip()
