"""The seeing demo model's tasks: synthetic scenes (numpy + Pillow), questions, a held-out split, metrics.

Shared by tools/train_demo_vl.py (training data) and tests/test_demo_vl_model.py (held-out items through the
real engine). No torch.

Every item is a question, 2-4 options in shuffled order, a target distribution over the options and a scene
(a small dict of drawing parameters; `render(scene)` makes the 96×96 RGB picture):
  colour   "Which colour is the circle?"        one circle of red / green / blue / yellow; 2-4 colour options
  star     "Where is the star: left or right?"  one star in the left or the right half; options left, right
  door     "Which door is open?"                 2 or 3 doors in a row, one open; options left, (middle,) right
  *_none   the same questions over a scene without the answer (a blank picture, or doors all closed):
           target uniform over the options, so the bars say "no idea" when the picture does not tell.

Option words are shown as listed or with the first letter's case flipped ("red" / "Red"), independently.

Held-out split: a scene's coarse layout (task, option set, answer, object position and size cells, background
shade cell, ...) is hashed; layouts in the held-out bucket are never generated for training and are the only
ones generated for tests, so a test picture is never a layout the model trained on.
"""

from __future__ import annotations

import math
import random
import zlib
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

# The item, casing, kind sampling, reshuffling and held-out drawing are the text demo's (tools/demo_tasks.py).
import demo_tasks
from demo_tasks import _cased, flip_case, shuffled, variants  # noqa: F401  (flip_case, shuffled, variants: used as tasks.*)
from demo_tasks import heldout_items as _heldout_items
from demo_tasks import sample_kind as _sample_kind

SIZE = 96  # pictures are SIZE × SIZE: three 32-pixel image tokens a side at the model's patch 16 / merge 2

COLOURS = {  # name -> base RGB; each picture jitters it a little
    "red": (220, 40, 40),
    "green": (40, 190, 60),
    "blue": (50, 80, 230),
    "yellow": (235, 220, 40),
}
SIDES = ("left", "middle", "right")

QUESTIONS = {
    "colour": "Which colour is the circle?",
    "star": "Where is the star: left or right?",
    "door": "Which door is open?",
}
KINDS = ("colour", "star", "door", "colour_none", "star_none", "door_none")
UNAMBIGUOUS = ("colour", "star", "door")
TRAIN_MIX = {"colour": 0.3, "star": 0.2, "door": 0.3, "colour_none": 0.07, "star_none": 0.06, "door_none": 0.07}
HELDOUT_BUCKETS = 10  # 1 in 10 layouts is held out
FLIP = 0.5


@dataclass(frozen=True)
class Item(demo_tasks.Item):
    """The text demo's item (question, options, target; ambiguous, answer) with a scene to draw."""

    scene: dict = field(compare=False, hash=False)
    unambiguous_kinds: ClassVar[tuple[str, ...]] = UNAMBIGUOUS

    def image(self) -> np.ndarray:
        return render(self.scene)


def vocabulary() -> list[str]:
    """Every option word (as listed; flip_case gives the other casing)."""
    return list(COLOURS) + list(SIDES)


# ----- drawing -----------------------------------------------------------------------------------------------------

def _jitter(rng: random.Random, rgb, amount: int) -> tuple[int, int, int]:
    return tuple(int(min(255, max(0, c + rng.randint(-amount, amount)))) for c in rgb)


def _background(rng: random.Random) -> tuple[int, int, int]:
    """A grey of any shade with a faint tint: never close to one of the four colours."""
    level = rng.randint(20, 235)
    return _jitter(rng, (level, level, level), 12)


def _star_points(cx: float, cy: float, r: float, rotation: float) -> list[tuple[float, float]]:
    points = []
    for k in range(10):
        radius = r if k % 2 == 0 else r * 0.42
        angle = rotation + k * math.pi / 5 - math.pi / 2
        points.append((cx + radius * math.cos(angle), cy + radius * math.sin(angle)))
    return points


def _contrast(rng: random.Random, background) -> tuple[int, int, int]:
    """An object colour that stands out from the background (dark on light, light on dark), not one of COLOURS."""
    level = 235 if sum(background) / 3 < 128 else 25
    return _jitter(rng, (level, level, level - 10), 15)


def render(scene: dict) -> np.ndarray:
    """The scene's picture: [SIZE, SIZE, 3] uint8 RGB (a styled scene: its own size). Same scene → same pixels."""
    from PIL import Image, ImageDraw

    if scene.get("style"):
        return render_styled(scene)
    rng = random.Random(scene["seed"])
    image = Image.new("RGB", (SIZE, SIZE), tuple(scene["background"]))
    draw = ImageDraw.Draw(image)
    task = scene["task"]
    if task == "colour" and scene.get("colour"):
        cx, cy, r = scene["x"], scene["y"], scene["r"]
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=_jitter(rng, COLOURS[scene["colour"]], 25))
    elif task == "star" and scene.get("side"):
        draw.polygon(_star_points(scene["x"], scene["y"], scene["r"], scene["rotation"]), fill=tuple(scene["ink"]))
    elif task == "door":
        n = scene["doors"]
        width = SIZE // n
        for i in range(n):
            left = i * width + scene["margin"]
            right = (i + 1) * width - scene["margin"]
            top, bottom = scene["top"], SIZE - 6
            frame = tuple(scene["frame"])
            draw.rectangle((left - 2, top - 2, right + 2, bottom), fill=frame)
            if i == scene["open"]:
                # The doorway is dark; the door leaf swung open shows as a narrow panel at the hinge side.
                draw.rectangle((left, top, right, bottom), fill=(10, 10, 14))
                leaf = max(3, (right - left) // 4)
                draw.polygon([(left, top), (left + leaf, top + 5), (left + leaf, bottom - 3), (left, bottom)], fill=tuple(scene["wood"]))
            else:
                draw.rectangle((left, top, right, bottom), fill=tuple(scene["wood"]))
                knob_x = right - max(3, (right - left) // 5)
                knob_y = (top + bottom) // 2
                draw.ellipse((knob_x - 2, knob_y - 2, knob_x + 2, knob_y + 2), fill=(230, 200, 60))
    pixels = np.asarray(image, dtype=np.uint8).copy()
    if scene.get("noise"):
        noise = np.random.default_rng(scene["seed"]).integers(-scene["noise"], scene["noise"] + 1, pixels.shape)
        pixels = np.clip(pixels.astype(np.int16) + noise, 0, 255).astype(np.uint8)
    return pixels


# ----- scenes and items --------------------------------------------------------------------------------------------

def _cell(value: float, cells: int) -> int:
    return min(cells - 1, int(value * cells / SIZE))


def _doors(rng: random.Random, n: int, none: bool):
    """(door count, options, open door's index, answer, wood colour): 3 doors for 3 or more options, else 2."""
    doors = 3 if n >= 3 else 2
    options = ["left", "middle", "right"] if doors == 3 else ["left", "right"]
    opened = None if none else rng.randrange(doors)
    answer = None if none else options[opened]
    wood = _jitter(rng, rng.choice(((140, 90, 40), (110, 70, 35), (170, 120, 60), (90, 100, 120))), 20)
    return doors, options, opened, answer, wood


def _scene(rng: random.Random, kind: str, n: int):
    """(scene, options as listed, answer word or None, layout key)."""
    task = kind.removesuffix("_none")
    none = kind.endswith("_none")
    background = _background(rng)
    scene = {"task": task, "seed": rng.randrange(2**31), "background": background, "noise": rng.choice((0, 0, 4, 8))}
    shade = _cell(sum(background) / 3 * SIZE / 256, 4)
    if task == "colour":
        options = rng.sample(sorted(COLOURS), n)
        answer = None if none else rng.choice(options)
        r = rng.randint(9, 22)
        x, y = rng.randint(r + 2, SIZE - r - 2), rng.randint(r + 2, SIZE - r - 2)
        scene.update(colour=answer, x=x, y=y, r=r)
        key = (kind, tuple(sorted(options)), answer, _cell(x, 3), _cell(y, 3), r // 8, shade)
    elif task == "star":
        options = ["left", "right"]
        side = None if none else rng.choice(options)
        r = rng.randint(8, 18)
        lo, hi = (r + 2, SIZE // 2 - r // 2) if side == "left" else (SIZE // 2 + r // 2, SIZE - r - 2)
        x, y = rng.randint(lo, hi), rng.randint(r + 2, SIZE - r - 2)
        scene.update(side=side, x=x, y=y, r=r, rotation=rng.uniform(0, 2 * math.pi / 5), ink=_contrast(rng, background))
        answer = side
        key = (kind, side, _cell(x, 4), _cell(y, 3), r // 6, shade)
    else:
        doors, options, opened, answer, wood = _doors(rng, n, none)
        scene.update(doors=doors, open=opened, margin=rng.randint(4, 8), top=rng.randint(10, 40), wood=wood,
                     frame=_contrast(rng, background))
        key = (kind, doors, opened, scene["margin"] // 3, scene["top"] // 10, shade)
    scene["layout"] = key  # not drawn: what the held-out split hashes
    return scene, options, answer, key


def is_heldout(key) -> bool:
    return zlib.crc32(repr(key).encode()) % HELDOUT_BUCKETS == 0


def make_item(rng: random.Random, kind: str, split: str = "train", flip: float = FLIP) -> Item:
    """One item of `kind`; split 'train' never yields a held-out layout, 'heldout' only yields those."""
    if split not in ("train", "heldout", "any"):
        raise ValueError(split)
    while True:
        n = rng.randint(2, 4)
        scene, options, answer, key = _scene(rng, kind, n)
        if split == "any" or is_heldout(key) == (split == "heldout"):
            break
    rng.shuffle(options)
    if answer is None:
        target = [1.0 / len(options)] * len(options)
    else:
        target = [1.0 if o == answer else 0.0 for o in options]
    return Item(kind, QUESTIONS[scene["task"]], tuple(_cased(rng, o, flip) for o in options), tuple(target), scene)


def sample_kind(rng: random.Random, mix: dict[str, float] = TRAIN_MIX) -> str:
    return _sample_kind(rng, mix)


def heldout_items(seed: int, counts: dict[str, int]) -> list[Item]:
    return _heldout_items(seed, counts, make_item)


def blank(colour=(128, 128, 128)) -> np.ndarray:
    """A picture with nothing in it."""
    return np.full((SIZE, SIZE, 3), colour, dtype=np.uint8)


# ----- other styles: sizes, aspect ratios, star shapes, door styles, backgrounds, distractors (issue 27 item 8) ----
#
# A styled scene is drawn at its own width × height (the engine's preprocess scales it into the pixel budget, as it
# does a user's picture). Each style axis has values for training and values kept for the held-out style set only,
# so a held-out picture is in a style the model never saw, not only a layout it never saw.

STYLE_VALUES = {
    # Training values sit on both sides of the held-out ones where an axis is ordered (aspect ratio, star points,
    # how far the door leaf swings out), so a held-out picture is between things the model saw, never one of them.
    "train": {
        # width / height, drawn log-uniform inside one of these ranges (the middle one listed twice: half the pictures)
        "aspect": ((1 / 2.15, 2.15), (1 / 2.15, 2.15), (1 / 4.5, 1 / 3.2), (3.2, 4.5)),
        "star_points": (4, 5, 7, 8),  # no 3: a three-point star is a triangle, and triangles are distractors
        "star_fill": ("filled", "outline"),
        "door_width": ("wide", "narrow"),
        "door_leaf": ("inside", "half", "none"),
        "frame": ((235, 235, 225), (25, 25, 15), (150, 40, 40), (50, 140, 60), (128, 128, 128), (130, 60, 160),
                  (200, 120, 40)),
        "background": ("grey", "tinted", "noise", "bands", "radial"),
    },
    "heldout": {
        "aspect": ((1 / 3, 1 / 2.2), (2.2, 3.0)),  # between the trained ranges
        "star_points": (6,),
        "star_fill": ("filled", "outline"),
        "door_width": ("narrow",),
        "door_leaf": ("outside",),
        "frame": ((40, 90, 150), (200, 200, 80)),
        "background": ("gradient",),
    },
}
# The issue's own cases: star pictures of 120×300 and 320×180, five-point stars, narrow doors whose leaf swings
# outside the frame.
ISSUE_SIZES = ((120, 300), (320, 180))
STYLE_KINDS = ("colour", "star", "door", "colour_none", "star_none", "door_none")


def _size(rng: random.Random, split: str) -> tuple[int, int]:
    """(width, height): 60 to 400 pixels a side at an aspect ratio of this split."""
    ranges = STYLE_VALUES[split]["aspect"]
    lo, hi = rng.choice(ranges) if isinstance(ranges[0], tuple) else ranges
    aspect = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    for _ in range(100):
        width = rng.randint(60, 400)
        height = round(width / aspect)
        if 60 <= height <= 400:
            return width, height
    return (400, round(400 / aspect)) if aspect >= 1 else (round(400 * aspect), 400)


def _styled_background(rng: random.Random, kind: str) -> dict:
    """A background far from the four circle colours: greys, muted tints, noise, or a two-grey gradient."""
    level = rng.randint(20, 235)
    if kind == "tinted":
        return {"kind": kind, "rgb": _jitter(rng, (level, level, level), 30)}
    if kind == "bands":  # 2-4 flat stripes of different greys (steps, never a smooth gradient), dark and light ones together
        levels = [min(235, max(20, level + rng.randint(-110, 110))) for _ in range(rng.randint(2, 4))]
        return {"kind": kind, "rgb": _jitter(rng, (level,) * 3, 8), "bands": [_jitter(rng, (v,) * 3, 8) for v in levels],
                "vertical": rng.random() < 0.5}
    if kind == "radial":  # one grey in the middle, another at the edges
        other = min(235, max(20, level + rng.choice((-1, 1)) * rng.randint(40, 140)))
        return {"kind": kind, "rgb": _jitter(rng, (level,) * 3, 8), "to": _jitter(rng, (other,) * 3, 8)}
    if kind == "gradient":
        other = min(235, max(20, level + rng.choice((-1, 1)) * rng.randint(60, 140)))
        return {"kind": kind, "rgb": _jitter(rng, (level,) * 3, 10), "to": _jitter(rng, (other,) * 3, 10),
                "vertical": rng.random() < 0.5}
    return {"kind": kind, "rgb": _jitter(rng, (level,) * 3, 8), "noise": 16 if kind == "noise" else 0}


def _draw_background(image, background: dict) -> None:
    from PIL import Image, ImageDraw

    draw = ImageDraw.Draw(image)
    width, height = image.size
    if background["kind"] == "bands":
        n = len(background["bands"])
        for i, rgb in enumerate(background["bands"]):
            if background["vertical"]:
                draw.rectangle((0, i * height // n, width, (i + 1) * height // n), fill=tuple(rgb))
            else:
                draw.rectangle((i * width // n, 0, (i + 1) * width // n, height), fill=tuple(rgb))
        return
    if background["kind"] == "radial":
        a, b = np.array(background["rgb"], float), np.array(background["to"], float)
        yy, xx = np.mgrid[0:height, 0:width]
        d = np.hypot((xx - width / 2) / (width / 2), (yy - height / 2) / (height / 2)) / math.sqrt(2)
        pixels = (a + (b - a) * d[..., None]).clip(0, 255).astype(np.uint8)
        image.paste(Image.fromarray(pixels, "RGB"))
        return
    if background["kind"] != "gradient":
        draw.rectangle((0, 0, width, height), fill=tuple(background["rgb"]))
        return
    a, b = np.array(background["rgb"], float), np.array(background["to"], float)
    steps = height if background["vertical"] else width
    for i in range(steps):
        rgb = tuple(int(v) for v in a + (b - a) * i / max(1, steps - 1))
        draw.line((0, i, width, i) if background["vertical"] else (i, 0, i, height), fill=rgb)


def _polygon_star(cx, cy, r, points: int, rotation: float, inner: float):
    out = []
    for k in range(2 * points):
        radius = r if k % 2 == 0 else r * inner
        angle = rotation + k * math.pi / points - math.pi / 2
        out.append((cx + radius * math.cos(angle), cy + radius * math.sin(angle)))
    return out


def _mean_level(background: dict) -> float:
    rgb = np.array(background["rgb"], float)
    if background["kind"] == "bands":
        rgb = np.mean([np.array(b, float) for b in background["bands"]], axis=0)
    if background["kind"] in ("gradient", "radial"):
        rgb = (rgb + np.array(background["to"], float)) / 2
    return float(rgb.mean())


def render_styled(scene: dict) -> np.ndarray:
    """A styled scene's picture: [height, width, 3] uint8 RGB. Same scene → same pixels."""
    from PIL import Image, ImageDraw

    rng = random.Random(scene["seed"])
    width, height = scene["width"], scene["height"]
    image = Image.new("RGB", (width, height))
    _draw_background(image, scene["background"])
    junk = scene.get("junk")
    if junk and junk["kind"] == "texture":
        image.paste(Image.fromarray(_texture(junk, width, height), "RGB"))
    draw = ImageDraw.Draw(image)
    if junk and junk["kind"] != "texture":
        _draw_junk(image, draw, junk)
    ink = tuple(scene["ink"])
    for shape, x, y, s in scene["distractors"]:  # small squares or triangles: never a circle, star or door
        box = (x - s, y - s, x + s, y + s)
        if shape == "square":
            draw.rectangle(box, fill=ink)
        else:
            draw.polygon([(x, y - s), (x + s, y + s), (x - s, y + s)], fill=ink)
    task = scene["task"]
    if task == "colour" and scene.get("colour"):
        cx, cy, r = scene["x"], scene["y"], scene["r"]
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=_jitter(rng, COLOURS[scene["colour"]], 25))
    elif task == "star" and scene.get("side"):
        points = _polygon_star(scene["x"], scene["y"], scene["r"], scene["points"], scene["rotation"], scene["inner"])
        if scene["fill"] == "filled":
            draw.polygon(points, fill=ink)
        else:
            draw.line(points + points[:1], fill=ink, width=max(2, int(scene["r"] / 6)))
    elif task == "door":
        _draw_doors(draw, scene, width, height)
    for word in scene.get("words", ()):
        _draw_word(image, word)
    pixels = np.asarray(image, dtype=np.uint8).copy()
    if scene["background"].get("noise"):
        amount = scene["background"]["noise"]
        noise = np.random.default_rng(scene["seed"]).integers(-amount, amount + 1, pixels.shape)
        pixels = np.clip(pixels.astype(np.int16) + noise, 0, 255).astype(np.uint8)
    return pixels


def _draw_doors(draw, scene: dict, width: int, height: int) -> None:
    n = scene["doors"]
    if not n:
        return
    slot = width / n
    door_w = slot * (0.38 if scene["door_width"] == "narrow" else 0.72)
    top, bottom = int(height * scene["top"]), height - max(3, height // 16)
    frame, wood = tuple(scene["frame"]), tuple(scene["wood"])
    edge = max(2, int(door_w / 12))
    for i in range(n):
        cx = slot * (i + 0.5)
        left, right = int(cx - door_w / 2), int(cx + door_w / 2)
        draw.rectangle((left - edge, top - edge, right + edge, bottom), fill=frame)
        if i == scene["open"]:
            _draw_doorway(draw, scene.get("doorway"), (left, top, right, bottom))
            leaf = max(3, (right - left) // 3)
            if scene["door_leaf"] == "inside":
                draw.polygon([(left, top), (left + leaf, top + edge * 2), (left + leaf, bottom - edge), (left, bottom)], fill=wood)
            elif scene["door_leaf"] == "half":  # seen edge-on: a thin leaf across the frame's hinge side
                half = max(2, leaf // 3)
                draw.polygon([(left + half, top), (left - half - edge, top - edge), (left - half - edge, bottom), (left + half, bottom)], fill=wood)
            elif scene["door_leaf"] == "none":  # the leaf out of sight: only the dark doorway says it is open
                pass
            else:  # swung towards the viewer: the leaf sticks out past the frame on the hinge side
                hinge = left - edge
                draw.polygon([(hinge, top), (hinge - leaf, top - edge), (hinge - leaf, bottom + edge), (hinge, bottom)], fill=wood)
        else:
            draw.rectangle((left, top, right, bottom), fill=wood)
            knob = max(2, int(door_w / 14))
            kx, ky = right - max(3, (right - left) // 5), (top + bottom) // 2
            draw.ellipse((kx - knob, ky - knob, kx + knob, ky + knob), fill=(230, 200, 60))


def _styled_scene(rng: random.Random, kind: str, split: str, n: int, size=None, junk_colour: float | None = None,
                  blobs: float | None = None, **fixed):
    """(scene, options, answer) in styles of `split` ('train' or 'heldout'); `fixed` pins style values; `junk_colour`:
    the share of a picture of something else's shapes and words drawn in one of the four circle colours; `blobs`: the
    share of its shapes drawn as a random polygon (training only, see BLOB_VERTICES)."""
    values = STYLE_VALUES[split]
    pick = lambda axis: fixed[axis] if axis in fixed else rng.choice(values[axis])  # noqa: E731
    task = kind.removesuffix("_none").removesuffix("_junk")
    none = kind.endswith(("_none", "_junk"))
    width, height = size or _size(rng, split)
    background = _styled_background(rng, pick("background"))
    level = _mean_level(background)
    ink = _jitter(rng, (235, 235, 225) if level < 128 else (25, 25, 15), 15)
    scene = {"style": split, "task": task, "seed": rng.randrange(2**31), "width": width, "height": height,
             "background": background, "ink": ink, "distractors": []}
    short = min(width, height)
    if task != "door":
        for _ in range(rng.choice((0, 0, 1, 2))):
            s = max(3, int(short * rng.uniform(0.04, 0.08)))
            scene["distractors"].append((rng.choice(("square", "triangle")), rng.randint(s, width - s), rng.randint(s, height - s), s))
    if task == "colour":
        options = rng.sample(sorted(COLOURS), n)
        answer = None if none else rng.choice(options)
        r = max(5, int(short * rng.uniform(0.1, 0.25)))
        scene.update(colour=answer, r=r, x=rng.randint(r + 1, width - r - 1), y=rng.randint(r + 1, height - r - 1))
    elif task == "star":
        options = ["left", "right"]
        answer = None if none else rng.choice(options)
        r = max(6, int(short * rng.uniform(0.1, 0.22)))
        margin = max(r // 2, int(width * 0.04))
        lo, hi = (r + 1, width // 2 - margin) if answer == "left" else (width // 2 + margin, width - r - 1)
        if hi < lo:
            lo = hi
        scene.update(side=answer, r=r, x=rng.randint(lo, hi), y=rng.randint(r + 1, height - r - 1),
                     points=pick("star_points"), fill=pick("star_fill"), inner=rng.uniform(0.38, 0.5),
                     rotation=rng.uniform(-0.15, 0.15))
    else:
        doors, options, opened, answer, wood = _doors(rng, n, none)
        scene.update(doors=doors, open=opened, top=rng.uniform(0.1, 0.4), wood=wood, frame=_jitter(rng, pick("frame"), 10),
                     door_width=pick("door_width"), door_leaf=pick("door_leaf"))
        if none and split == "train" and rng.random() < 0.5:
            scene["doors"] = 0  # no door at all, as on a blank picture: nothing to see, even bars
    if kind.endswith("_junk"):  # a picture of something else: a face, words, shapes or a texture (issue 39 item 5)
        scene["doors"] = 0
        scene["junk"] = _junk(rng, split, task, width, height, pick, junk_colour, blobs if split == "train" else None)
    return scene, options, answer


def make_styled_item(rng: random.Random, kind: str, split: str = "train", flip: float = FLIP, size=None, extras=None,
                     **fixed) -> Item:
    """One item of `kind` drawn in the styles of `split`: 'train' (what training may see) or 'heldout' (never).
    `extras` (probabilities, see EXTRAS): written words, lit or coloured doorways, painted doors; without it the
    random draws are the ones items drawn before issue 39 made."""
    if split not in STYLE_VALUES:
        raise ValueError(split)
    scene, options, answer = _styled_scene(rng, kind, split, rng.randint(2, 4), size, (extras or {}).get("junk_colour"),
                                           (extras or {}).get("blobs"), **fixed)
    if extras:
        _add_extras(rng, scene, split, answer, options, extras, fixed)
    rng.shuffle(options)
    target = [1.0 / len(options)] * len(options) if answer is None else [1.0 if o == answer else 0.0 for o in options]
    return Item(kind, QUESTIONS[scene["task"]], tuple(_cased(rng, o, flip) for o in options), tuple(target), scene)


def heldout_style_items(seed: int, counts: dict[str, int]) -> list[Item]:
    """Scenes every one of whose style choices training never saw (aspect ratio, star points, door leaf and
    frame, gradient background)."""
    rng = random.Random(seed)
    return [make_styled_item(rng, kind, "heldout") for kind, count in counts.items() for _ in range(count)]


def issue_case_items(seed: int, per_case: int) -> list[Item]:
    """The issue's failing cases: five-point stars (filled and outlined) on 120×300 and 320×180 pictures, narrow
    doors with the leaf swung outside the frame, circles at those sizes; training-style backgrounds."""
    rng = random.Random(seed)
    items = []
    for size in ISSUE_SIZES:
        for _ in range(per_case):
            items.append(make_styled_item(rng, "star", "train", size=size, star_points=5, background="grey"))
            items.append(make_styled_item(rng, "colour", "train", size=size, background="grey"))
            items.append(make_styled_item(rng, "door", "train", size=size, door_width="narrow", door_leaf="outside", background="grey"))
    return items


def styled_blank(scene: dict) -> np.ndarray:
    """The scene's background alone at the scene's size: nothing to see."""
    return render_styled({**scene, "task": "blank", "distractors": []})


# ----- pictures of something else, written words, lit and coloured doorways (issue 39 item 5) ---------------------
#
# "Irrelevant" pictures (kinds colour_junk, star_junk, door_junk): a face, written words, shapes that are neither a
# circle of the four colours nor a star nor a door, or a photograph-like texture, asked one of the three
# questions: nothing in them answers it, so the target is even. Word distractors: LEFT / RIGHT / MIDDLE or a colour
# name written on an answerable picture, naming a wrong option (the star's other side, a closed door, another
# colour): the drawing's answer stays the target. Doorways lit (warm white, a glow) or coloured, doors painted:
# the open door is still the open door. Every axis has training values and held-out values, as above.

JUNK_KINDS = ("face", "text", "shapes", "texture")
TASK_WORDS = ("LEFT", "RIGHT", "MIDDLE", "RED", "GREEN", "BLUE", "YELLOW", "STAR", "DOOR", "OPEN", "CIRCLE")
# Colours of shapes, words and faces that are not one of the four circle colours (and not near one).
OTHER_COLOURS = ((130, 60, 160), (120, 80, 40), (230, 130, 180), (40, 150, 150), (128, 128, 128), (235, 235, 225),
                 (25, 25, 15))
SKIN = ((241, 204, 170), (224, 172, 105), (198, 134, 66), (141, 85, 36), (90, 60, 40))
SMILEY_YELLOW = (240, 205, 50)  # the classic smiley: a yellow disc, so never asked "Which colour is the circle?"
TEXTURE_PALETTE = ((194, 178, 128), (110, 85, 60), (100, 110, 60), (150, 170, 190), (90, 100, 110), (160, 155, 150),
                   (150, 90, 60), (110, 90, 130), (70, 120, 120))
DOORWAYS = {  # what an open doorway shows: dark (as before), light, or a coloured room or sky
    "dark": (10, 10, 14), "lit": (250, 240, 200), "sky": (120, 180, 240), "grass": (90, 170, 80), "red": (200, 60, 50),
    "purple": (140, 80, 180), "orange": (240, 150, 60), "white": (240, 240, 240),
    "dusk": (240, 150, 90), "dawn": (250, 250, 220),  # gradients: this colour at the floor, DOORWAY_TOPS' at the top
    "glow": (255, 235, 150), "teal": (60, 170, 170), "pink": (240, 140, 190),
}
DOORWAY_TOPS = {"dusk": (40, 50, 110), "dawn": (150, 200, 240), "glow": (200, 140, 60)}
PAINTS = {"red": (170, 40, 40), "green": (40, 120, 60), "white": (230, 230, 225), "blue": (50, 70, 160),
          "black": (35, 35, 35), "mustard": (200, 160, 40), "plum": (100, 60, 120)}
STYLE_VALUES["train"].update(
    # Shapes and words weighted up: faces and textures were learnt at once (r8a); coloured shapes asked the colour
    # question and words asked the star question were the last pictures of something else to stay off even (r8c).
    junk=("face", "text", "text", "shapes", "shapes", "shapes", "texture"),
    # r10: more faces and lettering that are still none of the held-out ones (the fresh draws' strays were faces and
    # words in held-out styles: more variety to generalise from, not the held-out values themselves).
    face_shape=("round", "square", "wide"),
    face_features=("dots", "lines", "glasses", "wink"),
    font=("pixel", "smooth", "slant", "tall"),
    words=TASK_WORDS + ("HELLO", "EXIT", "GAME", "SCORE", "LEVEL", "PLAY", "STOP", "MENU"),
    shapes=("square", "triangle", "bar", "diamond", "ellipse", "ell", "pentagon", "cross", "parallelogram", "kite", "tee"),
    texture=("cloudy", "blobs", "grain", "speckle", "patches"),
    doorway=("dark", "lit", "sky", "grass", "red", "purple", "orange", "white", "dusk", "dawn"),
    paint=("red", "green", "white", "blue", "black"),
)
STYLE_VALUES["heldout"].update(
    junk=JUNK_KINDS,
    face_shape=("oval",),
    face_features=("full",),  # eyes with pupils, brows, a nose, an open mouth, hair
    font=("bold",),
    words=TASK_WORDS + ("START", "QUIT", "PAUSE", "SHOP", "BOSS", "LOOT"),
    shapes=("arrow", "trapezoid", "chevron"),
    texture=("fractal", "marble"),
    doorway=("glow", "teal", "pink"),
    paint=("mustard", "plum"),
)
# What training draws besides the base scene: words on 45 % of the styled pictures, a lit or coloured doorway on half
# the door scenes, painted doors on 40 %. A run's extras may also set "junk_colour": the share of the shapes and words
# of pictures of something else drawn in a circle colour (COLOURED_SHAPES and TEXT_IN_CIRCLE_COLOURS otherwise), and
# "blobs": the share of their shapes drawn as random polygons (training pictures only; BLOB_VERTICES).
EXTRAS = {"words": 0.45, "doorway": 0.5, "paint": 0.4}
COLOURED_SHAPES = 0.5  # share of the (non-ellipse) shapes drawn in one of the four circle colours
TEXT_IN_CIRCLE_COLOURS = 0.25  # share of the words of a picture of words drawn in one of them
JUNK_MIX = {"colour_junk": 0.1, "star_junk": 0.1, "door_junk": 0.1}


def _muted(rng: random.Random, rgb, amount: int = 20):
    return _jitter(rng, rgb, amount)


def _junk(rng: random.Random, split: str, task: str, width: int, height: int, pick, coloured: float | None = None,
          blobs: float | None = None) -> dict:
    """The drawing parameters of a picture of something else (see JUNK_KINDS); `coloured`: the share of its shapes
    and words in a circle colour (default COLOURED_SHAPES and TEXT_IN_CIRCLE_COLOURS); `blobs`: the share of its
    shapes drawn as a random polygon (none by default: the draws stay the ones made before)."""
    kind = pick("junk")
    short = min(width, height)
    junk = {"kind": kind}
    if kind == "face":
        faces = []
        for _ in range(rng.choice((1, 1, 2))):
            r = max(8, int(short * rng.uniform(0.15, 0.4)))
            colours = SKIN + ((SMILEY_YELLOW,) if task != "colour" else ())
            faces.append({"x": rng.randint(r, max(r, width - r)), "y": rng.randint(r, max(r, height - r)), "r": r,
                          "shape": pick("face_shape"), "features": pick("face_features"),
                          "rgb": _jitter(rng, rng.choice(colours), 12), "smile": rng.choice((True, True, False))})
        junk["faces"] = faces
    elif kind == "text":
        junk["words"] = [_word(rng, rng.choice(TASK_WORDS) if rng.random() < 0.5 else pick("words"), pick("font"), width, height,
                               _text_colour(rng, TEXT_IN_CIRCLE_COLOURS if coloured is None else coloured))
                         for _ in range(rng.randint(1, 4))]
    elif kind == "shapes":
        shapes = []
        for _ in range(rng.randint(2, 6)):
            shape = "blob" if blobs and rng.random() < blobs else pick("shapes")
            # A square may be red; only a circle would answer.
            in_colour = shape != "ellipse" and rng.random() < (COLOURED_SHAPES if coloured is None else coloured)
            rgb = rng.choice(list(COLOURS.values())) if in_colour else rng.choice(OTHER_COLOURS)
            s = max(4, int(short * rng.uniform(0.06, 0.18)))
            shapes.append({"shape": shape, "x": rng.randint(0, width), "y": rng.randint(0, height), "s": s,
                           "angle": rng.uniform(0, 2 * math.pi), "rgb": _jitter(rng, rgb, 15), "aspect": rng.uniform(0.3, 0.5)})
            if shape == "blob":  # as large as the circles (r 0.1-0.25 of the short side): a big chevron strayed
                shapes[-1].update(radii=_blob_radii(rng), s=max(6, int(short * rng.uniform(0.12, 0.32))))
        junk["shapes"] = shapes
    else:
        junk.update(texture=pick("texture"), seed=rng.randrange(2**31),
                    colours=[_muted(rng, rng.choice(TEXTURE_PALETTE)) for _ in range(3)], scale=rng.uniform(0.5, 2.0))
    return junk


# A random polygon (round seven's strays were held-out shapes in a circle colour: a folded chevron read as a disc):
# BLOB_VERTICES corners at even angles, each at its own distance from the centre, some folded far in, so training
# sees shapes of every outline rather than a list of eleven. Never near round: at least one corner folds in to
# under BLOB_FOLD of the radius (a circle would answer the colour question).
BLOB_VERTICES = (3, 4, 5, 6, 7, 8)
BLOB_FOLD = 0.45


def _blob_radii(rng: random.Random) -> list[float]:
    radii = [rng.uniform(0.3, 1.0) for _ in range(rng.choice(BLOB_VERTICES))]
    radii[rng.randrange(len(radii))] = rng.uniform(0.1, BLOB_FOLD)
    return radii


def _text_colour(rng: random.Random, in_circle_colours: float):
    r = rng.random()
    if r < in_circle_colours:
        return _jitter(rng, rng.choice(list(COLOURS.values())), 15)  # "RED" in red is words, not a circle
    return _jitter(rng, rng.choice(OTHER_COLOURS), 15)


def _font(font: str, size: int):
    from PIL import ImageFont

    if font == "pixel":
        return ImageFont.load_default_imagefont()
    return _freetype(size)


_FONTS: dict = {}


def _freetype(size: int):
    from PIL import ImageFont

    if size not in _FONTS:
        _FONTS[size] = ImageFont.load_default(size)
    return _FONTS[size]


def _word_size(text: str, font: str, size: int) -> tuple[int, int]:
    """(width, height) of a word drawn `size` pixels high in `font`."""
    if font == "pixel":
        left, top, right, bottom = _font(font, size).getbbox(text)
        k = max(1, round(size / 11))
        return (right - left) * k, (bottom - top) * k
    if font in _WARPED:
        w, h = _word_size(text, "smooth", _WARPED[font][0](size))
        return _WARPED[font][1](w, h)
    left, top, right, bottom = _freetype(size).getbbox(text, stroke_width=max(1, size // 10) if font == "bold" else 0)
    return right - left, bottom - top


# Training-only lettering drawn from the plain FreeType font: (the size it is drawn at, its drawn (width, height)).
# "slant": sheared a third of its height to the right; "tall": drawn at two thirds of the size, stretched 1.5x high.
_WARPED = {
    "slant": (lambda size: size, lambda w, h: (w + h // 3, h)),
    "tall": (lambda size: max(8, size * 2 // 3), lambda w, h: (w, h * 3 // 2)),
}


def _word(rng: random.Random, text: str, font: str, width: int, height: int, rgb, region=None) -> dict:
    """A written word somewhere in `region` (x0, y0, x1, y1; the whole picture by default), shrunk to fit."""
    text = rng.choice((text, text, text.title(), text.lower())) if text.isupper() else text
    x0, y0, x1, y1 = region or (0, 0, width, height)
    size = max(8, int(min(width, height) * rng.uniform(0.1, 0.22)))
    while size > 8 and _word_size(text, font, size)[0] > max(8, x1 - x0):
        size -= 2
    w, h = _word_size(text, font, size)
    return {"text": text, "font": font, "size": size, "rgb": rgb,
            "x": rng.randint(x0, max(x0, x1 - w)), "y": rng.randint(y0, max(y0, y1 - h))}


def _text_mask(f, text: str):
    """The word's coverage (an "L" image cut to its ink) in font `f`: scaled or warped before it is painted."""
    from PIL import Image, ImageDraw

    left, top, right, bottom = f.getbbox(text)
    mask = Image.new("L", (right - left, bottom - top), 0)
    ImageDraw.Draw(mask).text((-left, -top), text, fill=255, font=f)
    return mask


def _draw_word(image, word: dict) -> None:
    from PIL import Image, ImageDraw

    font, size, text = word["font"], word["size"], word["text"]
    if font == "pixel" or font in _WARPED:
        if font == "pixel":  # the bitmap font, scaled up with square pixels
            mask = _text_mask(_font(font, size), text)
            k = max(1, round(size / 11))
            mask = mask.resize((mask.width * k, mask.height * k), Image.NEAREST)
        else:
            mask = _text_mask(_freetype(_WARPED[font][0](size)), text)
            w, h = _WARPED[font][1](mask.width, mask.height)
            if font == "slant":  # x_src = x - (h - y) / 3
                mask = mask.transform((w, h), Image.AFFINE, (1, 1 / 3, -h / 3, 0, 1, 0), Image.BILINEAR)
            else:
                mask = mask.resize((w, h), Image.BILINEAR)
        image.paste(Image.new("RGB", mask.size, tuple(word["rgb"])), (word["x"], word["y"]), mask)
        return
    f = _freetype(size)
    stroke = max(1, size // 10) if font == "bold" else 0
    left, top, _, _ = f.getbbox(text, stroke_width=stroke)
    ImageDraw.Draw(image).text((word["x"] - left, word["y"] - top), text, fill=tuple(word["rgb"]), font=f,
                               stroke_width=stroke, stroke_fill=tuple(word["rgb"]))


def _rotated(points, cx, cy, angle):
    c, s = math.cos(angle), math.sin(angle)
    return [(cx + (x - cx) * c - (y - cy) * s, cy + (x - cx) * s + (y - cy) * c) for x, y in points]


def _shape_points(shape: dict):
    x, y, s, a = shape["x"], shape["y"], shape["s"], shape["aspect"]
    if shape["shape"] == "blob":
        n = len(shape["radii"])
        return _rotated([(x + s * r * math.cos(2 * math.pi * k / n), y + s * r * math.sin(2 * math.pi * k / n))
                         for k, r in enumerate(shape["radii"])], x, y, shape["angle"])
    outlines = {
        "square": [(x - s, y - s), (x + s, y - s), (x + s, y + s), (x - s, y + s)],
        "triangle": [(x, y - s), (x + s, y + s), (x - s, y + s)],
        "bar": [(x - 1.6 * s, y - a * s / 2), (x + 1.6 * s, y - a * s / 2), (x + 1.6 * s, y + a * s / 2), (x - 1.6 * s, y + a * s / 2)],
        "diamond": [(x, y - s), (x + 0.6 * s, y), (x, y + s), (x - 0.6 * s, y)],
        "ell": [(x - s, y - s), (x - s + a * s, y - s), (x - s + a * s, y + s - a * s), (x + s, y + s - a * s), (x + s, y + s), (x - s, y + s)],
        "pentagon": [(x + s * math.sin(2 * math.pi * k / 5), y - s * math.cos(2 * math.pi * k / 5)) for k in range(5)],
        "cross": [(x - a * s / 2, y - s), (x + a * s / 2, y - s), (x + a * s / 2, y - a * s / 2), (x + s, y - a * s / 2),
                  (x + s, y + a * s / 2), (x + a * s / 2, y + a * s / 2), (x + a * s / 2, y + s), (x - a * s / 2, y + s),
                  (x - a * s / 2, y + a * s / 2), (x - s, y + a * s / 2), (x - s, y - a * s / 2), (x - a * s / 2, y - a * s / 2)],
        "parallelogram": [(x - s, y + 0.5 * s), (x - 0.3 * s, y - 0.5 * s), (x + s, y - 0.5 * s), (x + 0.3 * s, y + 0.5 * s)],
        "kite": [(x, y - s), (x + 0.55 * s, y - 0.3 * s), (x, y + s), (x - 0.55 * s, y - 0.3 * s)],
        "tee": [(x - s, y - s), (x + s, y - s), (x + s, y - s + a * s), (x + a * s / 2, y - s + a * s), (x + a * s / 2, y + s),
                (x - a * s / 2, y + s), (x - a * s / 2, y - s + a * s), (x - s, y - s + a * s)],
        "arrow": [(x - s, y - a * s / 2), (x + 0.2 * s, y - a * s / 2), (x + 0.2 * s, y - s * 0.7), (x + s, y),
                  (x + 0.2 * s, y + s * 0.7), (x + 0.2 * s, y + a * s / 2), (x - s, y + a * s / 2)],
        "trapezoid": [(x - s, y + 0.6 * s), (x - 0.5 * s, y - 0.6 * s), (x + 0.5 * s, y - 0.6 * s), (x + s, y + 0.6 * s)],
        "chevron": [(x - s, y - s), (x, y - s + 2 * a * s), (x + s, y - s), (x + s, y - s + 1.2 * a * s + s * 0.4),
                    (x, y + s * 0.4 + a * s), (x - s, y - s + 1.2 * a * s + s * 0.4)],
    }
    return _rotated(outlines[shape["shape"]], x, y, shape["angle"])


def _draw_junk(image, draw, junk: dict) -> None:
    dark = (30, 25, 25)
    if junk["kind"] == "text":
        for word in junk["words"]:
            _draw_word(image, word)
    elif junk["kind"] == "shapes":
        for shape in junk["shapes"]:
            if shape["shape"] == "ellipse":  # never round: twice to three times as long as wide
                x, y, s, a = shape["x"], shape["y"], shape["s"], shape["aspect"]
                draw.ellipse((x - s, y - a * s, x + s, y + a * s), fill=tuple(shape["rgb"]))
            else:
                draw.polygon(_shape_points(shape), fill=tuple(shape["rgb"]))
    elif junk["kind"] == "face":
        for f in junk["faces"]:
            x, y, r, rgb = f["x"], f["y"], f["r"], tuple(f["rgb"])
            if f["shape"] == "round":
                draw.ellipse((x - r, y - r, x + r, y + r), fill=rgb, outline=dark, width=max(1, r // 12))
            elif f["shape"] == "square":
                draw.rounded_rectangle((x - r, y - r, x + r, y + r), radius=r // 3, fill=rgb, outline=dark, width=max(1, r // 12))
            elif f["shape"] == "wide":
                draw.ellipse((x - 1.2 * r, y - 0.85 * r, x + 1.2 * r, y + 0.85 * r), fill=rgb, outline=dark, width=max(1, r // 12))
            else:  # oval, with hair
                draw.ellipse((x - 0.75 * r, y - r, x + 0.75 * r, y + r), fill=rgb)
                draw.chord((x - 0.8 * r, y - 1.1 * r, x + 0.8 * r, y + 0.2 * r), 180, 360, fill=(60, 40, 25))
            e, w = r * 0.35, max(1, r // 10)
            if f["features"] == "dots":
                for ex in (x - e, x + e):
                    draw.ellipse((ex - w * 1.5, y - e - w * 1.5, ex + w * 1.5, y - e + w * 1.5), fill=dark)
            elif f["features"] == "lines":
                for ex in (x - e, x + e):
                    draw.line((ex - w * 2, y - e, ex + w * 2, y - e), fill=dark, width=w)
            elif f["features"] == "glasses":  # two rings and a bridge
                for ex in (x - e, x + e):
                    draw.ellipse((ex - w * 3, y - e - w * 3, ex + w * 3, y - e + w * 3), outline=dark, width=w)
                draw.line((x - e + w * 3, y - e, x + e - w * 3, y - e), fill=dark, width=w)
            elif f["features"] == "wink":  # one dot, one line
                draw.ellipse((x - e - w * 1.5, y - e - w * 1.5, x - e + w * 1.5, y - e + w * 1.5), fill=dark)
                draw.line((x + e - w * 2, y - e, x + e + w * 2, y - e), fill=dark, width=w)
            else:  # full: whites, pupils, brows, a nose, an open mouth
                for ex in (x - e, x + e):
                    draw.ellipse((ex - w * 3, y - e - w * 2, ex + w * 3, y - e + w * 2), fill=(245, 245, 240))
                    draw.ellipse((ex - w, y - e - w, ex + w, y - e + w), fill=dark)
                    draw.line((ex - w * 3, y - e - w * 4, ex + w * 3, y - e - w * 5), fill=dark, width=w)
                draw.line((x, y - w, x - w, y + e * 0.6), fill=dark, width=w)
                draw.ellipse((x - e * 0.6, y + e * 0.9, x + e * 0.6, y + e * 1.5), fill=(120, 30, 40))
                continue
            box = (x - e * 1.3, y - e * 0.2, x + e * 1.3, y + e * 1.5) if f["smile"] else (x - e * 1.3, y + e * 0.9, x + e * 1.3, y + e * 2.2)
            draw.arc(box, 20 if f["smile"] else 200, 160 if f["smile"] else 340, fill=dark, width=w)


def _texture(junk: dict, width: int, height: int) -> np.ndarray:
    """A photograph-like texture: smooth noise mapped between muted colours (cloudy, fractal), soft blobs on a
    gradient (blobs), noise-warped stripes (marble); training only (r10): streaks like wood grain (grain), fine
    noise over a coarse one (speckle), cloudy noise cut into three flat colours (patches)."""
    from PIL import Image, ImageDraw, ImageFilter

    rng = np.random.default_rng(junk["seed"])
    a, b, c = (np.array(rgb, float) for rgb in junk["colours"])

    def smooth(cells):
        grid = rng.random((max(2, int(cells * height / max(width, height))) + 1, max(2, int(cells * width / max(width, height))) + 1))
        return np.asarray(Image.fromarray((grid * 255).astype(np.uint8), "L").resize((width, height), Image.BICUBIC), float) / 255

    kind = junk["texture"]
    if kind == "cloudy":
        t = smooth(4 + 8 * junk["scale"])
    elif kind == "fractal":
        t = sum(smooth(3 * 2 ** k) / 2 ** k for k in range(4)) / 1.875
    elif kind == "marble":
        yy, xx = np.mgrid[0:height, 0:width]
        t = 0.5 + 0.5 * np.sin((xx + yy * 0.5) / (6 + 6 * junk["scale"]) + 6 * smooth(6))
    elif kind == "grain":  # many cells across, few along: streaks
        grid = rng.random((max(2, int(3 * junk["scale"])), max(8, int(24 * junk["scale"]))))
        t = np.asarray(Image.fromarray((grid * 255).astype(np.uint8), "L").resize((width, height), Image.BICUBIC), float) / 255
        t = t if junk["seed"] % 2 else np.asarray(Image.fromarray((t * 255).astype(np.uint8), "L").transpose(
            Image.Transpose.TRANSPOSE).resize((width, height), Image.BICUBIC), float) / 255
    elif kind == "speckle":
        t = 0.6 * smooth(3 + 3 * junk["scale"]) + 0.4 * rng.random((height, width))
    elif kind == "patches":
        t = np.digitize(smooth(3 + 5 * junk["scale"]), (0.4, 0.6)) / 2.0
    else:  # blobs
        t = np.tile(np.linspace(0, 1, width)[None, :], (height, 1))
    if kind == "patches":  # three flat colours, not a blend
        pixels = np.where(t[..., None] < 0.25, a, np.where(t[..., None] < 0.75, b, c))
    else:
        pixels = a + (b - a) * t[..., None]
    if kind == "blobs":
        image = Image.fromarray(pixels.clip(0, 255).astype(np.uint8), "RGB")
        layer = image.copy()
        draw = ImageDraw.Draw(layer)
        short = min(width, height)
        for _ in range(int(rng.integers(3, 9))):
            r = short * rng.uniform(0.08, 0.3)
            x, y = rng.uniform(0, width), rng.uniform(0, height)
            rgb = tuple(int(v) for v in (c + rng.uniform(-40, 40, 3)).clip(0, 255))
            draw.ellipse((x - r * rng.uniform(0.6, 1.4), y - r, x + r * rng.uniform(0.6, 1.4), y + r), fill=rgb)
        image = Image.blend(image, layer.filter(ImageFilter.GaussianBlur(short * 0.06)), 0.8)
        pixels = np.asarray(image, float)
    noise = rng.normal(0, 6, pixels.shape)
    return (pixels + noise).clip(0, 255).astype(np.uint8)


def _draw_doorway(draw, doorway, box) -> None:
    left, top, right, bottom = box
    if not doorway:
        draw.rectangle(box, fill=(10, 10, 14))
    elif doorway["kind"] == "gradient":  # e.g. bright at the floor, dimmer at the top: light from a room beyond
        a, b = np.array(doorway["rgb"], float), np.array(doorway["to"], float)
        for y in range(top, bottom + 1):
            f = (y - top) / max(1, bottom - top)
            draw.line((left, y, right, y), fill=tuple(int(v) for v in b + (a - b) * f))
    else:
        draw.rectangle(box, fill=tuple(doorway["rgb"]))


def _add_extras(rng: random.Random, scene: dict, split: str, answer, options, extras: dict, fixed: dict) -> None:
    """Words, doorway and paint (each with its probability in `extras`) on a drawn scene."""
    values = STYLE_VALUES[split]
    pick = lambda axis: fixed[axis] if axis in fixed else rng.choice(values[axis])  # noqa: E731
    task, width, height = scene["task"], scene["width"], scene["height"]
    if task == "door" and scene["doors"]:
        if rng.random() < extras.get("paint", 0):
            scene["paint"] = pick("paint")
            scene["wood"] = _jitter(rng, PAINTS[scene["paint"]], 12)
        if rng.random() < extras.get("doorway", 0):
            for _ in range(20):  # never the paint's own colour: the open door must differ from the closed ones
                name = pick("doorway")
                rgb = _jitter(rng, DOORWAYS[name], 12)
                top = _jitter(rng, DOORWAY_TOPS.get(name, DOORWAYS[name]), 12)
                if min(sum(abs(p - q) for p, q in zip(c, scene["wood"])) for c in (rgb, top)) > 120:
                    break
            scene["doorway"] = {"name": name, "kind": "gradient" if name in DOORWAY_TOPS else "flat", "rgb": rgb, "to": top}
    if rng.random() < extras.get("words", 0):
        scene["words"] = [_distractor_word(rng, scene, answer, options, pick("font"), width, height)]


def _distractor_word(rng: random.Random, scene: dict, answer, options, font: str, width: int, height: int) -> dict:
    """A word naming a wrong option where a reader might look for the answer: the star's other side (mostly written
    on that side), a closed door (above or on it), another colour (sometimes written in that colour)."""
    task, ink = scene["task"], tuple(scene["ink"])
    wrong = [o for o in options if o != answer]
    if task == "star":
        other = wrong[0] if answer else rng.choice(options)
        region = None
        if answer and rng.random() < 0.7:
            region = (0, 0, width // 2, height) if other == "left" else (width // 2, 0, width, height)
        word = _word(rng, other.upper(), font, width, height, ink, region)
        if answer:  # keep it off the star
            for _ in range(10):
                if not _overlaps(word, width, height, scene["x"], scene["y"], scene["r"]):
                    break
                word = _word(rng, other.upper(), font, width, height, ink, region)
        return word
    if task == "door" and scene["doors"]:
        sides = ["left", "middle", "right"] if scene["doors"] == 3 else ["left", "right"]
        closed = [i for i in range(scene["doors"]) if i != scene["open"]]
        i = rng.choice(closed)
        slot = width / scene["doors"]
        top = int(height * scene["top"])
        region = (int(slot * i), 0, int(slot * (i + 1)), max(top, int(height * 0.3)))
        return _word(rng, sides[i].upper(), font, width, height, ink, region)
    names = [c for c in COLOURS if c != answer]
    name = rng.choice(names)
    rgb = _jitter(rng, COLOURS[name], 15) if rng.random() < 0.5 else ink
    word = _word(rng, name.upper(), font, width, height, rgb)
    if task == "colour" and answer:
        for _ in range(10):
            if not _overlaps(word, width, height, scene["x"], scene["y"], scene["r"]):
                break
            word = _word(rng, name.upper(), font, width, height, rgb)
    return word


def _overlaps(word: dict, width: int, height: int, x: int, y: int, r: int) -> bool:
    w, h = _word_size(word["text"], word["font"], word["size"])
    return not (word["x"] + w < x - r or word["x"] > x + r or word["y"] + h < y - r or word["y"] > y + r)


def irrelevant_items(seed: int, per_case: int, split: str = "heldout") -> list[Item]:
    """Pictures of something else (each JUNK_KINDS kind) asked each of the three questions: target even."""
    rng = random.Random(seed)
    return [make_styled_item(rng, f"{task}_junk", split, junk=junk)
            for junk in JUNK_KINDS for task in ("colour", "star", "door") for _ in range(per_case)]


def word_items(seed: int, per_task: int, split: str = "heldout") -> list[Item]:
    """Answerable scenes with a word naming a wrong option written on them: the drawing's answer is the target."""
    rng = random.Random(seed)
    return [make_styled_item(rng, task, split, extras={"words": 1.0}) for task in ("colour", "star", "door") for _ in range(per_task)]


def lit_door_items(seed: int, count: int, split: str = "heldout") -> list[Item]:
    """Door scenes whose open doorway is lit or coloured (held out: a glow, teal, pink), doors painted half the time."""
    rng = random.Random(seed)
    return [make_styled_item(rng, "door", split, extras={"doorway": 1.0, "paint": 0.5}) for _ in range(count)]
