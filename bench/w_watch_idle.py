"""Watch mode's cost while nothing changes (issue 39 target: ≤ 5 % of one core): the window watching an unchanging
1280×720 game window on a real X server, against the same window not watching, in one process.

    xvfb-run -a -s "-screen 0 1920x1080x24" python -m bench.w_watch_idle --seconds 20 --repeats 3

Each repeat: `seconds` watching (the default grab interval), then `seconds` not watching; CPU time is the
process's (every thread), over wall time. Then the game's picture changes `repeats` times: the time from the
change to the new bars, against that decision's own time plus one grab interval (the issue's bound; 0.25 s is
allowed for painting and the grab itself). Writes ~/.cache/decider-bench/results/watch-idle.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from .common import RESULTS, log, stamp, write_json


def _spin(app, seconds: float) -> float:
    """Run the event loop for `seconds`; the process's CPU seconds spent meanwhile."""
    from PySide6.QtCore import QEventLoop, QTimer

    started = time.process_time()
    loop = QEventLoop()
    QTimer.singleShot(int(seconds * 1000), loop.quit)
    loop.exec()
    return time.process_time() - started


def _change_to_bars(app, window, game, repeats: int) -> dict:
    """From the game's picture changing to the new bars on screen, against one decision's time plus one grab
    interval (the issue's bound for watch mode): each repeat repaints the game and waits for the bars."""
    from PySide6.QtCore import QEventLoop, QTimer

    window.update_settings(watch_enabled=True)
    _spin(app, 3.0)
    waits, decisions = [], []
    for repeat in range(repeats):
        shown: list = []
        loop = QEventLoop()
        window.decision_shown.connect(lambda result: (shown.append(result), loop.quit()))
        game.setStyleSheet(f"background: #{(repeat * 0x3f7f1f + 0x204080) % 0xffffff:06x};")
        started = time.perf_counter()
        QTimer.singleShot(120_000, loop.quit)
        loop.exec()
        window.decision_shown.disconnect()
        if shown:
            waits.append(time.perf_counter() - started)
            decisions.append(shown[0].timings.get("total_s", 0.0))
        _spin(app, 1.5)
    window.update_settings(watch_enabled=False)
    interval = window.settings.watch_interval_ms / 1000
    return {"change_to_bars_s": waits, "decision_s": decisions,
            "within_bound": [w <= d + interval + 0.25 for w, d in zip(waits, decisions)]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_watch_idle")
    parser.add_argument("--model", default="resources/demo-vl-model")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if not os.environ.get("DISPLAY"):
        parser.error("needs an X display (run it under xvfb-run)")
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QWidget

    from decider.app.gui import build_window, create_app
    from decider.app.preferences import GuiSettings

    app = create_app()
    engine, window = build_window(GuiSettings(device="CPU", show_settings=False), register_global_hotkey=False,
                                  history=False, record=False)
    window.show()
    game = QWidget(None)
    game.setStyleSheet("background: qlineargradient(x1:0, y1:0, x2:1, y2:1, stop:0 #2040a0, stop:1 #a04020);")
    game.setGeometry(0, 0, 1280, 720)
    game.show()
    loaded: list = []
    window.model_ready.connect(loaded.append)
    window.load_model(args.model)
    while not loaded:
        app.processEvents()
    window.question.setPlainText("The game screen. Attack or retreat?")
    window.options.set_options(["Attack", "Retreat"])
    window.screen_decisions.region = QRect(game.geometry())
    watching, idle = [], []
    for repeat in range(args.repeats):
        window.update_settings(watch_enabled=True)
        _spin(app, 3.0)  # the first grab's decision, not counted
        watching.append(_spin(app, args.seconds) / args.seconds)
        window.update_settings(watch_enabled=False)
        idle.append(_spin(app, args.seconds) / args.seconds)
        log(f"watch idle: repeat {repeat + 1}: watching {watching[-1]:.1%} of a core, not watching {idle[-1]:.1%}")
    change = _change_to_bars(app, window, game, args.repeats)
    screen = window.watch.screen
    result = {**change, **stamp(seconds=args.seconds, repeats=args.repeats, model=os.path.basename(args.model)),
              "interval_ms": window.settings.watch_interval_ms, "watching_core": statistics.median(watching),
              "idle_core": statistics.median(idle), "watching": watching, "idle": idle,
              "grabs": screen.counts.grabs, "unchanged": screen.counts.unchanged, "decisions": screen.counts.decisions,
              "load_after": os.getloadavg()[0]}
    write_json(RESULTS / "watch-idle.json", result)
    print(f"watching {result['watching_core']:.2%} of one core, not watching {result['idle_core']:.2%} "
          f"({result['grabs']} grabs, {result['unchanged']} unchanged, {result['decisions']} decisions); change to bars "
          + ", ".join(f"{w:.2f} s (decision {d:.2f} s)" for w, d in zip(result["change_to_bars_s"], result["decision_s"])))
    window.close()
    game.close()
    engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
