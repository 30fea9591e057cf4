#!/usr/bin/env python
"""Fill a decision history with the demo model's held-out items, labelled with their outcomes, so the
calibration view (and `decider calibrate`) shows the demo model's reliability diagram.

    DECIDER_DATA_DIR=/tmp/demo-data python tools/demo_history.py
    DECIDER_DATA_DIR=/tmp/demo-data decider calibrate --fit
    DECIDER_DATA_DIR=/tmp/demo-data decider gui --tab calibration --screenshot docs/screenshots/calibration.png

Ambiguous items have no single right answer: their outcome is drawn from the item's own target
distribution (uniform when nothing matches, half-half when two options match), seeded.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import demo_tasks  # noqa: E402

from decider.app.config import demo_model_dir  # noqa: E402
from decider.app.history import default_store  # noqa: E402
from decider.app.service import EngineService  # noqa: E402
from decider.engine.decisions.decide import DecisionRequest  # noqa: E402
from decider.engine.core.settings import SamplingSettings  # noqa: E402

SEED = 7_2028  # the test seed of tests/test_demo_model.py: items training never saw
COUNTS = {"retrieval": 80, "category": 80, "retrieval_none": 14, "category_none": 13, "category_two": 13}


def main() -> int:
    folder = demo_model_dir()
    if folder is None:
        print("no demo model in resources/demo-model", file=sys.stderr)
        return 1
    store = default_store()
    service = EngineService(folder, history=store)
    rng = random.Random(SEED)
    greedy = SamplingSettings(temperature=0.0)
    items = demo_tasks.heldout_items(SEED, COUNTS)
    for item in items:
        result = service.decide(DecisionRequest(item.question, item.options, sampling=greedy), source="demo-heldout")
        right = item.answer if item.answer is not None else rng.choices(range(len(item.options)), weights=item.target)[0]
        store.label(result.history_id, right)
    print(f"{len(items)} labelled decisions of {service.model_name} written to {store.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
