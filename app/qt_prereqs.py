"""Why Qt's platform plugin would not load here, said before Qt aborts the process with a partial message.

Qt names only the first library it misses (and on some versions only libxcb-cursor0); `ldd` on the plugin
lists every one. Each is mapped to the package that ships it on the common distributions so the error ends
with one install line that really fixes it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

# soname → package, per package manager. Sonames not listed are named as they are.
_PACKAGES: dict[str, dict[str, str]] = {
    "apt-get": {
        "libxcb-cursor.so.0": "libxcb-cursor0", "libxcb-icccm.so.4": "libxcb-icccm4",
        "libxcb-keysyms.so.1": "libxcb-keysyms1", "libxcb-image.so.0": "libxcb-image0",
        "libxcb-render-util.so.0": "libxcb-render-util0", "libxcb-xkb.so.1": "libxcb-xkb1",
        "libxkbcommon-x11.so.0": "libxkbcommon-x11-0", "libxkbcommon.so.0": "libxkbcommon0",
        "libxcb-shape.so.0": "libxcb-shape0", "libxcb-randr.so.0": "libxcb-randr0",
        "libxcb-xfixes.so.0": "libxcb-xfixes0", "libxcb-sync.so.1": "libxcb-sync1", "libxcb-shm.so.0": "libxcb-shm0",
        "libxcb-render.so.0": "libxcb-render0", "libxcb-xinput.so.0": "libxcb-xinput0", "libxcb-util.so.1": "libxcb-util1",
        "libxcb-glx.so.0": "libxcb-glx0", "libxcb.so.1": "libxcb1", "libX11-xcb.so.1": "libx11-xcb1",
        "libX11.so.6": "libx11-6", "libEGL.so.1": "libegl1", "libGL.so.1": "libgl1", "libOpenGL.so.0": "libopengl0",
        "libfontconfig.so.1": "libfontconfig1", "libfreetype.so.6": "libfreetype6", "libdbus-1.so.3": "libdbus-1-3",
        "libglib-2.0.so.0": "libglib2.0-0", "libICE.so.6": "libice6", "libSM.so.6": "libsm6",
        "libwayland-client.so.0": "libwayland-client0", "libwayland-cursor.so.0": "libwayland-cursor0",
        "libwayland-egl.so.1": "libwayland-egl1",
    },
    "dnf": {
        "libxcb-cursor.so.0": "xcb-util-cursor", "libxcb-icccm.so.4": "xcb-util-wm",
        "libxcb-keysyms.so.1": "xcb-util-keysyms", "libxcb-image.so.0": "xcb-util-image",
        "libxcb-render-util.so.0": "xcb-util-renderutil", "libxcb-util.so.1": "xcb-util",
        "libxkbcommon-x11.so.0": "libxkbcommon-x11", "libxkbcommon.so.0": "libxkbcommon", "libEGL.so.1": "libglvnd-egl",
        "libGL.so.1": "libglvnd-glx", "libOpenGL.so.0": "libglvnd-opengl", "libfontconfig.so.1": "fontconfig",
        "libdbus-1.so.3": "dbus-libs", "libX11-xcb.so.1": "libX11-xcb",
    },
    "pacman": {
        "libxcb-cursor.so.0": "xcb-util-cursor", "libxcb-icccm.so.4": "xcb-util-wm",
        "libxcb-keysyms.so.1": "xcb-util-keysyms", "libxcb-image.so.0": "xcb-util-image",
        "libxcb-render-util.so.0": "xcb-util-renderutil", "libxcb-util.so.1": "xcb-util",
        "libxkbcommon-x11.so.0": "libxkbcommon-x11", "libxkbcommon.so.0": "libxkbcommon", "libEGL.so.1": "libglvnd",
        "libGL.so.1": "libglvnd", "libOpenGL.so.0": "libglvnd", "libfontconfig.so.1": "fontconfig",
    },
}
_INSTALL = {"apt-get": "sudo apt-get install -y", "dnf": "sudo dnf install -y", "pacman": "sudo pacman -S --needed"}
_FAMILIES = {"debian": "apt-get", "ubuntu": "apt-get", "fedora": "dnf", "rhel": "dnf", "arch": "pacman"}


def plugin_dir() -> Path:
    import PySide6

    return Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms"


def missing_libraries(library: Path) -> list[str]:
    """Shared libraries `library` needs that the dynamic loader cannot find (in ldd's order, once each)."""
    ldd = shutil.which("ldd")
    if ldd is None or not library.is_file():
        return []
    try:
        out = subprocess.run([ldd, str(library)], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    missing: list[str] = []
    for line in out.splitlines():
        name, _, where = line.strip().partition(" => ")
        if where.strip() == "not found" and name not in missing:
            missing.append(name)
    return missing


def package_manager(os_release: str) -> str | None:
    """apt-get / dnf / pacman from /etc/os-release's ID and ID_LIKE, None where unknown."""
    fields = dict(line.split("=", 1) for line in os_release.splitlines() if "=" in line)
    ids = [fields.get("ID", "")] + fields.get("ID_LIKE", "").split()
    for distro in (d.strip('"') for d in ids):
        if distro in _FAMILIES:
            return _FAMILIES[distro]
    return None


def install_line(missing: list[str], manager: str | None) -> str:
    if manager is None:
        return f"install the packages that provide {', '.join(missing)} with your distribution's package manager"
    names = _PACKAGES[manager]
    packages = list(dict.fromkeys(names[lib] for lib in missing if lib in names))
    unknown = [lib for lib in missing if lib not in names]
    line = f"{_INSTALL[manager]} {' '.join(packages)}" if packages else ""
    if unknown:
        line += (" and " if line else "install ") + f"the packages that provide {', '.join(unknown)}"
    return line


def platform_candidates(env: Mapping[str, str]) -> list[str]:
    """The platform plugins Qt will try, in order, for this environment."""
    chosen = env.get("QT_QPA_PLATFORM")
    if chosen:
        return [part.split(":")[0] for part in chosen.split(";") if part]
    if env.get("WAYLAND_DISPLAY"):
        return ["wayland", "xcb"]  # Qt 6 prefers Wayland in a Wayland session and falls back to XWayland
    return ["xcb"] if env.get("DISPLAY") else []


def platform_problem(env: Mapping[str, str] | None = None, plugins: Path | None = None,
                     os_release: str | None = None) -> str | None:
    """A one-paragraph error when no platform plugin Qt would try can load, else None."""
    env = os.environ if env is None else env
    plugins = plugin_dir() if plugins is None else plugins
    report: dict[str, list[str]] = {}
    for name in platform_candidates(env):
        library = plugins / f"libq{name}.so"
        if not library.is_file():
            continue  # offscreen, minimal, …: nothing to check; an unknown name is Qt's own error
        missing = missing_libraries(library)
        if not missing:
            return None
        report[name] = missing
    if not report:
        return None
    if os_release is None:
        try:
            os_release = Path("/etc/os-release").read_text(encoding="utf-8", errors="replace")
        except OSError:
            os_release = ""
    missing = list(dict.fromkeys(lib for libs in report.values() for lib in libs))
    plugins_named = " and ".join(f"'{n}'" for n in report)
    return (f"Qt's {plugins_named} platform plugin cannot load: the system libraries {', '.join(missing)} are missing. "
            f"Fix: {install_line(missing, package_manager(os_release))}")
