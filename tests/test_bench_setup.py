"""`python -m bench setup` then every `bench run` job works from a fresh clone (#30): the tools venv gets the project
itself (the paired jobs run Decider beside its peer in that interpreter and stopped at `No module named
'decider'`), without the window and server stacks, which no job imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.__main__ import GUI_AND_SERVER, setup_steps
from conftest import ROOT

TOOLS_JOBS = ("bench.w_genai", "bench.w_torch", "bench.w_llama", "bench.w_paired", "bench.w_think", "bench.build")


def test_the_tools_venv_installs_the_project_without_qt_or_the_server():
    steps = setup_steps("/venv/bin/python")
    assert steps[-1][-3:] == ["--no-deps", "-e", str(ROOT)]
    deps = steps[-2]
    assert any(d.startswith("openvino") for d in deps) and any(d.startswith("tokenizers") for d in deps)
    assert not any(d.lower().startswith(GUI_AND_SERVER) for d in deps)


@pytest.mark.parametrize("module", TOOLS_JOBS)
def test_each_tools_job_imports_with_the_engine_alone(module):
    """What the tools venv has: the package and its engine deps; Qt, uvicorn, starlette and pydantic refused."""
    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0].lower().startswith({GUI_AND_SERVER!r}):\n"
        "            raise ImportError('not in the tools venv: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"import {module}\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
