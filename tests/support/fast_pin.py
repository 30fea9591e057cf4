"""This test session's --fast choice for the fixture models, pinned in the session's cache folder.

--fast compiles the reduced compile measured fastest on this machine, or exact where none beat exact
(engine/compile/fast_tuning.py, engine/runners/runner.py). The session shares one DECIDER_CACHE_DIR (conftest.py), so unpinned, the
first fast runner of each fixture model would measure on first use with real timings: whether a reduced compile wins
on these tiny models depends on the CPU and its load, and the tests that compare --fast bars with exact ones (or
hold them to a reduced label) need a reduced compile, whichever wins here. So the session's cache says the stated
reduced default won. The tuner itself is tested with real compiles in tests/test_fast_tuning.py, in cache folders
of its own; a test passing its own cache_dir or DECIDER_CACHE_DIR measures as usual.
"""

from __future__ import annotations

import json
from pathlib import Path

from .models import MODELS

DEVICE = "CPU"  # the fast choice is measured for the CPU only (engine/runners/runner.py)
# Made-up step times, not a measurement: the winner beats exact (as a chosen candidate did), but by less than an
# exact prefill of the token costs, so fast reasoning does not pay and think-mode tests reason exactly unless they
# force a twin (DECIDER_FAST_REASONING_PROPERTIES): their reasoning does not depend on the CPU either.
EXACT_STEP_MS, WINNER_STEP_MS, EXACT_PREFILL_MS_PER_TOKEN = 10.0, 9.0, 2.0


def stated_candidate(capabilities: tuple[str, ...]) -> str:
    """The candidate that is the stated default --fast compile on a CPU with these capabilities (bf16 where the
    CPU has it, else f32; u8 KV cache; int8 activations in groups of 32)."""
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.compile.planner import compile_properties
    from decider.engine.compile.fast_tuning import candidates

    stated = compile_properties(DEVICE, DeviceOptions(device=DEVICE, exact=False), capabilities)
    found = [name for name, properties in candidates(capabilities).items()
             if all(stated.get(key) == value for key, value in properties.items())]
    if len(found) != 1:
        raise AssertionError(f"the stated --fast compile {stated} is not exactly one tuning candidate: {found}")
    return found[0]


def pinned_tuning(folder: Path, chosen: str | None, capabilities: tuple[str, ...]):
    """A Tuning for the fixture model in `folder` whose choice is `chosen` (None: nothing beat exact)."""
    from decider.engine.compile.fast_tuning import Measured, Tuning, candidates, key_for
    from decider.engine.compile.precision import isa_summary

    measured = [Measured(name, properties, WINNER_STEP_MS if name == chosen else EXACT_STEP_MS + 1, 0.0,
                         "pinned by tests/support/fast_pin.py, not measured")
                for name, properties in candidates(capabilities).items()]
    return Tuning(key_for(folder, DEVICE), isa_summary(), EXACT_STEP_MS, EXACT_PREFILL_MS_PER_TOKEN, None, chosen, measured)


def pin_fast_choice(cache_file: Path, chosen: str | None = "stated") -> str | None:
    """Write the choice for every fixture model into `cache_file` (the session's fast-tuning.json); "stated":
    the stated default reduced compile. Returns the candidate's name."""
    import openvino as ov

    from decider.engine.compile.precision import cpu_capabilities

    capabilities = cpu_capabilities(ov.Core())
    name = stated_candidate(capabilities) if chosen == "stated" else chosen
    entries = {}
    for folder in sorted(p for p in MODELS.iterdir() if p.is_dir()):
        tuning = pinned_tuning(folder, name, capabilities)
        entries[tuning.key] = tuning.to_json()
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    cache_file.write_text(json.dumps(entries, indent=1), encoding="utf-8")
    return name
