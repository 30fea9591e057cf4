"""The main window's companion side: the overlay beside a game, the clipboard hotkey, and decisions
that arrive through the local API.

A mixin of MainWindow (it reads the window's settings, controller and widgets).
"""

from __future__ import annotations

from PySide6.QtCore import QPoint
from PySide6.QtGui import QGuiApplication, QKeySequence

from decider.engine.errors import SettingsError

from .clipboard import parse_situation

SOURCE_TEXT = {
    "hotkey": "· from clipboard", "hotkey_image": "· from clipboard + the picture in the slot",
    "api": "· via local API", "capture": "· from a screenshot",
}


class CompanionActions:
    def decide_from_clipboard(self) -> bool:
        """Decide on the clipboard's text (a situation, then one option per line; see ui/clipboard.py)."""
        text = QGuiApplication.clipboard().text()
        try:
            question, options = parse_situation(text)
        except SettingsError as exc:
            self.set_overlay_visible(True)
            self.overlay.show_error(str(exc), SOURCE_TEXT["hotkey"])
            self.show_message(f"Clipboard: {exc}", 8000)
            return False
        if self.deciding or self.loading_path is not None:
            self.show_message("Busy: the clipboard decision was not started", 5000)
            return False
        self.question.setPlainText(question)
        self.options.set_options(options)
        if self.image_slot.pixels():
            # the slot's picture (say, an earlier capture) goes with the text only where it can, and never unsaid
            info = self.model_info
            if getattr(info, "sees_images", None) is False:
                self.image_slot.clear()
                self.image_slot.show_note(f"Picture removed:\n{info.name} cannot see images.")
                self.show_message(f"Clipboard decision on the text alone: {info.name} cannot see the picture, removed", 8000)
            else:
                self.show_message(f"Clipboard decision sent with the picture in the slot ({self.image_slot.summary()}); "
                                  "Clear it to decide on the text alone", 8000)
                return self.decide("hotkey_image")
        return self.decide("hotkey")

    def _on_api_decided(self, question: str, result) -> None:
        self.history_view.mark_dirty()
        self.calibration_view.mark_dirty()
        self.set_overlay_visible(True)
        self.overlay.show_result(question, result, SOURCE_TEXT["api"])
        self.show_message(f"API decision: {result.options[result.choice_index].text}", 6000)

    # ------------------------------------------------------------ overlay and hotkey
    def _place_overlay(self) -> None:
        position = self.settings.overlay_position
        screen = QGuiApplication.primaryScreen()
        if position is not None and screen is not None:
            point = QPoint(*position)
            if any(s.availableGeometry().contains(point) for s in QGuiApplication.screens()):
                self.overlay.move(point)
                return
        if screen is not None:
            area = screen.availableGeometry()
            self.overlay.move(area.right() - self.overlay.width() - 24, area.top() + 24)

    def set_overlay_visible(self, visible: bool) -> None:
        visible = bool(visible)
        if visible:
            if (self.last_result is not None and self.last_request is not None and not self.deciding
                    and self.controller.source == "window"):
                self.overlay.show_result(self.last_request.question, self.last_result)
            self.overlay.show()
            self.overlay.raise_()
        else:
            self.overlay.hide()
        if self.overlay_button.isChecked() != visible:
            self.overlay_button.blockSignals(True)
            self.overlay_button.setChecked(visible)
            self.overlay_button.blockSignals(False)
        if self.settings.overlay_enabled != visible:
            self._update_settings(overlay_enabled=visible)

    def _apply_hotkey(self) -> None:
        sequence = self.settings.hotkey
        self.app_shortcut.setKey(QKeySequence(sequence))
        native = QKeySequence(sequence).toString(QKeySequence.SequenceFormat.NativeText)
        if self._register_global:
            ok = self.global_hotkey.register(sequence)
            message = self.global_hotkey.message
        else:
            ok, message = False, "global hotkey not registered"
        if ok:
            self.status_hotkey.setText(f"hotkey {native}")
            self.status_hotkey.setToolTip(message)
            self.settings_panel.set_hotkey_status(f"{message}: decides on the clipboard from any application.", True)
        else:
            self.status_hotkey.setText(f"{native} (in app only)")
            self.status_hotkey.setToolTip(message)
            self.settings_panel.set_hotkey_status(
                f"{message[0].upper() + message[1:]}. {native} still works while Decider has focus.", False
            )
        self.shortcut_hint.setText(f"Ctrl+Enter decides · {native} decides on the clipboard")
        if self.last_result is None and not self.deciding:
            self.overlay.show_idle(f"Copy a situation and its options (one per line), then press {native}.")
