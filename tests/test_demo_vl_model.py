"""The bundled seeing demo model (resources/demo-vl-model) answers picture questions through the real engine.

Held-out items: scene layouts that training never generated (tools/demo_vl_tasks.py's hash split), drawn with a
seed training did not use. Every decision goes through engine.decide.decide() with the rendered picture, exactly
as `decider ask --image` asks. No torch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO_VL = ROOT / "resources" / "demo-vl-model"

if not (DEMO_VL / "config.json").is_file():
    pytest.skip("resources/demo-vl-model is absent (no seeing demo model shipped)", allow_module_level=True)

sys.path.insert(0, str(ROOT / "tools"))
import demo_tasks  # noqa: E402
import demo_vl_tasks as tasks  # noqa: E402

from decider.engine.decisions.decide import DecisionRequest, decide  # noqa: E402
from decider.engine.runners.runner import ModelRunner  # noqa: E402
from decider.engine.core.settings import SamplingSettings  # noqa: E402

# Must differ from the seeds tools/train_demo_vl.py trains and validates with (8_2026, 8_2027).
TEST_SEED = 8_2028
SHUFFLE_SEED = 8_2029
COUNTS = {"colour": 40, "star": 30, "door": 40, "colour_none": 10, "star_none": 10, "door_none": 10}
GREEDY = SamplingSettings(temperature=0.0)


@pytest.fixture(scope="module")
def runner():
    return ModelRunner(DEMO_VL)


def _bars(runner, item, pixels=None):
    image = item.image() if pixels is None else pixels
    result = decide(runner, DecisionRequest(item.question, item.options, images=(image,), sampling=GREEDY))
    assert [o.text for o in result.options] == list(item.options)
    probs = [o.probability for o in result.options]
    assert result.choice_index == demo_tasks.argmax(probs)
    return probs


@pytest.fixture(scope="module")
def measured(runner):
    items = tasks.heldout_items(TEST_SEED, COUNTS)
    m = demo_tasks.metrics(items, [_bars(runner, item) for item in items])
    print("\nseeing demo model, held-out:", json.dumps({k: v for k, v in m.items() if k != "bins"}, indent=1))
    return items, m


def test_items_are_held_out_and_varied(measured):
    items, _ = measured
    assert len(items) == sum(COUNTS.values())
    assert all(tasks.is_heldout(i.scene["layout"]) for i in items)
    assert {len(i.options) for i in items} == {2, 3, 4}
    assert {i.answer for i in items if not i.ambiguous} == {0, 1, 2, 3}  # the right option sits at every letter


# Bounds below: the value measured (`python -m pytest -s tests/test_demo_vl_model.py` prints them; f32 exact compile,
# 2026-12-04, avx512 CPU) with the margin stated beside each; where a count is bounded, the margin is one answer
# flipping on another CPU's f32 kernels (they move a bar by ~1e-5).


def test_accuracy_on_held_out_pictures(measured):
    _, m = measured
    assert m["accuracy"] >= 0.99  # measured 1.000 (110/110); bound: one wrong (0.991)
    for kind in ("colour", "star", "door"):
        assert m["by_kind"][kind] >= 0.96, kind  # measured 1.000 each (40, 30, 40 items); bound: one wrong (0.967)


def test_expected_calibration_error(measured):
    _, m = measured
    assert m["ece"] <= 0.006  # measured 0.0027 (r8c; r7f 0.0033); bound ~2× it


def test_option_order_does_not_decide(runner):
    items = [i for i in tasks.heldout_items(TEST_SEED + 1, {"colour": 8, "door": 8}) if len(i.options) > 2]
    for item in items:
        first = _bars(runner, item)
        order = list(range(len(item.options)))[::-1]
        again = _bars(runner, item.reordered(order))
        assert demo_tasks.argmax(first) == order[demo_tasks.argmax(again)]


@pytest.mark.parametrize("colour", [(128, 128, 128), (255, 255, 255), (40, 40, 40)])  # greys, like the trained backgrounds
def test_a_blank_picture_gives_near_even_bars(runner, colour):
    """The picture matters: with nothing to see, no option stands out (and the same questions over real scenes
    are answered confidently, above)."""
    items = tasks.heldout_items(TEST_SEED + 2, {"colour": 3, "star": 2, "door": 3})
    for item in items:
        probs = _bars(runner, item, tasks.blank(colour))
        n = len(probs)
        assert max(abs(p - 1 / n) for p in probs) <= 0.03, (item.question, item.options, probs)  # measured ≤ 0.0129
        with_scene = _bars(runner, item)
        assert max(with_scene) > max(probs) + 0.4  # measured ≥ 0.486 higher with the scene; bound 0.4


# Scenes in styles training never saw (issue 27 item 8): the same seeds and counts as tools/train_demo_vl.py's
# STYLE_SEED / STYLE_COUNTS / ISSUE_SEED / ISSUE_PER_CASE, so the card's numbers are these.
STYLE_SEED = 8_2030
STYLE_COUNTS = {"colour": 24, "star": 24, "door": 24, "colour_none": 8, "star_none": 8, "door_none": 8}
ISSUE_SEED = 8_2031
ISSUE_PER_CASE = 8


def _style_measure(runner, items):
    probs = [_bars(runner, item) for item in items]
    m = demo_tasks.metrics(items, probs)
    wrong = [max(p) for it, p in zip(items, probs) if not it.ambiguous and demo_tasks.argmax(p) != it.answer]
    m["largest_wrong_bar"] = max(wrong, default=0.0)
    blanks = [_bars(runner, it, tasks.styled_blank(it.scene)) for it in items if not it.ambiguous]
    m["blank_max_deviation"] = max(abs(p - 1 / len(ps)) for ps in blanks for p in ps)
    print("\nseeing demo model:", json.dumps({k: v for k, v in m.items() if k != "bins"}, indent=1))
    return m


@pytest.fixture(scope="module")
def styled(runner):
    items = tasks.heldout_style_items(STYLE_SEED, STYLE_COUNTS)
    return items, _style_measure(runner, items)


@pytest.fixture(scope="module")
def issue_cases(runner):
    items = tasks.issue_case_items(ISSUE_SEED, ISSUE_PER_CASE)
    return items, _style_measure(runner, items)


def test_held_out_styles_are_styles_training_never_saw(styled):
    items, _ = styled
    train = tasks.STYLE_VALUES["train"]
    sizes = set()
    for item in items:
        scene = item.scene
        assert scene["style"] == "heldout" and scene["background"]["kind"] not in train["background"]
        aspect = scene["width"] / scene["height"]
        assert not any(lo <= aspect <= hi for lo, hi in train["aspect"]) and 60 <= min(scene["width"], scene["height"]) <= max(scene["width"], scene["height"]) <= 400
        sizes.add((scene["width"], scene["height"]))
        if scene["task"] == "star" and scene.get("side"):
            assert scene["points"] not in train["star_points"]
        if scene["task"] == "door":
            assert scene["door_leaf"] not in train["door_leaf"]
    assert len(sizes) > len(items) // 2


def test_held_out_styles_are_mostly_right_and_never_sure_when_wrong(styled):
    """Outside its own drawings the demo may be wrong, but it must not say so at 99 %."""
    _, m = styled
    assert m["accuracy"] >= 0.93  # measured 0.944 (68/72); bound: one more wrong (0.931)
    assert m["largest_wrong_bar"] <= 0.82  # measured 0.762 (r8c); bound +0.06 (the target: never sure when wrong)


def test_blank_pictures_in_held_out_styles_give_near_even_bars(styled):
    _, m = styled
    assert m["blank_max_deviation"] <= 0.04  # measured 0.0169 (r8c), 0.0302 (r9f); bound +1/3 of the latest


def test_the_issues_cases(issue_cases):
    """Five-point stars on 120×300 and 320×180 pictures, narrow doors with the leaf outside the frame."""
    items, m = issue_cases
    assert {(i.scene["width"], i.scene["height"]) for i in items} == set(tasks.ISSUE_SIZES)
    assert m["accuracy"] >= 0.97  # measured 1.000 (48/48); bound: one wrong (0.979)
    assert m["largest_wrong_bar"] <= 0.75  # measured 0 (none wrong); bound as for the held-out styles


def test_the_model_card_states_the_held_out_style_numbers(styled):
    _, m = styled
    card = (DEMO_VL / "MODEL_CARD.md").read_text()
    row = next(line for line in card.splitlines() if line.startswith("| heldout styles |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == f"{m['accuracy'] * 100:.1f} %"
    assert cells[3] == f"{m['ece']:.3f}" and cells[4] == f"{m['largest_wrong_bar']:.3f}"
    assert cells[5] == f"{m['blank_max_deviation']:.3f}"


def test_folder_is_marked_small_and_vision_language():
    config = json.loads((DEMO_VL / "config.json").read_text())
    assert config.get("decider_demo") is True
    assert config["model_type"] == "qwen3_5" and "vision_config" in config
    assert {"linear_attention", "full_attention"} <= set(config["text_config"]["layer_types"])
    assert (DEMO_VL / "DEMO").is_file() and (DEMO_VL / "MODEL_CARD.md").is_file()
    assert (DEMO_VL / "preprocessor_config.json").is_file()
    assert sum(f.stat().st_size for f in DEMO_VL.rglob("*") if f.is_file()) <= 10_000_000


def test_the_cli_decides_from_an_image_file(tmp_path, capsys):
    from PIL import Image

    from decider.app.cli import main

    item = tasks.heldout_items(TEST_SEED + 3, {"colour": 1})[0]
    path = tmp_path / "scene.png"
    Image.fromarray(item.image()).save(path)
    args = ["ask", "--model", str(DEMO_VL), "--image", str(path), item.question, "--json", "--temperature", "0"]
    for option in item.options:
        args += ["--option", option]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert [o["text"] for o in out["options"]] == list(item.options)
    assert out["usage"]["image_tokens"] == 9  # a 96 × 96 scene: 3 × 3 merged tokens
    probs = np.array([o["probability"] for o in out["options"]])
    assert int(np.argmax(probs)) == item.answer


# Pictures of something else, written words, lit and coloured doorways (issue 39 item 5): the fresh draw of
# tools/train_demo_vl.py's NEW_SEEDS / NEW_COUNTS (never looked at while choosing the model), so the card's
# "fresh" row is these numbers.
FRESH_SEED = 8_2042
NEW_COUNTS = {"irrelevant_per_case": 24, "word_per_task": 48, "lit_doors": 80}
# Measured on the fresh draw of 288 + 144 + 80 pictures (r9f, 2026-12-07): irrelevant largest |bar - 1/n| 0.376
# (10 pictures beyond 0.15; r9a on the same pictures 0.523, 11 beyond), bound +0.05 (the issue's target, 0.15, is not
# met on a fresh draw: see the model card); words 95.8 % (138/144; r9a 91.7 %), bound one more wrong (0.951); lit doors
# 87.5 % (70/80; r9a 90.0 %), bound one more wrong (0.8625). r7f fails all three (0.586, 80.6 %, 60.0 % on the earlier
# 72 + 72 + 40).
IRRELEVANT_BOUND = 0.43
WORDS_BOUND = 0.95
LIT_DOORS_BOUND = 0.86


@pytest.fixture(scope="module")
def new_kinds(runner):
    import statistics

    irr = tasks.irrelevant_items(FRESH_SEED, NEW_COUNTS["irrelevant_per_case"])
    words = tasks.word_items(FRESH_SEED + 100, NEW_COUNTS["word_per_task"])
    doors = tasks.lit_door_items(FRESH_SEED + 200, NEW_COUNTS["lit_doors"])
    dev = [max(abs(p - 1 / len(ps)) for p in ps) for ps in (_bars(runner, it) for it in irr)]
    out = {"irrelevant_max": max(dev), "irrelevant_median": statistics.median(dev)}
    for name, items in (("words", words), ("lit_doors", doors)):
        probs = [_bars(runner, it) for it in items]
        out[name] = demo_tasks.metrics(items, probs)["accuracy"]
        wrong = [max(p) for it, p in zip(items, probs) if demo_tasks.argmax(p) != it.answer]
        out[name + "_wrong_bar"] = max(wrong, default=0.0)
        if name == "words":
            written = [{w["text"].lower() for w in it.scene["words"]} for it in items]
            out["word_won"] = sum(it.options[demo_tasks.argmax(p)].lower() in w for it, p, w in zip(items, probs, written)) / len(items)
    print("\nseeing demo model, issue 39 item 5 (fresh draw):", json.dumps(out, indent=1))
    return (irr, words, doors), out


def test_new_held_out_values_are_values_training_never_saw(new_kinds):
    (irr, words, doors), _ = new_kinds
    train, held = tasks.STYLE_VALUES["train"], tasks.STYLE_VALUES["heldout"]
    for axis in ("face_shape", "face_features", "font", "shapes", "texture", "doorway", "paint"):
        assert not set(held[axis]) & set(train[axis]), axis
    assert set(held["words"]) - set(tasks.TASK_WORDS) and not (set(held["words"]) & set(train["words"])) - set(tasks.TASK_WORDS)
    seen = set()
    for item in irr:
        junk, scene = item.scene["junk"], item.scene
        seen.add(junk["kind"])
        assert item.ambiguous and scene["doors"] == 0 and not scene.get("colour") and not scene.get("side")
        for face in junk.get("faces", ()):
            assert face["shape"] in held["face_shape"] and face["features"] in held["face_features"]
            assert scene["task"] != "colour" or tuple(face["rgb"]) != tasks.SMILEY_YELLOW
        for shape in junk.get("shapes", ()):
            assert shape["shape"] in held["shapes"]
        for word in junk.get("words", ()):
            assert word["font"] in held["font"] and word["text"].upper() in held["words"]
        if junk["kind"] == "texture":
            assert junk["texture"] in held["texture"]
    assert seen == set(tasks.JUNK_KINDS)
    for item in words:
        (word,) = item.scene["words"]
        assert word["font"] in held["font"] and word["text"].lower() != item.options[item.answer].lower()
    for item in doors:
        assert item.scene["doorway"]["name"] in held["doorway"] and item.scene.get("paint", "mustard") in held["paint"]
    assert any("paint" in item.scene for item in doors) and any("paint" not in item.scene for item in doors)


def test_pictures_of_something_else_give_even_bars(new_kinds):
    """A face, words, shapes or a texture asked about a circle, a star or a door: nothing to tell, no bar stands out."""
    _, m = new_kinds
    assert m["irrelevant_max"] <= IRRELEVANT_BOUND  # see the bounds below


def test_written_words_do_not_override_the_drawing(new_kinds):
    _, m = new_kinds
    assert m["words"] >= WORDS_BOUND and m["word_won"] <= 1 - WORDS_BOUND


def test_lit_and_coloured_doorways_count_as_open(new_kinds):
    _, m = new_kinds
    assert m["lit_doors"] >= LIT_DOORS_BOUND


def test_the_model_card_states_the_fresh_draw(new_kinds):
    _, m = new_kinds
    card = (DEMO_VL / "MODEL_CARD.md").read_text()
    row = next(line for line in card.splitlines() if line.startswith(f"| fresh (seed {FRESH_SEED}) |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == f"{m['irrelevant_max']:.3f} ({m['irrelevant_median']:.3f})"
    assert cells[3] == f"{m['words'] * 100:.1f} % ({m['word_won'] * 100:.1f} %)"
    assert cells[5] == f"{m['lit_doors'] * 100:.1f} %"


def test_random_polygons_are_training_pictures_only_and_never_round():
    """extras["blobs"] (round eight): a share of the training pictures of something else's shapes drawn as random
    polygons, each with a corner folded in (never a disc, which would answer the colour question); held-out pictures
    keep their own shapes, and without the extra the draws are the ones made before."""
    import random

    blobs = []
    for split in ("train", "heldout"):
        rng = random.Random(7)
        for _ in range(300):
            item = tasks.make_styled_item(rng, "colour_junk", split, extras={"blobs": 1.0})
            for shape in item.scene["junk"].get("shapes", ()):
                assert (shape["shape"] == "blob") == (split == "train")
                if split == "train":
                    blobs.append(shape)
    assert len(blobs) > 100
    assert {len(s["radii"]) for s in blobs} == set(tasks.BLOB_VERTICES)
    assert all(min(s["radii"]) <= tasks.BLOB_FOLD and max(s["radii"]) <= 1.0 for s in blobs)
    a, b = random.Random(3), random.Random(3)
    assert tasks.make_styled_item(a, "colour_junk", "train").scene == tasks.make_styled_item(b, "colour_junk", "train", extras={}).scene
