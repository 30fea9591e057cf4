"""Run in a subprocess over a copy of the package whose engine/core/settings.py declares one more sampling or
decision setting (tests/test_settings_one_place.py): looks for that setting on every surface and prints one
JSON object, surface -> null when it is there or the reason it is not.

Usage: python settings_surfaces.py NAME sampling|decision  (with the copy first on PYTHONPATH as `decider`)
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

NAME, KIND = sys.argv[1], sys.argv[2]
DECISION = KIND == "decision"
# in the new setting's range, not its default; and out of it (the tests' fields: a float in (0, 1], an int in 1..9)
VALUE, BAD = (2, 70) if DECISION else (0.5, 7.0)


def decide_answer() -> dict:
    """What Decider's own /v1/decide answers (DecisionResult.to_dict's parts the client reads)."""
    options = [{"label": "A", "text": "a", "logprob": -0.1, "probability": 0.9},
               {"label": "B", "text": "b", "logprob": -2.4, "probability": 0.1}]
    return {"choice": {"index": 0, "mode": "argmax"}, "options": options, "mode": "letters", "coverage": 0.99}


def chat_answer() -> dict:
    top = [{"token": t, "logprob": v, "bytes": None} for t, v in (("A", -0.1), ("B", -2.5))]
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "length",
                         "logprobs": {"content": [{"token": "A", "logprob": -0.1, "bytes": None, "top_logprobs": top}]}}],
            "usage": {"prompt_tokens": 42, "completion_tokens": 1}}


@contextmanager
def fake_server(owner: str, bodies: list[dict]) -> Iterator[str]:
    """An OpenAI-compatible server owned by `owner` that answers every chat with "A" (and /v1/decide as Decider's
    own server does); it keeps the chat and decide bodies."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send({"object": "list", "data": [{"id": "m", "object": "model", "owned_by": owner}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if "messages" in body or self.path.endswith("/decide"):
                bodies.append(body)
            self._send(decide_answer() if self.path.endswith("/decide") else chat_answer())

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def remote_decision(owner: str):
    """(the chat or decide body sent, the request, its result) of a remote decision at the new setting's VALUE:
    a decision setting goes to Decider's own server (no other takes one)."""
    from decider.engine.remote.engine import RemoteConfig, RemoteEngine
    from decider.engine.core.settings import SamplingSettings
    from decider.engine.decisions.types import DecisionRequest

    given = {NAME: VALUE} if DECISION else {"sampling": SamplingSettings(**{NAME: VALUE})}
    request = DecisionRequest("Q?", ("a", "b"), **given)
    bodies: list[dict] = []
    with fake_server(owner, bodies) as url:
        engine = RemoteEngine(RemoteConfig(url, model="m", method="auto" if DECISION else "chat"))
        engine.profile()  # which kind of server it is (the chat method alone never asks)
        result = engine.decide(request)
    return bodies[-1], request, result


def schema() -> None:
    from decider.engine.core.settings import SAMPLING_NAMES, SETTINGS, SamplingSettings

    if DECISION:
        return decision_schema()
    assert NAME in SAMPLING_NAMES and SETTINGS[NAME].label, "not declared"
    assert getattr(SamplingSettings(), NAME) == SETTINGS[NAME].default, "no default"
    assert getattr(SamplingSettings.for_model({NAME: VALUE}), NAME) == VALUE, "generation_config does not set it"


def decision_schema() -> None:
    from decider.engine.core.errors import SettingsError
    from decider.engine.core.settings import DECISION_NAMES, SETTINGS, DecisionSettings
    from decider.engine.decisions.types import DecisionRequest

    assert NAME in DECISION_NAMES and SETTINGS[NAME].label, "not declared"
    assert getattr(DecisionSettings(), NAME) == SETTINGS[NAME].default, "no default"
    assert getattr(DecisionRequest("Q?", ("a", "b")), NAME) == SETTINGS[NAME].default, "not a request's field"
    try:
        DecisionRequest("Q?", ("a", "b"), **{NAME: BAD})
    except SettingsError as exc:
        assert NAME in str(exc), "the refusal does not name it"
    else:
        raise AssertionError("out of range, accepted by the request")


def cli() -> None:
    from decider.app.cli import build_parser, decision_request
    from decider.engine.core.settings import SamplingSettings

    parser = build_parser()
    flag = ["--" + NAME.replace("_", "-"), str(VALUE)]
    for command in ([] if DECISION else (["complete", "--prompt", "x"], ["chat", "--message", "x"])):
        assert getattr(parser.parse_args(command + flag), NAME) == VALUE, f"no flag on {command[0]}"
    args = parser.parse_args(["ask", "Q?", "--option", "a", "--option", "b"] + flag)
    request = decision_request(args, SamplingSettings())
    assert getattr(request if DECISION else request.sampling, NAME) == VALUE, "the flag does not reach the request"


def api() -> None:
    from decider.app.api.protocol import ChatCompletionRequest, CompletionRequest, DecideRequest
    from decider.app.api.setting_fields import schema_drift
    from decider.engine.core.errors import SettingsError
    from decider.engine.core.settings import SamplingSettings

    assert not schema_drift(), f"the declared fields are not the schema's: {schema_drift()}"
    for request in () if DECISION else (ChatCompletionRequest, CompletionRequest):
        assert NAME in request.model_fields, f"no field on {request.__name__}"
    decided = DecideRequest(question="Q?", options=["a", "b"], **{NAME: VALUE}).to_request(SamplingSettings())
    assert getattr(decided if DECISION else decided.sampling, NAME) == VALUE, "the field does not reach the request"
    try:
        DecideRequest(question="Q?", options=["a", "b"], **{NAME: BAD}).to_request(SamplingSettings())
    except SettingsError as exc:
        assert NAME in str(exc), "the refusal does not name it"
    else:
        raise AssertionError("out of range, accepted")


def gui_settings() -> None:
    from decider.app.preferences import GuiSettings
    from decider.engine.core.settings import SETTINGS

    assert getattr(GuiSettings(), NAME) == SETTINGS[NAME].default, "not stored"
    changed = GuiSettings().with_changes(**{NAME: VALUE})
    assert getattr(changed.decision() if DECISION else changed.sampling(), NAME) == VALUE, "not handed to the engine"
    assert GuiSettings.from_dict(changed.to_dict())[0] == changed, "not kept in the settings file"
    kept, warnings = GuiSettings.from_dict({**changed.to_dict(), NAME: BAD})
    assert getattr(kept, NAME) == SETTINGS[NAME].default and any(NAME in w for w in warnings), "not validated"


def gui_form() -> None:
    from PySide6.QtWidgets import QApplication, QLabel

    from decider.app.gui_ports import settings_rules
    from decider.app.preferences import GuiSettings
    from decider.engine.core.settings import SETTINGS
    from decider.ui.decision_controller import build_request
    from decider.ui.settings_panel import SettingsPanel

    app = QApplication.instance() or QApplication([])
    panel = SettingsPanel(GuiSettings(), settings_rules())
    assert NAME in panel.fields, "no field in the form"
    assert SETTINGS[NAME].label in {label.text() for label in panel.findChildren(QLabel)}, "no label"
    panel.fields[NAME].setValue(VALUE)
    assert getattr(panel.settings, NAME) == VALUE, "an edit does not reach the settings"
    request = build_request("Q?", ["a", "b"], panel.settings)
    assert getattr(request if DECISION else request.sampling, NAME) == VALUE, "the form's request does not carry it"
    panel.deleteLater()
    app.processEvents()


def remote() -> None:
    if DECISION:
        assert remote_decision("decider")[0][NAME] == VALUE, "not in Decider's /v1/decide body"
        return
    assert remote_decision("somebody")[0][NAME] == VALUE, "not in the request body"
    assert remote_decision("llamacpp")[0]["typ_p"] == VALUE, "not under llama.cpp's name"


def history() -> None:
    from decider.app.history import HistoryStore

    _, request, result = remote_decision("decider" if DECISION else "somebody")
    with tempfile.TemporaryDirectory() as folder:
        store = HistoryStore(Path(folder) / "h.sqlite3")
        row = store.get(store.add(request, result, model="m", device="CPU", source="test"))
    assert row.settings[NAME] == VALUE, "not recorded"


SURFACES: dict[str, Callable[[], None]] = {
    "schema": schema, "cli": cli, "api": api, "gui_settings": gui_settings, "gui_form": gui_form, "remote": remote,
    "history": history,
}


def main() -> None:
    found: dict[str, str | None] = {}
    for surface, check in SURFACES.items():
        try:
            check()
            found[surface] = None
        except Exception as exc:  # each surface reports on its own; the test prints them all
            found[surface] = f"{type(exc).__name__}: {exc}" + ("" if isinstance(exc, AssertionError) else
                                                                "\n" + traceback.format_exc(limit=-3))
    print(json.dumps(found))


if __name__ == "__main__":
    main()
