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


def test_the_mtp_setting_drafts_with_the_runners_own_head_inside_the_loop(tmp_path):
    """--checkpoint: every setting also runs with the runner's MTP head taking its real steps, the oracle deciding."""
    from support.models import FIXTURES

    model = tmp_path / "qwen35-text-int8"
    model.mkdir()
    for path in model_dir("qwen35-text-int8").iterdir():
        if path.is_file():
            (model / path.name).symlink_to(path)
    out = tmp_path / "acceptance.json"
    argv = ["--model", str(model), "--checkpoint", str(FIXTURES / "checkpoints" / "qwen35-text"), "--tokens", "24",
            "--rounds", "1", "--acceptance", "0.0,1.0", "--drafts", "2", "--commits", "lazy", "--out", str(out)]
    assert w_acceptance.main(argv) == 0
    result = json.loads(out.read_text())
    assert set(result["facts"]) == {f"lazy k=2 a={a}{kind}" for a in (0.0, 1.0) for kind in ("", " mtp")}
    assert all(entry["identical"] for entry in result["facts"].values())
    sure, never = result["facts"]["lazy k=2 a=1.0 mtp"], result["facts"]["lazy k=2 a=0.0 mtp"]
    assert sure["proposed"]["median"] > 0 and sure["measured_acceptance"]["median"] == 1.0
    assert never["measured_acceptance"]["median"] == 0.0 and sure["forwards"]["median"] < never["forwards"]["median"]
    head = result["mtp_head_step"]
    assert head["back_to_back_seconds"] > 0 and head["ids"] > 0
