"""tools/bundle.py's parts that need no PyInstaller: which platforms it refuses and how, the names it gives the
archive, the spec patch and the icon. The build itself is tests/test_bundle.py (marked extra)."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import pytest

import bundle  # tools/bundle.py (tools/ is on the tests' pythonpath)

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("system, machine, says", [
    ("Windows", "AMD64", "NPU driver"),
    ("Darwin", "arm64", "notarisation"),
    ("Linux", "aarch64", "only Linux x86-64"),
])
def test_other_platforms_are_refused_with_what_they_would_need(system, machine, says):
    reason = bundle.refusal(system, machine)
    assert reason is not None and says in reason


def test_linux_x86_64_is_built():
    assert bundle.refusal("Linux", "x86_64") is None


def test_the_script_exits_2_with_the_reason_on_a_refused_platform(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(bundle.platform, "system", lambda: "Windows")
    monkeypatch.setattr(bundle.platform, "machine", lambda: "AMD64")
    assert bundle.main(["--out", str(tmp_path)]) == 2
    assert "bundle: Windows bundles are not built" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing was started


def test_the_archive_is_named_with_the_projects_version():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert bundle.version() == version
    assert bundle.bundle_name(version) == f"decider-{version}-linux-x86_64"


def test_the_spec_patch_drops_the_pyside6_runtime_hook_and_the_unused_qt_parts_before_the_archive_step(tmp_path):
    spec = tmp_path / "decider.spec"
    spec.write_text("a = Analysis(['x.py'])\npyz = PYZ(a.pure)\n", encoding="utf-8")
    bundle.patch_spec(spec)
    binaries = [("PySide6/Qt/plugins/platformthemes/libqgtk3.so", "s", "BINARY"), ("libcairo.so.2", "s", "BINARY"),
                ("PySide6/Qt/lib/libQt6Quick.so.6", "s", "BINARY"), ("PySide6/Qt/lib/libQt6Gui.so.6", "s", "BINARY"),
                ("PySide6/Qt/plugins/platforms/libqxcb.so", "s", "BINARY"), ("libfontconfig.so.1", "s", "BINARY")]
    analysis = type("A", (), {"scripts": [("pyi_rth_pyside6", "p", "PYSOURCE"), ("decider_main", "m", "PYSOURCE")],
                              "pure": [], "binaries": binaries})()
    scope: dict = {"Analysis": lambda _: analysis, "PYZ": lambda pure: None}
    exec(spec.read_text(encoding="utf-8"), scope)
    assert [entry[0] for entry in scope["a"].scripts] == ["decider_main"]
    assert [entry[0] for entry in scope["a"].binaries] == [
        "PySide6/Qt/lib/libQt6Gui.so.6", "PySide6/Qt/plugins/platforms/libqxcb.so", "libfontconfig.so.1"]


def test_a_spec_without_the_expected_step_is_an_error_not_a_silent_build(tmp_path):
    spec = tmp_path / "decider.spec"
    spec.write_text("a = Analysis(['x.py'])\n", encoding="utf-8")
    with pytest.raises(bundle.BundleError, match="no PYZ"):
        bundle.patch_spec(spec)


def test_the_archive_and_its_checksum(tmp_path):
    folder = tmp_path / "decider-9.9-linux-x86_64"
    (folder / "_internal").mkdir(parents=True)
    (folder / "decider").write_text("#!/bin/sh\n")
    tarball, checksum = bundle.archive(folder)
    digest, name = checksum.read_text().split()
    assert name == tarball.name == "decider-9.9-linux-x86_64.tar.gz"
    assert digest == hashlib.sha256(tarball.read_bytes()).hexdigest()


def test_the_icon_is_a_256px_picture_with_the_chosen_bar_in_the_accent_colour(tmp_path):
    from PIL import Image

    bundle.draw_icon(tmp_path / "icon.png")
    icon = Image.open(tmp_path / "icon.png").convert("RGBA")
    assert icon.size == (256, 256)
    assert icon.getpixel((0, 0))[3] == 0  # transparent corners
    assert (86, 196, 140, 255) in {colour for _, colour in icon.getcolors(maxcolors=1 << 16)}
