"""Qt's platform plugin prerequisites: every missing library found with ldd and one install line that fixes it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from decider.app.qt_prereqs import install_line, missing_libraries, package_manager, platform_candidates, platform_problem

DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n'
UBUNTU = "ID=ubuntu\nID_LIKE=debian\n"
FEDORA = 'ID=fedora\n'
ROCKY = 'ID="rocky"\nID_LIKE="rhel centos fedora"\n'


@pytest.fixture
def plugin_with_missing_library(tmp_path) -> Path:
    """A real shared library linked against two libraries that are then deleted, as on a minimal system.

    Their names exist nowhere else, so the loader cannot find them on any machine (real xcb names would be
    found where the xcb libraries are installed, as in CI)."""
    if shutil.which("gcc") is None or shutil.which("ldd") is None:
        pytest.skip("needs gcc and ldd to build a library with missing dependencies")
    for name in ("decider-gone-a", "decider-gone-b"):
        (tmp_path / f"{name}.c").write_text(f"int {name.replace('-', '_')}_f(void) {{ return 1; }}\n")
    for name, soname in (("decider-gone-a", "libdecider-gone-a.so.4"), ("decider-gone-b", "libdecider-gone-b.so.1")):
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", tmp_path / soname, tmp_path / f"{name}.c",
                        f"-Wl,-soname,{soname}"], check=True)
    (tmp_path / "plugin.c").write_text("int decider_gone_a_f(void); int decider_gone_b_f(void);\n"
                                       "int g(void) { return decider_gone_a_f() + decider_gone_b_f(); }\n")
    plugins = tmp_path / "platforms"
    plugins.mkdir()
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", plugins / "libqxcb.so", tmp_path / "plugin.c",
                    tmp_path / "libdecider-gone-a.so.4", tmp_path / "libdecider-gone-b.so.1"], check=True)
    (tmp_path / "libdecider-gone-a.so.4").unlink()
    (tmp_path / "libdecider-gone-b.so.1").unlink()
    return plugins


def test_ldd_finds_every_missing_library(plugin_with_missing_library):
    assert missing_libraries(plugin_with_missing_library / "libqxcb.so") == ["libdecider-gone-a.so.4",
                                                                            "libdecider-gone-b.so.1"]


def test_problem_names_every_missing_library_and_how_to_install_it(plugin_with_missing_library):
    problem = platform_problem({"DISPLAY": ":0"}, plugin_with_missing_library, DEBIAN)
    assert "the system libraries libdecider-gone-a.so.4, libdecider-gone-b.so.1 are missing" in problem
    assert problem.endswith("Fix: install the packages that provide libdecider-gone-a.so.4, libdecider-gone-b.so.1")


def test_no_problem_where_the_plugin_loads_or_is_not_used(plugin_with_missing_library, tmp_path):
    assert platform_problem({"QT_QPA_PLATFORM": "offscreen"}, plugin_with_missing_library, DEBIAN) is None
    healthy = tmp_path / "healthy"
    healthy.mkdir()
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", healthy / "libqxcb.so", "-x", "c", "-"],
                   input=b"int g(void) { return 0; }\n", check=True)
    assert platform_problem({"DISPLAY": ":0"}, healthy, DEBIAN) is None


def test_this_machines_qt_plugin_is_checked_for_real():
    """Whatever this machine lacks, the check agrees with ldd on PySide6's own xcb plugin."""
    from decider.app.qt_prereqs import plugin_dir

    plugin = plugin_dir() / "libqxcb.so"
    assert plugin.is_file()
    if shutil.which("ldd") is None:
        pytest.skip("no ldd")
    out = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True).stdout
    expected = {line.split()[0] for line in out.splitlines() if "not found" in line}
    assert set(missing_libraries(plugin)) == expected
    problem = platform_problem({"DISPLAY": ":0"}, plugin_dir(), DEBIAN)
    assert (problem is None) == (not expected)


def test_package_managers_and_lines():
    assert package_manager(DEBIAN) == "apt-get" and package_manager(UBUNTU) == "apt-get"
    assert package_manager(FEDORA) == "dnf" and package_manager(ROCKY) == "dnf"
    assert package_manager("ID=arch\n") == "pacman" and package_manager("ID=plan9\n") is None
    missing = ["libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1"]
    assert install_line(missing, "dnf") == "sudo dnf install -y xcb-util-cursor xcb-util-wm xcb-util-keysyms"
    assert install_line(missing, "pacman") == "sudo pacman -S --needed xcb-util-cursor xcb-util-wm xcb-util-keysyms"
    assert "libxcb-cursor.so.0" in install_line(missing, None)
    assert install_line(["libxcb-icccm.so.4", "libxcb-keysyms.so.1"], "apt-get") == \
        "sudo apt-get install -y libxcb-icccm4 libxcb-keysyms1"
    assert install_line(["libxcb-icccm.so.4", "libodd.so.2"], "apt-get") == \
        "sudo apt-get install -y libxcb-icccm4 and the packages that provide libodd.so.2"


def test_candidates_follow_qt():
    assert platform_candidates({"DISPLAY": ":0"}) == ["xcb"]
    assert platform_candidates({"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}) == ["wayland", "xcb"]
    assert platform_candidates({"QT_QPA_PLATFORM": "xcb;offscreen"}) == ["xcb", "offscreen"]
