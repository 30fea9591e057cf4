"""bench/w_few_tokens.py runs end to end on a fixture: three runners, every width, their logits compared (no timing
is asserted)."""

import json

from bench import w_few_tokens
from support.models import model_dir


def test_few_tokens_worker_times_every_width_on_three_runners(tmp_path):
    out = tmp_path / "few.json"
    argv = ["--model", str(model_dir("qwen35-text-int8")), "--prompt", "20", "--rounds", "1", "--out", str(out)]
    assert w_few_tokens.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["cpu_flags"] and result["threads"] == 1 and "load_after" in result
    assert set(result["runners"]) == {"fixed-width compile", "few-token path", "fused kernel"}
    for entry in result["runners"].values():
        assert set(entry["forward_vs_step"]) == {str(k) for k in w_few_tokens.WIDTHS}
        assert entry["ms"]["step"]["n"] == 1 and entry["ms"]["forward4"]["median"] > 0
    # three paths of f32 arithmetic: close, yet not one of them merely the other (they sum in other orders)
    assert 0.0 < result["logprob_gap_max"] < 5e-5
    assert any("verify forwards" in line for line in result["plan"])
