"""The README's test command runs on a fresh venv: every third-party module the tests import is installed by
`pip install -e ".[test]"`, or its import is optional (pytest.importorskip, or guarded by `except ImportError`).

A missing one stops the whole run at collection on a user's machine, while a developer's venv that happens to
have it passes (httpx: brought in by nothing any more once openai and huggingface_hub moved to httpx2).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from support.models import ROOT

LOCAL_FOLDERS = (ROOT, ROOT / "tests", ROOT / "tools", ROOT / "bench")


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def declared_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {_requirement_name(r) for r in [*project["dependencies"], *project["optional-dependencies"]["test"]]}


def _local_module(name: str) -> Path | None:
    for folder in LOCAL_FOLDERS:
        for candidate in (folder / f"{name}.py", folder / name / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _guarded(tree: ast.AST) -> set[int]:
    """Line numbers of imports inside `try: … except ImportError/ModuleNotFoundError`."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
            or isinstance(h.type, ast.Tuple) and any(getattr(e, "id", "") in ("ImportError", "ModuleNotFoundError") for e in h.type.elts)
            for h in node.handlers
        ):
            lines |= {n.lineno for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return lines


def _imports(path: Path) -> tuple[set[str], set[str]]:
    """(top-level modules imported unguarded, modules the file makes optional: pytest.importorskip("x"), or a skip
    on importlib.util.find_spec("x")) in one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    guarded, names, skipped = _guarded(tree), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and node.lineno not in guarded:
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.lineno not in guarded:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("importorskip", "find_spec") and node.args:
            if isinstance(node.args[0], ast.Constant):
                skipped.add(str(node.args[0].value).split(".")[0])
    return names, skipped


def third_party_imports() -> dict[str, set[str]]:
    """For each test file: the third-party modules it needs unconditionally, following the tools/bench modules
    it imports (they run in the test process too)."""
    needed: dict[str, set[str]] = {}
    stdlib = set(sys.stdlib_module_names)
    for test in sorted((ROOT / "tests").rglob("*.py")):
        seen, queue, found, skipped = set(), [test], set(), set()
        while queue:
            path = queue.pop()
            if path in seen:
                continue
            seen.add(path)
            names, skip = _imports(path)
            skipped |= skip
            for name in names:
                local = _local_module(name)
                if local is not None:
                    queue.append(local)
                elif name not in stdlib and name not in ("decider", "__future__"):
                    found.add(name)
        needed[str(test.relative_to(ROOT))] = found - skipped
    return needed


def test_every_module_the_tests_import_is_in_the_test_extra_or_optional():
    providers = metadata.packages_distributions()
    declared = declared_distributions()
    missing = {}
    for test, modules in third_party_imports().items():
        for module in modules:
            distributions = {d.lower().replace("_", "-") for d in providers.get(module, [])}
            if not distributions & declared:
                missing.setdefault(module, []).append(test)
    assert not missing, (
        "imported by tests but neither in [project.dependencies]/[test] nor behind pytest.importorskip: "
        + "; ".join(f"{m} ({', '.join(sorted(t)[:3])})" for m, t in sorted(missing.items()))
    )


def test_the_check_sees_imports_through_local_modules_and_optional_ones():
    """The check can fail: it finds httpx (imported by the scoring tests, in no other extra's way) and torch
    (imported by tools/demo_gguf.py, reached from a test that skips on find_spec("torch"))."""
    needed = third_party_imports()
    assert "httpx" in needed["tests/test_api_scoring.py"]
    assert "torch" not in needed["tests/test_remote_llama.py"]
    _, optional = _imports(ROOT / "tests" / "test_remote_llama.py")
    assert {"torch", "transformers"} <= optional
    assert "torch" in _imports(ROOT / "tools" / "demo_gguf.py")[0] or "torch" in (ROOT / "tools" / "demo_gguf.py").read_text()
