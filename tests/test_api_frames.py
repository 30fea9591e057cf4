"""`POST /v1/decide/frame` (issue 39 item 2, the API side): a game pushes its frames; a decision runs only when
the picture changed. Real HTTP against the fixture vision model; the one-in-flight / latest-wins rule also on the
coroutine itself with a decision the test holds open (timing two HTTP clients against a fast engine would not
show which frame arrived while which ran)."""

from __future__ import annotations

import asyncio
import base64
import io

import numpy as np
import pytest
from PIL import Image

from decider.app.api.server import ApiServer
from decider.app.service import EngineService
from decider.engine.compile.devices import DeviceOptions
from decider.engine.vision.frame_change import signature
from support.models import model_dir
from test_api import assert_error, call
from test_watch_mode import noisy, scene

GREEDY = {"temperature": 0, "seed": 1, "frequency_penalty": 0, "presence_penalty": 0}


def data_url(frame: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


@pytest.fixture(scope="module")
def api():
    decided = []
    server = ApiServer(EngineService(model_dir("qwen35-vl"), DeviceOptions(device="CPU")), "127.0.0.1", 0,
                       on_decision=decided.append)
    server.decided = decided
    server.start()
    yield server
    server.stop()


def push(api, frame: np.ndarray, question: str = "Which door is open?", **extra):
    return call(api.port, "POST", "/v1/decide/frame", {
        "question": question, "options": ["Left", "Right"], "images": [data_url(frame)], **GREEDY, **extra})


def test_unchanged_frames_cost_no_decision_changed_ones_do(api):
    status, _, first = push(api, scene(1), watch="game-a")
    assert status == 200, first
    assert first["frame"]["unchanged"] is False and first["usage"]["images_encoded"] == 1
    decisions = len(api.decided)
    for _ in range(3):
        status, _, again = push(api, noisy(scene(1), 2), watch="game-a")
        assert status == 200 and again["frame"]["unchanged"] is True
        assert 0 < again["frame"]["difference"] < 0.005
        assert again["options"] == first["options"] and again["frame"]["decided_at"] == first["frame"]["decided_at"]
    assert len(api.decided) == decisions  # no decision ran
    # a new question on the same picture is decided; the encoded picture is reused
    status, _, asked = push(api, scene(1), question="Which door is closed?", watch="game-a")
    assert asked["frame"]["unchanged"] is False and asked["usage"]["images_encoded"] == 0
    # the picture changes: decided, a new picture encoded
    status, _, changed = push(api, scene(2), question="Which door is closed?", watch="game-a")
    assert status == 200 and changed["frame"]["unchanged"] is False and changed["frame"]["difference"] > 0.02
    assert changed["usage"]["images_encoded"] == 1 and len(api.decided) == decisions + 2
    # another watch keeps its own last frame; a threshold of 1 makes any change "unchanged"
    status, _, other = push(api, scene(2), watch="game-b")
    assert other["frame"]["unchanged"] is False
    status, _, other = push(api, scene(3), watch="game-b", threshold=1.0)
    assert other["frame"]["unchanged"] is True


@pytest.mark.parametrize(("extra", "param"), [
    ({"images": []}, "images"),
    ({"threshold": 2}, "threshold"),
    ({"threshold": "low"}, "threshold"),
    ({"watch": ""}, "watch"),
    ({"watch": "x" * 65}, "watch"),
])
def test_a_bad_frame_request_is_a_400_naming_its_field(api, extra, param):
    body = {"question": "Which door?", "options": ["Left", "Right"], "images": [data_url(scene(1))], **extra}
    status, _, data = call(api.port, "POST", "/v1/decide/frame", body)
    assert_error(status, data, 400, param=param)


def test_two_frames_are_one_decision_too_many(api):
    body = {"question": "Which door?", "options": ["Left", "Right"], "images": [data_url(scene(1))] * 2}
    status, _, data = call(api.port, "POST", "/v1/decide/frame", body)
    assert_error(status, data, 400, param="images")


# ---------------------------------------------------------------- one in flight, the latest frame wins


class HeldDecisions:
    """Decisions the test ends one at a time; each result names the frame it was made for."""

    def __init__(self):
        self.started: list[str] = []
        self.release: dict[str, asyncio.Event] = {}

    def decide(self, name: str):
        async def run():
            self.started.append(name)
            self.release[name] = asyncio.Event()
            await self.release[name].wait()
            return FakeResult(name)

        return run


class FakeResult:
    def __init__(self, name: str):
        self.name = name

    def to_dict(self) -> dict:
        return {"frame_name": self.name}


def test_one_decision_in_flight_per_watch_and_a_newer_frame_supersedes_a_waiting_one():
    from decider.app.api.frames import FrameWatch, decide_frame
    from decider.engine.decisions.types import DecisionRequest

    async def scenario():
        watch, held = FrameWatch(), HeldDecisions()
        request = DecisionRequest(question="Which door?", options=("Left", "Right"))
        frames = {name: signature(scene(seed)) for name, seed in (("one", 1), ("two", 2), ("three", 3))}
        first = asyncio.ensure_future(decide_frame(watch, request, frames["one"], 0.02, held.decide("one")))
        await asyncio.sleep(0.01)
        second = asyncio.ensure_future(decide_frame(watch, request, frames["two"], 0.02, held.decide("two")))
        await asyncio.sleep(0.01)
        third = asyncio.ensure_future(decide_frame(watch, request, frames["three"], 0.02, held.decide("three")))
        await asyncio.sleep(0.01)
        assert held.started == ["one"]  # one in flight; two and three wait
        held.release["one"].set()
        assert (await first)["frame_name"] == "one"
        await asyncio.sleep(0.01)
        assert held.started == ["one", "three"]  # two was never decided: three is newer
        held.release["three"].set()
        got_second, got_third = await second, await third
        assert got_third["frame_name"] == "three" and got_third["frame"]["superseded"] is False
        assert got_second["frame_name"] == "three" and got_second["frame"]["superseded"] is True
        # the latest frame again: the last decision, unchanged
        again = await decide_frame(watch, request, frames["three"], 0.02, held.decide("never"))
        assert again["frame"]["unchanged"] is True and held.started == ["one", "three"]

    asyncio.run(scenario())
