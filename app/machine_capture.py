"""This machine's capture budget: the `image_pixels` default measured where Decider runs (issue 39 item 3).

The committed default (engine/core/settings.py IMAGE_PIXELS_DEFAULT) is the rule's choice on the bench machine
(app/capture_budget.py); a slower CPU misses the 3 s a player waits at it (an AMD Zen 4 without AMX: 3.86 s, where
an AMX Xeon took 2.97 s). `decider doctor --tune` therefore times capture-to-bars for the model on this machine at a
ladder of budgets, applies the same rule to its own rows, and keeps the choice per model, device, CPU and OpenVINO
version (engine/compile/measurements.key_for) in CACHE_NAME in the cache folder. EngineService then gives a decision
whose budget was left at the committed default this machine's measured one (`apply`); a budget anybody set to
another value is theirs. The history records the budget that ran.
"""

from __future__ import annotations

import json
import logging
import statistics
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

from decider.engine.core.settings import IMAGE_PIXELS_DEFAULT

from .capture_budget import FLOOR, TARGET_S, BudgetRow, choose_budget
from .capture_timing import CaptureTiming, time_capture
from .json_files import JsonFileError, read_json_file

CACHE_NAME = "capture-budgets.json"
# Full, half and a quarter of a 1280×720 grab's pixels (the committed default, 480²), then down to Qwen3.5's floor.
LADDER = (1280 * 720, 640 * 720, 480 * 480, 384 * 384, 320 * 320, FLOOR)
RUNS = 2  # cold runs a budget (its median counts; the most other work seen in either decides whether it was quiet)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MachineBudget:
    """The budget measured on this machine for one model and device, and why."""

    budget: int
    reason: str
    rows: tuple[tuple[int, float, float], ...]  # (budget, median capture-to-bars s, most other cores busy) a rung
    cpus: int

    def summary(self) -> str:
        measured = ", ".join(f"{budget:,} px {seconds:.2f} s" for budget, seconds, _ in self.rows)
        return f"{self.budget:,} pixels ({self.reason}; measured here: {measured})"


def rungs(model_budget: int) -> list[int]:
    """The ladder's budgets that differ for a model whose own budget is `model_budget` (above it, every budget is
    capped to the same picture; the top rung is then the model's own, where it lies within the setting's range)."""
    if model_budget < FLOOR:
        return []
    top = min(model_budget, LADDER[0])
    return [top] + [budget for budget in LADDER if budget < top]


def measure(runner, target_s: float = TARGET_S, require_quiet: bool = True,
            timer: Callable[[object, int], CaptureTiming] = time_capture) -> tuple[MachineBudget | None, str]:
    """Walk the ladder from the committed default (up while a budget fits `target_s`, down while it does not), RUNS
    cold decisions a rung; (the choice, one line saying what happened). None when nothing can be chosen: a model
    that cannot see, one whose own budget is under the floor, or (require_quiet) no rung measured on a quiet machine."""
    if runner.vision is None:
        return None, "this model cannot see images: no capture budget to measure"
    model_budget = runner.vision.processor.max_pixels
    ladder = rungs(model_budget)
    if not ladder:
        return None, f"the model's own image budget ({model_budget:,} pixels) is under the setting's floor: every budget is the same"
    start = min(range(len(ladder)), key=lambda i: abs(ladder[i] - IMAGE_PIXELS_DEFAULT))
    rows: dict[int, BudgetRow] = {}

    def run(index: int) -> bool:
        timings = [timer(runner, ladder[index]) for _ in range(RUNS)]
        row = BudgetRow(ladder[index], statistics.median(t.seconds for t in timings),
                        max((t.others_cores or 0.0) for t in timings), timings[0].cpus)
        rows[ladder[index]] = row
        return row.capture_to_bars_s <= target_s

    step = -1 if run(start) else 1  # the ladder runs from large to small budgets
    index = start + step
    while 0 <= index < len(ladder) and run(index) == (step == -1):
        index += step
    choice = choose_budget(rows.values() if require_quiet else [replace(r, others_cores=0.0) for r in rows.values()], target_s)
    if choice is None:
        return None, (f"other processes kept the CPU busy while it was measured ({_rows_text(rows)}): nothing kept; "
                      "run `decider doctor --tune` again on a quiet machine")
    ordered = sorted(rows.values(), key=lambda r: -r.budget)
    measured = MachineBudget(choice.budget, choice.reason,
                             tuple((r.budget, round(r.capture_to_bars_s, 3), r.others_cores) for r in ordered), ordered[0].cpus)
    return measured, measured.summary()


def _rows_text(rows: dict[int, BudgetRow]) -> str:
    return ", ".join(f"{r.budget:,} px {r.capture_to_bars_s:.2f} s with {r.others_cores:.2f} other cores busy" for r in rows.values())


def _entries(path: Path) -> dict:
    """The file's measurements by key; one that cannot be read is empty (the next measurement replaces it)."""
    try:
        data = read_json_file(path)
    except FileNotFoundError:
        return {}
    except JsonFileError as exc:
        log.warning("%s: %s; ignored (decider doctor --tune measures again)", path, exc)
        return {}
    return data if isinstance(data, dict) else {}


def _budget_from(data: object) -> MachineBudget | None:
    """A stored measurement whose every field has the right type and whose budget the setting allows, else None."""
    from decider.engine.core.settings import SETTINGS
    from decider.engine.core.errors import SettingsError

    try:
        budget = MachineBudget(data["budget"], data["reason"], tuple(tuple(row) for row in data["rows"]), data["cpus"])  # type: ignore[index]
        SETTINGS["image_pixels"].check(budget.budget)
    except (TypeError, KeyError, ValueError, SettingsError):
        return None
    ok = isinstance(budget.reason, str) and isinstance(budget.cpus, int) and all(
        len(row) == 3 and isinstance(row[0], int) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in row)
        for row in budget.rows)
    return budget if ok else None


def key(runner) -> str:
    from decider.engine.compile.measurements import key_for

    return key_for(runner.folder.path, runner.device)


def stored(runner, folder: Path) -> MachineBudget | None:
    """This machine's measured budget for the runner's model and device, if `decider doctor --tune` kept one."""
    return _budget_from(_entries(folder / CACHE_NAME).get(key(runner)))


def store(runner, folder: Path, budget: MachineBudget) -> Path:
    """Keep the measurement (atomically: temp file, then rename); entries of other models and devices stay."""
    path = folder / CACHE_NAME
    entries = {k: v for k, v in _entries(path).items() if _budget_from(v) is not None}
    entries[key(runner)] = asdict(budget)
    folder.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(entries, indent=1), encoding="utf-8")
    temporary.replace(path)
    return path


def apply(request, budget: MachineBudget | None):
    """The request with this machine's budget where it left the committed default (and has pictures to scale)."""
    if budget is None or not request.images or request.image_pixels != IMAGE_PIXELS_DEFAULT:
        return request
    return replace(request, image_pixels=budget.budget)
