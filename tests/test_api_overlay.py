"""A decision that arrives through /v1/decide shows in the overlay with its question: the real window,
worker and server wiring (build_window, the "Serve local API" toggle), offscreen."""

from __future__ import annotations

import json
import os
import socket
import urllib.request

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from decider.app.preferences import GuiSettings  # noqa: E402

from support.models import model_dir  # noqa: E402

QUESTION = "The troll blocks the bridge. What does the party do?"


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    from decider.app.gui import build_window, create_app

    monkeypatch.setenv("DECIDER_CONFIG_DIR", str(tmp_path / "config"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    create_app()
    engine, window = build_window(GuiSettings(device="CPU", api_port=port))
    qtbot.addWidget(window)
    yield window
    window.close()
    engine.close()


def test_an_api_decision_shows_its_question_in_the_overlay(qtbot, window):
    with qtbot.waitSignal(window.model_ready, timeout=60_000):
        window.load_model(str(model_dir("qwen35-text")))
    with qtbot.waitSignal(window.worker.api_state, timeout=10_000) as started:
        window.settings_panel.fields["api_enabled"].setChecked(True)
    assert started.args[0], started.args[1]
    body = json.dumps({"question": QUESTION, "options": ["Pay the toll", "Fight", "Find another way"]}).encode()
    url = window.worker._api_server.url + "/decide"
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())
    overlay = window.overlay
    qtbot.waitUntil(lambda: overlay.shown is not None and overlay.source.text() == "· via local API", timeout=10_000)
    question, result, _ = overlay.shown
    assert question == QUESTION
    assert overlay.question.toolTip() == QUESTION and overlay.question.isVisibleTo(overlay)
    assert result.choice_index == answer["choice"]["index"]
