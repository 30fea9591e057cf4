"""Model management from the picker: folder checks, doctor, convert (a child process tree), download
from a local hub."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("pytestqt")

from support.gui import FIXTURE, dirs, gui_dirs  # noqa: E402,F401 (pytest fixtures)

from PySide6.QtCore import Qt  # noqa: E402

from decider.app.gui_ports import model_tools  # noqa: E402


def test_model_picker_checks_folders_in_plain_words(qtbot, gui_dirs, tmp_path):
    from decider.ui.model_picker import ModelPickerDialog

    dialog = ModelPickerDialog(model_tools(), [FIXTURE, str(tmp_path / "gone")])
    qtbot.addWidget(dialog)
    assert dialog.load_button.isEnabled()  # the first recent model is selected and valid
    assert "qwen3_5_text" in dialog.details.text()
    dialog.list.setCurrentRow(1)
    assert not dialog.load_button.isEnabled()
    assert dialog.details.text().startswith("This folder cannot be used:") and "not a folder" in dialog.details.text()


def test_model_picker_offers_the_model_tools_and_downloaded_models(qtbot, dirs, tmp_path):
    from decider.app.models import PULL_MANIFEST, models_root
    from decider.ui.model_picker import ModelPickerDialog

    downloaded = models_root() / "owner--model"
    downloaded.mkdir(parents=True)
    (downloaded / PULL_MANIFEST).write_text("{}")
    dialog = ModelPickerDialog(model_tools(), [FIXTURE])
    qtbot.addWidget(dialog)
    assert [dialog.list.item(i).data(Qt.UserRole) for i in range(dialog.list.count())] == [FIXTURE, str(downloaded)]
    assert "downloaded" in dialog.list.item(1).text()
    for button in (dialog.download_button, dialog.convert_button, dialog.doctor_button):
        assert button.isEnabled()
    assert dialog.selected_path() == FIXTURE


def test_doctor_on_a_broken_folder_shows_the_problem_lines(qtbot, dirs, tmp_path):
    from decider.app.gui import create_app
    from decider.ui.doctor_dialog import DoctorDialog

    create_app()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "qwen3_5_text", "vocab_size": 100}))
    dialog = DoctorDialog(model_tools(), str(broken))
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: not dialog.running and dialog.summary.isVisibleTo(dialog), timeout=30_000)
    lines = dialog.line_texts()
    assert any(line.startswith("✓  OpenVINO") for line in lines)
    problems = [line for line in lines if line.startswith("✗")]
    assert problems and "→ fix:" in problems[0]
    assert "problem" in dialog.summary.text() and not dialog.load_button.isVisibleTo(dialog)

    good = DoctorDialog(model_tools(), FIXTURE)
    qtbot.addWidget(good)
    qtbot.waitUntil(lambda: not good.running and good.summary.isVisibleTo(good), timeout=30_000)
    assert any("folder complete" in line for line in good.line_texts())
    assert good.load_button.isVisibleTo(good)
    qtbot.mouseClick(good.load_button, Qt.LeftButton)
    assert good.chosen == FIXTURE


def test_convert_dialog_shows_the_install_command_without_optimum(qtbot, dirs, tmp_path):
    from decider.app.convert import INSTALL_HINT
    from decider.app.gui import create_app
    from decider.app.model_jobs import convert_task
    from decider.ui.convert_dialog import ConvertDialog

    create_app()
    dialog = ConvertDialog(model_tools(), hf_dir=str(tmp_path / "ckpt"), optimum=False)
    qtbot.addWidget(dialog)
    assert dialog.missing.isVisibleTo(dialog) and dialog.pip_command.text() == INSTALL_HINT
    assert "pip install" in dialog.pip_command.text()
    assert not dialog.convert_button.isEnabled() and dialog.start() is False
    assert dialog.out_dir.text() == str(tmp_path / "ckpt") + "-ov"
    # the job itself refuses a folder that is not a checkpoint, in plain words, off the UI thread
    (tmp_path / "ckpt").mkdir()
    task = convert_task(tmp_path / "ckpt", tmp_path / "out")
    with qtbot.waitSignal(task.failed, timeout=10_000) as blocker:
        task.start()
    assert "config.json: missing file" in blocker.args[0]


@pytest.mark.skipif(os.name != "posix", reason="process-group check uses POSIX signals")
def test_convert_runs_in_a_child_process_and_cancel_ends_its_whole_tree(qtbot, dirs, tmp_path, monkeypatch):
    import decider.app.convert as convert_module
    from decider.app.gui import create_app
    from decider.ui.convert_dialog import ConvertDialog

    create_app()
    monkeypatch.setattr(convert_module, "optimum_available", lambda: True)
    monkeypatch.setattr(convert_module, "check_checkpoint", lambda path: {"model_type": "qwen3_5_text"})
    out = tmp_path / "export"
    pids = tmp_path / "pids"
    # A stand-in for `decider convert`: it starts a grandchild (as optimum's exporter is), writes into the
    # output folder and prints progress, then would run for a minute.
    child = (
        "import os, subprocess, sys, time\n"
        f"os.makedirs({str(out)!r}, exist_ok=True); open(os.path.join({str(out)!r}, 'part.bin'), 'w').write('x')\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{g.pid}}')\n"
        "print('Exporting 1/3', flush=True); print('Exporting 2/3', flush=True)\n"
        "time.sleep(60)\n"
    )
    import decider.app.model_jobs as worker_module

    real = worker_module.convert_task
    monkeypatch.setattr(worker_module, "convert_task",
                        lambda hf, o, w: real(hf, o, w, command=[sys.executable, "-c", child]))
    dialog = ConvertDialog(model_tools(), hf_dir=str(tmp_path / "ckpt"), optimum=True)
    qtbot.addWidget(dialog)
    dialog.out_dir.setText(str(out))
    assert dialog.start()
    qtbot.waitUntil(lambda: "Exporting 2/3" in dialog.log.toPlainText(), timeout=20_000)
    assert dialog.progress.isVisibleTo(dialog) and dialog.cancel_button.isVisibleTo(dialog)
    parent_pid, grandchild_pid = map(int, pids.read_text().split())
    qtbot.mouseClick(dialog.cancel_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: not dialog.running, timeout=20_000)
    assert "Cancelled" in dialog.status.text()
    assert not out.exists()  # the unfinished export is gone

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie not yet reaped by its (dead) parent counts as gone
            return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
        except OSError:
            return True

    qtbot.waitUntil(lambda: gone(parent_pid) and gone(grandchild_pid), timeout=10_000)


def test_download_dialog_pulls_from_a_local_hub_with_progress(qtbot, dirs, tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    from test_models_cli import EXPORT, REPO, FixtureHub

    from decider.app.gui import create_app
    from decider.ui.download_dialog import DownloadDialog

    create_app()
    hub = FixtureHub()
    try:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        dialog = DownloadDialog(model_tools(), dest_root=str(tmp_path / "models"))
        qtbot.addWidget(dialog)
        assert not dialog.download_button.isEnabled()
        dialog.repo.setText("not a repo id!")
        assert dialog.start() is False and "not a repository id" in dialog.status.text()
        dialog.repo.setText(REPO)
        seen = []
        dialog.progress.valueChanged.connect(seen.append)
        assert dialog.start()
        qtbot.waitUntil(lambda: not dialog.running, timeout=30_000)
        assert dialog.outcome is not None and dialog.outcome.usable, dialog.status.text()
        folder = Path(dialog.outcome.path)
        assert folder == tmp_path / "models" / REPO.replace("/", "--")
        assert all((folder / p.name).read_bytes() == p.read_bytes() for p in EXPORT.iterdir() if p.is_file())
        assert dialog.progress.value() == 1000 and any(0 < v < 1000 for v in seen)
        assert "ready OpenVINO export" in dialog.status.text()
        qtbot.mouseClick(dialog.load_button, Qt.LeftButton)
        assert dialog.chosen == str(folder)
        # An export whose README names its checkpoint also gets the checkpoint's MTP head, as `decider pull` does.
        from test_models_cli import BASED

        dialog.repo.setText(BASED)
        assert dialog.start()
        qtbot.waitUntil(lambda: not dialog.running, timeout=30_000)
        assert dialog.outcome is not None and dialog.outcome.usable, dialog.status.text()
        assert (Path(dialog.outcome.path) / "openvino_mtp_model.xml").is_file()
        assert "MTP head: fetched" in dialog.status.text()

        # Cancel: stops the job, says the next download resumes (a slow link, so the click lands mid-transfer)
        hub.pace = 0.05
        cancelled = DownloadDialog(model_tools(), dest_root=str(tmp_path / "other"))
        qtbot.addWidget(cancelled)
        cancelled.repo.setText(REPO)
        assert cancelled.start()
        assert cancelled.cancel_button.isVisibleTo(cancelled)
        qtbot.mouseClick(cancelled.cancel_button, Qt.LeftButton)
        qtbot.waitUntil(lambda: not cancelled.running, timeout=30_000)
        assert "Cancelled" in cancelled.status.text() and "resume" in cancelled.status.text()
        assert not cancelled.load_button.isVisibleTo(cancelled) and cancelled.download_button.isEnabled()
        hub.pace = 0.0

        again = DownloadDialog(model_tools(), dest_root=str(tmp_path / "models"))
        qtbot.addWidget(again)
        again.repo.setText("decider-test/missing")
        again.start()
        qtbot.waitUntil(lambda: not again.running, timeout=30_000)
        assert "Download failed" in again.status.text() and "not found" in again.status.text()
    finally:
        hub.close()
