"""No production function (engine/, app/, ui/) runs over 80 lines: a longer one is split into steps with names,
so a reader sees what it does before how. Counted from `def` to the function's last line, docstring included."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("engine", "app", "ui")
LIMIT = 80


def long_functions(source: str, limit: int = LIMIT) -> list[tuple[str, int]]:
    """(name, lines) of every function or method in `source` longer than `limit` lines, nested ones too."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                found.append((node.name, lines))
    return found


def test_no_production_function_is_over_80_lines():
    too_long = []
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            for name, lines in long_functions(path.read_text(encoding="utf-8")):
                too_long.append(f"{relative}: {name} is {lines} lines")
    assert not too_long, "\n".join(too_long)


def test_a_function_of_81_lines_is_reported_and_one_of_80_is_not():
    def function(lines: int) -> str:
        return "def f():\n" + "    x = 1\n" * (lines - 1)

    assert long_functions(function(81)) == [("f", 81)]
    assert long_functions(function(80)) == []
    nested = "class A:\n    def m(self):\n" + "        y = 2\n" * 90
    assert long_functions(nested) == [("m", 91)]
