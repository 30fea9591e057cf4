"""What the history keeps of an image (its size and the sha256 of its pixels, never the picture) and the switch that
keeps only the size: the CLI's and the server's --no-image-hash, the app's "History keeps image hashes" setting, read
at each decision."""

import numpy as np
import pytest

from support.gui import make_window, dirs  # noqa: F401 - fixtures
from support.models import FIXTURES, model_dir
from decider.app.history import HistoryStore
from decider.app.images import image_digest, load_image_file
from decider.app.preferences import GuiSettings
from decider.engine.decisions.decide import DecisionRequest
from support.results import letters_result

SCREEN = FIXTURES / "images" / "screen_640x360.png"
VL = str(model_dir("qwen35-vl"))


def record(store: HistoryStore, pixels: np.ndarray) -> dict:
    request = DecisionRequest("Q?", ("A", "B"), images=(pixels,))
    return store.get(store.add(request, letters_result([-0.7, -0.7], request), model="m", device="CPU", source="test")).settings["images"][0]


def test_a_callable_switch_is_read_at_each_decision(tmp_path):
    pixels = load_image_file(SCREEN)
    keep = [True]
    store = HistoryStore(tmp_path / "h.sqlite3", image_hashes=lambda: keep[0])
    assert record(store, pixels) == {"width": 640, "height": 360, "sha256": image_digest(pixels)}
    keep[0] = False
    assert record(store, pixels) == {"width": 640, "height": 360}


def test_the_apps_setting_reaches_the_recording_store(make_window, tmp_path):  # noqa: F811
    window = make_window(GuiSettings(device="CPU", history_image_hashes=False), register_global_hotkey=False,
                         history_factory=lambda: HistoryStore(tmp_path / "gui.sqlite3"))
    store = window.ports.engine._history_factory()  # the store the engine thread records decisions into
    pixels = load_image_file(SCREEN)
    assert record(store, pixels) == {"width": 640, "height": 360}
    window.settings_panel.history_image_hashes.setChecked(True)  # the user turns hashes back on
    assert window.settings.history_image_hashes is True
    assert record(store, pixels)["sha256"] == image_digest(pixels)
    with pytest.raises(Exception, match="history_image_hashes"):
        GuiSettings(history_image_hashes="yes")


@pytest.mark.parametrize("flag", [True, False])
def test_serve_takes_no_image_hash(dirs, monkeypatch, flag):  # noqa: F811
    from decider.app import cli
    from decider.app.api import server

    opened = []
    monkeypatch.setattr(server, "serve", lambda factory, *rest: opened.append(factory()) or 0)
    assert cli.main(["serve", "--model", VL, "--device", "CPU", *(["--no-image-hash"] if flag else [])]) == 0
    assert opened[0].history.image_hashes is (not flag)
