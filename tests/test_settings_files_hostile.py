"""Settings files that are not UTF-8, are UTF-16, are nested too deeply or are devices (issue #25): the
usual one-line warning and the defaults, never a traceback or a RecursionError."""

from __future__ import annotations

import pytest

from decider.app.cli import main
from decider.app.preferences import GuiSettings, load_settings

BAD = {
    "latin-1": '{"temperature": 0.5, "system": "caf\xe9"}'.encode("latin-1"),
    "utf-16": '{"temperature": 0.5}'.encode("utf-16"),
    "deeply nested": b'{"recent_models": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "nested object": b'{"a": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_001,
}


@pytest.mark.parametrize("kind", list(BAD))
def test_a_bad_settings_file_gives_a_warning_and_the_defaults(tmp_path, kind):
    path = tmp_path / "gui-settings.json"
    path.write_bytes(BAD[kind])
    settings, warnings = load_settings(path)
    assert settings == GuiSettings()
    assert len(warnings) == 1 and "using defaults" in warnings[0] and "\n" not in warnings[0]


def test_a_device_as_settings_file_is_not_read(tmp_path):
    settings, warnings = load_settings(__import__("pathlib").Path("/dev/zero"))
    assert settings == GuiSettings() and "not a regular file" in warnings[0]


@pytest.mark.parametrize("kind", list(BAD))
def test_decider_models_survives_a_bad_settings_file(tmp_path, monkeypatch, capsys, kind):
    monkeypatch.setenv("DECIDER_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("DECIDER_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "gui-settings.json").write_bytes(BAD[kind])
    assert main(["models", "--json"]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_context_from_a_device_is_refused_without_reading_it(capsys):
    code = main(["ask", "--context", "/dev/zero", "Q?", "--option", "a", "--option", "b"])
    err = capsys.readouterr().err
    assert code == 2 and "not a regular file" in err and "Traceback" not in err
