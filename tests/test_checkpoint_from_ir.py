"""tools/checkpoint_from_ir.py: a demo's transformers weights read back from its OpenVINO IR.

The unit tests build small IR folders with OpenVINO's own graph API (a probe folder whose constants hold the probe's
values under the exporter's transforms, and a "shipped" one with the same graph and other values) and check every
element comes back, and that what is not a parameter, or a folder of another graph, is refused. The extra test
rebuilds the shipped seeing demo through optimum-intel's real exporter and checks it against the shipped folder.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import checkpoint_from_ir as cir  # noqa: E402

TOTAL = 60  # model elements: a 4×6 weight (0-23), a norm of 12 (24-35), 4 decays (36-39), 20 tied embeddings (40-59)


def _save_ir(folder: Path, constants: list[np.ndarray]) -> None:
    """One IR whose graph adds each constant (flattened) to a parameter of its size, so all stay in the graph."""
    import openvino as ov
    from openvino import opset13 as ops

    outputs, params = [], []
    for i, c in enumerate(constants):
        x = ops.parameter([c.size], np.float32, name=f"x{i}")
        params.append(x)
        outputs.append(ops.add(x, ops.reshape(ops.constant(c.astype(np.float32)), [c.size], False)))
    folder.mkdir(parents=True, exist_ok=True)
    ov.save_model(ov.Model(outputs, params), folder / "openvino_model.xml", compress_to_fp16=False)


def _as_exported(values: np.ndarray) -> list[np.ndarray]:
    """The constants an exporter would write for model elements holding `values`: the weight transposed, the norm
    as 1 + w, the decays as −exp(w), the tied embeddings twice (the table and the head), and two non-parameters."""
    w = values[:24].reshape(4, 6)
    return [w.T.copy(), 1 + values[24:36], -np.exp(values[36:40]), values[40:60].reshape(5, 4), values[40:60].copy(),
            np.array([1.0, 0.1, 0.01, 0.001]), np.array([2.0, 2.0])]


@pytest.fixture
def folders(tmp_path):
    rng = np.random.default_rng(7)
    weights = rng.normal(0, 0.05, TOTAL)
    weights[24:36] = rng.normal(0, 0.1, 12)   # norm offsets (the model's scale is 1 + w)
    weights[36:40] = np.log(rng.uniform(0.01, 2, 4))  # A_log
    _save_ir(tmp_path / "probe", _as_exported(cir.probe_values(0, TOTAL)))
    _save_ir(tmp_path / "shipped", _as_exported(weights))
    return tmp_path / "probe", tmp_path / "shipped", weights


def test_every_element_comes_back_through_each_transform(folders):
    probe, shipped, weights = folders
    values, report = cir.recover(probe, shipped, TOTAL)
    # float32 storage: the weights come back to their float32 rounding (A_log through exp and log: a few ulps).
    np.testing.assert_allclose(values, weights, rtol=2e-6, atol=1e-7)
    assert report == {"constants_placed": 5, "elements": TOTAL, "duplicate_gap": 0.0}


def test_a_constant_that_is_no_parameter_is_not_placed():
    assert cir.place(np.array([1.0, 0.1, 0.01, 0.001]), TOTAL) is None
    inside = cir.probe_values(3, 5)
    assert cir.place(inside, TOTAL).elements.tolist() == [3, 4, 5, 6, 7]
    assert cir.place(np.append(inside, 1.3), TOTAL) is None  # one element off the probe's grid
    assert cir.place(cir.probe_values(TOTAL - 2, 4), TOTAL) is None  # past the model's last element


def test_a_missing_parameter_is_an_error_not_a_silent_zero(tmp_path):
    consts = _as_exported(cir.probe_values(0, TOTAL))
    del consts[2]  # the decays folded some other way: their elements are found nowhere
    _save_ir(tmp_path / "probe", consts)
    _save_ir(tmp_path / "shipped", consts)
    with pytest.raises(ValueError, match="4 of 60 parameter elements were not found"):
        cir.recover(tmp_path / "probe", tmp_path / "shipped", TOTAL)


def test_another_graph_is_refused(folders, tmp_path):
    probe, _, weights = folders
    _save_ir(tmp_path / "other", _as_exported(weights)[:-1])
    with pytest.raises(ValueError, match="differ in their constants"):
        cir.recover(probe, tmp_path / "other", TOTAL)


def test_tied_copies_that_disagree_are_reported(folders, tmp_path):
    probe, _, weights = folders
    consts = _as_exported(weights)
    consts[4] = consts[4] + 0.25  # the head's copy of the table differs from the table
    _save_ir(tmp_path / "shipped2", consts)
    _, report = cir.recover(probe, tmp_path / "shipped2", TOTAL)
    assert report["duplicate_gap"] == pytest.approx(0.25, abs=1e-6)


def _exporter_importable() -> bool:
    try:
        # literal names: tests/test_test_dependencies.py reads these calls as the test's optional imports
        return (importlib.util.find_spec("optimum.intel") is not None and importlib.util.find_spec("torch") is not None
                and importlib.util.find_spec("transformers") is not None)
    except (ImportError, ValueError):
        return False


@pytest.mark.slow
@pytest.mark.extra
@pytest.mark.skipif(not _exporter_importable(), reason="optimum-intel (decider[convert]) is not installed")
def test_the_shipped_seeing_demo_is_rebuilt_to_its_own_probabilities(tmp_path):
    """The real thing: optimum-intel exports the probe, the shipped IR is read back, and transformers (float64) on
    the rebuilt checkpoint gives the shipped folder's option probabilities through the engine (rebuild checks ≤ 1e-5)."""
    import json
    import subprocess

    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "train_demo_vl.py"), "rebuild", "--work", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    meta = json.loads((tmp_path / "checkpoint" / "train_meta.json").read_text())
    assert meta["rebuilt"]["duplicate_gap"] < 1e-6 and meta["rebuilt"]["elements"] == 529_296
    summary = json.loads((tmp_path / "train_summary.json").read_text())
    assert summary["card_lines"] and all(line.startswith("- Run ") for line in summary["card_lines"])
