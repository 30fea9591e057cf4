"""What a settings change sets in motion (ui/settings_effects.py): the effects object driven without widgets
on the real engine thread and the fixture model, then the window's wiring of it, and the allowed web
origins end to end (the setting → the embedded server → a browser-style request)."""

from __future__ import annotations

import http.client
import json
import socket

import pytest

pytest.importorskip("pytestqt")

from support.gui import FIXTURE, dirs, load, make_window  # noqa: E402,F401 (pytest fixtures)

from PySide6.QtCore import Qt  # noqa: E402

from decider.app.engine_thread import EngineThread  # noqa: E402
from decider.app.preferences import GuiSettings  # noqa: E402
from decider.engine.compile.devices import DeviceOptions  # noqa: E402
from decider.ui.decision_controller import DecisionController  # noqa: E402
from decider.ui.settings_effects import RECONNECT_DELAY_MS, SettingsEffects  # noqa: E402

PAGE = "http://localhost:3000"
DECISION = {"question": "Which?", "options": ["left", "right"], "temperature": 0}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def refuses_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return True
    return False


def call(port: int, method: str, path: str, body: dict | None = None, headers: dict | None = None):
    """One request as a browser page would send it: its own Origin, the Host it typed."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Host": f"127.0.0.1:{port}", **(headers or {})})
        response = conn.getresponse()
        payload = response.read()
    finally:
        conn.close()
    return response.status, response.headers, json.loads(payload) if payload else None


class Recorder:
    """Every emission of some signals, in order: [(name, args), …], recorded in the emitting thread (the
    engine worker's request signals are queued to its thread: counted here when they are sent)."""

    def __init__(self, **signals) -> None:
        self.calls: list[tuple[str, tuple]] = []
        for name, signal in signals.items():
            signal.connect(lambda *args, n=name: self.calls.append((n, args)), Qt.DirectConnection)

    def named(self, name: str) -> list[tuple]:
        return [args for n, args in self.calls if n == name]


@pytest.fixture
def engine(qtbot):
    made = EngineThread()
    yield made
    made.close()


def effects_on(engine, settings: GuiSettings, demo_dir: str | None = None):
    controller = DecisionController(engine.worker)
    effects = SettingsEffects(controller, settings, demo_dir)
    seen = Recorder(load=effects.load_requested, connect=effects.connect_requested, dropped=effects.model_dropped,
                    hotkey=effects.hotkey_changed, api=engine.worker.request_api, api_state=engine.worker.api_state)
    return controller, effects, seen


def test_a_device_change_asks_for_one_reload_of_the_local_model(qtbot, engine):
    settings = GuiSettings(device="CPU")
    controller, effects, seen = effects_on(engine, settings)
    effects.apply(settings, settings.with_changes(exact=False))
    assert seen.calls == []  # no model yet: nothing to reload
    with qtbot.waitSignal(controller.model_ready, timeout=60_000):
        controller.load_model(FIXTURE, settings.device_options())
    effects.apply(settings, settings.with_changes(device="AUTO"))
    assert seen.calls == [("load", (FIXTURE, False))]
    effects.apply(settings, settings.with_changes(exact=False))
    assert seen.named("load") == [(FIXTURE, False), (FIXTURE, False)]
    seen.calls.clear()
    for unrelated in (settings, settings.with_changes(device="cpu"), settings.with_changes(think=True, temperature=0.1)):
        effects.apply(settings, unrelated)  # "cpu" is stored as "CPU": the same value
    assert seen.calls == []


def test_an_api_setting_change_restarts_the_server_once(qtbot, engine):
    first, second = free_port(), free_port()
    off = GuiSettings(device="CPU", api_port=first)
    controller, effects, seen = effects_on(engine, off)
    with qtbot.waitSignal(controller.model_ready, timeout=60_000):
        controller.load_model(FIXTURE, DeviceOptions(device="CPU"))
    effects.apply(off, off.with_changes(api_port=second))
    assert seen.calls == []  # the API is off: its address is only remembered
    on = off.with_changes(api_enabled=True)
    with qtbot.waitSignal(engine.worker.api_state, timeout=10_000) as blocker:
        effects.apply(off, on)
    assert blocker.args[0], blocker.args[1]
    server = engine.worker._api_server
    assert server.port == first and len(seen.named("api")) == 1

    moved = on.with_changes(api_port=second)
    with qtbot.waitSignal(engine.worker.api_state, timeout=10_000) as blocker:
        effects.apply(on, moved)
    assert blocker.args == [True, f"serving qwen35-text on http://127.0.0.1:{second}/v1"]
    assert len(seen.named("api")) == 2 and engine.worker._api_server.port == second
    assert refuses_connections(first)

    keyed = moved.with_changes(api_key="sesame", api_allowed_origins=(PAGE,))
    with qtbot.waitSignal(engine.worker.api_state, timeout=10_000):
        effects.apply(moved, keyed)
    assert len(seen.named("api")) == 3
    enabled, config = seen.named("api")[-1]
    assert enabled and (config.port, config.api_key, config.allow_origins) == (second, "sesame", (PAGE,))
    assert call(second, "GET", "/v1/models")[0] == 401  # the new server asks for the key

    for unchanged in (keyed, keyed.with_changes(think=True, device="AUTO", hotkey="Ctrl+Alt+K")):
        effects.apply(keyed, unchanged)
    qtbot.wait(200)
    assert len(seen.named("api")) == 3 and [s[0] for s in seen.named("api_state")] == [True, True, True]

    everyone = keyed.with_changes(api_host="0.0.0.0", api_key="")  # beyond this computer without a key: refused
    with qtbot.waitSignal(engine.worker.api_state, timeout=10_000) as blocker:
        effects.apply(keyed, everyone)
    assert blocker.args[0] is False and blocker.args[1].startswith("set an API key to serve on 0.0.0.0")
    assert engine.worker._api_server is None and refuses_connections(second)
    with qtbot.waitSignal(engine.worker.api_state, timeout=10_000) as blocker:
        effects.apply(everyone, everyone.with_changes(api_enabled=False))
    assert blocker.args == [False, "local API off"] and len(seen.named("api")) == 5


def test_switching_the_engine_connects_once_and_returns_to_the_local_model(qtbot, engine, tmp_path):
    local = GuiSettings(device="CPU")
    controller, effects, seen = effects_on(engine, local)
    remote = local.with_changes(engine="remote", remote_url="http://127.0.0.1:9/v1")
    effects.apply(local, remote)
    typed = remote
    for url in ("http://127.0.0.1:9/v", "http://127.0.0.1:9/v1"):  # typing: each edit restarts the delay
        effects.apply(typed, typed.with_changes(remote_url=url, remote_model=url[-2:]))
        typed = typed.with_changes(remote_url=url, remote_model=url[-2:])
    assert effects.reconnect_pending and seen.named("connect") == []
    qtbot.waitUntil(lambda: not effects.reconnect_pending, timeout=5_000)
    qtbot.wait(RECONNECT_DELAY_MS * 2)
    assert seen.named("connect") == [()]

    # back to local with nothing loaded before, no last folder, no demo: the window shows the empty state
    effects.apply(typed, typed.with_changes(engine="local"))
    assert seen.named("dropped") == [()] and seen.named("load") == [] and controller.model_info is None
    # with a last folder on disk it goes back there; a chosen folder is itself the switch
    folder = tmp_path / "model"
    folder.mkdir()
    effects.apply(typed, typed.with_changes(engine="local", last_model=str(folder)))
    assert seen.named("load") == [(str(folder), False)]
    with effects.loading_local():
        effects.apply(typed, typed.with_changes(engine="local", last_model=str(folder)))
    assert len(seen.named("load")) == 1
    # the last local model wins over the last folder once one was loaded
    with qtbot.waitSignal(controller.model_ready, timeout=60_000):
        controller.load_model(FIXTURE, DeviceOptions(device="CPU"))
    effects.apply(typed, typed.with_changes(engine="local", last_model=str(folder)))
    assert seen.named("load")[-1] == (FIXTURE, False)


def test_hotkey_changes_register_once(qtbot, engine):
    settings = GuiSettings()
    _, effects, seen = effects_on(engine, settings)
    effects.apply(settings, settings.with_changes(hotkey="Ctrl+Alt+K"))
    effects.apply(settings, settings.with_changes(overlay_opacity=0.5))
    assert seen.calls == [("hotkey", ("Ctrl+Alt+K",))]


def test_the_window_reloads_once_and_the_api_follows_the_new_model_once(qtbot, make_window):
    port = free_port()
    window = make_window(GuiSettings(device="CPU", api_enabled=True, api_port=port))
    states: list[tuple[bool, str]] = []
    window.worker.api_state.connect(lambda running, message: states.append((running, message)))
    loads = Recorder(load=window.worker.request_load)
    load(qtbot, window)
    # switched on before any model: served once one is in
    qtbot.waitUntil(lambda: any(running for running, _ in states), timeout=10_000)
    assert len(loads.calls) == 1
    first = window.worker._api_server
    states.clear()
    with qtbot.waitSignal(window.model_ready, timeout=60_000):
        window.settings_panel.fields["exact"].setChecked(False)
    qtbot.waitUntil(lambda: bool(states), timeout=10_000)
    qtbot.wait(300)
    assert len(loads.calls) == 2 and loads.calls[-1][1][1].exact is False
    assert states == [(True, f"serving qwen35-text on http://127.0.0.1:{port}/v1")]  # one restart, on the new model
    assert window.worker._api_server is not first
    assert window.settings_panel.api_status.text() == states[0][1]


def test_allowed_origins_reach_the_embedded_server(qtbot, make_window):
    port = free_port()
    window = make_window(GuiSettings(device="CPU", api_enabled=True, api_port=port))
    load(qtbot, window)
    qtbot.waitUntil(lambda: window.worker._api_server is not None, timeout=10_000)
    preflight = {"Origin": PAGE, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    page_post = {"Origin": PAGE, "Content-Type": "application/json"}
    status, headers, body = call(port, "OPTIONS", "/v1/decide", headers=preflight)
    assert status == 403 and body["error"]["param"] == "Origin" and "Access-Control-Allow-Origin" not in headers
    assert call(port, "POST", "/v1/decide", DECISION, page_post)[0] == 403

    panel = window.settings_panel
    panel.api_origins.setText("http://localhost:3000/app")  # a page's address, not its origin
    panel.api_origins.editingFinished.emit()
    assert "must not have a path" in panel.errors["api_allowed_origins"].text()
    assert window.settings.api_allowed_origins == ()

    with qtbot.waitSignal(window.worker.api_state, timeout=10_000) as blocker:
        panel.api_origins.setText("HTTP://LocalHost:3000/, http://127.0.0.1:5173")
        panel.api_origins.editingFinished.emit()
    assert blocker.args[0] is True
    assert window.settings.api_allowed_origins == (PAGE, "http://127.0.0.1:5173")
    assert panel.api_origins.text() == "http://localhost:3000, http://127.0.0.1:5173"
    status, headers, _ = call(port, "OPTIONS", "/v1/decide", headers=preflight)
    assert status == 204 and headers["Access-Control-Allow-Origin"] == PAGE
    assert "POST" in headers["Access-Control-Allow-Methods"] and "content-type" in headers["Access-Control-Allow-Headers"].lower()
    status, headers, body = call(port, "POST", "/v1/decide", DECISION, page_post)
    assert status == 200 and headers["Access-Control-Allow-Origin"] == PAGE
    assert [o["text"] for o in body["options"]] == ["left", "right"]
    assert call(port, "POST", "/v1/decide", DECISION, {**page_post, "Origin": "http://evil.example"})[0] == 403

    window.save_now()
    from decider.app.preferences import load_settings

    saved, warnings = load_settings()
    assert warnings == [] and saved.api_allowed_origins == (PAGE, "http://127.0.0.1:5173")
