"""A transformers checkpoint rebuilt from an optimum-intel OpenVINO export, for a demo whose checkpoint was not kept.

Continuing a demo's training needs its transformers weights; the shipped folder holds only the IR. Where each weight
lands among the IR's constants is found by a probe, not by reading names (most constants are renamed or folded):

1. a model of the same config whose every parameter element holds a value of its own -- element g of the whole model
   is 1 + (g + OFFSET)·2⁻²¹, exact in float32 -- is exported with the same exporter;
2. each float constant of the probe's IR is read back to element numbers under the transforms the exporter applies:
   as it is (a weight, maybe transposed or reshaped), 1 + w (Qwen3.5's RMSNorm scale, folded), ±exp(w) (Gated
   DeltaNet's A = −exp(A_log), folded with or without its sign);
3. the shipped IR's constants, paired with the probe's by their place in the graph (same exporter, same graph),
   are written back through the inverse transforms.

Every parameter element must be found, and where one is found twice (tied embeddings: the embedding table and the
head) the two must agree; the caller then checks the result against the shipped folder through the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

STEP = 2.0 ** -21  # element g holds 1 + (g + OFFSET)·STEP: exact in float32 while the model has < 2²¹ elements
OFFSET = 1024      # keeps g = 0 away from 1.0, which many scalar constants hold


@dataclass(frozen=True)
class Placement:
    """Where one IR constant's elements come from: a transform and, per element, the model's element number."""
    transform: str  # a key of INVERSE
    elements: np.ndarray  # int64, one per constant element (flattened)


def ir_constants(folder: Path) -> list[tuple[str, int, np.ndarray]]:
    """(IR file, place among its constants, data) of every float constant of every IR in `folder`, in graph order."""
    import openvino as ov

    core = ov.Core()
    out = []
    for xml in sorted(folder.glob("openvino_*.xml")):
        consts = [op for op in core.read_model(xml).get_ordered_ops() if op.get_type_name() == "Constant"]
        for i, op in enumerate(consts):
            data = op.get_data()
            if data.dtype in (np.float32, np.float64) and data.size > 1:
                out.append((xml.name, i, np.array(data, dtype=np.float64).reshape(-1)))
    return out


def probe_values(start: int, count: int) -> np.ndarray:
    """The probe's values of model elements start … start + count − 1 (float64, each exact in float32)."""
    return 1 + (np.arange(start, start + count, dtype=np.float64) + OFFSET) * STEP


def _write(model, values: np.ndarray) -> None:
    """The model's parameters, in their order, set from one flat array (element g of the model: values[g])."""
    import torch

    g = 0
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(values[g:g + p.numel()]).reshape(p.shape).to(p.dtype))
            g += p.numel()


def fill_probe(model) -> int:
    """Every parameter element of `model` set to its own value; returns the number of elements."""
    total = sum(p.numel() for p in model.parameters())
    if total + OFFSET >= 2 ** 21:
        raise ValueError(f"the probe needs < {2 ** 21 - OFFSET} parameter elements, this model has {total}")
    _write(model, probe_values(0, total))
    return total


INVERSE: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "w": lambda v: v, "1+w": lambda v: v - 1, "exp(w)": np.log, "-exp(w)": lambda v: np.log(-v)}


def place(data: np.ndarray, total: int) -> Placement | None:
    """The probe constant's elements as model element numbers, or None if it is not (wholly) made of parameters."""
    for transform in INVERSE:
        with np.errstate(invalid="ignore", divide="ignore"):
            g = (INVERSE[transform](data) - 1) / STEP - OFFSET
        if not np.isfinite(g).all():
            continue
        # A folded exp() is rounded in float32: its element numbers are within a fraction of a step of an integer.
        tolerance = 0.25 if "exp" in transform else 1e-6
        rounded = np.rint(g)
        if np.all(np.abs(g - rounded) <= tolerance) and rounded.min() >= 0 and rounded.max() < total:
            return Placement(transform, rounded.astype(np.int64))
    return None


def recover(probe_folder: Path, shipped_folder: Path, total: int) -> tuple[np.ndarray, dict]:
    """Every parameter element's value in the shipped IR (element g of the model: values[g]), from the probe export's
    placements, and a report: constants placed, the largest disagreement between duplicate placements."""
    probe, shipped = ir_constants(probe_folder), ir_constants(shipped_folder)
    if [(f, i, d.size) for f, i, d in probe] != [(f, i, d.size) for f, i, d in shipped]:
        raise ValueError("the probe's IR and the shipped IR differ in their constants: not the same exporter or config")
    values = np.full(total, np.nan)
    placed = 0
    duplicate_gap = 0.0
    for (_, _, pdata), (_, _, sdata) in zip(probe, shipped):
        p = place(pdata, total)
        if p is None:
            continue
        placed += 1
        w = INVERSE[p.transform](sdata)
        seen = ~np.isnan(values[p.elements])
        if seen.any():
            duplicate_gap = max(duplicate_gap, float(np.max(np.abs(values[p.elements][seen] - w[seen]))))
        values[p.elements] = w
    missing = int(np.isnan(values).sum())
    if missing:
        raise ValueError(f"{missing} of {total} parameter elements were not found in the IR")
    return values, {"constants_placed": placed, "elements": total, "duplicate_gap": duplicate_gap}


def rebuild(model, probe_folder: Path, shipped_folder: Path) -> dict:
    """Write the shipped IR's weights into `model` (the probe's config, in fill_probe's order); returns recover()'s
    report."""
    values, report = recover(probe_folder, shipped_folder, sum(p.numel() for p in model.parameters()))
    _write(model, values)
    return report
