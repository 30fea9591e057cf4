"""bench/w_draft.py runs end to end on the demo model (no timing is asserted) and projects what its costs say."""

import json

import pytest

from bench import w_draft
from support.models import ROOT, model_dir

DEMO = ROOT / "resources" / "demo-model"


def test_the_decode_task_checks_greedy_identity_and_counts_acceptance():
    if not DEMO.exists():
        pytest.skip("no demo model")
    result = w_draft.measure(str(DEMO), ["none", "lookup"], tokens=48, rounds=1, temperature=0.0)
    rows = result["rows"]
    assert rows["lookup"]["identical_to_first"] is True
    assert rows["none"]["acceptance"] is None and rows["none"]["tokens_per_forward"] == 1.0
    assert 0 < rows["lookup"]["kept"] <= rows["lookup"]["drafted"] and rows["lookup"]["tokens_per_forward"] > 1


def test_the_costs_task_runs_and_its_projection_is_tokens_over_cost(tmp_path, monkeypatch):
    out = tmp_path / "costs.json"
    monkeypatch.setattr("sys.argv", ["w_draft", "--task", "costs", "--model", str(model_dir("qwen35-text")),
                                     "--rounds", "1", "--out", str(out)])
    w_draft.main()
    result = json.loads(out.read_text())
    assert set(result["ratio_to_step"]) >= {"step", "verify2", "verify5", "rollback", "alternating step"}
    free = {"step": 1.0, "rollback": 0.0, **{f"verify{n}": 1.0 for n in range(2, 6)}}
    projection = w_draft.projected(free)
    assert projection["k=1 a=0.5"] == pytest.approx(1.5)  # a verify as cheap as a step: 1 + a tokens a round
    assert projection["k=3 a=0.9"] == pytest.approx(1 + 0.9 + 0.81 + 0.729)
    costly = w_draft.projected({**free, "rollback": 1.0})
    assert costly["k=1 a=0.5"] == pytest.approx(1.5 / 1.5)  # a rejection half the time costs half a step more


def test_mtp_costs_builds_a_random_head_at_the_checkpoints_geometry_and_projects(tmp_path):
    """bench/mtp_costs.py on the text fixture: a head folder beside the export (links + a random head), its costs,
    and a projection that is tokens over cost (draft steps included)."""
    from bench import mtp_costs
    from decider.engine.model.folder import inspect_folder

    export = tmp_path / "export"
    export.mkdir()
    for path in model_dir("qwen35-text").iterdir():
        (export / path.name).symlink_to(path)
    folder = mtp_costs.head_folder(export, ROOT / "tests" / "fixtures" / "checkpoints" / "qwen35-text")
    assert folder == tmp_path / "export-mtp" and inspect_folder(folder).mtp_ir is not None
    result = mtp_costs.measure(folder, rounds=1, trim=100)
    assert {"step", "draft step", "draft step trimmed 100", "verify2", "verify5", "rollback"} <= set(result["medians_s"])
    free = {"step": 1.0, "rollback": 0.0, "draft step": 0.0, **{f"verify{n}": 1.0 for n in range(2, 6)}}
    assert mtp_costs.projected(free, "draft step")["k=2 a=0.5"] == pytest.approx(1 + 0.5 + 0.25)
    costly = mtp_costs.projected({**free, "draft step": 0.5}, "draft step")
    assert costly["k=2 a=0.5"] == pytest.approx(1.75 / 2.0)  # two draft steps of half a step each
