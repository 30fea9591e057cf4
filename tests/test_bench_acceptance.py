"""bench/w_acceptance.py runs end to end on a fixture: drafted decoding at set acceptances, lazy commits against
snapshots, every setting's tokens those of plain decoding (no timing is asserted)."""

import json

from bench import w_acceptance
from support.models import model_dir


def test_acceptance_worker_checks_every_setting_against_plain_decoding(tmp_path):
    out = tmp_path / "acceptance.json"
    argv = ["--model", str(model_dir("qwen35-text-int8")), "--tokens", "24", "--rounds", "1", "--acceptance", "0.5,1.0",
            "--drafts", "2", "--out", str(out)]
    assert w_acceptance.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["cpu_flags"] and "load_after" in result
    assert set(result["plans"]) == {"lazy", "snapshot"} and result["plans"]["lazy"] != result["plans"]["snapshot"]
    names = {f"{c} k=2 a={a}" for c in ("lazy", "snapshot") for a in (0.5, 1.0)}
    assert set(result["facts"]) == names and set(result["ratio_to_plain"]) == names
    assert all(entry["identical"] for entry in result["facts"].values())
    for commits in ("lazy", "snapshot"):  # every draft right: all kept, fewer forwards than at one half
        sure, half = result["facts"][f"{commits} k=2 a=1.0"], result["facts"][f"{commits} k=2 a=0.5"]
        assert sure["measured_acceptance"]["median"] == 1.0 and sure["forwards"]["median"] < half["forwards"]["median"]
    # a rejection costs the snapshot path a replay the lazy commits do not pay
    assert result["facts"]["lazy k=2 a=0.5"]["forwards"]["median"] < result["facts"]["snapshot k=2 a=0.5"]["forwards"]["median"]
