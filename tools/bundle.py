"""Decider as a one-folder Linux x86-64 download: `python -m tools.bundle --out DIR` (from a checkout, with the
bundle extra: `pip install -e ".[bundle]"`) writes DIR/decider-VERSION-linux-x86_64.tar.gz and its .sha256.

The folder holds one executable, `decider`, that is the installed `decider` command (`decider.app.cli:main`):
the window with no arguments, `decider ask/serve/doctor/...` with them. Beside it: Python itself, OpenVINO
(CPU, GPU and NPU plugins), Qt (the offscreen, xcb and wayland platform plugins), the tokenizers, llguidance,
uvicorn/Starlette, both demo models, a font, a `.desktop` entry and an icon. PyInstaller builds it (docs/bundle.md
says why that one, and what Windows and macOS would need: this script refuses to run there).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOOKS = Path(__file__).resolve().parent / "bundle_hooks"
NAME = "decider"
# Imported somewhere in the dependency tree but never by a code path Decider runs (OpenVINO's readers of other
# model formats, torch through openvino.torch, test and notebook tools): left out, ~20 MB and much build time.
EXCLUDED_MODULES = (
    "openvino.frontend.onnx", "openvino.frontend.paddle", "openvino.frontend.pytorch", "openvino.frontend.tensorflow",
    "openvino.frontend.jax", "openvino.torch", "torch", "tensorflow", "jax", "transformers", "optimum", "matplotlib",
    "IPython", "pytest", "hypothesis", "tkinter", "PySide6.QtWebEngineCore", "PySide6.QtQml", "PySide6.QtQuick",
    # collected, setuptools brings a runtime hook that imports it (~120 files) at every start: ~0.1 s of each launch
    "setuptools", "pkg_resources", "distutils", "_distutils_hack",
)
# Read at run time from beside the layers (app/config.py, engine/decisions/prompts): the files a wheel carries as package data.
PACKAGE_DATA = ("resources/demo-model", "resources/demo-vl-model", "engine/decisions/prompts", "engine/kernels/native")
ENTRY = """import sys

from decider.app.cli import main

if __name__ == "__main__":
    sys.exit(main())
"""
DESKTOP = """[Desktop Entry]
Type=Application
Name=Decider
GenericName=Decision agent
Comment=Pick an option with a confidence bar per option, from a local Qwen3.5 model
Exec={exec}
Icon={icon}
Terminal=false
Categories=Utility;Science;
StartupWMClass=decider
"""
FONTS_CONF = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<!-- The system's fonts and configuration first, then the font that travels with Decider (this folder). -->
<fontconfig>
  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>
  <dir prefix="relative">.</dir>
  <cachedir prefix="xdg">fontconfig</cachedir>
</fontconfig>
"""
INSTALL_DESKTOP = """#!/bin/sh
# Adds Decider to the desktop's application menu (this folder stays where it is; run again after moving it).
here="$(cd "$(dirname "$0")" && pwd)"
apps="${XDG_DATA_HOME:-$HOME/.local/share}/applications"
mkdir -p "$apps"
sed -e "s|^Exec=.*|Exec=\\"$here/decider\\"|" -e "s|^Icon=.*|Icon=$here/decider.png|" "$here/decider.desktop" \\
  > "$apps/decider.desktop"
echo "added $apps/decider.desktop"
"""


class BundleError(Exception):
    """A reason the bundle cannot be built here, said as it is to the person running the script."""


def refusal(system: str, machine: str) -> str | None:
    """Why this platform gets no bundle from this script, or None on Linux x86-64."""
    if system == "Linux" and machine.lower() in ("x86_64", "amd64"):
        return None
    if system == "Windows":
        return ("Windows bundles are not built by this script yet: it needs a Windows machine, the Intel NPU driver "
                "for the NPU plugin and a code-signing certificate (docs/bundle.md, 'Windows and macOS').")
    if system == "Darwin":
        return ("macOS bundles are not built by this script yet: they need an .app layout, code signing and "
                "notarisation with an Apple Developer ID, and OpenVINO runs on the CPU only there "
                "(docs/bundle.md, 'Windows and macOS').")
    return f"only Linux x86-64 bundles are built (this is {system} {machine})."


def version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def bundle_name(ver: str) -> str:
    return f"{NAME}-{ver}-linux-x86_64"


def stage_sources(work: Path) -> Path:
    """A folder where `decider` is this checkout (the repository root is the package) and the entry script."""
    src = work / "src"
    src.mkdir(parents=True)
    (src / NAME).symlink_to(ROOT, target_is_directory=True)
    (src / "decider_main.py").write_text(ENTRY, encoding="utf-8")
    return src


def makespec_command(src: Path, work: Path, fonts: Path | None) -> list[str]:
    """pyi-makespec with the bundle's options: the spec is patched (`patch_spec`) before PyInstaller builds it."""
    command = [
        sys.executable, "-m", "PyInstaller.utils.cliutils.makespec", str(src / "decider_main.py"), "--name", NAME,
        "--onedir", "--log-level", "WARN", "--specpath", str(work), "--paths", str(src),
        # modules as .pyc files, imported by Python's own path finder as an installed package's are, not from a
        # compressed archive through PyInstaller's importer: the bundle must not start slower (BENCHMARKS.md)
        "--debug", "noarchive",
        "--additional-hooks-dir", str(HOOKS), "--runtime-hook", str(HOOKS / "rthook_environment.py"),
        # every decider module: the CLI imports most of them inside functions, the window some through Qt
        "--collect-submodules", "decider.app", "--collect-submodules", "decider.engine",
        "--collect-submodules", "decider.ui", "--hidden-import", "PySide6.QtSvg",
    ]
    for module in EXCLUDED_MODULES:
        command += ["--exclude-module", module]
    for relative in PACKAGE_DATA:
        command += ["--add-data", f"{ROOT / relative}{os.pathsep}{NAME}/{relative}"]
    if fonts is not None:
        command += ["--add-data", f"{fonts}{os.pathsep}fonts"]
    return command


# PyInstaller's runtime hook for PySide6 imports PySide6.QtCore at every start (to register a qt.conf that PyPI's
# wheels register themselves) and sets QT_PLUGIN_PATH: loading Qt costs `decider ask` ~0.1 s it never needs, so the
# hook is dropped and rthook_environment.py sets the plugin path instead.
SKIPPED_RUNTIME_HOOKS = ("pyi_rth_pyside6",)
# Qt plugins the window never loads, and the libraries only they pull in (by file-name prefix):
#  - the GTK 3 platform theme: it brings the build machine's cairo/pango/gdk-pixbuf/atk, which would meet the user's
#    own GTK at run time (mismatched GLib-stack versions are a classic crash of frozen apps); Decider draws its
#    own theme (ui/theme.py) and keeps the xdg-desktop-portal one for native file dialogs;
#  - the virtual keyboard (QML: Qt Quick and Qml, ~17 MB) and the PDF image format (Qt Pdf, 4 MB).
# tests/test_bundle.py checks with ldd that every library left in the folder still finds what it needs.
DROPPED_BINARIES = (
    "libqgtk3.so", "libqtvirtualkeyboardplugin.so", "libqpdf.so",
    "libQt6Quick", "libQt6Qml", "libQt6Pdf", "libQt6VirtualKeyboard",
    "libgdk_pixbuf-2.0", "libatk-1.0", "libcairo", "libpango", "libthai", "libdatrie", "libfribidi", "libpixman-1",
    "libgraphite2", "libharfbuzz.so",
)
SPEC_PATCH = f"""
a.scripts = [entry for entry in a.scripts if entry[0] not in {SKIPPED_RUNTIME_HOOKS!r}]
a.binaries = [entry for entry in a.binaries if not entry[0].rsplit("/", 1)[-1].startswith({DROPPED_BINARIES!r})]
"""


def patch_spec(spec: Path) -> None:
    text = spec.read_text(encoding="utf-8")
    anchor = "\npyz = PYZ("
    if anchor not in text:
        raise BundleError(f"{spec.name}: no PYZ( line to patch before (a PyInstaller whose spec files differ)")
    spec.write_text(text.replace(anchor, SPEC_PATCH + anchor, 1), encoding="utf-8")


def run_pyinstaller(src: Path, work: Path, fonts: Path | None) -> Path:
    """PyInstaller's folder (work/dist/decider), built from a patched spec."""
    # This checkout first, in PyInstaller's helper processes too: an editable install of another checkout (or a
    # test's link) must not be what gets collected.
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONSAFEPATH": "1"}
    steps = [
        makespec_command(src, work, fonts),
        [sys.executable, "-m", "PyInstaller", str(work / f"{NAME}.spec"), "--noconfirm", "--log-level", "WARN",
         "--distpath", str(work / "dist"), "--workpath", str(work / "build")],
    ]
    for step, command in enumerate(steps):
        done = subprocess.run(command, cwd=work, env=env, stdout=subprocess.DEVNULL if step == 0 else None)
        if done.returncode != 0:
            raise BundleError(f"PyInstaller failed (exit {done.returncode}); its messages are above")
        if step == 0:
            patch_spec(work / f"{NAME}.spec")
    return work / "dist" / NAME


def gather_fonts(work: Path) -> Path | None:
    """DejaVu Sans (regular and bold) and its licence from the build machine, with a fonts.conf that adds them
    to the system's fonts; None (and a warning) when this machine has no DejaVu to copy."""
    candidates = [Path("/usr/share/fonts/truetype/dejavu"), Path("/usr/share/fonts/dejavu-sans-fonts"),
                  Path("/usr/share/fonts/TTF")]
    for folder in candidates:
        regular, bold = folder / "DejaVuSans.ttf", folder / "DejaVuSans-Bold.ttf"
        if regular.is_file() and bold.is_file():
            fonts = work / "fonts"
            fonts.mkdir()
            for font in (regular, bold):
                shutil.copy2(font, fonts / font.name)
            licence = Path("/usr/share/doc/fonts-dejavu-core/copyright")
            if licence.is_file():
                shutil.copy2(licence, fonts / "DejaVu-LICENSE")
            (fonts / "fonts.conf").write_text(FONTS_CONF, encoding="utf-8")
            return fonts
    print("bundle: warning: no DejaVu Sans on this machine (apt-get install fonts-dejavu-core); the bundle "
          "will use the fonts of the machine it runs on", file=sys.stderr)
    return None


def draw_icon(path: Path, size: int = 256) -> None:
    """Decider's icon: three confidence bars on a dark tile, the chosen (longest) one in the accent colour."""
    from PIL import Image, ImageDraw

    image = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle((8, 8, size - 8, size - 8), radius=size // 6, fill=(32, 38, 52, 255))
    left, height, gap = size * 0.2, size * 0.14, size * 0.08
    top = (size - 3 * height - 2 * gap) / 2
    for row, (share, colour) in enumerate(((0.78, (86, 196, 140)), (0.32, (120, 132, 156)), (0.14, (120, 132, 156)))):
        y = top + row * (height + gap)
        draw.rounded_rectangle((left, y, left + share * size * 0.6 / 0.78, y + height), radius=height / 3, fill=colour)
    image.save(path)


def finish_folder(dist: Path, folder: Path) -> None:
    """PyInstaller's folder renamed for the version, with the desktop entry, its installer and the icon."""
    if folder.exists():
        shutil.rmtree(folder)
    shutil.move(str(dist), folder)
    for link in [p for p in folder.rglob("*") if p.is_symlink() and not p.exists()]:
        link.unlink()  # PyInstaller's top-level links to the libraries the spec patch dropped
    draw_icon(folder / "decider.png")
    # A menu entry needs absolute paths, known only where the folder is unpacked: install-desktop-entry.sh
    # writes them into the copy it installs; this one works as it is with the folder on PATH.
    (folder / "decider.desktop").write_text(DESKTOP.format(exec="decider", icon="decider"), encoding="utf-8")
    script = folder / "install-desktop-entry.sh"
    script.write_text(INSTALL_DESKTOP, encoding="utf-8")
    script.chmod(0o755)


def archive(folder: Path) -> tuple[Path, Path]:
    """folder.tar.gz (the folder at its top) and folder.tar.gz.sha256 in `sha256sum -c` format."""
    tarball = folder.parent / f"{folder.name}.tar.gz"
    with tarfile.open(tarball, "w:gz", compresslevel=6) as tar:
        tar.add(folder, arcname=folder.name)
    digest = hashlib.sha256()
    with tarball.open("rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    checksum = tarball.parent / f"{tarball.name}.sha256"
    checksum.write_text(f"{digest.hexdigest()}  {tarball.name}\n", encoding="utf-8")
    return tarball, checksum


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def build(out: Path, work: Path) -> tuple[Path, Path, Path]:
    """The bundle folder, its archive and checksum in `out`; PyInstaller's intermediate files in `work`."""
    try:
        import PyInstaller  # noqa: F401 (only whether it is installed)
    except ImportError:
        raise BundleError('PyInstaller is not installed: pip install -e ".[bundle]"') from None
    src = stage_sources(work)
    dist = run_pyinstaller(src, work, gather_fonts(work))
    out.mkdir(parents=True, exist_ok=True)
    folder = out / bundle_name(version())
    finish_folder(dist, folder)
    tarball, checksum = archive(folder)
    return folder, tarball, checksum


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="where the folder and the archive go")
    parser.add_argument("--keep-work", action="store_true", help="keep PyInstaller's work folder (printed)")
    args = parser.parse_args(argv)
    reason = refusal(platform.system(), platform.machine())
    if reason:
        print(f"bundle: {reason}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="decider-bundle-"))
    started = time.perf_counter()
    try:
        folder, tarball, checksum = build(args.out.resolve(), work)
    except BundleError as exc:
        print(f"bundle: error: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep_work:
            print(f"bundle: work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    seconds = time.perf_counter() - started
    print(f"bundle: {folder} ({folder_size(folder) / 2**20:.0f} MiB)")
    print(f"bundle: {tarball} ({tarball.stat().st_size / 2**20:.0f} MiB), checksum in {checksum.name}")
    print(f"bundle: built in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
