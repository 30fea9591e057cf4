"""The installed distribution is one package, `decider`: a wheel built from this checkout holds nothing else
at the top of site-packages (no `app`, `engine` or `ui` to collide with another distribution's), carries the
prompt templates and the bundled demo model, and decides from any folder once installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("setuptools")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return next(out.glob("decider-*.whl"))


def test_the_wheel_holds_one_top_level_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"decider", wheel.name.split("-py")[0] + ".dist-info"}
    assert "decider/engine/decisions/prompts/decision.txt" in names
    assert "decider/resources/demo-model/openvino_model.xml" in names
    assert "decider/resources/demo-vl-model/config.json" in names
    assert not any(n.startswith(("decider/tests/", "decider/tools/", "decider/bench/", "decider/modelkit/")) for n in names)


def test_the_installed_package_decides_from_another_folder(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(target), "PYTHONSAFEPATH": "1",
           "DECIDER_DATA_DIR": str(tmp_path / "data"), "DECIDER_CONFIG_DIR": str(tmp_path / "config")}
    done = subprocess.run([sys.executable, "-m", "decider.app.cli", "ask", "--json", "Which one?", "--option", "a", "--option", "b"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["choice"]["text"] in ("a", "b")  # decided by the bundled demo model
    where = subprocess.run([sys.executable, "-c", "import decider; print(decider.__file__)"], cwd=tmp_path, env=env,
                           capture_output=True, text=True).stdout
    assert where.startswith(str(target / "decider"))  # the installed copy, not this checkout
