"""Find and validate an optimum-intel export folder before anything is compiled.

Two layouts exist (see the facts file): the text layout (`openvino_model.xml`, model_type
`qwen3_5_text` / `qwen3_5_moe_text`) and the vision-language layout exported from real Qwen3.5
checkpoints (`openvino_language_model.xml` + `openvino_text_embeddings_model.xml`, model_type
`qwen3_5` / `qwen3_5_moe`). Every problem becomes one ModelError naming the file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import ModelError

TEXT_MODEL_TYPES = ("qwen3_5_text", "qwen3_5_moe_text")
VL_MODEL_TYPES = ("qwen3_5", "qwen3_5_moe")

TEXT_IR = "openvino_model.xml"
VL_LANGUAGE_IR = "openvino_language_model.xml"
VL_EMBEDDINGS_IR = "openvino_text_embeddings_model.xml"
MTP_IR = "openvino_mtp_model.xml"  # the checkpoint's multi-token prediction head (app/mtp_export.py), optional
VL_VISION_IRS = (
    "openvino_vision_embeddings_model.xml",
    "openvino_vision_embeddings_pos_model.xml",
    "openvino_vision_embeddings_merger_model.xml",
)

_CONST_EXTENT = re.compile(rb'offset="(\d+)"\s+size="(\d+)"')


@dataclass(frozen=True)
class ModelFolder:
    path: Path
    layout: str  # "text" or "vl"
    model_type: str
    text_config: dict
    language_ir: Path
    embeddings_ir: Path | None
    tokenizer_json: Path
    generation_config: dict = field(default_factory=dict)
    vision_config: dict = field(default_factory=dict)  # empty: no vision encoder to use

    @property
    def has_vision(self) -> bool:
        return bool(self.vision_config)

    @property
    def mtp_ir(self) -> Path | None:
        """The MTP draft head's IR beside the export, if `decider convert` kept one."""
        path = self.path / MTP_IR
        return path if path.is_file() and path.with_suffix(".bin").is_file() else None

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def vocab_size(self) -> int:
        return int(self.text_config["vocab_size"])

    @property
    def context_length(self) -> int:
        return int(self.text_config.get("max_position_embeddings", 262144))

    @property
    def is_moe(self) -> bool:
        return "moe" in self.model_type


def read_json_object(path: Path, required: bool = True) -> dict:
    """A JSON file holding an object; ModelError naming the file when it is missing (and required), not JSON or
    not an object ({} for a missing optional file)."""
    if not path.is_file():
        if required:
            raise ModelError(f"{path}: missing file")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ModelError(f"{path}: expected a JSON object")
    return data


def check_ir_pair(xml: Path) -> None:
    """The .xml must exist and its .bin must hold every constant the .xml points into."""
    bin_path = xml.with_suffix(".bin")
    for path in (xml, bin_path):
        if not path.is_file():
            raise ModelError(f"{path}: missing file (an OpenVINO IR needs both .xml and .bin)")
    try:
        text = xml.read_bytes()
    except OSError as exc:
        raise ModelError(f"{xml}: cannot read ({exc})") from None
    if b"<net" not in text[:4096]:
        raise ModelError(f"{xml}: not an OpenVINO IR (no <net> element)")
    needed = max((int(o) + int(s) for o, s in _CONST_EXTENT.findall(text)), default=0)
    have = bin_path.stat().st_size
    if have < needed:
        raise ModelError(f"{bin_path}: truncated ({have} bytes, the IR needs {needed}); download it again")


def inspect_folder(path: str | Path) -> ModelFolder:
    """Validate a model folder's files and configuration; compile nothing."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ModelError(f"{folder}: not a folder")
    config = read_json_object(folder / "config.json", required=True)
    model_type = config.get("model_type")
    if model_type in TEXT_MODEL_TYPES:
        layout, text_config = "text", config
        language_ir, embeddings_ir = folder / TEXT_IR, None
    elif model_type in VL_MODEL_TYPES:
        layout = "vl"
        nested = config.get("text_config")
        if not isinstance(nested, dict):
            raise ModelError(f"{folder / 'config.json'}: model_type {model_type} needs a text_config object")
        text_config = nested
        language_ir, embeddings_ir = folder / VL_LANGUAGE_IR, folder / VL_EMBEDDINGS_IR
    else:
        supported = ", ".join(TEXT_MODEL_TYPES + VL_MODEL_TYPES)
        raise ModelError(
            f"{folder / 'config.json'}: unknown model_type {model_type!r}; Decider runs Qwen3.5 exports ({supported})"
        )
    if not isinstance(text_config.get("vocab_size"), int) or text_config["vocab_size"] <= 0:
        raise ModelError(f"{folder / 'config.json'}: vocab_size missing or not a positive integer")
    for xml in (language_ir, embeddings_ir):
        if xml is not None:
            check_ir_pair(xml)
    tokenizer_json = folder / "tokenizer.json"
    if not tokenizer_json.is_file():
        raise ModelError(f"{tokenizer_json}: missing file (Decider needs the Hugging Face tokenizer.json)")
    generation_config = read_json_object(folder / "generation_config.json", required=False)
    vision_config = _vision_config(folder, config) if layout == "vl" else {}
    return ModelFolder(
        path=folder,
        layout=layout,
        model_type=model_type,
        text_config=text_config,
        language_ir=language_ir,
        embeddings_ir=embeddings_ir,
        tokenizer_json=tokenizer_json,
        generation_config=generation_config,
        vision_config=vision_config,
    )


def _vision_config(folder: Path, config: dict) -> dict:
    """The vision tower's config when the export carries its IRs (text-only use needs none of them)."""
    present = [name for name in VL_VISION_IRS if (folder / name).exists()]
    if not present:
        return {}
    for name in VL_VISION_IRS:
        check_ir_pair(folder / name)
    vision = config.get("vision_config")
    if not isinstance(vision, dict):
        raise ModelError(f"{folder / 'config.json'}: the export has vision IRs but no vision_config object")
    return vision
