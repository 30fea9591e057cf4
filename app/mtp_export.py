"""The checkpoint's MTP head as `openvino_mtp_model.xml` beside an export (`decider convert` and `decider pull` call it).

optimum-intel drops a Qwen3.5 checkpoint's `mtp.*` tensors (transformers ignores them on load), so they are read
straight from the checkpoint's safetensors files (engine/model/safetensors_file.py; `decider pull` fetches them by HTTP
Range requests instead, app/pull_mtp.py) and built into a small second graph (engine/graphs/mtp_graph.py). The graph
holds only the head's own layer: the embedding and the vocabulary projection are the exported model's, joined when a
runner loads it (engine/runners/mtp_head.py). Weights are stored f16, as optimum's default weight format stores the main
model's: the head only drafts, the exact model verifies every token.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import openvino as ov

from decider.engine.model.folder import MTP_IR
from decider.engine.graphs.mtp_graph import build_mtp_model
from decider.engine.model.safetensors_file import checkpoint_tensors

PREFIX = "mtp."


def export_mtp(hf_dir: Path, out_dir: Path) -> Path | None:
    """Write the MTP head's IR into out_dir; None when the checkpoint has no `mtp.*` tensors (nothing written).
    ModelError when it has some the builder cannot use (say, a layer of another kind)."""
    tensors = checkpoint_tensors(hf_dir, PREFIX)
    if not tensors:
        return None
    config = json.loads((hf_dir / "config.json").read_text(encoding="utf-8"))
    return export_mtp_tensors(tensors, config, out_dir)


def export_mtp_tensors(tensors: Mapping[str, np.ndarray], config: dict, out_dir: Path) -> Path:
    """Build the head from its `mtp.*` tensors (full names) and the checkpoint's config.json; write out_dir/MTP_IR
    (+ .bin) and return its path. ModelError when the builder cannot use them."""
    model = build_mtp_model({name[len(PREFIX):]: array for name, array in tensors.items() if name.startswith(PREFIX)},
                            config.get("text_config", config))
    path = out_dir / MTP_IR
    ov.save_model(model, path, compress_to_fp16=True)
    return path
