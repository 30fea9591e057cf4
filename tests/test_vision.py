"""Images in the engine: preprocessing, encoder, image tokens and 3-D positions, against transformers float64
(tests/fixtures/reference/qwen35-vl-images.json, made by tools/make_vision_references.py)."""

import hashlib
import json

import numpy as np
import pytest
from PIL import Image

from support.models import FIXTURES, REFERENCE, model_dir
from decider.engine.model.chat_template import Message, build_chat_prompt
from decider.engine.decisions.decide import DecisionRequest, decide
from decider.engine.core.errors import SettingsError
from decider.engine.generation.generate import generate_step, make_rng
from decider.engine.generation.sampling import make_sampler
from decider.engine.core.logprobs import log_softmax
from decider.engine.core.settings import SamplingSettings
from decider.engine.vision.preprocess import ProcessorConfig, preprocess, target_size
from decider.engine.model.vision_tokens import ImageToken, image_tokens, rope_positions, token_ids

TOLERANCE = 1e-4
GREEDY = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0, repetition_penalty=1.0)
REF = json.loads((REFERENCE / "qwen35-vl-images.json").read_text())
CASES = {c["name"]: c for c in REF["cases"] if "text" in c}  # chat-template prompts


def load(name: str) -> np.ndarray:
    with Image.open(FIXTURES / REF["images"][name]["file"]) as image:
        return np.asarray(image.convert("RGB"))


def chat_prompt(runner, case: dict):
    parts = tuple(tuple(runner.image_tokens(load(name))) for name in case["images"]) + (case["text"],)
    return build_chat_prompt(runner.tokenizer, [Message("user", parts)], think=False)


@pytest.mark.parametrize("name", sorted(REF["images"]))
def test_preprocessing_gives_the_reference_processors_pixels(vl_runner, name):
    info = REF["images"][name]
    patches = preprocess(load(name), vl_runner.vision.processor)
    assert list(patches.grid) == info["grid_thw"] and list(patches.size) == info["resized"]
    assert hashlib.sha256(patches.values.tobytes()).hexdigest() == info["pixel_values_sha256"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_image_prompts_match_transformers_float64(vl_runner, name):
    case = CASES[name]
    prompt = chat_prompt(vl_runner, case)
    assert token_ids(prompt.ids, REF["image_token_id"]).tolist() == case["prompt_ids"]  # the chat template's placeholders
    vl_runner.reset()
    got = log_softmax(vl_runner.prefill(prompt.ids))
    assert np.max(np.abs(got - np.array(case["logprobs"]))) < TOLERANCE
    # Greedy steps after the image: text positions continue from the image's 3-D positions, not its length.
    steps = list(generate_step(vl_runner, prompt.ids, make_sampler(GREEDY, make_rng(0)), max_tokens=len(case["steps"]), top_logprobs=5))
    assert [s.token_id for s in steps] == [s["token"] for s in case["steps"]]
    for got_step, want in zip(steps, case["steps"]):
        assert [t.token_id for t in got_step.entry.top] == [t[0] for t in want["top"]]
        assert max(abs(t.logprob - w[1]) for t, w in zip(got_step.entry.top, want["top"])) < TOLERANCE


def test_non_square_positions_are_where_a_port_goes_wrong(vl_runner):
    """Positions counted as if the image were text (or with rows and columns swapped) miss the reference:
    the parity above is not luck of a model that ignores positions."""
    case = CASES["wide"]
    prompt = chat_prompt(vl_runner, case)
    want = np.array(case["logprobs"])
    swapped = [ImageToken(t.digest, (t.index % t.cols) * t.rows + t.index // t.cols, t.cols, t.rows)
               if isinstance(t, ImageToken) else t for t in prompt.ids]
    vl_runner.reset()
    assert np.max(np.abs(log_softmax(vl_runner.prefill(swapped)) - want)) > 1e-3


def test_rope_positions_follow_qwen35():
    image = image_tokens("d", rows=2, cols=3)
    items = [7, 8, *image, 9]
    positions = rope_positions([], items)
    assert positions[:, :2].tolist() == [[0, 1]] * 3
    # Image at text position 2: (t, h, w) = (2, 2 + row, 2 + col).
    assert positions[0, 2:8].tolist() == [2] * 6
    assert positions[1, 2:8].tolist() == [2, 2, 2, 3, 3, 3]
    assert positions[2, 2:8].tolist() == [2, 3, 4, 2, 3, 4]
    # The text after it continues at 2 + max(rows, cols) = 5, not at 2 + 6.
    assert positions[:, 8].tolist() == [5, 5, 5]
    # A chunk after a history gets the same positions as the whole sequence would.
    assert rope_positions(items[:4], items[4:]).tolist() == positions[:, 4:].tolist()
    assert rope_positions(items, [10]).tolist() == [[6], [6], [6]]


def test_pixel_budget_and_grid():
    config = ProcessorConfig.from_dict(json.loads((model_dir("qwen35-vl") / "preprocessor_config.json").read_text()), {})
    assert target_size(360, 640, config) == (192, 320)  # 16:9 scaled into 256×256 pixels
    assert target_size(24, 40, config) == (64, 96)  # scaled up to at least 64×64 pixels
    assert target_size(64, 96, config) == (64, 96)
    with pytest.raises(SettingsError, match="200-fold"):
        target_size(1, 400, config)


def test_the_same_screen_and_context_is_computed_once(vl_runner):
    screen = load("screen_640x360")
    request = DecisionRequest("Attack, defend or retreat?", ("Attack", "Defend", "Retreat"), context="Rules: be brave.",
                              images=(screen,), sampling=GREEDY)
    vl_runner.reset()
    vl_runner.clear_snapshots()
    vl_runner.vision.clear()
    first = decide(vl_runner, request)
    assert first.usage["images_encoded"] == 1 and first.usage["image_tokens"] == 60
    second = decide(vl_runner, DecisionRequest("Attack or wait?", ("Attack", "Wait"), context="Rules: be brave.",
                                               images=(screen.copy(),), sampling=GREEDY))
    assert second.usage["images_encoded"] == 0
    assert second.usage["reused_tokens"] > 60  # the screenshot and the context came from the snapshot
    # The question after the restored image gets the same positions as in a cold run.
    vl_runner.reset()
    vl_runner.clear_snapshots()
    cold = decide(vl_runner, DecisionRequest("Attack or wait?", ("Attack", "Wait"), context="Rules: be brave.",
                                             images=(screen,), sampling=GREEDY))
    assert cold.usage["reused_tokens"] == 0
    assert [o.logprob for o in cold.options] == [o.logprob for o in second.options]
    decide(vl_runner, request)
    again = decide(vl_runner, request)
    assert [o.logprob for o in again.options] == [o.logprob for o in first.options]
    # Another picture of the same size shares no state with it: the digest is part of the prefix.
    other = screen.copy()
    other[0, 0] ^= 0xFF
    changed = decide(vl_runner, DecisionRequest(request.question, request.options, context=request.context,
                                                images=(other,), sampling=GREEDY))
    assert changed.usage["images_encoded"] == 1 and changed.usage["reused_tokens"] < 10


def test_images_are_refused_clearly(text_runner, vl_runner):
    with pytest.raises(SettingsError, match="no vision encoder"):
        decide(text_runner, DecisionRequest("Q?", ("A", "B"), images=(load("square_64x64"),)))
    for bad in (np.zeros((8, 8, 3), dtype=np.float32), np.zeros((8, 8, 5), dtype=np.uint8), "shot.png"):
        with pytest.raises(SettingsError):
            DecisionRequest("Q?", ("A", "B"), images=(bad,))
    with pytest.raises(SettingsError, match="at most"):
        DecisionRequest("Q?", ("A", "B"), images=(load("square_64x64"),) * 9)
