"""tools/train_demo_vl.py's tail loss on pictures of something else (issue 39 item 5): the worst quarter of a batch's
pictures of something else by their distance from even bars, computed against a float64 reference written here."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the trainer's own packages: decider[convert] brings all three
pytest.importorskip("transformers")
pytest.importorskip("optimum")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import demo_vl_tasks as tasks  # noqa: E402
import train_demo_vl  # noqa: E402

pytestmark = pytest.mark.extra


def _item(kind: str, n: int) -> tasks.Item:
    return tasks.Item(kind, "q", tuple(f"o{i}" for i in range(n)), tuple([1.0 / n] * n), {})


def _reference(items, logp: np.ndarray, share: float = 0.25) -> float:
    """KL(even || bars) of each picture of something else over its own options, the worst ceil(share × count) averaged."""
    d = sorted((-logp[i, :len(it.options)].mean() - math.log(len(it.options))
                for i, it in enumerate(items) if it.kind.endswith("_junk")), reverse=True)
    k = max(1, math.ceil(share * len(d)))
    return sum(d[:k]) / k


def _logp(rows) -> np.ndarray:
    """Letter log-probabilities: each row's option bars (padded with a tiny mass for unused letters)."""
    out = np.full((len(rows), 4), math.log(1e-9))
    for i, bars in enumerate(rows):
        out[i, :len(bars)] = np.log(np.asarray(bars) * (1 - 1e-9 * (4 - len(bars))))
    return out


def test_even_bars_cost_nothing_and_answerable_pictures_are_not_counted():
    items = [_item("star_junk", 2), _item("colour_junk", 4), _item("star", 2)]
    logp = _logp([[0.5, 0.5], [0.25] * 4, [0.99, 0.01]])  # the answerable star is far from even: not a tail
    loss = train_demo_vl.junk_tail_loss(items, torch.tensor(logp))
    assert abs(float(loss)) < 1e-6


def test_the_worst_quarter_is_weighed_and_matches_the_reference():
    rng = np.random.default_rng(5)
    items, rows = [], []
    for i in range(12):
        n = int(rng.integers(2, 5))
        items.append(_item(("colour_junk", "star_junk", "door_junk", "door")[i % 4], n))
        rows.append(rng.dirichlet(np.full(n, 3.0)))
    logp = _logp(rows)
    got = float(train_demo_vl.junk_tail_loss(items, torch.tensor(logp)))
    assert got == pytest.approx(_reference(items, logp), rel=1e-9)
    # the worst picture of something else alone, with share small enough for one
    assert float(train_demo_vl.junk_tail_loss(items, torch.tensor(logp), share=0.01)) == pytest.approx(
        _reference(items, logp, share=0.01), rel=1e-9)
    assert got < float(train_demo_vl.junk_tail_loss(items, torch.tensor(logp), share=0.01))


def test_only_the_worst_pictures_get_a_gradient():
    items = [_item("star_junk", 2) for _ in range(8)]
    rows = [[0.5, 0.5]] * 6 + [[0.9, 0.1], [0.7, 0.3]]
    logp = torch.tensor(_logp(rows), requires_grad=True)
    train_demo_vl.junk_tail_loss(items, logp).backward()  # ceil(8 / 4) = 2: the last two
    moved = logp.grad.abs().sum(-1)
    assert torch.all(moved[:6] == 0) and torch.all(moved[6:] > 0)


def test_a_batch_without_pictures_of_something_else_adds_nothing():
    loss = train_demo_vl.junk_tail_loss([_item("door", 3)], torch.tensor(_logp([[0.8, 0.1, 0.1]])))
    assert float(loss) == 0.0
