"""The compile probe's child process (`python -m decider.engine.runners.probe_child`): compiles the folder's model as a
runner would, once per property set read from stdin, reporting each verdict before the next so a crash names the set
that caused it (engine/compile/probe.py reads the verdicts). Apart from compile_probe, which the runner imports: the
child builds runners, and a module both imported and importing the runner would close an import circle.
"""

from __future__ import annotations

import json
import os
import sys

from ..compile.probe import CHILD_ENV


def compile_each(request: dict) -> None:
    """The child: compile the folder's model as a runner would, once per property set, reporting each before the
    next (so a crash names the set that caused it)."""
    import openvino as ov

    from ..compile.devices import DeviceOptions
    from ..core.errors import DeciderError
    from ..model.folder import inspect_folder
    from ..compile.planner import plan_for
    from .runner import ModelRunner

    folder = inspect_folder(request["folder"])
    for properties in request["properties"]:
        try:
            core = ov.Core()  # a Core of its own per set, as a runner opened alone has
            plan = plan_for(folder, DeviceOptions(device=request["device"], exact=False), core, overrides=properties)
            ModelRunner(folder, core=core, plan=plan)
            verdict = {"outcome": "ok", "detail": ""}
        except (DeciderError, RuntimeError) as exc:
            verdict = {"outcome": "failed", "detail": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
        print(json.dumps(verdict), flush=True)


if __name__ == "__main__":
    os.environ.setdefault(CHILD_ENV, "1")  # it compiles, it does not probe again
    compile_each(json.loads(sys.stdin.read()))
