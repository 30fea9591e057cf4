"""The window soak: the desktop app as a companion runs it — the main window and its embedded API in one process.

    python -m bench.soak --mode window --model DIR --requests 2000 --out docs/benchmarks/soak-window-NAME

The same seeded mix as the other modes (bench/soak.py: decide 50 %, completions 25 %, chat 25 %); every other
decision is typed into the window and decided with its Decide button, the rest go to the window's embedded API
over HTTP, as a game would send them. Offscreen Qt, the history recorded into a fresh data folder (the window's
History and Calibration tabs read it). RSS is this process's, read after every request; OUT.json / OUT.svg as
the API mode writes them.
"""

from __future__ import annotations

import os
import random
import tempfile
import threading
import time

from .soak_requests import Plan, free_port, make_request, post, rss_of, summarise


def _wait(done, timeout: float, what: str) -> None:
    """Run a Qt event loop until done(): the engine's results reach the window through it, and widgets the window
    replaced are deleted by it (deleteLater), as in the app; processEvents() alone would never delete them."""
    from PySide6.QtCore import QEventLoop, QTimer

    deadline = time.monotonic() + timeout
    loop, poll = QEventLoop(), QTimer()
    poll.timeout.connect(lambda: loop.quit() if done() or time.monotonic() > deadline else None)
    poll.start(2)
    if not done():
        loop.exec()
    poll.stop()
    if not done():
        raise RuntimeError(f"{what}: no result within {timeout:.0f} s")


def _api_call(url: str, body: dict) -> tuple[int, int | None]:
    """POST from a client thread while this (the GUI) thread keeps the event loop running."""
    reply: list = []
    client = threading.Thread(target=lambda: reply.append(post(url, body)), daemon=True)
    client.start()
    _wait(lambda: not client.is_alive(), 1800, url)
    if not reply:
        raise RuntimeError(f"{url}: the client thread failed")
    return reply[0]


def soak_window(plan: Plan, checkpoint=None) -> dict:
    data = tempfile.mkdtemp(prefix="decider-soak-window-")
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["DECIDER_DATA_DIR"] = os.environ["DECIDER_CONFIG_DIR"] = data

    from decider.app.gui import build_window, create_app
    from decider.app.preferences import GuiSettings

    app = create_app()  # noqa: F841 (the QApplication, referenced for the whole run)
    port = free_port()
    settings = GuiSettings(device="CPU", api_enabled=True, api_port=port, temperature=0.0, frequency_penalty=0.0,
                           presence_penalty=0.0)
    engine, window = build_window(settings, save=lambda _settings: None, register_global_hotkey=False)
    shown = [0]  # a count, not the results: keeping them would be the soak's own leak
    window.decision_shown.connect(lambda *_: shown.__setitem__(0, shown[0] + 1))
    loaded: list = []
    window.model_ready.connect(loaded.append)
    window.show()
    window.load_model(str(plan.model))
    _wait(lambda: bool(loaded), 600, "loading the model")
    base = f"http://127.0.0.1:{port}"
    _wait(lambda: _listening(base), 60, "the embedded API")
    rng = random.Random(plan.seed)
    samples, statuses, started, window_turn = [], {}, time.time(), False
    try:
        for i in range(plan.requests):
            path, body = make_request(rng, plan.max_words, plan.spread, plan.max_tokens)
            t0 = time.perf_counter()
            if path == "/v1/decide" and (window_turn := not window_turn):
                path = "window"
                window.question.setPlainText(body["question"])
                window.options.set_options(body["options"])
                if not window.decide_button.isEnabled() or window.deciding:
                    raise RuntimeError("the window is not ready for the next decision")
                before = shown[0]
                window.decide_button.click()
                # decision_shown also fires for API decisions the window shows: wait for this question's.
                _wait(lambda: shown[0] > before and not window.deciding
                      and window.last_request.question == body["question"], 1800, "a window decision")
                status, prompt_tokens = 200, None
            else:
                status, prompt_tokens = _api_call(base + path, body)
            samples.append({"i": i + 1, "path": path, "status": status, "s": time.perf_counter() - t0,
                            "prompt_tokens": prompt_tokens, "rss_mib": rss_of(os.getpid()), "t": time.time() - started})
            statuses[status] = statuses.get(status, 0) + 1
            if checkpoint and (i + 1) % 50 == 0:
                checkpoint(summarise(plan, samples, statuses, "window"))
    finally:
        window.close()
        engine.close()
    return summarise(plan, samples, statuses, "window")


def _listening(base: str) -> bool:
    import urllib.request

    try:
        urllib.request.urlopen(base + "/v1/models", timeout=1).read()
        return True
    except OSError:
        return False
