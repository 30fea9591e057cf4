"""`decider gui`: wire the settings, the engine thread and the main window together.

Model choice at start: --model, else the last model used, else the bundled demo model
(resources/demo-model) labelled "demo model", else the "choose a model folder" state.

With --screenshot PATH it loads the model, runs the --question/--option decision, saves a PNG of the
window (and of the overlay with --overlay-screenshot) and exits: how the README's pictures are made.
--tab calibration|history|inspector shows that tab in the picture (read from the history in the data
dir; a screenshot run never records its own decision there).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from .config import demo_model_dir
from .preferences import GuiSettings, load_settings, save_settings
from .engine_thread import EngineThread

if TYPE_CHECKING:
    from .history import HistoryStore

log = logging.getLogger(__name__)

SCREENSHOT_TIMEOUT_MS = 180_000


def initial_model(args_model: str | None, settings: GuiSettings) -> tuple[str | None, bool]:
    """(path, is_demo) to open at start, or (None, False) for the empty state."""
    if args_model:
        return str(Path(args_model).expanduser()), False
    if settings.last_model and Path(settings.last_model).is_dir():
        return settings.last_model, False
    demo = demo_model_dir()
    if demo is not None:
        return str(demo), True
    return None, False


def create_app(argv: list[str] | None = None) -> QApplication:
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(argv if argv is not None else [sys.argv[0]])
    app.setApplicationName("Decider")
    app.setOrganizationName("Decider")
    from decider.ui.theme import apply_theme

    from .config import cache_dir

    apply_theme(app, str(cache_dir()))
    return app


def build_window(settings: GuiSettings, warnings: list[str] | None = None, *, save=save_settings,
                 register_global_hotkey: bool = True, history: bool = True, record: bool | None = None,
                 history_factory: Callable[[], HistoryStore] | None = None):
    """The engine thread and a main window on it (the caller closes both).

    history: the Calibration and History tabs read the decision history; record (default: history):
    the engine records every decision into it. history_factory replaces app.history.default_store.
    """
    from decider.ui.main_window import MainWindow

    from .gui_ports import app_ports
    from .history import default_store

    factory: Callable[[], HistoryStore] = history_factory or default_store
    if record is None:
        record = history
    windows: list = []

    def recording_store():
        store = factory()
        # The window's current setting, read at each decision: turning it off applies to the next screenshot.
        store.image_hashes = lambda: (windows[0].settings if windows else settings).history_image_hashes
        return store

    engine = EngineThread(recording_store if record else None)
    demo = demo_model_dir()
    ports = app_ports(engine.worker, history=factory if history else None, save_settings=save,
                      demo_dir=str(demo) if demo else None)
    window = MainWindow(ports, settings, warnings=warnings, register_global_hotkey=register_global_hotkey)
    windows.append(window)
    return engine, window


def display_problem(env=None, platform: str = sys.platform) -> str | None:
    """Why Qt cannot open a window here, said before Qt aborts the process with its own message."""
    env = os.environ if env is None else env
    if not platform.startswith("linux") or env.get("QT_QPA_PLATFORM"):
        return None
    if not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
        return ("no display to open the window on ($DISPLAY and $WAYLAND_DISPLAY are unset). Run Decider on a "
                "desktop, or under a virtual one (`xvfb-run decider`), or decide in the terminal: "
                "`decider ask \"QUESTION\" --option A --option B` (the demo model when none is configured)")
    return None


def _platform_problem() -> str | None:
    if not sys.platform.startswith("linux"):
        return None
    from .qt_prereqs import platform_problem

    return platform_problem()


def gui_main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="decider: %(message)s")
    screenshot = getattr(args, "screenshot", None)
    overlay_shot = getattr(args, "overlay_screenshot", None)
    problem = display_problem() or _platform_problem()
    if problem:
        print(f"decider: error: {problem}", file=sys.stderr)
        return 2
    app = create_app()
    settings, warnings = load_settings()
    for warning in warnings:
        print(f"decider: warning: {warning}", file=sys.stderr)
    changes = {}
    if getattr(args, "device", None) and args.device.upper() != "AUTO":
        changes["device"] = args.device
    if getattr(args, "fast", False):
        changes["exact"] = False
    if getattr(args, "think", None) is not None:
        changes["think"] = bool(args.think)
    if changes:
        settings = settings.with_changes(**changes)
    save = None if screenshot else save_settings  # a screenshot run leaves the user's settings alone
    if screenshot:
        # Repeatable pictures: greedy draws, the overlay shown, no global key grab.
        settings = settings.with_changes(temperature=0.0, overlay_enabled=bool(overlay_shot), show_settings=True)
    tab = getattr(args, "tab", None)
    if tab and tab not in ("decision", "inspector", "calibration", "history"):
        print(f"decider: error: --tab must be decision, inspector, calibration or history (got {tab!r})", file=sys.stderr)
        return 2
    if screenshot:
        settings = settings.with_changes(engine="local")
    engine, window = build_window(
        settings, warnings, save=save, register_global_hotkey=not screenshot,
        history=not screenshot or tab in ("calibration", "history"), record=not screenshot,
    )
    code = {"value": 0}

    path, is_demo = initial_model(getattr(args, "model", None), settings)
    if getattr(args, "question", None):
        window.question.setPlainText(args.question)
    if getattr(args, "option", None):
        window.options.set_options(list(args.option))
    if getattr(args, "tool", None):
        from .tool_decision import load_tools

        window.set_tools(load_tools(args.tool))

    if screenshot:
        _screenshot_run(app, window, args, path, is_demo, screenshot, overlay_shot, code)
    else:
        if tab:
            window.show_tab(tab)
        window.start(path, is_demo)

    if window.settings.window_maximized and not screenshot:
        window.showMaximized()
    else:
        window.show()
    app.exec()
    from .task_runner import Task

    Task.cancel_all()  # a download keeps what arrived; a conversion's child processes end
    if not engine.close():
        # Still inside a compile that cannot be interrupted: leave without tearing the thread down
        # under it (Qt aborts when a running QThread is destroyed). Settings were saved on close.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code["value"])
    return code["value"]


def _screenshot_run(app, window, args, path, is_demo, screenshot: str, overlay_shot: str | None, code: dict) -> None:
    if path is None:
        print("decider: error: --screenshot needs a model (--model DIR)", file=sys.stderr)
        code["value"] = 2
        QTimer.singleShot(0, app.quit)
        return
    if not args.question or (len(args.option) < 2 and not getattr(args, "tool", None)):
        print("decider: error: --screenshot needs --question and at least two --option (or --tool)", file=sys.stderr)
        code["value"] = 2
        QTimer.singleShot(0, app.quit)
        return

    def fail(message: str) -> None:
        print(f"decider: error: {message}", file=sys.stderr)
        code["value"] = 1
        app.quit()

    def save_pictures() -> None:
        app.processEvents()
        Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
        if not window.grab().save(screenshot):
            fail(f"could not write {screenshot}")
            return
        print(f"decider: saved {screenshot}")
        if overlay_shot:
            Path(overlay_shot).parent.mkdir(parents=True, exist_ok=True)
            if not window.overlay.grab().save(overlay_shot):
                fail(f"could not write {overlay_shot}")
                return
            print(f"decider: saved {overlay_shot}")
        app.quit()

    def on_loaded(info) -> None:
        if overlay_shot:
            window.set_overlay_visible(True)
        if not window.decide():
            fail("the decision could not start (check --question and --option)")

    window.model_ready.connect(on_loaded)
    window.model_error.connect(fail)
    window.decision_failed.connect(fail)
    def on_shown(result) -> None:
        tab = getattr(args, "tab", None)
        if tab:
            window.show_tab(tab)
        if tab == "calibration":
            window.calibration_view.refresh()
            window.calibration_view.fit_temperature()  # the picture shows a fit (nothing is applied or saved)
        QTimer.singleShot(400, save_pictures)

    window.decision_shown.connect(on_shown)
    QTimer.singleShot(SCREENSHOT_TIMEOUT_MS, lambda: fail("timed out waiting for the decision"))
    window.load_model(path, is_demo)
