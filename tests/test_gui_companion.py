"""The companion side: the overlay window, the clipboard trigger, decisions arriving through the local API."""

from __future__ import annotations

import json
import threading

import pytest

pytest.importorskip("pytestqt")

from support.gui import direct_service, dirs, load, make_window  # noqa: E402,F401 (pytest fixtures)

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication  # noqa: E402

from decider.app.preferences import GuiSettings, load_settings  # noqa: E402
from decider.engine.decisions.decide import DecisionRequest  # noqa: E402


def test_overlay_flags_transparency_click_through_and_position(qtbot, make_window):
    window = make_window(GuiSettings(overlay_opacity=0.6))
    overlay = window.overlay
    flags = overlay.windowFlags()
    for flag in (Qt.Tool, Qt.FramelessWindowHint, Qt.WindowStaysOnTopHint):
        assert flags & flag == flag
    assert overlay.testAttribute(Qt.WA_TranslucentBackground)
    assert overlay.opacity == pytest.approx(0.6)
    assert not overlay.testAttribute(Qt.WA_TransparentForMouseEvents)

    window.overlay_button.setChecked(True)
    assert overlay.isVisible() and window.settings.overlay_enabled
    window.settings_panel.fields["overlay_click_through"].setChecked(True)
    assert overlay.testAttribute(Qt.WA_TransparentForMouseEvents)
    assert overlay.windowFlags() & Qt.WindowTransparentForInput
    assert overlay.isVisible()  # re-shown after the flag change
    window.settings_panel.fields["overlay_click_through"].setChecked(False)
    assert not overlay.testAttribute(Qt.WA_TransparentForMouseEvents)
    assert not overlay.windowFlags() & Qt.WindowTransparentForInput

    window.settings_panel.fields["overlay_opacity"].setValue(90)
    assert overlay.opacity == pytest.approx(0.9)
    # dragging: press, move, release → the new position is remembered
    start = overlay.pos()
    qtbot.mousePress(overlay, Qt.LeftButton, pos=overlay.rect().center())
    overlay.move(start.x() - 40, start.y() + 30)
    qtbot.mouseRelease(overlay, Qt.LeftButton, pos=overlay.rect().center())
    window.save_now()
    saved, _ = load_settings()
    assert saved.overlay_position == (overlay.x(), overlay.y())
    assert saved.overlay_opacity == pytest.approx(0.9) and saved.overlay_enabled


def test_clipboard_trigger_decides_on_the_parsed_options(qtbot, make_window):
    window = make_window()
    load(qtbot, window)
    # offscreen: no global hotkey, said so, in-app shortcut kept
    assert not window.global_hotkey.available
    assert "offscreen" in window.global_hotkey.message
    assert "in app only" in window.status_hotkey.text()
    assert window.app_shortcut.key().toString() == "Ctrl+Shift+D"

    QGuiApplication.clipboard().setText(
        "The orc chief offers a truce.\nThe party is low on arrows.\n\nA. Accept the truce\nB) Attack at dawn\n- Retreat to the hills\n"
    )
    with qtbot.waitSignal(window.decision_shown, timeout=30_000) as blocker:
        window.hotkey_triggered.emit()
    result = blocker.args[0]
    assert [o.text for o in result.options] == ["Accept the truce", "Attack at dawn", "Retreat to the hills"]
    assert window.last_request.question == "The orc chief offers a truce.\nThe party is low on arrows."
    assert window.overlay.isVisible()
    assert window.overlay.bars.values() == pytest.approx([o.probability for o in result.options])
    assert window.overlay.source.text() == "· from clipboard"

    QGuiApplication.clipboard().setText("just one line")
    window.hotkey_triggered.emit()
    assert "found 0 options" in window.overlay.hint.text()
    assert not window.deciding

    # the hotkey is configurable: the in-app shortcut follows the setting
    assert window.settings_panel.set_value("hotkey", "Ctrl+Alt+K")
    assert window.app_shortcut.key().toString() == "Ctrl+Alt+K"
    assert "Ctrl+Alt+K" in window.status_hotkey.text()


def test_api_decisions_reach_the_overlay_from_another_thread(qtbot, make_window, direct_service):
    window = make_window()
    from decider.app.api.state import ApiDecision

    request = DecisionRequest("From the game", ("Jump", "Duck"))
    result = direct_service.decide(request)
    thread = threading.Thread(target=window.worker._on_api_decision, args=(ApiDecision(request, result),))
    thread.start()
    thread.join()
    qtbot.waitUntil(lambda: window.overlay.isVisible() and window.overlay.source.text() == "· via local API", timeout=5000)
    assert window.overlay.bars.values() == pytest.approx([o.probability for o in result.options])


def test_local_api_toggle_serves_the_loaded_model(qtbot, make_window):
    pytest.importorskip("decider.app.api.server")
    import socket
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    window = make_window(GuiSettings(device="CPU", api_port=port))
    load(qtbot, window)
    states: list[tuple[bool, str]] = []
    window.worker.api_state.connect(lambda running, message: states.append((running, message)))
    window.settings_panel.fields["api_enabled"].setChecked(True)
    qtbot.waitUntil(lambda: bool(states), timeout=10_000)
    running, message = states[-1]
    assert running, message
    qtbot.waitUntil(lambda: "serving qwen35-text on http://127.0.0.1" in window.settings_panel.api_status.text(), timeout=5000)
    server = window.worker._api_server
    body = json.dumps({"question": "Which?", "options": ["One", "Two"]}).encode()
    request = urllib.request.Request(server.url + "/decide", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())
    qtbot.waitUntil(lambda: window.overlay.source.text() == "· via local API", timeout=10_000)
    assert window.overlay.bars.values() == pytest.approx([o["probability"] for o in answer["options"]])
    window.settings_panel.fields["api_enabled"].setChecked(False)
    qtbot.waitUntil(lambda: len(states) == 2, timeout=10_000)
    assert states[-1][0] is False and window.worker._api_server is None
