"""The type checker (mypy, configured in pyproject.toml's [tool.mypy]) passes over engine/, app/ and ui/, so CI fails
on a type error; and it does report one: a caller that treats the settings port's sampling as a number is caught."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("decider.engine", "decider.app", "decider.ui")


def _home() -> Path:
    """A folder where `decider` names this checkout (the repository root is the package), kept between runs so
    mypy's cache there stays valid; one per checkout."""
    home = Path(tempfile.gettempdir()) / f"decider-typecheck-{hashlib.sha1(str(ROOT).encode()).hexdigest()[:12]}"
    home.mkdir(exist_ok=True)
    link = home / "decider"
    if not link.is_symlink():
        try:
            link.symlink_to(ROOT, target_is_directory=True)
        except FileExistsError:  # another test process made it meanwhile
            pass
    assert link.resolve() == ROOT
    return home


def mypy(*args: str) -> subprocess.CompletedProcess:
    home = _home()
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
               "--cache-dir", str(home / ".mypy_cache"), "--no-error-summary", *args]
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    return subprocess.run(command, cwd=home, env=env, capture_output=True, text=True, timeout=900)


def test_engine_app_and_ui_type_check():
    done = mypy(*[arg for package in PACKAGES for arg in ("-p", package)])
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_a_type_error_against_the_ports_is_reported():
    snippet = (
        "from decider.ui.ports import Settings\n"
        "def temperature(settings: Settings) -> float:\n"
        "    return settings.sampling() * 2\n"  # SamplingSettings, not a number (the port said Any before #29)
    )
    done = mypy("-c", snippet)
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'Unsupported operand types for * ("SamplingSettings" and "int")' in done.stdout, done.stdout


def test_only_untyped_libraries_are_exempt():
    """No module of ours is exempt (the last ten were, while issue #29's branches rewrote them)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    for override in config.get("overrides", []):
        modules = set(override["module"] if isinstance(override["module"], list) else [override["module"]])
        assert not any(m.startswith("decider") for m in modules), modules
        assert set(override) <= {"module", "ignore_missing_imports"}, override
    assert not config.get("ignore_errors") and not config.get("ignore_missing_imports")


def test_unannotated_functions_are_checked_too():
    """mypy skips the body of a function without annotations unless check_untyped_defs is on: then the
    errors there are found (the option is read from pyproject.toml, and the checker is shown to honour it)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config.get("check_untyped_defs") is True
    done = mypy("-c", "def untyped():\n    return 'text' + 1\n")
    assert done.returncode == 1 and 'Unsupported operand types for + ("str" and "int")' in done.stdout, done.stdout


def test_the_ports_name_their_types():
    """ui/ports.py is the boundary between the widgets and the application: no value crosses it as Any."""
    import ast

    tree = ast.parse((ROOT / "ui" / "ports.py").read_text(encoding="utf-8"))
    untyped = [node.lineno for node in ast.walk(tree)
               if (isinstance(node, ast.Name) and node.id == "Any") or (isinstance(node, ast.Attribute) and node.attr == "Any")]
    assert not untyped, f"ui/ports.py uses Any on lines {untyped}"
