"""How the capture budget's default (`image_pixels`) is chosen from a measurement, one rule in one place.

The rule (issue 39): **the largest measured budget whose capture-to-bars fits 3 s on the bench machine, counting
only rows measured on a quiet machine.** A row is quiet when other processes kept at most
OTHERS_PER_CPU of each vCPU busy during every one of its runs (their CPU time, not the load average: the bench's
own threads raise the load average by about one per core while it measures, so the load average cannot tell
other work from the measurement itself). If quiet rows exist but none fits, the default is real Qwen3.5's floor
(256², the fewest pixels it takes: nothing smaller is faster). With no quiet row the measurement cannot choose
and the rule says so (None).

`python -m bench vision-budgets` measures the rows (bench/w_vision_budgets.py) and applies this rule;
`decider doctor --tune` applies it to rows measured on the machine it runs on and keeps that machine's own default
(app/machine_capture.py), since a CPU slower than the bench machine's misses the wait at the committed one;
tests/test_capture_choice.py checks engine/core/settings.py's default against the rule on the committed result file
(docs/benchmarks/vision-budgets.json), so the default cannot drift from the measurement. `decider doctor` uses
`is_quiet_load` to say whether its own capture-to-bars was timed on a quiet machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

TARGET_S = 3.0  # capture-to-bars a player waits at most at the default budget (issue 39's target)
QUIET_LOAD_PER_CPU = 0.5  # a machine is quiet enough to start measuring below this 1-minute load per vCPU
OTHERS_PER_CPU = 0.1  # a run counts as quiet when other processes used at most this share of each vCPU during it
FLOOR = 256 * 256  # real Qwen3.5's smallest pixel budget


@dataclass(frozen=True)
class BudgetRow:
    """One budget's measurement: the median capture-to-bars over its runs and the worst interference seen."""

    budget: int
    capture_to_bars_s: float
    others_cores: float  # the most other processes kept busy (cores) during any of the row's runs
    cpus: int

    @property
    def quiet(self) -> bool:
        return self.others_cores <= OTHERS_PER_CPU * self.cpus


@dataclass(frozen=True)
class BudgetChoice:
    budget: int
    reason: str


def is_quiet_load(load: float, cpus: int) -> bool:
    """Whether a 1-minute load average is low enough to start a measurement (before it, not during it)."""
    return load <= QUIET_LOAD_PER_CPU * max(cpus, 1)


def choose_budget(rows: Iterable[BudgetRow], target_s: float = TARGET_S) -> BudgetChoice | None:
    """The rule above (`target_s`: the wait it fits); None when no row was measured on a quiet machine."""
    quiet = [row for row in rows if row.quiet]
    if not quiet:
        return None
    fits = [row for row in quiet if row.capture_to_bars_s <= target_s]
    if not fits:
        slowest = min(quiet, key=lambda row: row.budget)
        return BudgetChoice(FLOOR, f"no quiet row fits {target_s:g} s (the smallest, {slowest.budget:,} pixels, took "
                                   f"{slowest.capture_to_bars_s:.2f} s): Qwen3.5's floor, {FLOOR:,} pixels")
    best = max(fits, key=lambda row: row.budget)
    return BudgetChoice(best.budget, f"the largest budget whose capture-to-bars fits {target_s:g} s on a quiet machine: "
                                     f"{best.budget:,} pixels in {best.capture_to_bars_s:.2f} s")


def rows_from_result(result: dict[str, Any]) -> list[BudgetRow]:
    """The rows of a `python -m bench vision-budgets` result (Decider's runs; the transformers runs do not count)."""
    cpus = int(result["cpus"])
    return [BudgetRow(int(row["budget"]), float(row["decider"]["capture_to_bars_s"]),
                      max(float(run["others_cores"]) for run in row["decider"]["runs"]), cpus)
            for row in result["rows"]]
