"""Watch mode (issue 39 item 2): the companion re-decides by itself when the game's picture changes.

The change measure and the gate on plain arrays; the screen watch with a fake frame source (the screen grabber's
fake is allowed: a real grab needs a desktop); then the window on the real engine and the fixture vision model,
fed frames by a fake source, deciding through its real path.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from decider.engine.core.errors import SettingsError  # noqa: E402
from decider.engine.vision.frame_change import DEFAULT_CHANGE_THRESHOLD, FrameGate, Verdict, difference, signature  # noqa: E402

RNG = np.random.default_rng(39)


def scene(seed: int, height: int = 360, width: int = 640) -> np.ndarray:
    """A game-like frame: a few large flat rectangles on a background."""
    rng = np.random.default_rng(seed)
    frame = np.full((height, width, 3), rng.integers(0, 255, 3), np.uint8)
    for _ in range(6):
        top, left = rng.integers(0, height - 40), rng.integers(0, width - 60)
        frame[top:top + rng.integers(30, height // 2), left:left + rng.integers(40, width // 2)] = rng.integers(0, 255, 3)
    return frame


def noisy(frame: np.ndarray, amount: int = 4) -> np.ndarray:
    return np.clip(frame.astype(int) + RNG.integers(-amount, amount + 1, frame.shape), 0, 255).astype(np.uint8)


# ---------------------------------------------------------------- the change measure


def test_noise_and_a_blinking_cursor_stay_under_the_threshold_a_new_scene_does_not():
    base = scene(1)
    cursor = base.copy()
    cursor[100:116, 200:202] = 255
    assert difference(signature(base), signature(base)) == 0.0
    assert difference(signature(base), signature(noisy(base))) < DEFAULT_CHANGE_THRESHOLD / 4
    assert difference(signature(base), signature(cursor)) < DEFAULT_CHANGE_THRESHOLD / 4
    assert difference(signature(base), signature(scene(2))) > DEFAULT_CHANGE_THRESHOLD * 2
    moved = base.copy()
    moved[:180, :320] = 255 - moved[:180, :320]  # a quarter of the screen changes
    assert difference(signature(base), signature(moved)) > DEFAULT_CHANGE_THRESHOLD


def test_the_signature_takes_any_size_gray_or_colour_and_refuses_what_is_not_a_frame():
    assert signature(np.zeros((3, 5), np.uint8)).shape == (32, 32, 3)
    white = signature(np.full((7, 9, 4), 255, np.uint8))
    assert white.shape == (32, 32, 3) and np.allclose(white, 1.0)
    assert difference(signature(np.zeros((40, 40, 3), np.uint8)), white) == pytest.approx(1.0)
    for bad in (np.zeros((0, 5, 3), np.uint8), np.zeros(5, np.uint8), "pixels"):
        with pytest.raises(SettingsError):
            signature(bad)  # type: ignore[arg-type]
    with pytest.raises(SettingsError):
        FrameGate(threshold=1.5)


# ---------------------------------------------------------------- the gate


def test_the_gate_decides_a_changed_frame_and_nothing_for_an_unchanged_one():
    gate: FrameGate[str] = FrameGate()
    base = scene(1)
    assert gate.offer(signature(base), "first") is Verdict.DECIDE
    assert gate.finished() is None
    for _ in range(5):
        assert gate.offer(signature(noisy(base)), "same") is Verdict.UNCHANGED
    assert gate.offer(signature(scene(2)), "changed") is Verdict.DECIDE


def test_at_most_one_decision_in_flight_and_the_latest_frame_wins():
    gate: FrameGate[str] = FrameGate()
    assert gate.offer(signature(scene(1)), "one") is Verdict.DECIDE
    for seed, name in ((2, "two"), (3, "three"), (4, "four")):
        assert gate.offer(signature(scene(seed)), name) is Verdict.HELD
    assert gate.finished() == "four"  # two and three are dropped: no queue
    assert gate.in_flight
    assert gate.finished() is None and not gate.in_flight
    # a change that goes back to the frame being decided while in flight is moot
    assert gate.offer(signature(scene(5)), "five") is Verdict.DECIDE
    assert gate.offer(signature(scene(6)), "six") is Verdict.HELD
    assert gate.offer(signature(noisy(scene(5))), "five again") is Verdict.UNCHANGED
    assert gate.finished() is None


def test_a_busy_engine_holds_the_frame_until_it_is_free_and_forget_redecides():
    gate: FrameGate[str] = FrameGate()
    assert gate.offer(signature(scene(1)), "one", engine_busy=True) is Verdict.HELD
    assert gate.take_held() == "one" and gate.in_flight
    assert gate.finished() is None
    assert gate.offer(signature(scene(1)), "again") is Verdict.UNCHANGED
    gate.forget()  # a new question: the same picture is decided again
    assert gate.offer(signature(scene(1)), "again") is Verdict.DECIDE


# ---------------------------------------------------------------- the screen watch, fake frames

pytest.importorskip("pytestqt")

from PySide6.QtCore import QRect  # noqa: E402
from PySide6.QtGui import QImage  # noqa: E402


def qimage(frame: np.ndarray) -> QImage:
    height, width, _ = frame.shape
    return QImage(frame.tobytes(), width, height, 3 * width, QImage.Format.Format_RGB888).copy()


class FakeScreen:
    """Frames to grab, in order (the last one repeats); counts the grabs."""

    def __init__(self, frames: list[np.ndarray]):
        self.frames = list(frames)
        self.grabs = 0

    def show(self, frame: np.ndarray) -> None:
        self.frames = [frame]

    def __call__(self):
        from decider.ui.screen_capture import Capture

        self.grabs += 1
        frame = self.frames.pop(0) if len(self.frames) > 1 else self.frames[0]
        return Capture(qimage(frame), "fake", QRect(0, 0, frame.shape[1], frame.shape[0]))


class FakeDecisions:
    """Records the frames decided on; a decision stays in flight until the test ends it."""

    def __init__(self):
        self.decided: list[QImage] = []
        self.busy = False

    def __call__(self, image: QImage) -> bool:
        self.decided.append(image)
        return True


@pytest.fixture
def watch(qtbot):
    from decider.ui.screen_watch import ScreenWatch

    screen, decisions, lock = FakeScreen([scene(1)]), FakeDecisions(), {"locked": False}
    made = ScreenWatch(screen, decisions, lambda: decisions.busy, lambda: lock["locked"], interval_ms=60_000)
    made.fake = (screen, decisions, lock)
    yield made
    made.stop()


def test_unchanged_frames_cost_no_decision_and_a_changed_one_does(watch):
    screen, decisions, _ = watch.fake
    watch.start()  # the first frame is decided
    assert len(decisions.decided) == 1 and watch.status_text() == "watching · deciding…"
    watch.decision_ended(True)
    for _ in range(5):
        screen.show(noisy(scene(1)))
        assert watch.tick() is Verdict.UNCHANGED
    assert len(decisions.decided) == 1 and screen.grabs == 6
    assert watch.status_text().startswith("watching · decided ") and watch.status_text().endswith(" ago")
    screen.show(scene(2))
    assert watch.tick() is Verdict.DECIDE
    assert len(decisions.decided) == 2


def test_one_decision_in_flight_and_when_it_ends_only_the_latest_frame_is_decided(watch):
    screen, decisions, _ = watch.fake
    watch.start()
    for seed in (2, 3, 4):
        screen.show(scene(seed))
        assert watch.tick() is Verdict.HELD
    assert len(decisions.decided) == 1
    watch.decision_ended(True)
    assert len(decisions.decided) == 2
    assert qimage(scene(4)) == decisions.decided[1]  # the latest, not 2 or 3
    watch.decision_ended(True)
    assert len(decisions.decided) == 2  # nothing else was waiting


def test_nothing_is_grabbed_while_paused_or_locked(watch):
    screen, decisions, lock = watch.fake
    watch.start()
    watch.decision_ended(True)
    grabs = screen.grabs
    watch.set_paused(True)
    screen.show(scene(2))
    for _ in range(3):
        assert watch.tick() is None
    assert screen.grabs == grabs and watch.status_text() == "watching · paused"
    watch.set_paused(False)
    lock["locked"] = True
    assert watch.tick() is None and screen.grabs == grabs and watch.status_text() == "watching · screen locked"
    lock["locked"] = False
    assert watch.tick() is Verdict.DECIDE and screen.grabs == grabs + 1
    watch.stop()
    assert watch.tick() is None and watch.status_text() == ""


def test_the_overlay_is_blanked_out_of_the_grabbed_frame():
    from decider.ui.image_input import qimage_to_pixels
    from decider.ui.screen_watch import blank_out

    frame = qimage(np.full((100, 200, 3), 200, np.uint8))
    masked = qimage_to_pixels(blank_out(frame, QRect(1000, 500, 200, 100), QRect(1150, 450, 100, 100)))
    assert (masked[:50, 150:] == 0).all() and (masked[50:, :] == 200).all() and (masked[:, :150] == 200).all()
    assert blank_out(frame, QRect(0, 0, 200, 100), QRect(500, 500, 10, 10)) is frame


# ---------------------------------------------------------------- the window, real engine, fixture vision model

from decider.app.preferences import GuiSettings  # noqa: E402
from support.layout_checks import layout_problems  # noqa: E402
from support.models import model_dir  # noqa: E402

VL = str(model_dir("qwen35-vl"))


@pytest.fixture
def vl_window(qtbot, tmp_path, monkeypatch):
    from decider.app.gui import build_window, create_app

    monkeypatch.setenv("DECIDER_CONFIG_DIR", str(tmp_path / "config"))
    create_app()
    engine, win = build_window(GuiSettings(device="CPU", watch_interval_ms=60_000), register_global_hotkey=False,
                               history=False)
    qtbot.addWidget(win)
    with qtbot.waitSignal(win.model_ready, timeout=60_000):
        win.load_model(VL)
    win.question.setPlainText("Which door is open?")
    win.options.set_options(["Left", "Right"])
    yield win
    win.close()
    engine.close()


def test_the_window_watches_decides_on_changes_only_and_reuses_the_encoded_picture(qtbot, vl_window):
    window = vl_window
    screen = FakeScreen([scene(1)])
    window.watch.set_frame_source(screen)
    shown = []
    window.decision_shown.connect(shown.append)
    with qtbot.waitSignal(window.decision_shown, timeout=60_000):
        window.header.watch_button.setChecked(True)  # the setting, the overlay and the first grab
    assert window.settings.watch_enabled and window.overlay.isVisible()
    assert window.overlay.source.text() == "· watching the screen"
    first = shown[-1]
    assert first.usage["images_encoded"] == 1 and window.image_slot.summary() == "640×360 · watching the screen"
    qtbot.waitUntil(lambda: window.overlay.watch_status.text().startswith("watching · decided "), timeout=5_000)
    window.overlay.show()
    qtbot.wait(50)  # the text just changed: its layout pass
    assert layout_problems(window.overlay) == []  # the state and the age fit the overlay, whole
    # the same picture: grabbed, no decision
    for _ in range(3):
        screen.show(noisy(scene(1), 2))
        assert window.watch.screen.tick() is Verdict.UNCHANGED
    assert len(shown) == 1
    # a new question on the same picture: decided on the next grab, the encoded picture reused
    screen.show(scene(1))
    window.question.setPlainText("Which door is closed?")
    with qtbot.waitSignal(window.decision_shown, timeout=60_000):
        assert window.watch.screen.tick() is Verdict.DECIDE
    assert shown[-1].usage["images_encoded"] == 0 and len(shown) == 2
    # the game's picture changes: decided again, a new picture encoded
    screen.show(scene(2))
    with qtbot.waitSignal(window.decision_shown, timeout=60_000):
        assert window.watch.screen.tick() is Verdict.DECIDE
    assert shown[-1].usage["images_encoded"] == 1 and len(shown) == 3
    # a model loaded while watching decides the picture on screen, changed or not
    with qtbot.waitSignal(window.model_ready, timeout=60_000):
        window.load_model(VL)
    with qtbot.waitSignal(window.decision_shown, timeout=60_000):
        assert window.watch.screen.tick() is Verdict.DECIDE
    assert len(shown) == 4
    # Pause: nothing grabbed; the hotkey's toggle stops watching
    grabs = screen.grabs
    window.header.pause_button.setChecked(True)
    screen.show(scene(3))
    assert window.watch.screen.tick() is None and screen.grabs == grabs
    assert window.overlay.watch_status.text() == "watching · paused"
    window.watch.toggle()
    assert not window.settings.watch_enabled and not window.header.watch_button.isChecked()
    assert not window.overlay.watch_status.isVisible()
