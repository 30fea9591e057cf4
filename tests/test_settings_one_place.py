"""A sampling setting is declared in ONE place, a field of engine.settings.SamplingSettings: a copy of the
package with one more field there must offer it on every surface (defaults and the model's
generation_config, CLI flags, API fields with their range check, the GUI's stored settings and their
validation, the settings form, the remote request body under each server's name, the history).
A surface that still lists the settings by hand fails here, by name."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SURFACES = Path(__file__).parent / "support" / "settings_surfaces.py"
NEW_FIELD = (
    '    typical_p: float = setting(1.0, "Typical P", "keep tokens of typical information content; 1 = off", 0.0, 1.0,\n'
    '                               low_open=True, from_model=True, remote_names={"llama.cpp": "typ_p"})\n'
)


def package_with_one_more_setting(folder: Path) -> Path:
    """A copy of the package whose SamplingSettings declares `typical_p` just before `seed`: nothing else edited."""
    copy = folder / "decider"
    copy.mkdir()
    shutil.copy2(ROOT / "__init__.py", copy / "__init__.py")
    for layer in ("engine", "app", "ui"):  # the package's layers only (never a venv or cache beside them)
        shutil.copytree(ROOT / layer, copy / layer, ignore=shutil.ignore_patterns("__pycache__"))
    settings = copy / "engine" / "settings.py"
    text = settings.read_text(encoding="utf-8")
    anchor = "    seed: int | None = setting("
    assert text.count(anchor) == 1, "the seed field's declaration moved: update the anchor"
    settings.write_text(text.replace(anchor, NEW_FIELD + anchor), encoding="utf-8")
    return folder


def test_a_setting_declared_once_reaches_every_surface(tmp_path):
    pytest.importorskip("PySide6")
    folder = package_with_one_more_setting(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(folder), QT_QPA_PLATFORM="offscreen")
    done = subprocess.run([sys.executable, str(SURFACES), "typical_p"], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    missing = {surface: why for surface, why in json.loads(done.stdout.splitlines()[-1]).items() if why is not None}
    assert not missing, "\n".join(f"{surface}: {why}" for surface, why in missing.items())


def test_the_surfaces_looked_at_are_the_ones_the_schema_names():
    """The subprocess checks each surface the schema's docstring promises (no surface silently left out)."""
    text = SURFACES.read_text(encoding="utf-8")
    for surface in ("schema", "cli", "api", "gui_settings", "gui_form", "remote", "history"):
        assert f'"{surface}": {surface}' in text
