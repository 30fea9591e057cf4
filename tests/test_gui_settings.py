"""The desktop settings: the file round trip, bad values falling back, the settings panel."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

pytest.importorskip("pytestqt")

from support.gui import dirs, gui_dirs, load, make_window  # noqa: E402,F401 (pytest fixtures)

from PySide6.QtCore import Qt  # noqa: E402

from decider.app.preferences import GuiSettings, load_settings, save_settings, settings_path  # noqa: E402


def test_settings_round_trip_to_disk(gui_dirs):
    settings = GuiSettings().with_changes(
        temperature=0.3, top_k=5, top_p=0.9, min_p=0.05, repetition_penalty=1.1, frequency_penalty=-0.5,
        presence_penalty=0.25, seed=42, max_tokens=1000, reasoning_budget=300, think=True, permute=True,
        system_prompt="Be brief.", device="cpu", overlay_opacity=0.5, overlay_position=(10, 20),
        overlay_click_through=True, hotkey="Ctrl+Alt+F9", api_enabled=True, api_port=9000,
    ).with_recent_model("/models/a").with_recent_model("/models/b")
    path = save_settings(settings)
    assert path == settings_path() and path.parent == gui_dirs / "config"
    loaded, warnings = load_settings()
    assert warnings == []
    assert loaded == settings
    assert loaded.device == "CPU" and loaded.recent_models == ("/models/b", "/models/a") and loaded.last_model == "/models/b"
    assert loaded.sampling().seed == 42 and loaded.sampling().top_k == 5


def test_invalid_values_in_the_file_fall_back_with_a_warning(gui_dirs):
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({
        "temperature": 9, "top_p": 0, "top_k": 2.5, "seed": -1, "device": "TPU", "think": "yes",
        "overlay_opacity": 0.01, "reasoning_budget": 0, "presence_penalty": 0.5, "recent_models": "nope",
        "future_setting": 1,
    }))
    settings, warnings = load_settings()
    defaults = GuiSettings()
    for name in ("temperature", "top_p", "top_k", "seed", "device", "think", "overlay_opacity", "reasoning_budget", "recent_models"):
        assert getattr(settings, name) == getattr(defaults, name), name
    assert settings.presence_penalty == 0.5  # the valid value is kept
    assert len(warnings) == 9
    assert any("temperature must be a number in [0.0, 2.0]" in w for w in warnings)
    assert any("device must be one of" in w for w in warnings)
    save_settings(settings)
    assert json.loads(path.read_text())["future_setting"] == 1  # unknown keys survive a save
    path.write_text("{ not json")
    settings, warnings = load_settings()
    assert settings == GuiSettings() and "not valid JSON" in warnings[0]


def test_settings_panel_refuses_invalid_values_and_persists_valid_ones(qtbot, make_window):
    window = make_window()
    panel = window.settings_panel
    before = window.settings
    assert panel.set_value("top_p", 0.0) is False
    assert "top_p must be a number in (0.0, 1.0]" in panel.errors["top_p"].text()
    assert not panel.errors["top_p"].isHidden()
    assert window.settings == before
    panel.seed.setText("abc")
    panel.seed.editingFinished.emit()
    assert "seed must be an integer" in panel.errors["seed"].text()
    assert window.settings.seed is None
    # the widgets carry the ranges: a spin box cannot hold more than the rule allows
    assert panel.fields["temperature"].maximum() == 2.0
    assert panel.fields["reasoning_budget"].minimum() == 1
    # a valid edit through the widget is taken and saved
    panel.fields["temperature"].setValue(1.25)
    panel.seed.setText("7")
    panel.seed.editingFinished.emit()
    assert panel.errors["seed"].isHidden()
    window.save_now()
    saved, _ = load_settings()
    assert saved.temperature == 1.25 and saved.seed == 7


def test_model_defaults_button_restores_the_models_sampling(qtbot, make_window):
    window = make_window(GuiSettings(device="CPU", temperature=1.9, top_k=3, presence_penalty=-1.0, draft="auto", seed=7))
    assert not window.settings_panel.defaults_button.isEnabled()
    info = load(qtbot, window)
    assert window.settings_panel.defaults_button.isEnabled()
    qtbot.mouseClick(window.settings_panel.defaults_button, Qt.LeftButton)
    # the distribution's settings are the model's; drafts (speed only) and the seed stay the user's
    assert window.settings.sampling() == replace(info.defaults, draft="auto", seed=7)
    assert info.defaults.draft != "auto" and info.defaults.seed != 7
    assert window.settings_panel.fields["temperature"].value() == pytest.approx(info.defaults.temperature)


def test_remote_settings_round_trip_and_validation(dirs):
    settings = GuiSettings().with_changes(
        engine="remote", remote_url="http://gpu:8000/v1", remote_api_key="k", remote_model="qwen",
        remote_timeout=12.5, remote_constraint="vllm",
    )
    save_settings(settings)
    loaded, warnings = load_settings()
    assert warnings == [] and loaded == settings
    config = loaded.remote_config()
    assert (config.base_url, config.api_key, config.model, config.timeout, config.constraint) == (
        "http://gpu:8000", "k", "qwen", 12.5, "vllm")
    settings_path().write_text(json.dumps({"engine": "cloud", "remote_url": "gpu:8000", "remote_timeout": 0,
                                           "remote_constraint": "grammar"}))
    loaded, warnings = load_settings()
    assert loaded.engine == "local" and loaded.remote_url == "" and loaded.remote_timeout == 60.0
    assert len(warnings) == 4
    from decider.engine.core.errors import SettingsError

    with pytest.raises(SettingsError, match="enter the server's URL"):
        GuiSettings(engine="remote").remote_config()


def test_allowed_origins_are_stored_as_browsers_send_them(gui_dirs):
    from decider.app.preferences import parse_origin
    from decider.engine.core.errors import SettingsError

    assert parse_origin(" HTTP://LocalHost:3000/ ") == "http://localhost:3000"
    assert parse_origin("https://game.example:443") == "https://game.example"  # browsers omit the default port
    assert parse_origin("http://[::1]:8080") == "http://[::1]:8080"
    assert parse_origin("https://bücher.example") == "https://xn--bcher-kva.example"
    refused = {
        "*": "any web page", "null": "sandboxed or local-file", "http://localhost:3000/app": "must not have a path",
        "http://x?q=1": "must not have a path", "localhost:3000": "http:// or https://", "file:///tmp": "http:// or https://",
        "http://user@host": "no user", "http://host:99999": "bad port", "http://a b": "not valid", "": "web page's origin",
    }
    for text, reason in refused.items():
        with pytest.raises(SettingsError, match=reason):
            parse_origin(text)
    settings = GuiSettings().with_changes(api_key="k", api_allowed_origins=("http://A.example:80", "http://a.example"))
    assert settings.api_allowed_origins == ("http://a.example",)  # one origin, written twice
    with pytest.raises(SettingsError, match="must not have a path"):
        settings.with_changes(api_allowed_origins=("http://ok.example", "http://a.example/x"))
    save_settings(settings)
    assert json.loads(settings_path().read_text())["api_allowed_origins"] == ["http://a.example"]
    loaded, warnings = load_settings()
    assert warnings == [] and loaded == settings and loaded.api_key == "k"
    settings_path().write_text(json.dumps({"api_allowed_origins": ["http://ok.example", "*"], "api_key": 5}))
    loaded, warnings = load_settings()
    assert loaded.api_allowed_origins == () and loaded.api_key == "" and len(warnings) == 2
    assert "'*' would let any web page use the local API" in warnings[0]
