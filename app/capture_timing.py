"""Capture-to-bars: how long a player waits from a grabbed screen to the option bars, at a pixel budget.

A deterministic 1280×720 game-like screen (sky and ground, sprites, HUD bars, sensor noise, as bench/w_vision.py
draws it) is decided on cold (the runner's state and its encoded-image cache cleared first), with a short
three-option question; the time runs from the pixel array to the bars (the grab itself is not included).
`decider doctor` reports it at the default budget; bench/w_capture_budget.py at several.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

QUESTION = "The screenshot shows the battle. What should we do?"
OPTIONS = ("Attack", "Defend", "Retreat")
WIDTH, HEIGHT = 1280, 720


def game_screen(width: int = WIDTH, height: int = HEIGHT, seed: int = 0) -> np.ndarray:
    """A deterministic game-like screen: sky and ground gradients, a few sprites, HUD bars, sensor noise."""
    rng = np.random.default_rng(seed)
    y = np.linspace(0, 1, height)[:, None, None]
    x = np.linspace(0, 1, width)[None, :, None]
    image = np.where(y < 0.6, [90, 140, 220] * (1 - 0.4 * y), [60, 130, 50] * (1.2 - 0.5 * y)) + 20 * x
    for _ in range(12):
        top, left = rng.integers(0, height - 80), rng.integers(0, width - 80)
        image[top : top + rng.integers(20, 80), left : left + rng.integers(20, 80)] = rng.integers(0, 255, 3)
    image[10:30, 10:300] = [200, 30, 30]  # health bar
    image[40:60, 10:220] = [30, 30, 200]  # mana bar
    image += rng.normal(0, 6, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


@dataclass(frozen=True)
class CaptureTiming:
    budget: int  # the pixel budget asked for
    model_budget: int  # the model's own (a smaller one caps the budget)
    size: tuple[int, int]  # (height, width) the grab was scaled to
    image_tokens: int
    seconds: float  # capture-to-bars
    preprocess_s: float
    encode_s: float
    prefill_s: float  # the language model's prefill, the encode taken out
    load: float = 0.0  # the 1-minute load average just before the run
    cpus: int = 1
    others_cores: float | None = None  # cores other processes kept busy during the run (None: not on Linux)
    logprobs: tuple[float, ...] = field(default=(), compare=False)

    def summary(self) -> str:
        capped = f", capped by the model's own {self.model_budget:,}" if self.model_budget < self.budget else ""
        return (f"{self.seconds:.2f} s for a {WIDTH}×{HEIGHT} grab at a budget of {self.budget:,} pixels{capped} "
                f"(scaled to {self.size[1]}×{self.size[0]}, {self.image_tokens} image tokens): preprocess "
                f"{self.preprocess_s:.2f} s, vision encoder {self.encode_s:.2f} s, prefill {self.prefill_s:.2f} s; "
                f"{self.conditions()}")

    def conditions(self) -> str:
        """The load it was measured under and whether that counts as quiet (app/capture_budget.py). Other processes'
        CPU during the run decides where it is known: the load average lags, and still counts the compile that ran
        just before (`decider doctor` compiles the model first)."""
        from .capture_budget import OTHERS_PER_CPU, is_quiet_load

        seen = f"measured at load {self.load:.2f} on {self.cpus} vCPUs"
        if self.others_cores is None:
            quiet = is_quiet_load(self.load, self.cpus)
        else:
            quiet = self.others_cores <= OTHERS_PER_CPU * self.cpus
            seen += f", other processes using {self.others_cores:.2f} cores during it"
        return f"{seen} ({'quiet' if quiet else 'busy: other work slowed this'})"


def _cpu_jiffies() -> tuple[float, float, float] | None:
    """(busy, total) jiffies of the whole machine and this process's own CPU time in jiffies (Linux only)."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    except (OSError, ValueError, IndexError):
        return None
    idle = values[3] + values[4]
    own = os.times()
    return sum(values) - idle, sum(values), (own.user + own.system) * os.sysconf("SC_CLK_TCK")


def _others_cores(before, after, cpus: int) -> float | None:
    """How many cores other processes kept busy between two `_cpu_jiffies` readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    others = (after[0] - before[0]) - (after[2] - before[2])
    return round(max(others, 0.0) / ((after[1] - before[1]) / cpus), 3)


def time_capture(runner, budget: int, screen: np.ndarray | None = None) -> CaptureTiming:
    """One cold decision on the screen at `budget` pixels (the runner must see images)."""
    from decider.engine.decisions.decide import decide
    from decider.engine.core.settings import SamplingSettings
    from decider.engine.decisions.types import DecisionRequest
    from decider.engine.vision.preprocess import target_size

    pixels = game_screen() if screen is None else screen
    request = DecisionRequest(question=QUESTION, options=OPTIONS, images=(pixels,), image_pixels=budget,
                              sampling=SamplingSettings(temperature=0.0))
    runner.reset()  # cold: no state, no snapshot of an earlier prompt, no encoded image to reuse
    runner.clear_snapshots()
    runner.vision.clear()
    cpus, load, jiffies = os.cpu_count() or 1, os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0, _cpu_jiffies()
    started = time.perf_counter()
    result = decide(runner, request)
    seconds = time.perf_counter() - started
    others = _others_cores(jiffies, _cpu_jiffies(), cpus)
    stats = runner.vision.stats
    prefill = result.timings.get("prefill_s", 0.0) - stats.last_encode_s
    processor = runner.vision.processor
    size = target_size(pixels.shape[0], pixels.shape[1], replace(processor, max_pixels=min(budget, processor.max_pixels)))
    return CaptureTiming(budget, processor.max_pixels, size, int(result.usage.get("image_tokens", 0)), seconds,
                         stats.last_preprocess_s, stats.last_encode_s, max(prefill, 0.0), load, cpus, others,
                         tuple(option.logprob for option in result.options))
