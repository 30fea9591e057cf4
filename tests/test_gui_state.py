"""State that follows the model and the form (issue 27 items 1-2): a picture a new model cannot see goes with a
note, the clipboard trigger never sends a picture unsaid, an error never sits on an older result, form errors go
once fixed, a failure's status message goes on the next success. The real engine thread, offscreen."""

from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from support.gui import FIXTURE, ask, dirs, load, make_window  # noqa: E402,F401 (pytest fixtures)

from PySide6.QtGui import QGuiApplication, QImage  # noqa: E402

from support.models import FIXTURES, model_dir  # noqa: E402

VL = str(model_dir("qwen35-vl"))
SCREEN = str(FIXTURES / "images" / "screen_640x360.png")


def shown_result(window) -> bool:
    view = window.result_view
    return not view.choice_row.isHidden() or not view.bars.isHidden()


def decided(qtbot, window, source=None):
    with qtbot.waitSignal(window.decision_shown, timeout=60_000) as blocker:
        assert window.decide() if source is None else source()
    return blocker.args[0]


def test_a_picture_goes_with_a_note_when_a_model_that_cannot_see_comes_in(qtbot, make_window):
    window = make_window(register_global_hotkey=False)
    load(qtbot, window, VL)
    window.image_slot.set_image(QImage(SCREEN), "captured")
    assert window.image_slot.pixels()
    load(qtbot, window, FIXTURE)
    assert window.image_slot.pixels() == ()
    assert "cannot see images" in window.image_slot.caption.text()
    ask(window, "Which of these is a food?", ["cat", "bread", "hammer"])
    result = decided(qtbot, window)  # Decide works at once: no Clear needed
    assert result.usage.get("image_tokens", 0) == 0


def test_a_seeing_model_keeps_the_picture(qtbot, make_window):
    window = make_window(register_global_hotkey=False)
    load(qtbot, window, VL)
    window.image_slot.set_image(QImage(SCREEN), "captured")
    load(qtbot, window, VL)  # reloaded (a setting changed): the picture still applies
    assert window.image_slot.pixels()


def test_the_clipboard_trigger_says_when_it_sends_the_picture_in_the_slot(qtbot, make_window):
    window = make_window(register_global_hotkey=False)
    load(qtbot, window, VL)
    window.image_slot.set_image(QImage(SCREEN), "captured")
    QGuiApplication.clipboard().setText("Which door is open?\nA. Left\nB. Right")
    result = decided(qtbot, window, lambda: window.hotkey_triggered.emit() or True)
    assert result.usage["image_tokens"] > 0
    assert "picture in the slot (640×360 · captured)" in window.status.current_message()


def test_the_clipboard_trigger_drops_a_picture_the_model_cannot_see_and_says_so(qtbot, make_window):
    window = make_window(register_global_hotkey=False)
    load(qtbot, window, FIXTURE)
    window.image_slot.set_image(QImage(SCREEN), "pasted")  # a picture the text model cannot use
    QGuiApplication.clipboard().setText("Which of these is a food?\nA. cat\nB. bread\nC. hammer")
    result = decided(qtbot, window, lambda: window.hotkey_triggered.emit() or True)
    assert result.options[result.choice_index].text in ("cat", "bread", "hammer")
    assert window.image_slot.pixels() == () and "cannot see images" in window.image_slot.caption.text()
    assert "text alone" in window.status.current_message()


def test_an_error_clears_the_previous_result_and_a_success_clears_the_failure(qtbot, make_window):
    window = make_window(register_global_hotkey=False)
    load(qtbot, window, FIXTURE)
    ask(window, "Pick a colour", ["red", "blue"])
    decided(qtbot, window)
    assert shown_result(window) and window.inspector.options_table.isVisibleTo(window.inspector)
    # a failure from the engine: a picture the text model cannot see, attached after it loaded
    window.image_slot.set_image(QImage(SCREEN), "pasted")
    ask(window, "Which of these is a food?", ["cat", "bread", "hammer"])
    with qtbot.waitSignal(window.decision_failed, timeout=60_000):
        assert window.decide()
    assert "cannot see images" in window.result_view.error_box.text()
    assert not shown_result(window) and window.result_view.result is None  # no "blue 41 %" under it
    assert not window.inspector.options_table.isVisibleTo(window.inspector)
    assert window.status.current_message().startswith("Decision failed")
    window.image_slot.clear()
    decided(qtbot, window)
    assert not window.status.current_message().startswith("Decision failed")
    assert shown_result(window) and window.result_view.error_box.isHidden()


def test_a_form_error_goes_once_the_form_is_right(qtbot, make_window):
    window = make_window(register_global_hotkey=False)
    load(qtbot, window, FIXTURE)
    ask(window, "", ["cat", "bread"])
    assert not window.decide()
    error = window.result_view.error_box
    assert not error.isHidden() and "empty" in error.text()
    window.question.setPlainText("Which of these is a food?")
    assert error.isHidden() and not window.result_view.placeholder.isHidden()
    window.options.set_options(["cat"])  # still wrong, for another reason: the message follows
    window.question.setPlainText("Which of these is a food? ")
    assert window.decide() is False and not error.isHidden()
    window.options.set_options(["cat", "bread"])
    assert error.isHidden()


def test_another_model_does_not_show_the_last_models_result(qtbot, make_window):
    window = make_window(register_global_hotkey=False)
    load(qtbot, window, FIXTURE)
    ask(window, "Pick a colour", ["red", "blue"])
    decided(qtbot, window)
    load(qtbot, window, VL)
    assert not shown_result(window) and window.last_result is None
    assert not window.inspector.options_table.isVisibleTo(window.inspector)
