"""The window on a remote OpenAI-compatible engine: a loopback server whose answers the test switches."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("pytestqt")

from support.gui import FIXTURE, ask, dirs, load, make_window  # noqa: E402,F401 (pytest fixtures)

from PySide6.QtCore import Qt  # noqa: E402

from decider.app.preferences import GuiSettings  # noqa: E402


def chat_answer(token: str, alternatives: dict[str, float]) -> dict:
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": token}, "finish_reason": "length",
                     "logprobs": {"content": [{"token": token, "logprob": alternatives.get(token, -9.0),
                                               "top_logprobs": [{"token": t, "logprob": v} for t, v in alternatives.items()]}]}}],
        "usage": {"prompt_tokens": 42, "completion_tokens": 1},
    }


def completion_answer(token: str, alternatives: dict[str, float]) -> dict:
    return {"choices": [{"index": 0, "text": token, "finish_reason": "length",
                         "logprobs": {"tokens": [token], "token_logprobs": [alternatives[token]],
                                      "top_logprobs": [alternatives], "text_offset": [0]}}],
            "usage": {"prompt_tokens": 42, "completion_tokens": 1}}


class FakeServer:
    """A loopback OpenAI-compatible server whose answers the test switches: ok, unauthorized, slow, broken."""

    ALTERNATIVES = {"A": -0.4, "B": -1.3, **{f"w{i}": -3.0 - i * 0.1 for i in range(18)}}  # no "C": below the top 20

    def __init__(self):
        self.mode = "ok"
        self.delay = 1.5
        self.requests = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body=None, raw=None):
                data = raw if raw is not None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass

            def _fault(self) -> bool:
                if server.mode == "401":
                    self._send(401, {"error": {"message": "invalid API key", "type": "auth"}})
                    return True
                if server.mode == "500":
                    self._send(500, {"error": {"message": "model crashed"}})
                    return True
                return False

            def do_GET(self):
                if not self._fault():
                    self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}, {"id": "other"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if self._fault():
                    return
                if server.mode == "slow":
                    time.sleep(server.delay)
                if server.mode == "malformed":
                    self._send(200, raw=b"<html>not json</html>")
                    return
                if "tokenize" in self.path:  # no tokenizer: a letter below the list stays a (true) upper bound
                    self._send(404, {"detail": "Not Found"})
                elif self.path.endswith("/chat/completions"):
                    self._send(200, chat_answer("A", FakeServer.ALTERNATIVES))
                else:  # a raw prompt, Decider's own: the top list bounds what it leaves out
                    self._send(200, completion_answer("A", FakeServer.ALTERNATIVES))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake_server():
    server = FakeServer()
    yield server
    server.close()


def test_remote_engine_bars_upper_bound_errors_and_recovery(qtbot, make_window, fake_server):
    settings = GuiSettings(temperature=0.0, engine="remote", remote_url=fake_server.url, remote_timeout=5.0)
    window = make_window(settings)
    panel = window.settings_panel
    assert panel.remote_box.isVisibleTo(panel) and not panel.local_box.isVisibleTo(panel)
    with qtbot.waitSignal(window.model_ready, timeout=10_000) as blocker:
        window.start(None)
    info = blocker.args[0]
    assert info.remote and info.name == "fake-model" and info.model_key == "fake-model"
    assert window.status_engine.text() == "server top-20 logprobs"
    assert window.model_button.text().endswith("fake-model   ·   remote")

    ask(window, "Which?", ["Attack", "Defend", "Hide"])
    with qtbot.waitSignal(window.decision_shown, timeout=10_000) as blocker:
        window.decide()
    result = blocker.args[0]
    assert result.engine.kind == "remote"
    view = window.result_view
    bars = view.bars.bars
    assert [b.bound for b in bars] == [None, None, "upper"]
    assert bars[2].percent_text().startswith("< ") and not bars[0].percent_text().startswith("<")
    assert view.bound_note.isVisibleTo(view) and "C was below the server's top-20" in view.bound_note.text()
    assert "server top-20 logprobs" in view.engine_note.text() and fake_server.url.removesuffix("/v1") in view.engine_note.text()
    assert "at most" in bars[2].toolTip()
    assert view.bars.values() == pytest.approx([o.probability for o in result.options])
    assert next(r for r in reversed(fake_server.requests) if "logprobs" in r)["logprobs"] == 20
    table = window.inspector.options_table
    assert table.item(2, 1).text().startswith("≤ ") and table.item(2, 3).text().startswith("< ")
    assert "the server listed" in window.inspector.alts_note.text()
    # the inspector and the history know the remote model
    window.history_view.refresh()
    assert window.history_view.rows[0].model == "fake-model" and window.history_view.rows[0].device == "remote"

    # Test connection runs off the UI thread and reports models and logprobs
    qtbot.mouseClick(panel.test_button, Qt.LeftButton)
    # the report and the button's return come as two signals from the task's thread: wait for both
    qtbot.waitUntil(lambda: "returns logprobs" in panel.connection_status.text() and panel.test_button.isEnabled(),
                    timeout=10_000)
    assert "fake-model" in panel.connection_status.text() and panel.test_button.isEnabled()
    assert [panel.remote_model.itemText(i) for i in range(panel.remote_model.count())] == ["fake-model", "other"]

    # 401: a plain message, the window keeps working
    fake_server.mode = "401"
    with qtbot.waitSignal(window.decision_failed, timeout=10_000) as blocker:
        window.decide()
    assert "401 unauthorized" in blocker.args[0] and "check the API key" in blocker.args[0]
    assert "401" in view.error_box.text() and view.error_box.isVisibleTo(view)
    assert window.decide_button.isEnabled()
    qtbot.mouseClick(panel.test_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: panel.connection_status.text().startswith("✗"), timeout=10_000)
    assert "401 unauthorized" in panel.connection_status.text()

    for mode, words in (("500", "HTTP 500: model crashed"), ("malformed", "did not answer JSON")):
        fake_server.mode = mode
        with qtbot.waitSignal(window.decision_failed, timeout=10_000) as blocker:
            window.decide()
        assert words in blocker.args[0]

    # a timeout set in the panel reconnects, then a slow answer is a message, not a hang
    fake_server.mode = "ok"
    with qtbot.waitSignal(window.model_ready, timeout=10_000):
        assert panel.set_value("remote_timeout", 0.5)
    assert window.settings.remote_timeout == 0.5
    fake_server.mode = "slow"
    started = time.monotonic()
    with qtbot.waitSignal(window.decision_failed, timeout=10_000) as blocker:
        window.decide()
    assert "no answer within 0.5 s" in blocker.args[0] and time.monotonic() - started < 5

    fake_server.mode = "ok"
    with qtbot.waitSignal(window.decision_shown, timeout=10_000):
        window.decide()
    assert window.result_view.bars.bars[2].bound == "upper"


def test_remote_connection_failure_and_switching_back_to_local(qtbot, make_window, fake_server):
    fake_server.mode = "401"
    window = make_window(GuiSettings(device="CPU", temperature=0.0, engine="remote", remote_url=fake_server.url))
    with qtbot.waitSignal(window.model_error, timeout=10_000) as blocker:
        window.start(FIXTURE)
    assert "401 unauthorized" in blocker.args[0]
    assert window.result_view.currentWidget() is window.result_view.no_model_page
    assert "401" in window.settings_panel.connection_status.text()
    assert not window.decide_button.isEnabled()
    # a server that does not serve the named model says so
    fake_server.mode = "ok"
    with qtbot.waitSignal(window.model_error, timeout=10_000) as blocker:
        window.settings_panel.set_value("remote_model", "missing-model")
    assert "does not serve 'missing-model'" in blocker.args[0]
    # a bad URL is refused before anything is sent
    assert window.settings_panel.set_value("remote_url", "ftp://x") is False
    assert "http://" in window.settings_panel.errors["remote_url"].text()
    # back to the local engine: the model picker's folder (the engine setting follows)
    info = load(qtbot, window)
    assert window.settings.engine == "local" and not info.remote
    assert window.status_engine.text() == "exact logprobs (f32)"
    assert window.settings_panel.local_box.isVisibleTo(window.settings_panel)
    ask(window, "Pick", ["Red", "Blue"])
    with qtbot.waitSignal(window.decision_shown, timeout=30_000) as blocker:
        window.decide()
    assert window.result_view.engine_note.text() == "Computed locally: qwen35-text on CPU · dynamic path · exact full-vocabulary (f32) logprobs"
    assert not window.result_view.bound_note.isVisibleTo(window.result_view)
