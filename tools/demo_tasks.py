"""The demo model's decision tasks: lexicons, item generator and the metrics the targets are stated in.

Pure Python (no torch, no numpy): shared by tools/train_demo.py (training data) and
tests/test_demo_model.py (held-out items through the real engine).

Every item is a question, 2-4 options in shuffled order and a target distribution over the options:
  retrieval   "Scouts report that {X} is the safe choice. What should we do?"  X is one of the options
  category    "Which of these is an animal?" (/ a tool? / a food?)              exactly one option matches
  ambiguous   retrieval with X absent, category with no match -> uniform over all options;
              category with two matches -> 0.5 / 0.5 over the two.

Casing: every word is shown either as listed or with its first letter's case flipped ("dog"/"Dog",
"Hide"/"hide"), independently for each option and for the {X} of the question; matching ignores case.

Held-out split: an item's combination (task, question, set of options, case-folded) is hashed; combinations in the
held-out bucket are never generated for training (`split="train"`) and are the only ones generated for
tests (`split="heldout"`), so a test item is never a combination the model was trained on (in any order).
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, replace
from typing import ClassVar

ACTIONS = [
    "Attack", "Defend", "Retreat", "Trade", "Hide", "Wait", "Build", "Scout", "Negotiate", "Flee",
    "Charge", "Ambush", "Fortify", "Heal", "Rest", "Explore", "Gather", "Hunt", "Fish", "Mine",
    "Craft", "Repair", "Sail", "Climb", "Swim", "Sneak", "Bribe", "Pray", "Camp", "Regroup",
    "Surrender", "Sabotage", "Recruit", "Bargain", "Feint", "Flank", "Siege", "Patrol", "Signal", "Evacuate",
]

CATEGORIES = {
    "animal": [
        "dog", "cat", "horse", "cow", "pig", "sheep", "goat", "wolf", "bear", "fox", "lion", "tiger",
        "mouse", "rabbit", "deer", "eagle", "owl", "frog", "snake", "whale", "shark", "monkey", "camel", "zebra",
    ],
    "tool": [
        "hammer", "saw", "drill", "wrench", "shovel", "axe", "chisel", "pliers", "rake", "ladder", "screwdriver",
        "spade", "hoe", "clamp", "needle", "scissors", "crowbar", "trowel", "anvil", "sickle", "mallet", "tongs",
        "pickaxe", "funnel",
    ],
    "food": [
        "bread", "cheese", "apple", "rice", "soup", "butter", "honey", "carrot", "potato", "egg", "cake", "pie",
        "pasta", "salad", "banana", "grape", "onion", "bacon", "yogurt", "cookie", "pancake", "tomato", "lemon",
        "noodle",
    ],
}

RETRIEVAL_QUESTION = "Scouts report that {x} is the safe choice. What should we do?"
CATEGORY_QUESTIONS = {
    "animal": "Which of these is an animal?",
    "tool": "Which of these is a tool?",
    "food": "Which of these is a food?",
}

# Item kinds. The first two are "unambiguous" (one right option); the rest are ambiguous.
KINDS = ("retrieval", "category", "retrieval_none", "category_none", "category_two")
UNAMBIGUOUS = ("retrieval", "category")

TRAIN_MIX = {"retrieval": 0.34, "category": 0.34, "retrieval_none": 0.10, "category_none": 0.11, "category_two": 0.11}

HELDOUT_BUCKETS = 20  # 1 in 20 combinations is held out


@dataclass(frozen=True)
class Item:
    kind: str
    question: str
    options: tuple[str, ...]
    target: tuple[float, ...]  # probability the item assigns to each option (sums to 1)
    unambiguous_kinds: ClassVar[tuple[str, ...]] = UNAMBIGUOUS  # a subclass with other kinds sets its own

    @property
    def ambiguous(self) -> bool:
        return self.kind not in self.unambiguous_kinds

    @property
    def answer(self) -> int | None:
        """Index of the one right option (unambiguous items), else None."""
        return self.target.index(1.0) if not self.ambiguous else None

    def reordered(self, order: list[int]) -> "Item":
        """Same item with options shown in `order` (position j shows option order[j])."""
        return replace(self, options=tuple(self.options[i] for i in order), target=tuple(self.target[i] for i in order))


def combination_key(kind: str, question: str, options) -> str:
    return kind + "|" + question.casefold() + "|" + ",".join(sorted(o.casefold() for o in options))


def flip_case(word: str) -> str:
    """'dog' -> 'Dog', 'Hide' -> 'hide'."""
    first = word[0].upper() if word[0].islower() else word[0].lower()
    return first + word[1:]


def variants(word: str) -> tuple[str, str]:
    return word, flip_case(word)


def is_heldout(kind: str, question: str, options) -> bool:
    return zlib.crc32(combination_key(kind, question, options).encode()) % HELDOUT_BUCKETS == 0


def _cased(rng: random.Random, word: str, flip: float) -> str:
    return flip_case(word) if rng.random() < flip else word


def _draw(rng: random.Random, kind: str, n: int, flip: float) -> Item:
    if kind in ("retrieval", "retrieval_none"):
        x = rng.choice(ACTIONS)
        others = rng.sample([a for a in ACTIONS if a != x], n if kind == "retrieval_none" else n - 1)
        options = others if kind == "retrieval_none" else others + [x]
        rng.shuffle(options)
        question = RETRIEVAL_QUESTION.format(x=_cased(rng, x, flip))
        target = [1.0 / n] * n if kind == "retrieval_none" else [1.0 if o == x else 0.0 for o in options]
        return Item(kind, question, tuple(_cased(rng, o, flip) for o in options), tuple(target))
    category = rng.choice(sorted(CATEGORIES))
    others = [w for c in sorted(CATEGORIES) if c != category for w in CATEGORIES[c]]
    matching = {"category": 1, "category_none": 0, "category_two": 2}[kind]
    options = rng.sample(CATEGORIES[category], matching) + rng.sample(others, n - matching)
    rng.shuffle(options)
    members = set(CATEGORIES[category])
    if matching == 0:
        target = [1.0 / n] * n
    else:
        target = [1.0 / matching if o in members else 0.0 for o in options]
    return Item(kind, CATEGORY_QUESTIONS[category], tuple(_cased(rng, o, flip) for o in options), tuple(target))


FLIP = 0.5  # probability that a word is shown with its first letter's case flipped


def make_item(rng: random.Random, kind: str, split: str = "train", min_options: int = 2, max_options: int = 4,
              flip: float = FLIP) -> Item:
    """One item of `kind`; split 'train' never yields a held-out combination, 'heldout' only yields those."""
    if split not in ("train", "heldout", "any"):
        raise ValueError(split)
    lo = 3 if kind == "category_two" else min_options
    while True:
        item = _draw(rng, kind, rng.randint(max(lo, min_options), max_options), flip)
        if split == "any" or is_heldout(kind, item.question, item.options) == (split == "heldout"):
            return item


def sample_kind(rng: random.Random, mix: dict[str, float] = TRAIN_MIX) -> str:
    r = rng.random() * sum(mix.values())
    for kind, weight in mix.items():
        r -= weight
        if r < 0:
            return kind
    return kind


def heldout_items(seed: int, counts: dict[str, int], make=None) -> list[Item]:
    """Held-out evaluation items: counts per kind, generated from `seed` (by `make`, this module's make_item unless
    given: tools/demo_vl_tasks.py passes its own)."""
    rng = random.Random(seed)
    make = make or make_item
    return [make(rng, kind, "heldout") for kind, count in counts.items() for _ in range(count)]


def shuffled(items: list[Item], seed: int) -> list[Item]:
    """The same items with every option list permuted again (a different order wherever possible)."""
    rng = random.Random(seed)
    out = []
    for item in items:
        order = list(range(len(item.options)))
        while order == list(range(len(item.options))):
            rng.shuffle(order)
        out.append(item.reordered(order))
    return out


# ----- metrics (probabilities: one list per item, aligned with item.options) -----

def argmax(values) -> int:
    return max(range(len(values)), key=lambda i: values[i])


def metrics(items: list[Item], probabilities: list[list[float]], bins: int = 10) -> dict:
    """Accuracy on unambiguous items, ECE over all items, confidence gap.

    Correctness of a choice is the target mass on the chosen option: 1/0 on unambiguous items; on ambiguous
    items the "true" answer is taken to be drawn from the target (a uniform pick among the plausible
    options), so a choice among two matches is right with probability 0.5 and any choice on a no-match item
    with probability 1/n. Confidence is the probability of the chosen (argmax) option. ECE: equal-width
    bins over [0, 1], weighted mean |accuracy - confidence|.
    """
    confidences, corrects = [], []
    unambiguous_right = unambiguous = 0
    confident_right, other = [], []
    by_kind: dict[str, list[float]] = {}
    for item, probs in zip(items, probabilities):
        choice = argmax(probs)
        confidence = probs[choice]
        correct = item.target[choice]
        confidences.append(confidence)
        corrects.append(correct)
        by_kind.setdefault(item.kind, []).append(correct)
        if not item.ambiguous:
            unambiguous += 1
            unambiguous_right += correct == 1.0
            (confident_right if correct == 1.0 else other).append(confidence)
        else:
            other.append(confidence)
    ece = 0.0
    bin_rows = []
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        members = [i for i, c in enumerate(confidences) if (lo < c <= hi) or (b == 0 and c == 0.0)]
        if not members:
            continue
        acc = sum(corrects[i] for i in members) / len(members)
        conf = sum(confidences[i] for i in members) / len(members)
        ece += len(members) / len(items) * abs(acc - conf)
        bin_rows.append((lo, hi, len(members), acc, conf))
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    return {
        "n": len(items),
        "accuracy": unambiguous_right / unambiguous if unambiguous else float("nan"),
        "ece": ece,
        "confidence_correct": mean(confident_right),
        "confidence_other": mean(other),
        "confidence_gap": mean(confident_right) - mean(other),
        "by_kind": {k: mean(v) for k, v in by_kind.items()},
        "bins": bin_rows,
    }
