"""`decider convert --report`: the outcome as typed data, read back by the app's convert job."""

from __future__ import annotations

import os

import pytest

from decider.app.cli import main
from decider.app.convert import ConvertReport
from support.models import model_dir

EXPORT = model_dir("qwen35-text")


def test_a_report_round_trips_and_a_missing_one_reads_as_none(tmp_path):
    report = ConvertReport(str(tmp_path / "out"), "export", "✓ exported in 3 s → out")
    report.write(tmp_path / "r.json")
    assert ConvertReport.read(tmp_path / "r.json") == report and report.usable
    assert ConvertReport.read(tmp_path / "none.json") is None
    (tmp_path / "bad.json").write_text("{ not json")
    assert ConvertReport.read(tmp_path / "bad.json") is None


def test_a_refused_conversion_reports_its_error(tmp_path, capsys):
    code = main(["convert", str(EXPORT), str(tmp_path / "out"), "--report", str(tmp_path / "r.json")])
    assert code == 2 and "already an OpenVINO export" in capsys.readouterr().err
    report = ConvertReport.read(tmp_path / "r.json")
    assert report is not None and not report.usable and "already an OpenVINO export" in report.error


@pytest.mark.skipif(os.name != "posix", reason="the job's child process group is POSIX-only here")
def test_the_convert_job_takes_the_childs_error_from_its_report(qtbot, tmp_path, monkeypatch):
    pytest.importorskip("PySide6")
    import decider.app.convert as convert_module
    from decider.app.gui import create_app
    from decider.app.model_jobs import convert_task

    create_app()
    # The parent's checks pass; the child (a real `decider convert`) refuses the folder and says why.
    monkeypatch.setattr(convert_module, "optimum_available", lambda: True)
    monkeypatch.setattr(convert_module, "check_checkpoint", lambda path: {"model_type": "qwen3_5_text"})
    task = convert_task(EXPORT, tmp_path / "out")
    with qtbot.waitSignal(task.failed, timeout=60_000) as blocker:
        task.start()
    assert "already an OpenVINO export" in blocker.args[0]
