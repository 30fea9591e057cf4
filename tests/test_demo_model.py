"""The bundled demo model (resources/demo-model) meets issue #7's targets through the real engine.

Held-out items: combinations (task, question, option set) that training never generated (tools/demo_tasks.py's
hash split), drawn with a seed training did not use. Every decision goes through engine.decide.decide() on the
exported folder, exactly as the app asks. No torch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "resources" / "demo-model"

if not (DEMO / "config.json").is_file():
    pytest.skip("resources/demo-model is absent (no demo model shipped)", allow_module_level=True)

sys.path.insert(0, str(ROOT / "tools"))
import demo_tasks  # noqa: E402

from decider.engine.decisions.decide import DecisionRequest, decide  # noqa: E402
from decider.engine.runners.runner import ModelRunner  # noqa: E402
from decider.engine.core.settings import SamplingSettings  # noqa: E402

# Must differ from the seeds tools/train_demo.py trains and validates with (7_2026, 7_2027).
TEST_SEED = 7_2028
SHUFFLE_SEED = 7_2029
COUNTS = {"retrieval": 80, "category": 80, "retrieval_none": 14, "category_none": 13, "category_two": 13}


@pytest.fixture(scope="module")
def runner():
    return ModelRunner(DEMO)


def _probabilities(runner, items):
    out = []
    for item in items:
        result = decide(runner, DecisionRequest(item.question, item.options, sampling=SamplingSettings(temperature=0.0)))
        assert [o.text for o in result.options] == list(item.options)
        probs = [o.probability for o in result.options]
        assert result.choice_index == demo_tasks.argmax(probs)
        out.append(probs)
    return out


@pytest.fixture(scope="module")
def measured(runner):
    items = demo_tasks.heldout_items(TEST_SEED, COUNTS)
    reshuffled = demo_tasks.shuffled(items, SHUFFLE_SEED)
    first = demo_tasks.metrics(items, _probabilities(runner, items))
    second = demo_tasks.metrics(reshuffled, _probabilities(runner, reshuffled))
    print("\ndemo model, held-out:", json.dumps({k: v for k, v in first.items() if k != "bins"}, indent=1))
    print("reshuffled accuracy:", second["accuracy"])
    return items, first, second


def test_items_are_held_out_and_balanced(measured):
    items, _, _ = measured
    assert len(items) == sum(COUNTS.values()) == 200
    assert all(demo_tasks.is_heldout(i.kind, i.question, i.options) for i in items)
    assert {len(i.options) for i in items} == {2, 3, 4}
    assert {i.answer for i in items if not i.ambiguous} == {0, 1, 2, 3}  # the right option sits at every letter


# Bounds below: the value measured (`python -m pytest -s tests/test_demo_model.py` prints them; f32 exact compile,
# 2026-12-04, avx512 CPU) with the margin stated beside each. Another CPU's f32 kernels move a bar by ~1e-5, so the
# margins allow one answer of the 160 unambiguous ones (80 per kind) to flip, and no more.


def test_accuracy_on_unambiguous_items(measured):
    _, m, _ = measured
    assert m["accuracy"] >= 0.99  # measured 1.000 (160/160); bound: one wrong (0.994)
    assert m["by_kind"]["retrieval"] >= 0.98  # measured 1.000 (80/80); bound: one wrong (0.9875)
    assert m["by_kind"]["category"] >= 0.98  # measured 1.000 (80/80); bound: one wrong (0.9875)


def test_expected_calibration_error(measured):
    _, m, _ = measured
    assert m["ece"] <= 0.002  # measured 0.00068; bound 3× it (issue #7's target was 0.10)


def test_confidence_gap(measured):
    _, m, _ = measured
    assert m["confidence_correct"] - m["confidence_other"] >= 0.55  # measured 0.578 (1.000 vs 0.422); bound −0.03


def test_option_order_barely_matters(measured):
    _, first, second = measured
    assert abs(first["accuracy"] - second["accuracy"]) <= 1 / 160  # measured 0 (160/160 both orders); bound: one item


def test_folder_is_marked_and_small():
    config = json.loads((DEMO / "config.json").read_text())
    assert config.get("decider_demo") is True
    assert config["model_type"] == "qwen3_5_text"
    assert {"linear_attention", "full_attention"} <= set(config["layer_types"])
    assert (DEMO / "DEMO").is_file() and (DEMO / "MODEL_CARD.md").is_file()
    assert sum(f.stat().st_size for f in DEMO.rglob("*") if f.is_file()) <= 10_000_000
