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
    draw = ImageDraw.Draw(image)
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
            draw.rectangle((left, top, right, bottom), fill=(10, 10, 14))
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


def _styled_scene(rng: random.Random, kind: str, split: str, n: int, size=None, **fixed):
    """(scene, options, answer) in styles of `split` ('train' or 'heldout'); `fixed` pins style values."""
    values = STYLE_VALUES[split]
    pick = lambda axis: fixed[axis] if axis in fixed else rng.choice(values[axis])  # noqa: E731
    task = kind.removesuffix("_none")
    none = kind.endswith("_none")
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
    return scene, options, answer


def make_styled_item(rng: random.Random, kind: str, split: str = "train", flip: float = FLIP, size=None, **fixed) -> Item:
    """One item of `kind` drawn in the styles of `split`: 'train' (what training may see) or 'heldout' (never)."""
    if split not in STYLE_VALUES:
        raise ValueError(split)
    scene, options, answer = _styled_scene(rng, kind, split, rng.randint(2, 4), size, **fixed)
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
