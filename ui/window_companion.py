"""The main window's companion side: the overlay beside a game, the clipboard hotkey, and decisions
that arrive through the local API.

An object the window owns (`window.companion`), given the window it works for as a WindowPort (ui/window_port.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QPoint
from PySide6.QtGui import QGuiApplication, QKeySequence

from decider.engine.core.errors import SettingsError
from decider.engine.decisions.types import DecisionResult

from .clipboard import parse_situation

if TYPE_CHECKING:
    from .window_port import WindowPort

SOURCE_TEXT = {
    "hotkey": "· from clipboard", "hotkey_image": "· from clipboard + the picture in the slot",
    "api": "· via local API", "capture": "· from a screenshot", "watch": "· watching the screen",
}


class WindowCompanion:
    """The overlay, the clipboard hotkey and API decisions: the companion side of the window."""

    def __init__(self, window: WindowPort) -> None:
        self.window = window

    def decide_from_clipboard(self) -> bool:
        """Decide on the clipboard's text (a situation, then one option per line; see ui/clipboard.py)."""
        w = self.window
        text = QGuiApplication.clipboard().text()
        try:
            question, options = parse_situation(text)
        except SettingsError as exc:
            self.set_overlay_visible(True)
            w.overlay.show_error(str(exc), SOURCE_TEXT["hotkey"])
            w.show_message(f"Clipboard: {exc}", 8000)
            return False
        if w.deciding or w.loading_path is not None:
            w.show_message("Busy: the clipboard decision was not started", 5000)
            return False
        w.question.setPlainText(question)
        w.options.set_options(options)
        if w.image_slot.pixels():
            # the slot's picture (say, an earlier capture) goes with the text only where it can, and never unsaid
            info = w.model_info
            if info is not None and info.sees_images is False:
                w.image_slot.clear()
                w.image_slot.show_note(f"Picture removed:\n{info.name} cannot see images.")
                w.show_message(f"Clipboard decision on the text alone: {info.name} cannot see the picture, removed", 8000)
            else:
                w.show_message(f"Clipboard decision sent with the picture in the slot ({w.image_slot.summary()}); "
                               "Clear it to decide on the text alone", 8000)
                return w.decide("hotkey_image")
        return w.decide("hotkey")

    def show_api_decision(self, question: str, result: DecisionResult) -> None:
        w = self.window
        w.history_view.mark_dirty()
        w.calibration_view.mark_dirty()
        self.set_overlay_visible(True)
        w.overlay.show_result(question, result, SOURCE_TEXT["api"])
        w.show_message(f"API decision: {result.choice.text}", 6000)

    # ------------------------------------------------------------ overlay and hotkey
    def place_overlay(self) -> None:
        w = self.window
        position = w.settings.overlay_position
        screen = QGuiApplication.primaryScreen()
        if position is not None and screen is not None:
            point = QPoint(*position)
            if any(s.availableGeometry().contains(point) for s in QGuiApplication.screens()):
                w.overlay.move(point)
                return
        if screen is not None:
            area = screen.availableGeometry()
            w.overlay.move(area.right() - w.overlay.width() - 24, area.top() + 24)

    def set_overlay_visible(self, visible: bool) -> None:
        w = self.window
        visible = bool(visible)
        if visible:
            if (w.last_result is not None and w.last_request is not None and not w.deciding
                    and w.controller.source == "window"):
                w.overlay.show_result(w.last_request.question, w.last_result)
            w.overlay.show()
            w.overlay.raise_()
        else:
            w.overlay.hide()
        if w.overlay_button.isChecked() != visible:
            w.overlay_button.blockSignals(True)
            w.overlay_button.setChecked(visible)
            w.overlay_button.blockSignals(False)
        if w.settings.overlay_enabled != visible:
            w.update_settings(overlay_enabled=visible)

    def apply_hotkey(self) -> None:
        w = self.window
        sequence = w.settings.hotkey
        w.app_shortcut.setKey(QKeySequence(sequence))
        native = QKeySequence(sequence).toString(QKeySequence.SequenceFormat.NativeText)
        if w.register_global:
            ok = w.global_hotkey.register(sequence)
            message = w.global_hotkey.message
        else:
            ok, message = False, "global hotkey not registered"
        if ok:
            w.status_hotkey.setText(f"hotkey {native}")
            w.status_hotkey.setToolTip(message)
            w.settings_panel.set_hotkey_status(f"{message}: decides on the clipboard from any application.", True)
        else:
            w.status_hotkey.setText(f"{native} (in app only)")
            w.status_hotkey.setToolTip(message)
            w.settings_panel.set_hotkey_status(
                f"{message[0].upper() + message[1:]}. {native} still works while Decider has focus.", False
            )
        w.shortcut_hint.setText(f"Ctrl+Enter decides · {native} decides on the clipboard")
        if w.last_result is None and not w.deciding:
            w.overlay.show_idle(f"Copy a situation and its options (one per line), then press {native}.")
