"""The import contracts in pyproject.toml ([tool.importlinter]) hold on this tree, and they do fail when
a widget imports the application, a tool the benchmarks (or the reverse) or a test module `conftest`: each
check is run on a copy with one such import added. And at run time, importing the widgets and the GUI
wiring loads no OpenVINO."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "engine", "ui")
# Run from the repository root under their own names; root packages of the contracts too.
BESIDE = ("bench", "tools", "modelkit", "tests")


def lint_imports(package: Path) -> subprocess.CompletedProcess:
    """import-linter on the `decider` package at `package` (its pyproject.toml holds the contracts), in a
    fresh interpreter that imports `decider` from there."""
    assert package.name == "decider"
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    env = {**os.environ, "PYTHONPATH": str(package.parent), "PYTHONSAFEPATH": "1"}
    return subprocess.run([sys.executable, "-c", code], cwd=package, env=env, capture_output=True, text=True, timeout=120)


def copy_tree(dest: Path) -> Path:
    package = dest / "decider"
    for name in (*PACKAGES, *BESIDE):
        shutil.copytree(ROOT / name, package / name, ignore=shutil.ignore_patterns("__pycache__", "fixtures", "*.bin", "*.xml"))
    for name in ("__init__.py", "pyproject.toml"):
        shutil.copy(ROOT / name, package / name)
    return package


def test_the_import_contracts_hold():
    import decider

    done = lint_imports(Path(decider.__file__).parent)  # this checkout, under the name it is imported by
    assert done.returncode == 0, done.stdout + done.stderr
    assert "9 kept, 0 broken" in done.stdout


def test_a_widget_importing_the_application_breaks_the_layers(tmp_path):
    tree = copy_tree(tmp_path)
    assert lint_imports(tree).returncode == 0  # the copy itself is clean
    bars = tree / "ui" / "bars.py"
    bars.write_text(bars.read_text().replace("from .theme import color", "from .theme import color\nimport decider.app.history"))
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "BROKEN" in done.stdout and "decider.ui.bars -> decider.app.history" in done.stdout


def test_the_engine_importing_qt_breaks_its_contract(tmp_path):
    tree = copy_tree(tmp_path)
    target = tree / "engine" / "core" / "errors.py"
    target.write_text(target.read_text() + "\nimport PySide6.QtCore  # noqa\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "decider.engine.core.errors -> PySide6" in done.stdout


def _add_line(path: Path, line: str) -> None:
    path.write_text(path.read_text() + "\n" + line + "  # noqa\n")


@pytest.mark.parametrize("where, line, broken", [
    ("tools/parity_report.py", "from bench.common import SRC", "tools.parity_report -> bench.common"),
    ("bench/report.py", "import tools.make_fixtures", "bench.report -> tools.make_fixtures"),
    ("bench/report.py", "from tests.support.models import case", "bench.report -> tests.support.models"),
    ("modelkit/llama_cpp.py", "import bench.common", "modelkit.llama_cpp -> bench.common"),
    ("engine/core/clock.py", "import support.models", "decider.engine.core.clock -> support"),
    # the engine's parts in layers: the vocabulary at the bottom imports no runner
    ("engine/core/clock.py", "from decider.engine.runners import base", "decider.engine.core.clock -> decider.engine.runners.base"),
    ("tests/test_cli.py", "from conftest import model_dir", "tests.test_cli -> conftest"),
])
def test_the_tools_benchmarks_and_tests_keep_apart(tmp_path, where, line, broken):
    """tools/ and bench/ use the package (and modelkit), never each other; nothing but the tests imports a test
    module, and no module imports conftest: one such import in a copy breaks a contract."""
    tree = copy_tree(tmp_path)
    _add_line(tree / where, line)
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "BROKEN" in done.stdout and broken in done.stdout, done.stdout[-3000:]


def test_ui_never_imports_openvino():
    code = (
        "import sys; import decider.ui.main_window, decider.ui.overlay, decider.ui.inspector, decider.ui.settings_panel, decider.ui.model_picker, decider.ui.hotkey; "
        "import decider.app.preferences, decider.app.gui; "
        "bad = [m for m in sys.modules if m == 'openvino' or m.startswith('openvino.') or m == 'decider.engine.runners.runner']; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen"}, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_new_ui_modules_never_import_openvino():
    code = (
        "import sys; import decider.ui.calibration_tab, decider.ui.history_tab, decider.ui.reliability_chart, decider.ui.task_dialog, decider.ui.download_dialog, decider.ui.convert_dialog, decider.ui.doctor_dialog, decider.ui.result_view, decider.ui.settings_panel, decider.ui.model_picker, "
        "decider.ui.main_window, decider.app.engine_thread, decider.app.task_runner, decider.app.model_jobs, decider.app.gui; "
        "bad = [m for m in sys.modules if m == 'openvino' or m.startswith('openvino.') or m == 'decider.engine.runners.runner']; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen"}, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_application_objects_fit_the_ports_the_widgets_declare(tmp_path):
    """The widgets know the application only by the Protocols in ui/ports.py: what app/gui.py hands them
    must have every member those declare (a renamed method or signal fails here, not in a click)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from decider.app.engine_thread import EngineWorker
    from decider.app.gui_ports import calibration, model_tools, settings_rules
    from decider.app.history import HistoryStore
    from decider.app.preferences import GuiSettings
    from decider.app.task_runner import Task
    from decider.engine.decisions.decide import DecisionRequest
    from support.results import letters_result
    from decider.ui import ports

    assert isinstance(EngineWorker(), ports.EngineClient)
    assert isinstance(GuiSettings(), ports.Settings)
    assert isinstance(Task(lambda task: None), ports.TaskHandle)
    store = HistoryStore(tmp_path / "history.sqlite3")
    assert isinstance(store, ports.History)
    request = DecisionRequest("Q?", ("a", "b"))
    store.add(request, letters_result([-0.1, -2.0], request), model="m", device="CPU", source="test")
    assert isinstance(store.rows()[0], ports.HistoryRecord)
    assert isinstance(calibration(), ports.Calibration) and isinstance(model_tools(), ports.ModelTools)
    assert settings_rules().setting_range("temperature")[1] >= 1.0
    # and the check has teeth: the worker's members minus one no longer fit
    worker = EngineWorker()
    members = [*ports.EngineClient.__annotations__, *(n for n, v in vars(ports.EngineClient).items()
                                                       if callable(v) and not n.startswith("_"))]
    assert "serve_api" in members and "progress" in members
    assert isinstance(SimpleNamespace(**{n: getattr(worker, n) for n in members}), ports.EngineClient)
    assert not isinstance(SimpleNamespace(**{n: getattr(worker, n) for n in members if n != "serve_api"}), ports.EngineClient)


def test_code_imports_the_layers_only_as_decider():
    """The layers are installed only as `decider.engine` / `decider.app` / `decider.ui`: a top-level
    `import engine` would work from the repository root (python -m puts it on sys.path) and nowhere else."""
    import re

    top_level = re.compile(r"^\s*(?:from|import)\s+(?:app|engine|ui)(?:\.|\s|$)", re.M)
    offenders = []
    for folder in ("app", "engine", "ui", "tests", "tools", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            if "fixtures" in path.parts:
                continue
            offenders += [f"{path.relative_to(ROOT)}: {m.group(0).strip()}" for m in top_level.finditer(path.read_text())]
    assert offenders == []
    assert top_level.search("from engine.runner import ModelRunner\n")  # and the pattern does catch one


def _bare_imports(path: Path) -> set[str]:
    """The top-level names `path` imports absolutely (at any depth: lazy imports too)."""
    import ast

    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_nothing_outside_tools_and_tests_imports_them_by_a_bare_name():
    """Under pytest tools/ and tests/ are on sys.path (pyproject's pythonpath), so `import make_fixtures` or
    `from support.models import …` in bench/ would pass here and fail under `python -m bench`; import-linter sees
    such a name only as an outside package. So: no module of the package, bench/ or modelkit/ imports a tool
    or a test module by its bare name."""
    tools = {path.stem for path in (ROOT / "tools").glob("*.py")}
    tests = {path.stem for folder in ("tests", "tests/support") for path in (ROOT / folder).glob("*.py")} | {"support"}
    assert {"make_fixtures", "demo_tasks"} <= tools and {"conftest", "support", "test_architecture"} <= tests
    offenders = []
    for folder in (*PACKAGES, "bench", "modelkit"):
        for path in (ROOT / folder).rglob("*.py"):
            offenders += [f"{path.relative_to(ROOT)}: {name}" for name in sorted(_bare_imports(path) & (tools | tests))]
    assert offenders == []
    # and the scan does see one, lazy too: tests may import tools, test_static_runner does so inside a function
    assert "demo_tasks" in _bare_imports(ROOT / "tests" / "test_static_runner.py") & tools


def _cycles(graph) -> list[tuple[str, ...]]:
    """One chain back per import that closes a cycle (a -> b with a path b -> … -> a)."""
    found = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                found.append((importer, *back))
    return found


def test_the_benchmarks_and_modelkit_have_no_import_cycle():
    """bench/soak ⇄ bench/soak_window was one (#29): no module of bench/ or modelkit/ reaches itself again through
    its imports (lazy ones too); the same check finds that cycle when the import is put back."""
    grimp = pytest.importorskip("grimp")
    code = ("import sys, json, grimp; sys.path.insert(0, '.'); g = grimp.build_graph('bench', 'modelkit', cache_dir=None); "
            "print(json.dumps({m: sorted(g.find_modules_directly_imported_by(m)) for m in g.modules}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONSAFEPATH": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    graph = grimp.ImportGraph()
    for importer, imported in json.loads(done.stdout).items():
        graph.add_module(importer)
        for name in imported:
            graph.add_import(importer=importer, imported=name)
    assert "bench.soak_window" in graph.modules and "modelkit.tokenizer_files" in graph.modules
    assert _cycles(graph) == []
    graph.add_import(importer="bench.soak_window", imported="bench.soak")
    assert ("bench.soak", "bench.soak_window", "bench.soak") in _cycles(graph)


def test_a_bare_layer_name_does_not_import_in_tests():
    """What users' installs do (no `engine` at the top level) holds in the test process too (conftest), so a
    package looked up by its bare name — `resources.files("engine")` — fails here, not on a user's machine."""
    import importlib
    from importlib import resources

    with pytest.raises(ModuleNotFoundError, match="decider.engine"):
        importlib.import_module("engine")
    with pytest.raises(ModuleNotFoundError):
        resources.files("app")
    assert resources.files("decider.engine.decisions").joinpath("prompts/decision.txt").is_file()


def test_the_window_imports_the_decision_vocabulary_without_the_engine():
    """engine/decisions/types.py holds the request/result vocabulary: importing the main window loads neither OpenVINO nor
    the tokenizer (#29: it used to load 19 engine modules and `tokenizers` for DecisionRequest)."""
    import subprocess
    import sys

    code = ("import sys, decider.ui.main_window\n"
            "print(sorted(m for m in ('openvino', 'tokenizers', 'llguidance', 'decider.engine.runners.runner', 'decider.engine.decisions.decide', "
            "'decider.engine.generation.generate') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_a_class_is_defined_once_across_the_layers():
    """One definition per value type: a window-side Protocol copying an app dataclass field by field (ModelInfo
    was both, in app/engine_thread.py and ui/ports.py; TemperatureFit too) drifts apart from it. The one name left
    in two places names two things: a weights file's quantisation (app/models.py), a compiled model's arithmetic."""
    import ast
    from collections import defaultdict

    where: dict[str, list[str]] = defaultdict(list)
    for package in ("engine", "app", "ui"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.ClassDef):
                    where[node.name].append(str(path.relative_to(ROOT)))
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert set(twice) == {"Precision"}, twice
    assert all(len(where[name]) == 1 and where[name][0].startswith("engine/") for name in ("ModelInfo", "TemperatureFit")), where


# Import cycles allowed while a branch removes them, each edge (importer, imported): none today. A new cycle fails
# test_engine_app_and_ui_have_no_import_cycle.
KNOWN_CYCLE_EDGES: set[tuple[str, str]] = set()


def _package_graph(grimp, prefixes: tuple[str, ...]):
    """The import graph of the `decider` package this test runs (lazy and TYPE_CHECKING imports included), built
    in a fresh interpreter and kept to the modules under `prefixes`."""
    import decider

    code = ("import sys, json, grimp; g = grimp.build_graph('decider', cache_dir=None); "
            "print(json.dumps({m: sorted(g.find_modules_directly_imported_by(m)) for m in g.modules}))")
    env = {**os.environ, "PYTHONPATH": str(Path(decider.__file__).parent.parent), "PYTHONSAFEPATH": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    graph = grimp.ImportGraph()
    for importer, imported in json.loads(done.stdout).items():
        if importer.startswith(prefixes):
            graph.add_module(importer)
            for name in imported:
                if name.startswith(prefixes):
                    graph.add_import(importer=importer, imported=name)
    return graph


def test_engine_app_and_ui_have_no_import_cycle():
    """No module of engine/, app/ or ui/ reaches itself again through its imports, lazy ones (inside a function)
    and TYPE_CHECKING ones too (#40: the tuning and the runner, the window and its parts, the step loop and its
    drafted variant, the tools and their format imported each other). The same check finds a cycle put back."""
    grimp = pytest.importorskip("grimp")
    graph = _package_graph(grimp, ("decider.engine", "decider.app", "decider.ui"))
    assert "decider.ui.window_models" in graph.modules and "decider.engine.runners.runner" in graph.modules
    for importer, imported in KNOWN_CYCLE_EDGES:
        assert graph.direct_import_exists(importer=importer, imported=imported), (
            f"{importer} -> {imported} is gone: delete it from KNOWN_CYCLE_EDGES (and pyproject's ignore_imports)")
        graph.remove_import(importer=importer, imported=imported)
    assert _cycles(graph) == []
    graph.add_import(importer="decider.ui.window_models", imported="decider.ui.main_window")
    assert ("decider.ui.main_window", "decider.ui.window_models", "decider.ui.main_window") in _cycles(graph)


def flat_modules(engine: Path) -> list[str]:
    """Modules directly in engine/ (its __init__ aside): each module belongs in a part."""
    return sorted(path.name for path in engine.glob("*.py") if path.name != "__init__.py")


def test_every_engine_module_is_in_a_sub_package_that_says_what_it_holds(tmp_path):
    """engine/ shows its parts: no flat module beside them, every
    folder of modules is a package whose __init__ says in a paragraph what it holds, and every one is shipped."""
    import ast
    import tomllib

    engine = ROOT / "engine"
    assert flat_modules(engine) == []
    parts = sorted(path.parent for path in engine.rglob("*.py") if "__pycache__" not in path.parts and path.parent != engine)
    packages = set(parts)
    assert len(packages) >= 10
    for folder in packages:
        init = folder / "__init__.py"
        assert init.is_file(), f"{folder.relative_to(ROOT)} has no __init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc.split()) >= 20, f"{init.relative_to(ROOT)}: no paragraph saying what the part holds"
    shipped = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    assert {"decider." + ".".join(folder.relative_to(ROOT).parts) for folder in packages} <= shipped
    # and the check does see a flat module
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "stray.py").write_text("")
    assert flat_modules(tmp_path) == ["stray.py"]
