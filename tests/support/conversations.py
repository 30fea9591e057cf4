"""A conversation that moves a runner's state through every compile it has, for comparing two runners' logits."""

from __future__ import annotations

import numpy as np


def every_move(runner) -> list[np.ndarray]:
    """Prefill, steps, a verify and its rewind, more steps, a prompt that reuses a snapshot, steps again: every move
    of the state between a runner's compiles (its own, the one-token steps', the verifies')."""
    prompt = list(range(30, 70))
    out = [runner.prefill(prompt, checkpoints=[len(prompt)])]
    out += [runner.step(t) for t in (5, 6, 7)]
    out += list(runner.verify([8, 9, 10], 3))
    runner.rewind()
    out += [runner.step(t) for t in (8, 11, 12)]
    out.append(runner.prefill(prompt + [40, 41]))  # restores the snapshot at the prompt, then two tokens
    out += [runner.step(t) for t in (13, 14)]
    return out
