"""The one-folder download (tools/bundle.py), run as a stranger's machine would: built once with PyInstaller, the
archive checked against its checksum and unpacked into a fresh folder, then run with an empty environment (`env -i`:
a fresh HOME, PATH=/usr/bin:/bin, no Python of ours anywhere) and compared with the installed package on the same
questions. Marked `extra`: .ci/run runs it after installing the bundle extra (PyInstaller).

The window's screenshot is written to the test's tmp folder (its path is printed with -s); the run only saves it
after the decision was drawn, and DECIDER_BUNDLE_SHOT=FILE copies it somewhere to look at.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [
    pytest.mark.extra,
    pytest.mark.skipif(platform.system() != "Linux" or platform.machine() != "x86_64",
                       reason="tools/bundle.py builds Linux x86-64 bundles only"),
]
pytest.importorskip("PyInstaller", reason="the bundle extra is not installed (pip install -e '.[bundle]')")

QUESTION = "Scouts report that Trade is the safe choice. What should we do?"
OPTIONS = ["Attack", "Trade", "Hide"]
# No option fits: the demo model is unsure, so the bars sit mid-range where a difference would show.
UNSURE = ("Which of these is an animal?", ["hammer", "bread", "saw"])


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle-out")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tools.bundle", "--out", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    print(f"\nbundle built in {time.perf_counter() - started:.0f} s")
    tarballs = list(out.glob("decider-*-linux-x86_64.tar.gz"))
    assert len(tarballs) == 1, sorted(p.name for p in out.iterdir())
    yield tarballs[0]
    shutil.rmtree(out, ignore_errors=True)  # ~650 MB: pytest keeps its last three runs' folders


@pytest.fixture(scope="module")
def bundle(archive, tmp_path_factory):
    """The archive unpacked in a new folder: the executable inside it."""
    where = tmp_path_factory.mktemp("unpacked")
    with tarfile.open(archive) as tar:
        tar.extractall(where, filter="tar")  # keeps the executable bits and the libraries' relative links
    folders = list(where.iterdir())
    assert [f.name for f in folders] == [archive.name.removesuffix(".tar.gz")]
    yield folders[0] / "decider"
    shutil.rmtree(where, ignore_errors=True)


def stranger_env(home: Path, **extra: str) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), "PATH": "/usr/bin:/bin", **extra}


def run_bundle(bundle: Path, args: list[str], home: Path, timeout: int = 300, **extra: str):
    return subprocess.run([str(bundle), *args], cwd=home.parent, env=stranger_env(home, **extra), capture_output=True,
                          text=True, timeout=timeout)


def run_installed(args: list[str], tmp_path: Path, **extra: str):
    """The same command through the installed package (this checkout, linked by conftest) in this Python."""
    env = {**os.environ, "HOME": str(tmp_path / "installed-home"), **extra}
    for name in ("CONFIG", "DATA", "CACHE"):
        env[f"DECIDER_{name}_DIR"] = str(tmp_path / "installed" / name.lower())
    return subprocess.run([sys.executable, "-m", "decider.app.cli", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def answer(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def bars(done: subprocess.CompletedProcess) -> tuple[int, list[float]]:
    decided = answer(done)
    return decided["choice"]["index"], [option["probability"] for option in decided["options"]]


def test_the_desktop_entry_installs_with_the_folders_absolute_paths(bundle, tmp_path):
    folder = bundle.parent
    done = subprocess.run(["sh", str(folder / "install-desktop-entry.sh")], env=stranger_env(tmp_path / "home"),
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    installed = (tmp_path / "home" / ".local" / "share" / "applications" / "decider.desktop").read_text()
    assert f'Exec="{folder}/decider"' in installed.splitlines()
    assert f"Icon={folder}/decider.png" in installed.splitlines()
    assert "Type=Application" in installed.splitlines()


def test_the_archive_matches_its_checksum_and_holds_the_pieces(archive, bundle):
    checksum = archive.parent / f"{archive.name}.sha256"
    digest, name = checksum.read_text(encoding="utf-8").split()
    assert name == archive.name
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == digest
    assert archive.name == f"decider-{_version()}-linux-x86_64.tar.gz"
    folder, internal = bundle.parent, bundle.parent / "_internal"
    assert os.access(bundle, os.X_OK)
    entry = dict(line.split("=", 1) for line in (folder / "decider.desktop").read_text().splitlines() if "=" in line)
    assert entry["Type"] == "Application" and entry["Exec"].startswith("decider") and entry["Icon"] == "decider"
    assert (folder / "decider.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plugins = internal / "openvino" / "libs"
    for library in ("libopenvino_intel_cpu_plugin.so", "libopenvino_intel_gpu_plugin.so",
                    "libopenvino_intel_npu_plugin.so", "libopenvino_auto_plugin.so"):
        assert (plugins / library).is_file(), library
    assert list(plugins.glob("libopenvino_ir_frontend.so*")), "no IR reader: no model could be read"
    for platform_plugin in ("libqoffscreen.so", "libqxcb.so"):
        assert (internal / "PySide6" / "Qt" / "plugins" / "platforms" / platform_plugin).is_file()
    assert (internal / "fonts" / "fonts.conf").is_file() and list((internal / "fonts").glob("*.ttf"))
    for demo in ("demo-model", "demo-vl-model"):
        assert (internal / "decider" / "resources" / demo / "config.json").is_file()
    assert list(internal.glob("llvmlite/binding/libllvmlite*.so")), "no llvmlite: the exact int8 kernel could not JIT"


# Libraries a bundled one may need from the system: the GPU runtime's OpenCL loader, a Wayland session's client
# libraries, and the X11/xcb/GL set (named with the install line when missing: the install-line test below).
SYSTEM_PROVIDED = ("libOpenCL.so", "libwayland-", "libxcb", "libX", "libEGL.so", "libGL.so", "libOpenGL.so", "libxkbcommon")


def test_every_bundled_library_finds_what_it_needs(bundle):
    internal = bundle.parent / "_internal"
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(internal)}  # as the bootloader sets it
    unresolved: dict[str, list[str]] = {}
    for library in sorted(internal.rglob("*.so*")):
        assert library.exists(), f"dangling link {library}"
        if library.is_symlink() or not library.is_file():
            continue
        listing = subprocess.run(["ldd", str(library)], env=env, capture_output=True, text=True, timeout=60).stdout
        for line in listing.splitlines():
            name, _, where = line.strip().partition(" => ")
            if where.strip() == "not found" and not name.startswith(SYSTEM_PROVIDED):
                unresolved.setdefault(name, []).append(str(library.relative_to(internal)))
    assert not unresolved, unresolved


def _version() -> str:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


@pytest.mark.parametrize("question, options, chosen", [(QUESTION, OPTIONS, 1), (*UNSURE, None)], ids=["sure", "unsure"])
def test_ask_on_the_demo_model_gives_the_installed_packages_bars(bundle, tmp_path, question, options, chosen):
    args = ["ask", "--json", question, *[a for option in options for a in ("--option", option)]]
    choice, probabilities = bars(run_bundle(bundle, args, tmp_path / "home"))
    installed_choice, installed = bars(run_installed(args, tmp_path))
    assert choice == installed_choice
    if chosen is not None:
        assert choice == chosen  # the demo model learned to follow the scouts
    else:
        assert max(probabilities) < 0.9
    assert max(abs(a - b) for a, b in zip(probabilities, installed, strict=True)) <= 1e-6


def test_ask_with_a_picture_on_the_seeing_demo_model_gives_the_installed_packages_bars(bundle, tmp_path):
    import demo_vl_tasks
    from PIL import Image

    item = demo_vl_tasks.heldout_items(8_2030, {"colour": 1})[0]
    picture = tmp_path / "scene.png"
    Image.fromarray(item.image()).save(picture)
    demo = Path("decider") / "resources" / "demo-vl-model"
    common = ["ask", "--json", item.question, "--image", str(picture), *[a for o in item.options for a in ("--option", o)]]
    choice, probabilities = bars(run_bundle(bundle, [*common, "--model", str(bundle.parent / "_internal" / demo)],
                                            tmp_path / "home"))
    installed_choice, installed = bars(run_installed([*common, "--model", str(ROOT / "resources" / "demo-vl-model")],
                                                     tmp_path))
    assert choice == installed_choice
    assert max(abs(a - b) for a, b in zip(probabilities, installed, strict=True)) <= 1e-6


def test_an_int8_model_through_the_exact_kernel_gives_the_installed_packages_bars(bundle, tmp_path):
    """engine/kernels JIT-compiles its int8 projection with llvmlite: forced on, the bundle must take the same path
    (the precision label says which) and land on the same bars. On a CPU without VNNI both keep the plugin's."""
    model = ROOT / "tests" / "fixtures" / "models" / "qwen35-text-int8"
    args = ["ask", "--json", "--model", str(model), "--device", "CPU", "Which way?", "--option", "Left", "--option", "Right"]
    bundled = answer(run_bundle(bundle, args, tmp_path / "home", DECIDER_EXACT_KERNEL="kernel"))
    installed = answer(run_installed(args, tmp_path, DECIDER_EXACT_KERNEL="kernel"))
    assert bundled["engine"] == installed["engine"]
    assert bundled["choice"]["index"] == installed["choice"]["index"]
    pairs = zip(bundled["options"], installed["options"], strict=True)
    assert max(abs(a["probability"] - b["probability"]) for a, b in pairs) <= 1e-6


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _mapped_files(pid: int) -> set[str]:
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {line.split(None, 5)[5] for line in lines if len(line.split(None, 5)) == 6 and line.split(None, 5)[5].startswith("/")}


def _wait_until_serving(server: subprocess.Popen, port: int, deadline_s: float = 120) -> None:
    import httpx

    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        assert server.poll() is None, server.communicate()[1][-3000:]
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.3)
    pytest.fail("decider serve did not answer within 120 s")


def test_serve_answers_a_chat_request_with_the_bundles_own_python(bundle, tmp_path):
    from openai import OpenAI

    port = _free_port()
    home = tmp_path / "home"
    server = subprocess.Popen([str(bundle), "serve", "--port", str(port)], cwd=tmp_path, env=stranger_env(home),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_until_serving(server, port)
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused")
        model = client.models.list().data[0].id
        reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": QUESTION}],
                                               max_tokens=8, logprobs=True, top_logprobs=2)
        assert reply.choices[0].message.content
        assert reply.choices[0].logprobs is not None and reply.choices[0].logprobs.content
        mapped = _mapped_files(server.pid)
    finally:
        server.terminate()
        server.communicate(timeout=60)
    folder = str(bundle.parent) + "/"
    assert any(path.startswith(folder) and "libpython3" in path for path in mapped)
    ours = {str(Path(p).resolve()) + "/" for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    foreign_python = sorted(p for p in mapped if any(p.startswith(prefix) for prefix in ours)
                            or ("python3" in p and not p.startswith(folder)))
    assert not foreign_python, foreign_python


def test_the_window_opens_offscreen_and_draws_a_decision(bundle, tmp_path):
    shot = tmp_path / "window.png"
    args = ["gui", "--question", QUESTION, *[a for option in OPTIONS for a in ("--option", option)],
            "--screenshot", str(shot)]
    done = run_bundle(bundle, args, tmp_path / "home", QT_QPA_PLATFORM="offscreen")
    assert done.returncode == 0, done.stderr[-3000:]
    from PIL import Image

    picture = Image.open(shot)
    assert picture.size == (1240, 780)
    assert len(picture.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 50  # drawn text and bars, not a blank
    print(f"\nbundle window screenshot: {shot}")
    if os.environ.get("DECIDER_BUNDLE_SHOT"):
        shutil.copy(shot, os.environ["DECIDER_BUNDLE_SHOT"])


def _missing_for_xcb(bundle: Path) -> list[str]:
    """The system libraries the bundle's xcb plugin cannot find here (the bundled ones are found beside it)."""
    from decider.app.qt_prereqs import missing_libraries

    internal = bundle.parent / "_internal"
    env_path = os.environ.get("LD_LIBRARY_PATH")
    os.environ["LD_LIBRARY_PATH"] = str(internal)
    try:
        return missing_libraries(internal / "PySide6" / "Qt" / "plugins" / "platforms" / "libqxcb.so")
    finally:
        os.environ.pop("LD_LIBRARY_PATH")
        if env_path is not None:
            os.environ["LD_LIBRARY_PATH"] = env_path


def test_a_display_without_the_xcb_libraries_is_named_with_the_install_line(bundle, tmp_path):
    missing = _missing_for_xcb(bundle)
    if not missing:
        pytest.skip("this machine has every library Qt's xcb plugin needs (the window test covers the rest)")
    done = run_bundle(bundle, ["gui"], tmp_path / "home", DISPLAY=":99")
    assert done.returncode == 2, done.stderr[-3000:]
    assert "'xcb' platform plugin cannot load" in done.stderr
    for library in missing:
        assert library in done.stderr
    assert "Fix: " in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(shutil.which("xvfb-run") is None, reason="xvfb-run is not installed")
def test_a_real_x_window_under_xvfb(bundle, tmp_path):
    if _missing_for_xcb(bundle):
        pytest.skip("Qt's xcb plugin misses system libraries here (the install-line test covers that)")
    shot = tmp_path / "x11.png"
    args = ["gui", "--question", QUESTION, "--option", OPTIONS[0], "--option", OPTIONS[1], "--screenshot", str(shot)]
    done = subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 1280x800x24", str(bundle), *args], cwd=tmp_path,
                          env=stranger_env(tmp_path / "home"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
