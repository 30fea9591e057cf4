"""`python -m bench setup` then every `bench run` job works from a fresh clone (#30): the tools venv gets the project
itself (the paired jobs run Decider beside its peer in that interpreter and stopped at `No module named
'decider'`), without the window and server stacks, which no job imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.__main__ import GUI_AND_SERVER, setup_steps
from support.models import ROOT

TOOLS_JOBS = ("bench.w_genai", "bench.w_torch", "bench.w_llama", "bench.w_paired", "bench.w_think", "bench.build")


def tools_venv_modules(source: str) -> set[str]:
    """Every module bench/__main__.py runs with the tools venv's interpreter: Job(key, tools, "bench.X", …) calls,
    and what it starts with tools_python() directly (`-m bench.build`)."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Job" and len(node.args) >= 3:
            python, module = node.args[1], node.args[2]
            if isinstance(python, ast.Name) and python.id == "tools" and isinstance(module, ast.Constant):
                found.add(module.value)
        if isinstance(node, ast.List) and any(getattr(e, "func", None) is not None and getattr(e.func, "id", None) == "tools_python"
                                               for e in node.elts if isinstance(e, ast.Call)):
            found.update(e.value for e in node.elts if isinstance(e, ast.Constant) and str(e.value).startswith("bench."))
    return found


def test_every_tools_venv_job_is_checked():
    """A job added to the tools venv's plans is imported below too (the list cannot fall behind the plans)."""
    planned = tools_venv_modules((ROOT / "bench" / "__main__.py").read_text(encoding="utf-8"))
    assert {"bench.w_paired", "bench.w_genai", "bench.build"} <= planned  # the scan finds them
    assert planned <= set(TOOLS_JOBS), planned - set(TOOLS_JOBS)


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
