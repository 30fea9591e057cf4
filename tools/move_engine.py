#!/usr/bin/env python3
"""Moves engine/'s flat modules into its sub-packages and rewrites every reference to them (#40).

Run from anywhere: `python tools/move_engine.py` (`--dry-run` lists the moves it would make and changes nothing).
It is idempotent: on a tree already moved it moves only flat modules that appeared since (a merged branch's
engine/x.py) and rewrites the references that still use the flat names (a merged branch's `from .x import`,
`decider.engine.x`, `engine/x.py`). What it does:

- `git mv` each engine/x.py to the sub-package MOVES (or, for a name it does not know, RULES) gives it; a flat
  module no rule covers stays where it is and is listed in a loud warning at the end;
- moves engine/prompts/ beside the module that reads it (DIRS) and rewrites `resources.files(...)`, the
  package-data and `engine/prompts/` paths;
- rewrites imports in every Python file: relative ones inside engine/ (`from .x import`, `from . import x`,
  `from ..x import` in kernels/) are resolved where the file was and re-expressed from where it is;
  `from decider.engine import x, y` is split per new package, keeping the names it binds;
- rewrites dotted names `decider.engine.x[.attr]` anywhere in Python, TOML and Markdown (monkeypatch strings,
  `python -m decider.engine.x`, import-linter contracts), file paths `engine/x.py` (and `engine/x.name`) and `"engine" / "x.py"`;
- lists every engine sub-package in pyproject.toml's `packages`.

Exit status: 0 done; 1 flat modules left that no rule places (listed); 2 the merge still has conflicts.
Nothing else in the repository imports this script: it is deleted once every branch has been merged.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "engine"
PREFIX = "decider.engine"

# old flat module -> its dotted place under decider.engine
MOVES = {
    # core: the vocabulary every part shares
    "errors": "core.errors", "clock": "core.clock", "files": "core.files", "info": "core.info",
    "settings": "core.settings", "logprobs": "core.logprobs", "ranking": "core.ranking",
    # constrained: what the model may emit (tools, the tool-call format, grammars, JSON schemas)
    "tools": "constrained.tools", "tool_format": "constrained.tool_format",
    "tool_grammar": "constrained.tool_grammar", "structured": "constrained.structured",
    # model: the model folder and its text side
    "model_folder": "model.folder", "tokenizer": "model.tokenizer", "chat_template": "model.chat_template",
    "template_check": "model.template_check", "reasoning_close": "model.reasoning_close",
    "vision_tokens": "model.vision_tokens",
    # graphs: edits to the exported OpenVINO graph
    "graph": "graphs.logits", "static_graph": "graphs.static", "decode_graph": "graphs.decode",
    "mlp_fusion_guard": "graphs.mlp_fusion_guard",
    # compile: devices, precision and the compile choices
    "devices": "compile.devices", "precision": "compile.precision", "fast_tuning": "compile.fast_tuning",
    "compile_probe": "compile.probe", "compile_plan": "compile.plan", "planner": "compile.planner",
    "measurements": "compile.measurements",
    # vision: the image encoder and what feeds it
    "vision_encoder": "vision.encoder", "vision_device": "vision.device", "vision_feed": "vision.feed",
    "vision_preprocess": "vision.preprocess", "frame_change": "vision.frame_change",
    # runners: compiled models that run a prompt
    "runner": "runners.runner", "runner_base": "runners.base", "runner_choice": "runners.choice",
    "static_runner": "runners.static", "prompt_cache": "runners.prompt_cache", "prompt_entry": "runners.prompt_entry",
    "prefill_chunks": "runners.prefill_chunks", "fast_reasoning": "runners.fast_reasoning",
    "scoring": "runners.scoring", "compile_probe_child": "runners.probe_child",
    "mtp_head": "runners.mtp_head",
    # generation: the token loop, sampling and drafts
    "generate": "generation.generate", "speculative": "generation.speculative", "drafts": "generation.drafts",
    "sampling": "generation.sampling", "processors": "generation.processors", "logit_bias": "generation.logit_bias",
    # decisions: a decision's request, prompt, labels and result
    "types": "decisions.types", "decide": "decisions.decide", "decision_prompt": "decisions.prompt",
    "tool_decide": "decisions.tool_decide", "labels": "decisions.labels", "option_draw": "decisions.option_draw",
    "calibration": "decisions.calibration", "remote_precision": "decisions.server_precision",
    # completions: the OpenAI completions format
    "openai_format": "completions.openai_format", "echo": "completions.echo",
    # remote: a decision from an OpenAI-compatible server
    "remote": "remote.engine", "remote_http": "remote.http", "remote_probe": "remote.probe",
    "remote_prompt": "remote.prompt", "remote_read": "remote.read", "remote_reasoning": "remote.reasoning",
    "remote_tools": "remote.tool_calls",
}

# names MOVES does not know (modules added by other branches): the first pattern that matches gives the place
RULES = [
    (r"remote_(\w+)", r"remote.\1"),
    (r"vision_(\w+)", r"vision.\1"),
    (r"compile_(\w+)", r"compile.\1"),
    (r"planner|measurements|\w*tuning\w*|\w+_plan", r"compile.\g<0>"),
    (r"conv_\w+|\w+_graph", r"graphs.\g<0>"),
    (r"mtp_\w+|\w*drafts?(_\w+)?|speculative_\w+|\w+_acceptance", r"generation.\g<0>"),
    (r"\w+_runner|runner_\w+", r"runners.\g<0>"),
    (r"safetensors\w*|\w*tokeni[sz]er\w*|\w*template\w*", r"model.\g<0>"),
    (r"tool_\w+", r"constrained.\g<0>"),
    (r"\w*kernel\w*", r"kernels.\g<0>"),
]

# folders of data under engine/ -> the sub-package that reads them
DIRS = {"prompts": "decisions"}

# where a move changes what code computes from its own location (looked up literally; gone once rewritten)
SPECIAL = {
    "compile/probe.py": [
        ('f"{__package__}.compile_probe"', 'f"{__package__}.probe"'),
        ("str(Path(__file__).parent.parent.parent)", 'str(Path(__file__).parents[len(__package__.split("."))])'),
    ],
}

TEXT_SUFFIXES = {".py", ".toml", ".md", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".sh"}
TEXT_NAMES = {".ci/run"}
SKIP = {"tools/move_engine.py"}


def place(name: str) -> str | None:
    """The dotted place (under decider.engine) of the flat module `name`, or None when nothing covers it."""
    if name in MOVES:
        return MOVES[name]
    for pattern, template in RULES:
        found = re.fullmatch(pattern, name)
        if found:
            return found.expand(template)
    return None


def git(*args: str, dry: bool = False) -> str:
    if dry and args[0] in ("mv", "add"):
        print("  (dry) git", " ".join(args))
        return ""
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


class Tree:
    """The engine's modules as they are on disk (after the moves)."""

    def __init__(self) -> None:
        self.modules: set[str] = set()
        self.packages: set[str] = {""}
        for path in ENGINE.rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(ENGINE).with_suffix("").parts
            if parts[-1] == "__init__":
                self.packages.add(".".join(parts[:-1]))
            else:
                self.modules.add(".".join(parts))

    def exists(self, rel: str) -> bool:
        return rel in self.modules or rel in self.packages

    def is_package(self, rel: str) -> bool:
        return rel in self.packages


def new_rel(tree: Tree, rel: str, extra: dict[str, str]) -> str:
    """`rel` (dotted, under decider.engine, maybe with attributes after the module) as it is named now."""
    parts = rel.split(".")
    head = parts[0]
    target = extra.get(head) or place(head)
    conflict = target is not None and tree.is_package(head) and target.split(".")[0] == head and target != head
    if tree.exists(head) and not conflict:
        return rel
    if conflict:  # the old module `head` became the package `head`: `head.x` stays when x is in that package
        if len(parts) == 1 or tree.exists(f"{head}.{parts[1]}"):
            return rel
    if target is None or not tree.exists(target):
        return rel
    return ".".join([target, *parts[1:]])


def relative(from_package: str, target: str) -> str:
    """`target` (absolute, dotted) as a relative module from inside the package `from_package`."""
    here, there = from_package.split("."), target.split(".")
    common = 0
    while common < min(len(here), len(there)) and here[common] == there[common]:
        common += 1
    return "." * (len(here) - common + 1) + ".".join(there[common:])


def module_name(path: Path) -> tuple[str, str] | None:
    """(module, package) of a file inside the package decider, or None for files outside it."""
    rel = path.relative_to(ROOT)
    if rel.parts[0] not in ("engine", "app", "ui"):
        return None
    parts = ["decider", *rel.with_suffix("").parts]
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), ".".join(parts[:-1])
    return ".".join(parts), ".".join(parts[:-1])


def resolve(package: str, level: int, module: str | None) -> str:
    base = package.split(".")
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _under(absolute: str) -> str | None:
    if absolute == PREFIX:
        return ""
    return absolute[len(PREFIX) + 1:] if absolute.startswith(PREFIX + ".") else None


class ImportFix:
    """The new text of one `from ... import ...` statement, or None when it needs none."""

    def __init__(self, tree: Tree, extra: dict[str, str], now_package: str | None, was_package: str | None) -> None:
        self.tree, self.extra = tree, extra
        self.now, self.was = now_package, was_package

    def target(self, node: ast.ImportFrom) -> str | None:
        """The absolute module the statement imports from, named as it is now."""
        if node.level == 0:
            rel = _under(node.module or "")
        else:
            assert self.was is not None
            rel = _under(resolve(self.was, node.level, node.module))
            if rel and not self.tree.exists(rel) and new_rel(self.tree, rel, self.extra) == rel and node.level == 1:
                rel = node.module  # written against the flat engine/ (a merged branch's line in a moved file)
        if rel is None:
            return None
        names = [alias.name for alias in node.names]
        if rel and rel in self.tree.packages and not any(self.tree.exists(f"{rel}.{n}") for n in names):
            moved = self.extra.get(rel) or place(rel)
            if moved and moved != rel and self.tree.exists(moved):
                rel = moved  # the old module `rel` is now the package `rel`: its names live in `moved`
        return self._absolute(rel)

    def _absolute(self, rel: str) -> str:
        rel = new_rel(self.tree, rel, self.extra) if rel else rel
        return f"{PREFIX}.{rel}" if rel else PREFIX

    def spelled(self, node: ast.ImportFrom, absolute: str) -> str:
        if node.level == 0 or self.now is None:
            return absolute
        return relative(self.now, absolute)

    def names(self, node: ast.ImportFrom, absolute: str) -> list[tuple[str, str, str]] | None:
        """(module to import from, name, bound name) per name when some name is a moved module, else None."""
        rel = _under(absolute)
        if rel is None or not self.tree.is_package(rel):
            return None
        moved, rows = False, []
        for alias in node.names:
            inside = f"{rel}.{alias.name}" if rel else alias.name
            if alias.name == "*" or self.tree.exists(inside):
                rows.append((absolute, alias.name, alias.asname or alias.name))
                continue
            now = new_rel(self.tree, alias.name if rel == "" else inside, self.extra)
            if rel == "" and now != alias.name and self.tree.exists(now):
                parent, _, leaf = now.rpartition(".")
                rows.append((f"{PREFIX}.{parent}" if parent else PREFIX, leaf, alias.asname or alias.name))
                moved = True
            else:
                rows.append((absolute, alias.name, alias.asname or alias.name))
        return rows if moved else None


def fix_imports(text: str, path: Path, tree: Tree, extra: dict[str, str], moved_from: dict[Path, Path]) -> str:
    try:
        syntax = ast.parse(text)
    except SyntaxError as exc:
        print(f"WARNING: {path.relative_to(ROOT)} does not parse ({exc}); its imports are left as they are")
        return text
    now = module_name(path)
    was = module_name(moved_from.get(path, path))
    fix = ImportFix(tree, extra, now[1] if now else None, was[1] if was else None)
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, list[str]]] = []
    for node in ast.walk(syntax):
        if not isinstance(node, ast.ImportFrom) or (node.level and fix.was is None):
            continue
        absolute = fix.target(node)
        if absolute is None:
            continue
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        indent = lines[first][: node.col_offset]
        tail = lines[last][node.end_col_offset:] if node.end_col_offset is not None else "\n"
        rows = fix.names(node, absolute)
        if rows is not None:
            groups: dict[str, list[str]] = {}
            for module, name, bound in rows:
                groups.setdefault(module, []).append(name if name == bound else f"{name} as {bound}")
            new = [f"{indent}from {fix.spelled(node, m)} import {', '.join(n)}" for m, n in groups.items()]
            new[-1] += tail if tail.strip() else (tail or "\n")
            new = [line if line.endswith("\n") else line + "\n" for line in new]
            edits.append((first, last, new))
            continue
        spelled = fix.spelled(node, absolute)
        old = "." * node.level + (node.module or "")
        if spelled == old:
            continue
        pattern = re.compile(r"(from\s+)" + re.escape(old) + r"(\s+import\b)")
        head = lines[first]
        replaced = pattern.sub(lambda m: m.group(1) + spelled + m.group(2), head[node.col_offset:], count=1)
        edits.append((first, first, [head[: node.col_offset] + replaced]))
    for first, last, new in sorted(edits, reverse=True):
        lines[first: last + 1] = new
    return "".join(lines)


DOTTED = re.compile(r"\bdecider\.engine((?:\.\w+)+)")
PATH = re.compile(r"(?<![\w.])engine/(\w+)(?=\.[A-Za-z_])")  # engine/x.py, engine/x.name
JOINED = re.compile(r'"engine"(\s*/\s*)"(\w+)\.py"')


def fix_text(text: str, tree: Tree, extra: dict[str, str]) -> str:
    def dotted(m: re.Match) -> str:
        rel = m.group(1)[1:]
        return f"{PREFIX}.{new_rel(tree, rel, extra)}"

    def moved_file(name: str) -> str | None:
        if (ENGINE / f"{name}.py").exists():
            return None
        where = extra.get(name) or place(name)
        return where if where and (ENGINE / (where.replace(".", "/") + ".py")).exists() else None

    def file_path(m: re.Match) -> str:
        where = moved_file(m.group(1))
        return m.group(0) if where is None else f"engine/{where.replace('.', '/')}"

    def joined(m: re.Match) -> str:
        where = moved_file(m.group(2))
        if where is None:
            return m.group(0)
        *folders, leaf = where.split(".")
        return '"engine"' + "".join(f'{m.group(1)}"{part}"' for part in folders) + f'{m.group(1)}"{leaf}.py"'

    text = DOTTED.sub(dotted, text)
    text = PATH.sub(file_path, text)
    text = JOINED.sub(joined, text)
    for folder, package in DIRS.items():
        if (ENGINE / folder).exists():
            continue
        dotted_package = f"{PREFIX}.{package}"
        text = text.replace(f'resources.files("{PREFIX}").joinpath("{folder}/', f'resources.files("{dotted_package}").joinpath("{folder}/')
        text = text.replace(f'"{PREFIX}" = ["{folder}/', f'"{dotted_package}" = ["{folder}/')
        text = re.sub(rf"(?<![\w.])engine/{folder}\b", f"engine/{package}/{folder}", text)
    return text


def fix_packages(text: str, tree: Tree) -> str:
    """pyproject.toml's `packages = [...]`: every engine sub-package listed, the rest kept."""
    found = re.search(r"^packages = \[(.*)\]$", text, re.M)
    if not found:
        print("WARNING: pyproject.toml has no one-line `packages = [...]`: list the engine's sub-packages by hand")
        return text
    kept = [p.strip().strip('"') for p in found.group(1).split(",") if p.strip()]
    kept = [p for p in kept if not p.startswith(PREFIX + ".")]
    engine = sorted(f"{PREFIX}.{p}" for p in tree.packages if p)
    at = kept.index(PREFIX) + 1 if PREFIX in kept else len(kept)
    names = kept[:at] + engine + kept[at:]
    return text[: found.start()] + "packages = [" + ", ".join(f'"{n}"' for n in names) + "]" + text[found.end():]


def move(dry: bool) -> tuple[dict[Path, Path], dict[str, str], list[str]]:
    """git mv every flat module (and data folder) to its place: (new path -> old path, name -> place, unplaced)."""
    moved_from: dict[Path, Path] = {}
    extra: dict[str, str] = {}
    unplaced = []
    tracked = set(git("ls-files", "engine").split())
    for path in sorted(ENGINE.glob("*.py")):
        name = path.stem
        if name == "__init__":
            continue
        if path.relative_to(ROOT).as_posix() not in tracked:
            print(f"WARNING: engine/{path.name} is not tracked by git: commit it, then run this again")
            unplaced.append(name)
            continue
        where = place(name)
        if where is None:
            unplaced.append(name)
            continue
        target = ENGINE / (where.replace(".", "/") + ".py")
        if target.exists():
            print(f"WARNING: engine/{path.name} -> {target.relative_to(ROOT)} exists already; left where it is")
            unplaced.append(name)
            continue
        _package(target.parent, dry)
        print(f"move engine/{path.name} -> {target.relative_to(ROOT)}")
        git("mv", str(path.relative_to(ROOT)), str(target.relative_to(ROOT)), dry=dry)
        moved_from[target] = path
        extra[name] = where
    for folder, package in DIRS.items():
        if (ENGINE / folder).is_dir():
            _package(ENGINE / package, dry)
            print(f"move engine/{folder}/ -> engine/{package}/{folder}/")
            git("mv", f"engine/{folder}", f"engine/{package}/{folder}", dry=dry)
    return moved_from, extra, unplaced


def _package(folder: Path, dry: bool) -> None:
    init = folder / "__init__.py"
    if init.exists() or dry:
        return
    folder.mkdir(parents=True, exist_ok=True)
    init.write_text(f'"""decider.engine.{folder.name}: see its documented __init__ (added by hand after the move)."""\n')
    print(f"new package {init.relative_to(ROOT)}")
    git("add", str(init.relative_to(ROOT)))


def files_to_rewrite() -> list[Path]:
    names = list(dict.fromkeys(git("ls-files").splitlines()))  # a path in a merge conflict is listed per stage
    out = []
    for name in names:
        if name in SKIP or "fixtures" in name.split("/") or (name.startswith("resources/") and not name.endswith(".md")):
            continue
        if Path(name).suffix in TEXT_SUFFIXES or name in TEXT_NAMES:
            path = ROOT / name
            if path.is_file():
                out.append(path)
    return out


def _static_checks() -> None:
    """No new module name is an old flat name of another module (a merged `from .x` would find the wrong one)."""
    old = set(MOVES)
    for name, where in MOVES.items():
        leaf = where.split(".")[-1]
        assert leaf == name or leaf not in old, f"{name} -> {where}: {leaf} is another module's old name"
        assert where.split(".")[0] not in old or where.split(".")[0] == "remote", where


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    _static_checks()
    unmerged = git("diff", "--name-only", "--diff-filter=U").split()
    if unmerged:
        print("Resolve the merge's conflicts first (flat-style imports may stay: this script rewrites them):\n    "
              + "\n    ".join(unmerged), file=sys.stderr)
        return 2
    moved_from, extra, unplaced = move(args.dry_run)
    if args.dry_run:
        return _warn(unplaced)
    tree = Tree()
    changed = []
    for path in files_to_rewrite():
        text = path.read_text(encoding="utf-8")
        new = fix_imports(text, path, tree, extra, moved_from) if path.suffix == ".py" else text
        new = fix_text(new, tree, extra)
        if path.name == "pyproject.toml" and path.parent == ROOT:
            new = fix_packages(new, tree)
        rel = path.relative_to(ROOT).as_posix()
        for relpath, pairs in SPECIAL.items():
            if rel == f"engine/{relpath}":
                for old, replacement in pairs:
                    new = new.replace(old, replacement)
        if new != text:
            changed.append(rel)
            if not args.dry_run:
                path.write_text(new, encoding="utf-8")
    for rel in changed:
        print(f"rewrote {rel}")
    print(f"{len(moved_from)} module(s) moved, {len(changed)} file(s) rewritten")
    return _warn(unplaced)


def _warn(unplaced: list[str]) -> int:
    if not unplaced:
        return 0
    bar = "!" * 78
    print(f"\n{bar}\nWARNING: no rule places these flat engine modules; they stay in engine/ and "
          f"tests/test_architecture.py fails until they have a sub-package:\n"
          + "\n".join(f"    engine/{name}.py" for name in unplaced)
          + f"\nAdd them to MOVES (or RULES) in tools/move_engine.py, or git mv them by hand, and run it again.\n{bar}",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
