"""A setting is declared in ONE place, a field of engine.settings.SamplingSettings or DecisionSettings: a copy of
the package with one more field there must offer it on every surface (defaults and the model's
generation_config, the decision request, CLI flags, the GUI's stored settings and their validation, the
settings form and the request it makes, the remote request body under each server's name, the history).
The API's fields are restated for type checkers (app/api/setting_fields.py): a copy that declares the field
in the schema alone is refused by the drift check, by name; with the field restated there, the API takes it.
A surface that still lists the settings by hand fails here, by name."""

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SURFACES = Path(__file__).parent / "support" / "settings_surfaces.py"


# kind -> (name, the schema's new field and the line it goes before, the API's restatement and its line)
NEW_FIELDS = {
    "sampling": ("typical_p", (
        '    typical_p: float = setting(1.0, "Typical P", "keep tokens of typical information content; 1 = off", 0.0, 1.0,\n'
        '                               low_open=True, from_model=True, remote_names={"llama.cpp": "typ_p"})\n',
        "    seed: int | None = setting("),
        ("    typical_p: EngineFloat = declared(1.0, 0.0, 1.0, low_open=True)\n", "    seed: EngineInt = declared(")),
    "decision": ("vote_rounds", (
        '    vote_rounds: int = setting(1, "Vote rounds", "ask this many times and average the bars", 1, 9)\n',
        "    alternatives: int = setting("),
        ("    vote_rounds: EngineInt = declared(1, 1, 9)\n", "    alternatives: EngineInt = declared(")),
}


def _insert(path: Path, text: str, anchor: str) -> None:
    source = path.read_text(encoding="utf-8")
    assert source.count(anchor) == 1, f"{anchor.strip()!r} moved in {path.name}: update the anchor"
    path.write_text(source.replace(anchor, text + anchor), encoding="utf-8")


def package_with_one_more_setting(folder: Path, kind: str, *, api: bool = True) -> Path:
    """A copy of the package whose schema declares one more `kind` setting (and, with `api`, whose
    app/api/setting_fields.py restates it): nothing else edited."""
    copy = folder / "decider"
    copy.mkdir()
    shutil.copy2(ROOT / "__init__.py", copy / "__init__.py")
    for layer in ("engine", "app", "ui"):  # the package's layers only (never a venv or cache beside them)
        shutil.copytree(ROOT / layer, copy / layer, ignore=shutil.ignore_patterns("__pycache__"))
    _, schema, restated = NEW_FIELDS[kind]
    _insert(copy / "engine" / "core" / "settings.py", *schema)
    if api:
        _insert(copy / "app" / "api" / "setting_fields.py", *restated)
    return folder


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(folder), QT_QPA_PLATFORM="offscreen")
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=300, cwd=folder)


@pytest.mark.parametrize("kind", ["sampling", "decision"])
def test_a_setting_declared_once_reaches_every_surface(tmp_path, kind):
    pytest.importorskip("PySide6")
    folder = package_with_one_more_setting(tmp_path, kind)
    done = _run(folder, str(SURFACES), NEW_FIELDS[kind][0], kind)
    assert done.returncode == 0, done.stderr[-2000:]
    missing = {surface: why for surface, why in json.loads(done.stdout.splitlines()[-1]).items() if why is not None}
    assert not missing, "\n".join(f"{surface}: {why}" for surface, why in missing.items())


@pytest.mark.parametrize("kind", ["sampling", "decision"])
def test_a_setting_the_api_does_not_restate_is_named_by_the_drift_check(tmp_path, kind):
    folder = package_with_one_more_setting(tmp_path, kind, api=False)
    done = _run(folder, "-c", "from decider.app.api.setting_fields import schema_drift; print(schema_drift())")
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"'{NEW_FIELDS[kind][0]}'" in done.stdout and "app/api/setting_fields.py" in done.stdout


def test_the_surfaces_looked_at_are_the_ones_the_schema_names():
    """The subprocess checks each surface the schema's docstring promises (no surface silently left out)."""
    text = SURFACES.read_text(encoding="utf-8")
    for surface in ("schema", "cli", "api", "gui_settings", "gui_form", "remote", "history"):
        assert f'"{surface}": {surface}' in text


def test_every_surface_offers_exactly_the_schemas_settings(qtbot):
    """Each surface's set of engine settings is the schema's: none missing, none of its own."""
    from decider.app.api.protocol import ChatCompletionRequest, DecideRequest
    from decider.app.cli import build_parser
    from decider.app.gui_ports import settings_rules
    from decider.app.history import _settings_record
    from decider.app.preferences import GuiSettings
    from decider.engine.core.settings import DECISION_NAMES, SAMPLING_NAMES, SETTINGS, SamplingSettings
    from decider.engine.decisions.types import DecisionRequest
    from decider.ui.settings_panel import SettingsPanel

    decision, sampling, engine = set(DECISION_NAMES), set(SAMPLING_NAMES), set(SAMPLING_NAMES + DECISION_NAMES)
    assert decision and sampling and not decision & sampling
    assert {f.name for f in fields(DecisionRequest)} & set(SETTINGS) == decision
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    group = next(g for g in commands.choices["ask"]._action_groups if g.title == "decision")
    assert {a.dest for a in group._group_actions} == decision
    assert {f.name for f in fields(GuiSettings)} & set(SETTINGS) == engine | {"max_tokens"}
    panel = SettingsPanel(GuiSettings(), settings_rules())
    qtbot.addWidget(panel)
    assert set(panel.fields) & set(SETTINGS) == engine | {"max_tokens"}
    assert set(DecideRequest.model_fields) & set(SETTINGS) == engine
    assert set(ChatCompletionRequest.model_fields) & set(SETTINGS) >= sampling
    request = DecisionRequest("Q?", ("a", "b"), sampling=SamplingSettings(seed=3))
    assert set(_settings_record(request)) & set(SETTINGS) == set(SETTINGS) - {"max_tokens"}  # the history: all
    assert set(request.request_fields()) == {s for s in decision if not SETTINGS[s].local and SETTINGS[s].always_sent}
    changed = {s: (not SETTINGS[s].default) if SETTINGS[s].kind is bool else SETTINGS[s].default + 1 for s in decision}
    changed["score_options"] = False  # not with think
    sent = DecisionRequest("Q?", ("a", "b"), **changed).request_fields()
    assert set(sent) == {s for s in decision if not SETTINGS[s].local} - {"score_options"} | {
        s for s in decision if SETTINGS[s].always_sent}
