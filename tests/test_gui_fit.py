"""Text that fits, tables that read, models that can be found (issue 27 items 3-5): checked by the widgets'
state and geometry, offscreen, on the real window and engine."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pytestqt")

from support.gui import FIXTURE, ask, dirs, load, make_window  # noqa: E402,F401 (pytest fixtures)

from PySide6.QtCore import QMimeData, Qt, QTimer, QUrl  # noqa: E402
from PySide6.QtGui import QColor, QImage  # noqa: E402
from PySide6.QtWidgets import QApplication, QFileDialog, QToolButton  # noqa: E402

from decider.engine.decisions.decide import DecisionResult  # noqa: E402
from decider.engine.core.logprobs import Alternative  # noqa: E402

from support.models import FIXTURES, model_dir  # noqa: E402
from support.results import letters_result  # noqa: E402

VL = str(model_dir("qwen35-vl"))


def lines_fit(label) -> None:
    """Every shown line of the label is whole inside it, or visibly elided, and all lines fit its height."""
    shown = label.shown_text().split("\n")
    metrics = label.fontMetrics()
    rect = label.contentsRect()
    # the glyphs' box as QLabel lays them out, descenders of the last line included
    box = metrics.boundingRect(rect, int(label.alignment()), label.shown_text())
    assert box.height() <= rect.height(), (shown, box.height(), rect.height())
    for line in shown:
        assert metrics.horizontalAdvance(line) <= rect.width(), (line, rect.width())
    full = label.text().split("\n")
    for line, whole in zip(shown, full):
        assert line == whole or "…" in line, (line, whole)


def test_a_long_status_message_is_elided_with_its_full_text_in_the_tooltip(qtbot, make_window):
    window = make_window(register_global_hotkey=False)
    window.show()
    qtbot.waitExposed(window)
    load(qtbot, window)
    text = "Decision failed: demo-model cannot see images: the export has no vision encoder " + "and more words " * 30
    window.show_message(text, 10_000)
    label = window.status.message
    assert label.shown_text().endswith("…") and label.toolTip() == text
    lines_fit(label)
    # the permanent labels on the right are not covered
    assert label.geometry().right() < window.status_model.geometry().left()
    window.show_message("Decision cancelled", 4000)
    assert label.shown_text() == "Decision cancelled" and label.toolTip() == ""


def test_the_image_caption_shows_its_whole_top_line_and_never_cuts_a_word(qtbot, make_window, tmp_path):
    window = make_window(register_global_hotkey=False)
    window.show()
    qtbot.waitExposed(window)
    path = tmp_path / "colour_16_red_320x180_a_rather_long_file_name_from_the_benchmark.png"
    QImage(str(FIXTURES / "images" / "screen_640x360.png")).scaled(320, 180).save(str(path))
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    assert window.image_slot.drop(mime)
    QApplication.processEvents()
    caption = window.image_slot.caption
    assert caption.text() == f"320×180 · {path.name}\nsent with the next decision"
    shown = caption.shown_text().split("\n")
    assert shown[0].startswith("320×180 · ") and shown[0].endswith(".png") and "…" in shown[0]
    assert shown[1] == "sent with the next decision"
    assert path.name in caption.toolTip()
    lines_fit(caption)
    # inside the slot, under nothing: its top line is not clipped by the frame
    top_left = caption.mapTo(window.image_slot, caption.rect().topLeft())
    assert top_left.y() >= 0 and top_left.y() + caption.height() <= window.image_slot.height()


def result_with_a_certain_choice() -> DecisionResult:
    return letters_result([-1.2e-5, -11.5, -13.0], alternatives=[Alternative("A", 32, -1.2e-5), Alternative(" the", 279, -12.25)])


def test_the_token_inspector_shades_whole_rows_and_shows_a_real_logprob(qtbot):
    from decider.ui.inspector import TokenInspector

    inspector = TokenInspector()
    qtbot.addWidget(inspector)
    inspector.set_result(result_with_a_certain_choice())
    for table in (inspector.options_table, inspector.alts_table):
        for row in range(table.rowCount()):
            colours = {table.item(row, c).background().color().name(QColor.HexArgb)
                       for c in range(table.columnCount()) if not table.isColumnHidden(c)}
            assert len(colours) == 1, (table, row, colours)  # no column left out (the logprob one was)
    assert inspector.options_table.item(0, 1).background().color().alpha() > 0  # the chosen row is shaded
    chosen = inspector.options_table.item(0, 1).text()
    assert chosen != "-0.000" and float(chosen) == pytest.approx(-1.2e-5, rel=0.01)
    assert inspector.options_table.item(1, 1).text() == "-11.500"
    assert inspector.alts_table.item(0, 3).text() == "-12.250"  # the option letters are left out of the list


def _ink(button: QToolButton) -> int:
    """Pixels of the button as drawn that stand out from its own background: an icon, not a blank square."""
    image = button.grab().toImage()
    background = image.pixelColor(4, image.height() // 2)
    return sum(1 for x in range(image.width()) for y in range(image.height())
               if abs(image.pixelColor(x, y).lightnessF() - background.lightnessF()) > 0.35)


def on_next_dialog(look) -> None:
    """Once the next modal dialog is up: look at it, then close it (whatever the look found, so nothing hangs)."""

    def run():
        dialog = QApplication.activeModalWidget()
        try:
            look(dialog)
        finally:
            dialog.reject()

    QTimer.singleShot(200, run)


def picker_entries(picker) -> dict[str, str]:
    items = [picker.list.item(i) for i in range(picker.list.count())]
    return {item.data(Qt.UserRole): item.text().split("\n")[0] for item in items}


def test_the_picker_lists_both_demos_and_the_folder_dialog_shows_its_toolbar(qtbot, make_window):
    from decider.app.config import DEMO_MODEL_DIR, SEEING_DEMO_MODEL_DIR

    window = make_window(register_global_hotkey=False)
    seen = {}

    def in_folder_dialog(dialog):
        seen["dialog"] = type(dialog).__name__
        seen["ink"] = {b.objectName(): _ink(b) for b in dialog.findChildren(QToolButton)
                       if b.objectName() in ("backButton", "toParentButton", "newFolderButton", "detailModeButton")}

    def in_picker(picker):
        seen["entries"] = picker_entries(picker)
        on_next_dialog(in_folder_dialog)
        picker.browse()

    on_next_dialog(in_picker)
    window.choose_model()
    assert seen["entries"].get(str(DEMO_MODEL_DIR)) == "demo model"
    assert seen["entries"].get(str(SEEING_DEMO_MODEL_DIR)) == "seeing demo model"
    assert seen["dialog"] == "QFileDialog" and len(seen["ink"]) == 4
    assert min(seen["ink"].values()) >= 30, seen["ink"]  # icons, not blank squares (an arrow is ~50 px at 16 px)


def test_loading_the_seeing_demo_records_it_and_the_picker_lists_it_once(qtbot, make_window, dirs):
    from decider.app.config import SEEING_DEMO_MODEL_DIR
    from decider.app.preferences import save_settings

    window = make_window(register_global_hotkey=False, save=save_settings)
    info = load(qtbot, window, str(SEEING_DEMO_MODEL_DIR))
    assert info.name == "seeing demo model"
    window.save_now()
    saved = json.loads((dirs / "config" / "gui-settings.json").read_text())
    assert saved["last_model"] == str(SEEING_DEMO_MODEL_DIR)
    assert saved["recent_models"] == [str(SEEING_DEMO_MODEL_DIR)]
    seen = {}
    on_next_dialog(lambda picker: seen.update(texts=list(picker_entries(picker).values())))
    window.choose_model()
    assert seen["texts"].count("seeing demo model  (loaded)") == 1 and seen["texts"][0] == "seeing demo model  (loaded)"
