"""The models Decider knows: recent/configured folders, the demo model and downloaded ones.

Each folder is described without compiling anything: layout, model_type, size on disk, weight
precision (read from the IR) and which devices suit it. A folder that cannot be used carries the
ModelError that says why, naming the file.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from decider.engine.core.errors import ModelError
from decider.engine.model.folder import TEXT_MODEL_TYPES, VL_MODEL_TYPES, inspect_folder

from .config import config_dir, data_dir, demo_models
from .json_files import JsonFileError, read_json_file

PULL_MANIFEST = ".decider-pull.json"
PARTIAL_DIR = ".decider-partial"
SETTINGS_FILES = ("gui-settings.json", "gui_settings.json")  # the app writes the first; tolerate the other

LAYOUT_NAMES = {"text": "text", "vl": "vision-language"}
CHECKPOINT_WEIGHTS = ("*.safetensors", "pytorch_model*.bin", "model.safetensors.index.json")

# Element types that hold weights (everything else in an IR is shapes, indices and masks).
_WEIGHT_TYPES = ("f64", "f32", "bf16", "f16", "f8e4m3", "f8e5m2", "i8", "u8", "i4", "u4", "nf4")
_CONST = re.compile(
    rb'type="Const"[^>]*>\s*<data element_type="(\w+)" shape="([^"]*)" offset="\d+" size="(\d+)"'
)
_NNCF_BLOCK = re.compile(rb"<weight_compression>(.*?)</weight_compression>", re.S)
_NNCF_VALUE = re.compile(rb'<(\w+) value="([^"]*)"\s*/>')


def models_root() -> Path:
    """Where `decider pull` stores repositories: data_dir()/models/<owner>--<name>."""
    return data_dir() / "models"


def repo_folder_name(repo_id: str) -> str:
    return repo_id.replace("/", "--")


# ----- weight precision -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Precision:
    label: str  # "int4-sym channel-wise (+int8_asym)", "int8-asym", "fp16", "fp32", ...
    bits: int | None  # 4, 8, 16, 32
    symmetric: bool | None
    group_size: int | None  # -1 = channel-wise
    ratio: float | None
    source: str  # "nncf" (the IR's compression record) or "constants" (element types of the weights)
    bytes_by_type: dict[str, int] = field(default_factory=dict)

    @property
    def npu_preferred(self) -> bool:
        """int4 symmetric, channel-wise, every ratio-defining layer in int4: the NPU's preferred format."""
        return (
            self.bits == 4 and self.symmetric is True and self.group_size == -1
            and (self.ratio is None or self.ratio >= 0.999)
        )


def _nncf_record(xml: Path) -> dict[str, str] | None:
    """The <nncf><weight_compression> record optimum-intel/NNCF writes into the IR's rt_info (at its end)."""
    try:
        with xml.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 512 * 1024))
            tail = handle.read()
    except OSError:
        return None
    match = _NNCF_BLOCK.search(tail)
    if not match:
        return None
    return {k.decode(): v.decode() for k, v in _NNCF_VALUE.findall(match.group(1))}


def weight_precision(xml: str | Path) -> Precision | None:
    """Weight precision of an IR: from NNCF's record if present, else from its Const element types."""
    xml = Path(xml)
    try:
        text = xml.read_bytes()
    except OSError:
        return None
    by_type: dict[str, int] = {}
    ranks: dict[str, set[int]] = {}
    for etype, shape, size in _CONST.findall(text):
        name = etype.decode()
        if name not in _WEIGHT_TYPES:
            continue
        by_type[name] = by_type.get(name, 0) + int(size)
        ranks.setdefault(name, set()).add(len([d for d in shape.split(b",") if d.strip()]))
    record = _nncf_record(xml)
    if record and record.get("mode"):
        mode = record["mode"]  # int4_sym, int4_asym, int8_asym, int8_sym, nf4, ...
        bits_match = re.search(r"(\d+)", mode)
        bits = int(bits_match.group(1)) if bits_match else None
        symmetric = True if mode.endswith("_sym") else False if mode.endswith("_asym") else None
        try:
            group_size = int(record.get("group_size", "-1"))
        except ValueError:
            group_size = None
        try:
            ratio = float(record.get("ratio", "1"))
        except ValueError:
            ratio = None
        label = mode.replace("_", "-")
        if bits == 4:
            label += " channel-wise" if group_size == -1 else f" group {group_size}"
            extra = []
            if ratio is not None and ratio < 0.999:
                extra.append(f"ratio {ratio:g}")
            if any(t in by_type for t in ("u8", "i8")):
                backup = record.get("backup_mode", "int8")
                extra.append(f"+{backup}" if backup not in ("none", "") else "+int8")
            if extra:
                label += f" ({', '.join(extra)})"
        return Precision(label, bits, symmetric, group_size, ratio, "nncf", by_type)
    if not by_type:
        return None
    four = [t for t in ("i4", "u4", "nf4") if t in by_type]
    eight = [t for t in ("i8", "u8") if t in by_type]
    if four:
        symmetric = four == ["i4"]
        grouped = any(3 in ranks[t] for t in four)
        label = f"int4-{'sym' if symmetric else 'asym'} {'group-wise' if grouped else 'channel-wise'}"
        if eight:
            label += " (+int8)"
        return Precision(label, 4, symmetric, None if grouped else -1, None, "constants", by_type)
    if eight:
        symmetric = eight == ["i8"]
        return Precision(f"int8-{'sym' if symmetric else 'asym'}", 8, symmetric, -1, None, "constants", by_type)
    floats = {t: n for t, n in by_type.items() if t.startswith(("f", "bf"))}
    main = max(floats, key=lambda t: floats[t])
    name = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "f64": "fp64"}.get(main, main)
    bits = 32 if main == "f32" else 16 if main in ("f16", "bf16") else None
    return Precision(name, bits, None, None, None, "constants", by_type)


# ----- describing one folder ------------------------------------------------------------------------------------


@dataclass
class ModelEntry:
    path: Path
    name: str
    sources: list[str]  # "given", "last used", "recent", "demo model", "seeing demo model", "downloaded"
    kind: str  # "export" (ready), "checkpoint" (needs `decider convert`), "broken", "incomplete"
    size_bytes: int = 0
    layout: str | None = None  # "text" / "vision-language"
    model_type: str | None = None
    precision: Precision | None = None
    devices: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    repo_id: str | None = None
    commit: str | None = None
    partial_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.kind == "export"

    def to_dict(self) -> dict:
        data = asdict(self)
        data["path"] = str(self.path)
        data["precision"] = None if self.precision is None else {
            **asdict(self.precision), "npu_preferred": self.precision.npu_preferred,
        }
        data["ok"] = self.ok
        return data


def folder_size(path: Path) -> tuple[int, int]:
    """(bytes of the model's files, bytes of unfinished downloads)."""
    total = partial = 0
    for root, dirs, files in os.walk(path):
        in_partial = PARTIAL_DIR in Path(root).relative_to(path).parts
        for name in files:
            try:
                size = os.stat(os.path.join(root, name), follow_symlinks=True).st_size
            except OSError:
                continue
            if in_partial:
                partial += size
            else:
                total += size
    return total, partial


def checkpoint_info(folder: Path) -> dict | None:
    """config.json of a Hugging Face Qwen3.5 checkpoint (safetensors, no IR), or None."""
    config_path = folder / "config.json"
    if not config_path.is_file():
        return None
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(config, dict) or config.get("model_type") not in TEXT_MODEL_TYPES + VL_MODEL_TYPES:
        return None
    if not any(next(folder.glob(pattern), None) for pattern in CHECKPOINT_WEIGHTS):
        return None
    return config


def device_support(precision: Precision | None) -> dict[str, str]:
    return {
        "CPU": "yes",
        "GPU": "yes",
        "NPU": "preferred" if precision is not None and precision.npu_preferred else "works",
    }


def read_manifest(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / PULL_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def describe(path: str | Path, sources: list[str] | None = None) -> ModelEntry:
    folder = Path(path).expanduser()
    entry = ModelEntry(path=folder, name=folder.name, sources=list(sources or []), kind="broken")
    manifest = read_manifest(folder) if folder.is_dir() else None
    if manifest:
        entry.repo_id = manifest.get("repo_id")
        entry.commit = manifest.get("commit")
        if isinstance(entry.repo_id, str) and entry.repo_id:
            entry.name = entry.repo_id
    if folder.is_dir():
        entry.size_bytes, entry.partial_bytes = folder_size(folder)
    try:
        model = inspect_folder(folder)
    except ModelError as exc:
        config = checkpoint_info(folder) if folder.is_dir() else None
        if config is not None:
            entry.kind = "checkpoint"
            entry.model_type = config["model_type"]
            entry.layout = LAYOUT_NAMES["text" if config["model_type"] in TEXT_MODEL_TYPES else "vl"]
            dtype = config.get("dtype") or config.get("torch_dtype") or (config.get("text_config") or {}).get("dtype")
            if dtype:
                entry.precision = Precision(str(dtype), None, None, None, None, "config")
            entry.error = f"{folder}: a Hugging Face checkpoint; convert it with `decider convert {folder} OUT_DIR --weights int4-npu`"
        else:
            entry.kind = "incomplete" if entry.partial_bytes and not manifest else "broken"
            entry.error = str(exc)
        return entry
    entry.kind = "export"
    entry.layout = LAYOUT_NAMES[model.layout]
    entry.model_type = model.model_type
    entry.precision = weight_precision(model.language_ir)
    entry.devices = device_support(entry.precision)
    return entry


# ----- the list -------------------------------------------------------------------------------------------------


def _settings_models() -> list[tuple[str, str]]:
    """(path, source) from the GUI settings file; any shape it may have is tolerated."""
    found: list[tuple[str, str]] = []
    for name in SETTINGS_FILES:
        try:
            data = read_json_file(config_dir() / name)
        except (OSError, JsonFileError):
            continue
        if not isinstance(data, dict):
            continue

        def as_path(item: object) -> str | None:
            if isinstance(item, str) and item.strip():
                return item
            if isinstance(item, dict):
                for key in ("path", "folder", "model", "dir"):
                    if isinstance(item.get(key), str) and item[key].strip():
                        return item[key]
            return None

        last = as_path(data.get("last_model"))
        if last:
            found.append((last, "last used"))
        recent = data.get("recent_models")
        if isinstance(recent, (list, tuple)):
            found.extend((p, "recent") for p in map(as_path, recent) if p)
    return found


def known_models(extra: list[str | Path] | None = None) -> list[ModelEntry]:
    """Every folder Decider knows, each once (by resolved path), sources merged."""
    order: list[str] = []
    sources: dict[str, list[str]] = {}
    paths: dict[str, Path] = {}

    def add(path: str | Path, source: str) -> None:
        p = Path(path).expanduser()
        try:
            key = str(p.resolve())
        except OSError:
            key = str(p.absolute())
        if key not in sources:
            order.append(key)
            sources[key] = []
            paths[key] = p
        if source not in sources[key]:
            sources[key].append(source)

    for path in extra or []:
        add(path, "given")
    for path, source in _settings_models():
        add(path, source)
    for demo, label in demo_models():
        add(demo, label)
    root = models_root()
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if child.is_dir() and not child.name.startswith("."):
                add(child, "downloaded")
    return [describe(paths[key], sources[key]) for key in order]


# ----- text -----------------------------------------------------------------------------------------------------


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def devices_here() -> list[str]:
    """The devices OpenVINO really sees on this machine (what a model's device list is checked against)."""
    import openvino as ov

    try:
        return list(ov.Core().available_devices)
    except RuntimeError:
        return []


def render_entry(entry: ModelEntry, seen: list[str] | None = None) -> str:
    """One entry; with `seen` (devices OpenVINO lists here) a device this machine lacks says so."""
    mark = {"export": "✓", "checkpoint": "•"}.get(entry.kind, "✗")
    head = f"{mark} {entry.name}"
    if entry.sources:
        head += f"  ({', '.join(entry.sources)})"
    size = human_size(entry.size_bytes)
    if entry.partial_bytes:
        size += f" + {human_size(entry.partial_bytes)} unfinished download"
    lines = [head, f"    {entry.path} · {size}"]
    if entry.kind == "export":
        weights = entry.precision.label if entry.precision else "unknown weights"
        families = None if seen is None else {d.split(".")[0] for d in seen}
        devices = " · ".join(
            f"{d} {v}" if families is None or d in families else f"{d} {v} (none here)" for d, v in entry.devices.items()
        )
        lines.append(f"    {entry.layout} ({entry.model_type}) · weights {weights} · {devices}")
    elif entry.kind == "checkpoint":
        weights = f" · {entry.precision.label}" if entry.precision else ""
        lines.append(f"    Hugging Face checkpoint, {entry.layout} ({entry.model_type}){weights}")
        lines.append(f"    → convert: decider convert {entry.path} OUT_DIR --weights int4-npu")
    else:
        lines.append(f"    ✗ {entry.error}")
        if entry.kind == "incomplete":
            lines.append("    → the download did not finish: run `decider pull` again to resume")
    return "\n".join(lines)
