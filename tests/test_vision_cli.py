"""Images where a decision is asked: `decider ask --image`, image files, the history's record of them."""

import base64
import json

import numpy as np
import pytest

from decider.app.cli import main
from decider.app.history import HistoryStore, default_store
from decider.app.images import decode_data_url, image_digest, load_image_file
from support.models import FIXTURES, REFERENCE, model_dir
from decider.engine.decisions.decide import DecisionRequest
from support.results import letters_result
from decider.engine.core.errors import SettingsError

REF = json.loads((REFERENCE / "qwen35-vl-images.json").read_text())
DECISION = next(c for c in REF["cases"] if c["name"] == "decision_screen")
SCREEN = FIXTURES / REF["images"]["screen_640x360"]["file"]
GREEDY = ["--temperature", "0", "--frequency-penalty", "0", "--presence-penalty", "0"]


def ask(capsys, *argv):
    code = main(["ask", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_ask_with_an_image_matches_transformers_float64(capsys):
    code, out, _ = ask(capsys, "--model", str(model_dir("qwen35-vl")), "--image", str(SCREEN), "--context", str(_context_file()),
                       DECISION["question"], *sum((["--option", o] for o in DECISION["options"]), []), "--json", *GREEDY)
    assert code == 0
    result = json.loads(out)
    want = np.array(DECISION["logprobs"])
    letters = [32 + i for i in range(len(DECISION["options"]))]  # "A", "B", "C" in the fixture tokenizer
    got = [o["logprob"] for o in result["options"]]
    assert np.max(np.abs(np.array(got) - want[letters])) < 1e-4
    assert result["usage"]["image_tokens"] == 60 and result["usage"]["prompt_tokens"] == len(DECISION["prompt_ids"])
    row = default_store().get(result["history_id"])
    assert row.settings["images"] == [{"width": 640, "height": 360, "sha256": image_digest(load_image_file(SCREEN))}]


def _context_file():
    import tempfile

    handle = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8")
    handle.write(DECISION["context"])
    handle.close()
    return handle.name


@pytest.mark.parametrize(("path", "message"), [
    ("/no/such/shot.png", "no such image file"),
    (str(FIXTURES), "a folder"),
    (str(FIXTURES / "README.md"), "not an image"),
])
def test_bad_image_paths_are_one_line_errors(capsys, path, message):
    code, _, err = ask(capsys, "--model", str(model_dir("qwen35-vl")), "--image", path, "Q?", "--option", "A", "--option", "B")
    assert code == 2 and message in err and "Traceback" not in err


def test_a_text_only_model_says_it_cannot_see(capsys):
    code, _, err = ask(capsys, "--model", str(model_dir("qwen35-text")), "--image", str(SCREEN), "Q?", "--option", "A", "--option", "B")
    assert code == 2 and "cannot see images" in err


def test_history_keeps_a_hash_or_only_the_size_never_the_pixels(tmp_path):
    pixels = load_image_file(SCREEN)
    request = DecisionRequest("Q?", ("A", "B"), images=(pixels,))
    result = letters_result([-0.7, -0.7], request)
    for hashes, expected in ((True, {"width": 640, "height": 360, "sha256": image_digest(pixels)}), (False, {"width": 640, "height": 360})):
        store = HistoryStore(tmp_path / f"h{hashes}.sqlite3", image_hashes=hashes)
        row = store.get(store.add(request, result, model="m", device="CPU", source="test"))
        assert row.settings["images"] == [expected]
        assert len((tmp_path / f"h{hashes}.sqlite3").read_bytes()) < pixels.nbytes / 10


def test_data_urls_decode_and_remote_urls_are_refused():
    png = SCREEN.read_bytes()
    pixels = decode_data_url("data:image/png;base64," + base64.b64encode(png).decode())
    assert np.array_equal(pixels, load_image_file(SCREEN))
    for url, message in (("https://example.com/a.png", "not fetched"), ("data:image/png;base64,!!!", "not valid"),
                         ("data:text/plain,hi", "base64 data URL"), ("data:image/png;base64," + base64.b64encode(b"xx").decode(), "not an image")):
        with pytest.raises(SettingsError, match=message):
            decode_data_url(url)
