"""The side jobs the model picker runs as Tasks: a remote connection test, a download, a conversion
in a child process (its whole process tree ends on cancel), and the doctor."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decider.engine.core.errors import Cancelled, SettingsError

from .task_runner import Task


@dataclass(frozen=True)
class ModelJobOutcome:
    """What a download or a conversion left behind."""

    path: str
    usable: bool  # a ready OpenVINO export Decider can load
    kind: str  # "export", "checkpoint", "broken", "incomplete"
    summary: str


def connection_task(config) -> Task:
    """engine.remote.RemoteEngine(config).test_connection() → ConnectionReport (models, logprobs?, detail)."""

    def run(task: Task):
        from decider.engine.remote.engine import RemoteEngine

        return RemoteEngine(config).test_connection()

    return Task(run, "connection-test")


def pull_task(repo_id: str, revision: str | None = None, dest_root: str | Path | None = None) -> Task:
    """app.pull.pull with byte progress and cancel (what arrived is kept: the next pull resumes)."""

    def run(task: Task) -> ModelJobOutcome:
        from .models import models_root
        from .pull import pull, summary

        root = Path(dest_root) if dest_root else models_root()
        task.log(f"downloading {repo_id}{f' @ {revision}' if revision else ''} into {root}")
        result = pull(repo_id, revision or None, root, progress=task.report, cancel=task.cancelled)
        usable, text = summary(result)
        if usable:  # an export without an MTP head gets its checkpoint's, as `decider pull` does (app/pull_mtp.py)
            from .pull_mtp import fetch_mtp_head

            text = "\n".join([text, *fetch_mtp_head(result).lines()])
        kind = result.entry.kind if result.entry is not None else "broken"
        return ModelJobOutcome(str(result.path), usable and kind == "export", kind, text)

    return Task(run, "pull")


def _kill_tree(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            subprocess.run(["taskkill", "/F", "/T", "/PID", str(proc.pid)], capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        proc.kill()


def convert_task(hf_dir: str | Path, out_dir: str | Path, weights: str = "int4-npu",
                 command: list[str] | None = None) -> Task:
    """`decider convert` in a child process (optimum-intel runs in a grandchild): its lines stream to the
    task's log; cancel ends the whole process tree and removes the unfinished export.
    `command` replaces the child's command line (tests)."""

    hf_dir, out_dir = Path(hf_dir).expanduser(), Path(out_dir).expanduser()

    def run(task: Task) -> ModelJobOutcome:
        from .convert import INSTALL_HINT, WEIGHTS, ConvertError, ConvertReport, check_checkpoint, optimum_available
        from .models import describe

        if weights not in WEIGHTS:
            raise SettingsError(f"weights must be one of {', '.join(WEIGHTS)} (got {weights!r})")
        check_checkpoint(hf_dir)
        if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
            raise SettingsError(f"{out_dir} exists and is not empty; choose a new folder")
        if not optimum_available():
            raise ConvertError(f"converting needs optimum-intel, which is not installed: {INSTALL_HINT}")
        existed = out_dir.exists()
        root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        report_file = Path(tempfile.mkdtemp(prefix="decider-convert-")) / "report.json"
        argv = command or [sys.executable, "-m", "decider.app.cli", "convert", str(hf_dir), str(out_dir), "--weights", weights,
                           "--report", str(report_file)]
        extra: dict[str, Any] = {"start_new_session": True}  # Popen's keyword for this platform
        if sys.platform == "win32":
            extra = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
        proc = subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", bufsize=1, **extra)
        task.on_cancel(lambda: _kill_tree(proc))
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                text = raw.rstrip("\n").split("\r")[-1].rstrip()
                if text.strip():
                    task.log(text)
            code = proc.wait()
        finally:
            if proc.poll() is None:
                _kill_tree(proc)
                proc.wait()
            report = ConvertReport.read(report_file)
            shutil.rmtree(report_file.parent, ignore_errors=True)
        if task.cancelled():
            if not existed:
                shutil.rmtree(out_dir, ignore_errors=True)  # the unfinished export; nothing of the user's
            raise Cancelled("conversion cancelled")
        if code != 0:
            raise ConvertError(report.error if report and report.error else f"the conversion failed (exit {code})")
        if report is None:  # a child that wrote no report: say what the folder holds now
            entry = describe(out_dir)
            return ModelJobOutcome(str(out_dir), entry.kind == "export", entry.kind, f"converted into {out_dir}")
        return ModelJobOutcome(report.out_dir, report.usable, report.kind, report.summary)

    return Task(run, "convert")


def doctor_task(path: str | Path | None, options=None) -> Task:
    """app.doctor.run_doctor → list of app.doctor.Check (status ok/info/warn/fail, text, fix)."""

    def run(task: Task):
        from .doctor import run_doctor

        report = run_doctor(path, options)
        return list(report.checks)

    return Task(run, "doctor")
