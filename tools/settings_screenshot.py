"""The picture of the settings panel's Local API section (docs/screenshots/settings-api.png): the app on the
demo model (or --model DIR), the local API on with one allowed web page, the panel scrolled to that section.

    xvfb-run -a python tools/settings_screenshot.py --out docs/screenshots/settings-api.png
    (from a checkout: PYTHONPATH=DIR_WITH_A_decider_LINK, as for any tool)

Settings, history and caches go to a temporary folder: the user's own are never read or written.
`--bad-origin TEXT` types that into the field instead, to see how a refused value looks.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/screenshots/settings-api.png")
    parser.add_argument("--model", help="model folder (default: the bundled demo model)")
    parser.add_argument("--origin", default="http://localhost:3000")
    parser.add_argument("--bad-origin", help="type this (refused) value into the field instead")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="decider-shot-"))
    for name in ("CONFIG", "DATA", "CACHE"):
        os.environ[f"DECIDER_{name}_DIR"] = str(home / name.lower())

    from PySide6.QtCore import QTimer

    from decider.app.config import demo_model_dir
    from decider.app.gui import build_window, create_app
    from decider.app.preferences import GuiSettings

    port = 8765  # the default; another free one when a running Decider holds it (else the picture says "cannot serve")
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    model = args.model or str(demo_model_dir())
    app = create_app()
    settings = GuiSettings(device="CPU", api_enabled=True, api_port=port, api_allowed_origins=(args.origin,))
    engine, window = build_window(settings, save=None, history=False, record=False)
    panel = window.settings_panel
    code = {"value": 1}

    def shoot() -> None:
        if args.bad_origin is not None:
            panel.api_origins.setText(args.bad_origin)
            panel.api_origins.editingFinished.emit()
        panel.ensureWidgetVisible(panel.api_status, 0, 0)
        app.processEvents()
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        if panel.grab().save(args.out):
            print(f"saved {args.out}")
            code["value"] = 0
        app.quit()

    def on_api(running: bool, message: str) -> None:
        if running or "waits" not in message:
            QTimer.singleShot(300, shoot)

    window.controller.api_state.connect(on_api)
    window.model_error.connect(lambda message: (print(f"error: {message}", file=sys.stderr), app.quit()))
    QTimer.singleShot(120_000, app.quit)
    window.show()
    window.load_model(model, is_demo=args.model is None)
    app.exec()
    window.close()
    engine.close()
    return code["value"]


if __name__ == "__main__":
    sys.exit(main())
