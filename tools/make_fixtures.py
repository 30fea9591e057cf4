#!/usr/bin/env python
"""Regenerate the tiny Qwen3.5 test fixtures under tests/fixtures/.

Run with an environment that has torch 2.13.0 (CPU), transformers 5.2.x, optimum-intel 2.2.0 and openvino:

    python tools/make_fixtures.py                    # everything: tokenizer, models, export, references, check
    python tools/make_fixtures.py --only qwen35-text # one model (tokenizer is rebuilt only if missing)
    python tools/make_fixtures.py --references-only  # recompute references for the existing exports

Everything is seeded; re-running produces the same tokenizer, weights, IRs and reference numbers
(for the same library versions).

Steps:
  1. tokenizer  -> tests/fixtures/tokenizer/ (byte-level BPE trained on a synthetic corpus + Qwen specials)
  2. models     -> tests/fixtures/checkpoints/<name>/ (safetensors + config + tokenizer files)
  3. export     -> tests/fixtures/models/<name>/ (optimum-intel, fp32 IR, no OpenVINO tokenizer conversion)
  4. reference  -> tests/fixtures/reference/<name>.json (transformers, float64, eager attention)
  5. check      -> raw OpenVINO on the IR against the reference (printed only)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import shutil
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
if str(ROOT) not in sys.path:  # run as a script: the repository root holds modelkit/
    sys.path.insert(0, str(ROOT))

from modelkit.environment import quiet_offline  # noqa: E402

quiet_offline()  # before the heavy imports
os.environ.setdefault("RAYON_NUM_THREADS", "1")  # the fixture tokenizer's BPE training, deterministic

import numpy as np  # noqa: E402

from modelkit.qwen35_config import preprocessor_config  # noqa: E402
from modelkit.qwen35_config import text_config_kwargs as qwen35_text_config_kwargs  # noqa: E402
from modelkit.qwen35_config import vision_config as qwen35_vision_config  # noqa: E402

# The tokenizer folder's pieces, shared with the demo models and the bench (the demo trainers import them from here).
from modelkit.tokenizer_files import (  # noqa: E402,F401
    ADDED_TOKENS,
    CHAT_TEMPLATE,
    QWEN_SPLIT_REGEX,
    TOKENIZER_FILES,
    byte_level_bpe,
    special_tokens_map_dict,
    tokenizer_config_dict,
    write_tokenizer_files,
)

FIXTURES = ROOT / "tests" / "fixtures"
TOKENIZER_DIR = FIXTURES / "tokenizer"
CHECKPOINTS = FIXTURES / "checkpoints"
MODELS = FIXTURES / "models"
REFERENCE = FIXTURES / "reference"
MOE_EXPORT_NOTE = FIXTURES / "MOE_EXPORT.txt"

SEED = 20260515
GREEDY_STEPS = 16
TOP_K = 5

# The model logits width must exceed the tokenizer: real Qwen3.5 checkpoints have 248,320 logits for a
# 248,077-id tokenizer.  Here: round the tokenizer size up to a multiple of 64, then add 64 more.
PAD_MULTIPLE = 64

COMPILE_CONFIG = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"}


def log(msg: str) -> None:
    print(f"[make_fixtures {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------------------------------
# 1. Tokenizer
# ---------------------------------------------------------------------------------------------------------------------

BPE_VOCAB_SIZE = 1800  # regular tokens (256 byte symbols + merges)

_LETTERS = list("ABCDEFGHIJ")
_ACTIONS = ["Attack", "Defend", "Retreat", "Trade", "Hide", "Wait", "Scout", "Negotiate", "Build", "Flee",
            "Advance", "Surrender", "Ally", "Explore", "Rest", "Gather", "Sell", "Buy", "Fortify", "Ambush"]
_NOUNS = ["army", "castle", "river", "bridge", "village", "merchant", "enemy", "king", "queen", "army", "forest",
          "mountain", "harbor", "ship", "wagon", "gold", "silver", "grain", "horse", "sword", "shield", "tower",
          "gate", "wall", "road", "market", "council", "soldier", "captain", "general", "spy", "messenger",
          "storm", "winter", "summer", "harvest", "famine", "plague", "treaty", "border", "camp", "fleet",
          "cavalry", "archer", "scout", "guard", "prisoner", "ally", "rival", "trader", "caravan", "city",
          "island", "valley", "hill", "desert", "coast", "plan", "risk", "reward", "cost", "option", "choice",
          "decision", "answer", "question", "reason", "evidence", "report", "letter", "map", "supply", "food",
          "water", "weapon", "defense", "attack", "retreat", "trade", "price", "profit", "loss", "chance",
          "outcome", "player", "team", "game", "move", "turn", "round", "score", "rule", "goal", "strategy",
          "resource", "unit", "base", "territory", "kingdom", "empire", "clan", "tribe", "ruler", "people",
          "farmer", "worker", "builder", "doctor", "teacher", "student", "friend", "stranger", "traveler"]
_ADJS = ["strong", "weak", "large", "small", "quiet", "loud", "fast", "slow", "safe", "dangerous", "rich", "poor",
         "northern", "southern", "eastern", "western", "old", "new", "hidden", "open", "closed", "hungry", "tired",
         "brave", "careful", "clever", "foolish", "honest", "cunning", "loyal", "hostile", "friendly", "neutral",
         "uncertain", "likely", "unlikely", "certain", "best", "worst", "better", "worse", "good", "bad", "high",
         "low", "heavy", "light", "early", "late", "important", "urgent", "simple", "difficult", "final", "first",
         "second", "third", "last", "next", "previous", "main", "only", "entire", "whole", "few", "many"]
_VERBS = ["is", "are", "was", "were", "has", "have", "had", "will", "would", "can", "could", "should", "must",
          "might", "may", "moves", "waits", "attacks", "defends", "retreats", "trades", "hides", "arrives",
          "leaves", "returns", "gathers", "approaches", "crosses", "holds", "controls", "blocks", "offers",
          "demands", "refuses", "accepts", "reports", "says", "thinks", "believes", "knows", "expects", "fears",
          "wants", "needs", "plans", "prepares", "marches", "sails", "rides", "builds", "burns", "captures",
          "loses", "wins", "chooses", "decides", "considers", "suggests", "recommends", "prefers"]
_FUNCTION = ["the", "a", "an", "and", "or", "but", "if", "then", "because", "so", "that", "this", "these", "those",
             "of", "to", "in", "on", "at", "by", "for", "with", "from", "near", "behind", "before", "after",
             "while", "when", "where", "which", "who", "what", "why", "how", "not", "no", "yes", "all", "some",
             "each", "every", "our", "their", "your", "my", "his", "her", "its", "we", "they", "you", "I", "he",
             "she", "it", "there", "here", "now", "soon", "today", "tomorrow", "tonight", "again", "still",
             "only", "also", "very", "more", "most", "less", "least", "than", "as", "into", "over", "under"]
_NAMES = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory", "Oscar",
          "Peggy", "Trent", "Victor", "Walter", "Anna", "Boris", "Clara", "Diego", "Elena", "Farid", "Greta"]
_CHAT_WORDS = ["user", "assistant", "system", "You", "are", "a", "helpful", "Answer", "Choose", "Options",
               "Option", "Question", "Reply", "with", "one", "letter", "only", "Think", "step", "by",
               "Decision", "Confidence", "Final", "answer", "The", "scouts", "report", "that"]


def _sentence(rng: random.Random) -> str:
    n1, n2 = rng.choice(_NOUNS), rng.choice(_NOUNS)
    a1 = rng.choice(_ADJS)
    v1 = rng.choice(_VERBS)
    f = rng.sample(_FUNCTION, 4)
    name = rng.choice(_NAMES)
    act = rng.choice(_ACTIONS)
    letter = rng.choice(_LETTERS)
    num = rng.randint(0, 2000)
    templates = [
        f"The scouts report that the {a1} {n1} {v1} near the {n2}.",
        f"{name} {v1} {f[0]} {a1} {n1} {f[1]} {f[2]} {n2}.",
        f"Option {letter}: {act} the {n1}.",
        f"Answer: {letter}",
        f"The answer is {letter}.",
        f"I choose {letter} because the {n1} {v1} {a1}.",
        f"{act}, {rng.choice(_ACTIONS).lower()} or {rng.choice(_ACTIONS).lower()}?",
        f"Should we {act.lower()} or {rng.choice(_ACTIONS).lower()}? The {n1} {v1} {a1}.",
        f"We have {num} {n1}s and {rng.randint(0, 99)} {n2}s left after {rng.randint(1, 30)} days.",
        f"At {rng.randint(0, 23)}:{rng.randint(0, 59):02d} the {n1} {v1} {a1} ({rng.randint(1, 100)}%).",
        f"Confidence: {rng.random():.2f}",
        f'{{"choice": "{letter}", "action": "{act}", "confidence": {rng.random():.2f}}}',
        f"{name}'s {n1} isn't {a1}; they're {rng.choice(_ADJS)} and we'll {act.lower()}.",
        f"Q: What should the {n1} do?\nA: {act}.",
        f"Question {rng.randint(1, 50)}: Which {n1} is {a1}? Reply with one letter only.",
        f"- {act} the {n1}\n- {rng.choice(_ACTIONS)} the {n2}",
        f"Think step by step. The {n1} {v1} {a1}, so {f[3]} {n2} {rng.choice(_VERBS)} {rng.choice(_ADJS)}.",
    ]
    return rng.choice(templates)


def _options_block(rng: random.Random) -> str:
    k = rng.randint(2, 10)
    acts = [rng.choice(_ACTIONS) for _ in range(k)]
    style = rng.randint(0, 3)
    lines = []
    for i in range(k):
        L = _LETTERS[i]
        if style == 0:
            lines.append(f"{L}) {acts[i]}")
        elif style == 1:
            lines.append(f"{L}. {acts[i]} the {rng.choice(_NOUNS)}")
        elif style == 2:
            lines.append(f"({L}) {acts[i]}")
        else:
            lines.append(f"{L}: {acts[i]}")
    q = f"The {rng.choice(_NOUNS)} {rng.choice(_VERBS)} {rng.choice(_ADJS)}. What do we do?"
    ans = rng.choice(_LETTERS[:k])
    tail = rng.choice([f"Answer: {ans}", f"Answer with {ans}", f"The best option is {ans}.",
                       f"Choose {ans}", f"I pick {ans}, not {rng.choice(_LETTERS[:k])}."])
    return q + "\n" + "\n".join(lines) + "\n" + tail


def _chat_block(rng: random.Random) -> str:
    # Chat transcripts without the special tokens, so "user", "assistant", "system" and "\n\n" get merged.
    parts = []
    if rng.random() < 0.5:
        parts.append("system\nYou are a helpful assistant. " + _sentence(rng))
    parts.append("user\n" + _options_block(rng))
    parts.append("assistant\n\n\n" + rng.choice([_sentence(rng), "Answer: " + rng.choice(_LETTERS)]))
    return "\n".join(parts)


def build_corpus(seed: int = SEED, n_lines: int = 24000) -> list[str]:
    rng = random.Random(seed)
    lines: list[str] = []
    for _ in range(n_lines):
        r = rng.random()
        if r < 0.55:
            lines.append(" ".join(_sentence(rng) for _ in range(rng.randint(1, 3))))
        elif r < 0.75:
            lines.append(_options_block(rng))
        elif r < 0.90:
            lines.append(_chat_block(rng))
        else:
            # Paragraphs, blank lines, lists of letters, digits.
            lines.append(_sentence(rng) + "\n\n" + _sentence(rng))
            lines.append(", ".join(rng.sample(_LETTERS, rng.randint(2, 10))))
            lines.append(" ".join(str(rng.randint(0, 99999)) for _ in range(rng.randint(1, 5))))
    # Plain word lists so every word gets seen in isolation and with a leading space.
    vocab_words = sorted(set(_ACTIONS + _NOUNS + _ADJS + _VERBS + _FUNCTION + _NAMES + _CHAT_WORDS))
    for w in vocab_words:
        lines.append(f"{w} {w.lower()} {w.capitalize()} {w.upper()}")
    for L in _LETTERS:
        lines.append(f"{L} {L}\n{L}. {L}) ({L}) {L}: {L},")
    return lines


def build_tokenizer():
    """Train the fixture tokenizer; returns a tokenizers.Tokenizer."""
    tok = byte_level_bpe(build_corpus(), vocab_size=BPE_VOCAB_SIZE, min_frequency=2)
    # Check the invariants the fixtures rely on.
    for L in _LETTERS:
        for s in (L, " " + L):
            ids = tok.encode(s, add_special_tokens=False).ids
            assert len(ids) == 1, f"{s!r} encodes to {ids}"
    for s in ("\n", "\n\n", "user", "assistant", "system"):
        ids = tok.encode(s, add_special_tokens=False).ids
        assert len(ids) == 1, f"{s!r} encodes to {ids}"
    return tok


def write_tokenizer(out: Path) -> None:
    tok = build_tokenizer()
    write_tokenizer_files(out, tok)
    n_regular = tok.get_vocab_size(with_added_tokens=False)
    log(f"tokenizer: {n_regular} regular + {len(ADDED_TOKENS)} added = {tok.get_vocab_size()} ids -> {out}")


def load_tokenizer(directory: Path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(directory / "tokenizer.json"))


def tokenizer_size(directory: Path) -> int:
    return load_tokenizer(directory).get_vocab_size(with_added_tokens=True)


def model_vocab_size(tok_size: int) -> int:
    return int(math.ceil(tok_size / PAD_MULTIPLE) * PAD_MULTIPLE + PAD_MULTIPLE)


def check_tokenizer_with_transformers(directory: Path) -> None:
    """AutoTokenizer must load the files and agree with the raw tokenizer; the chat template must render
    the Qwen3.5 prompt shapes."""
    from transformers import AutoTokenizer

    raw = load_tokenizer(directory)
    hf = AutoTokenizer.from_pretrained(str(directory))
    assert len(hf) == raw.get_vocab_size(), (len(hf), raw.get_vocab_size())
    assert hf.eos_token == "<|im_end|>" and hf.pad_token == "<|endoftext|>", (hf.eos_token, hf.pad_token)
    samples = build_corpus(seed=SEED + 1, n_lines=200) + [
        "café naïve  e\u0301 tabs\tand  spaces \n\n\n end", "It's <think>\nok</think> <|im_end|>", "1234567 A.B,C"
    ]
    for s in samples:
        a = raw.encode(s, add_special_tokens=False).ids
        b = hf.encode(s, add_special_tokens=False)
        assert a == b, (s, a, b)
    msgs = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Hi"}]
    off = hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    on = hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=True)
    base = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert off == base + "<think>\n\n</think>\n\n", repr(off)
    assert on == base + "<think>\n", repr(on)
    ids = raw.encode(off, add_special_tokens=False).ids
    tid = raw.token_to_id
    assert ids[-4:] == [tid("<think>"), raw.encode("\n\n").ids[0], tid("</think>"), raw.encode("\n\n").ids[0]], ids
    log("tokenizer: AutoTokenizer agrees with tokenizer.json; chat template OK")



# ---------------------------------------------------------------------------------------------------------------------
# 2. Models
# ---------------------------------------------------------------------------------------------------------------------


def _block_broken_torchvision() -> None:
    """optimum-intel depends on torchvision, and PyPI's torchvision wheel does not load beside the CPU build of
    torch ("RuntimeError: operator torchvision::nms does not exist"); transformers imports it as soon as it is
    installed.  Nothing here needs torchvision, so hide it before transformers is imported."""
    if "torchvision" not in sys.modules:
        sys.modules["torchvision"] = None  # importlib.util.find_spec() -> None, `import torchvision` -> ImportError


INITIALIZER_RANGE = 0.15  # std of the (truncated) normal init of every Linear / Conv / vision weight
EMBED_STD = 0.3  # token embedding and lm_head rows: makes next-token distributions clearly non-uniform
PADDED_ROW_STD = 0.3  # lm_head rows of the padded ids (>= tokenizer size): random like the rest, so keeping them
#                      in a log-sum-exp or an argmax gives visibly wrong numbers (real checkpoints: untrained rows)
NORM_NOISE = 0.3  # added to every norm weight ((1+w) RMSNorms start at 0, gated norm and LayerNorms at 1)
A_LOG_MEAN = -2.0
SSM_NOISE = {"A_log": 0.5, "dt_bias": 0.5, "conv1d": 0.3}
OTHER_NOISE = 0.5 * INITIALIZER_RANGE  # added to every other parameter after init


# The fixtures' text geometry (modelkit's names). Hv = 2*Hk: value head h reads key head h // 2 (repeat_interleave,
# not tile). 8 of the 32 head dims rotate, so the M-RoPE sections sum to 4.
GEOMETRY = {"hidden": 64, "layers": 4, "heads": 4, "kv_heads": 2, "head_dim": 32, "intermediate": 128,
            "linear_k_heads": 2, "linear_v_heads": 4, "linear_dim": 16, "max_positions": 32768, "mrope_section": [2, 1, 1]}


def text_config_kwargs(vocab_size: int, tied: bool, special: dict) -> dict:
    return {**qwen35_text_config_kwargs(vocab=vocab_size, tied=tied, special=special, **GEOMETRY),
            "initializer_range": INITIALIZER_RANGE}


MODEL_SPECS = {
    "qwen35-text": {
        "layout": "text",
        "model_type": "qwen3_5_text",
        "architecture": "Qwen3_5ForCausalLM",
        "task": "text-generation-with-past",
        "seed": SEED + 1,
        "tied": False,
        "optional": False,
    },
    "qwen35-vl": {
        "layout": "vl",
        "model_type": "qwen3_5",
        "architecture": "Qwen3_5ForConditionalGeneration",
        "task": "image-text-to-text",
        "seed": SEED + 2,
        "tied": True,
        "optional": False,
    },
    "qwen35-moe-text": {
        "layout": "text",
        "model_type": "qwen3_5_moe_text",
        "architecture": "Qwen3_5MoeForCausalLM",
        "task": "text-generation-with-past",
        "seed": SEED + 3,
        "tied": False,
        "optional": True,  # an export failure is recorded in MOE_EXPORT.txt instead of stopping the run
    },
}

VISION_CONFIG = qwen35_vision_config(depth=1, hidden=32, intermediate=64, heads=2, out_hidden=GEOMETRY["hidden"],
                                     positions=64, initializer_range=INITIALIZER_RANGE)  # an 8x8 position grid

# The VL fixture's preprocessor_config.json: the shape of a real Qwen3.5 export's file (Qwen2-VL image processor,
# patch 16, temporal patch 2, merge 2, mean/std 0.5), with a pixel budget scaled to the tiny model: 64×64 to 256×256
# pixels (4 to 64 image tokens) instead of the real 256×256 to 4096×4096, so test images stay small and a 16:9
# screenshot still takes the downscaling path.
PREPROCESSOR_CONFIG = preprocessor_config(64 * 64, 256 * 256, VISION_CONFIG)


def write_preprocessor_config(name: str) -> None:
    """VL fixtures only: the image processor settings, in the checkpoint and in the export (real exports carry it)."""
    if MODEL_SPECS[name]["layout"] != "vl":
        return
    text = json.dumps(PREPROCESSOR_CONFIG, indent=2) + "\n"
    for folder in (CHECKPOINTS / name, MODELS / name):
        if folder.exists():
            (folder / "preprocessor_config.json").write_text(text)


MOE_KWARGS = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32)


def special_ids(tok) -> dict:
    return {t: tok.token_to_id(t) for t, _ in ADDED_TOKENS}


def build_model(name: str, tok):
    """Create the tiny random model `name` (float32, eval mode) with seeded, perturbed weights."""
    import torch

    spec = MODEL_SPECS[name]
    T = tok.get_vocab_size()
    V = model_vocab_size(T)
    sp = special_ids(tok)
    torch.manual_seed(spec["seed"])
    text_kw = text_config_kwargs(V, spec["tied"], sp)
    if spec["model_type"] == "qwen3_5_text":
        from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

        model = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**text_kw))
        embed, head = model.model.embed_tokens, model.lm_head
    elif spec["model_type"] == "qwen3_5_moe_text":
        from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig

        text_kw.pop("intermediate_size")
        model = Qwen3_5MoeForCausalLM(Qwen3_5MoeTextConfig(**text_kw, **MOE_KWARGS))
        embed, head = model.model.embed_tokens, model.lm_head
    elif spec["model_type"] == "qwen3_5":
        from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

        cfg = Qwen3_5Config(
            text_config=text_kw,
            vision_config=dict(VISION_CONFIG),
            image_token_id=sp["<|image_pad|>"],
            video_token_id=sp["<|video_pad|>"],
            vision_start_token_id=sp["<|vision_start|>"],
            vision_end_token_id=sp["<|vision_end|>"],
            tie_word_embeddings=True,
        )
        model = Qwen3_5ForConditionalGeneration(cfg)
        embed, head = model.model.language_model.embed_tokens, model.lm_head
    else:  # pragma: no cover
        raise ValueError(spec["model_type"])

    g = torch.Generator().manual_seed(spec["seed"] + 1000)
    with torch.no_grad():
        for pname, p in model.named_parameters():  # tied lm_head/embedding appears once
            leaf = pname.rsplit(".", 1)[-1]
            if p is embed.weight or p is head.weight:
                p.copy_(torch.randn(p.shape, generator=g) * EMBED_STD)
                if p is head.weight:
                    p[T:].copy_(torch.randn((V - T, p.shape[1]), generator=g) * PADDED_ROW_STD)
            elif leaf == "A_log":
                # Redrawn rather than perturbed: the init (A ~ U(0, 16)) makes exp(g) ~ 1e-9, i.e. a DeltaNet that
                # forgets everything after one token -- a weak test of the recurrent state, and its tiny outputs
                # make the gated RMSNorm amplify float32 rounding.  A ~ 0.05..0.4 keeps several tokens of memory.
                p.copy_(A_LOG_MEAN + torch.randn(p.shape, generator=g) * SSM_NOISE["A_log"])
            elif leaf == "dt_bias":
                p.add_(torch.randn(p.shape, generator=g) * SSM_NOISE["dt_bias"])
            elif ".conv1d." in pname:
                p.add_(torch.randn(p.shape, generator=g) * SSM_NOISE["conv1d"])
            elif "norm" in pname.rsplit(".", 2)[-2] and leaf == "weight":
                # RMSNorm (1+w), q_norm/k_norm, gated norm, vision LayerNorms
                p.add_(torch.randn(p.shape, generator=g) * NORM_NOISE)
            else:
                p.add_(torch.randn(p.shape, generator=g) * OTHER_NOISE)
        for pname, p in model.named_parameters():
            assert torch.isfinite(p).all(), pname
    if spec["tied"]:
        assert head.weight.data_ptr() == embed.weight.data_ptr(), "expected tied embeddings"
    else:
        assert head.weight.data_ptr() != embed.weight.data_ptr(), "expected untied embeddings"
    model.generation_config.eos_token_id = [sp["<|im_end|>"], sp["<|endoftext|>"]]
    model.generation_config.pad_token_id = sp["<|endoftext|>"]
    model.generation_config.bos_token_id = None
    return model.float().eval()


def copy_tokenizer_files(dst: Path) -> None:
    for f in TOKENIZER_FILES:
        shutil.copyfile(TOKENIZER_DIR / f, dst / f)


def save_checkpoint(name: str, model) -> Path:
    out = CHECKPOINTS / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    model.save_pretrained(str(out))
    copy_tokenizer_files(out)
    log(f"{name}: checkpoint -> {out.relative_to(ROOT)} ({dir_size(out) / 1e6:.2f} MB)")
    return out


def dir_size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def count_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------------------------------------------------
# 3. Export (in a child process, so optimum's model patching cannot leak into the reference computation)
# ---------------------------------------------------------------------------------------------------------------------


def export_worker(name: str) -> None:
    """Body of the child process: optimum-intel export of checkpoints/<name> to models/<name>."""
    _block_broken_torchvision()
    from optimum.exporters.openvino import main_export
    from optimum.intel import OVConfig

    spec = MODEL_SPECS[name]
    out = MODELS / name
    main_export(
        str(CHECKPOINTS / name),
        output=str(out),
        task=spec["task"],
        ov_config=OVConfig(dtype="fp32"),  # = optimum-cli export openvino --weight-format fp32
        convert_tokenizer=False,  # no openvino_tokenizer.xml; the engine reads tokenizer.json
        stateful=True,
    )


def export_model(name: str) -> tuple[bool, str]:
    import subprocess

    out = MODELS / name
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    log(f"{name}: exporting with optimum-intel ({MODEL_SPECS[name]['task']}, fp32) ...")
    t0 = time.time()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--export-worker", name],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, PYTHONHASHSEED="0"),
    )
    text = proc.stdout
    if proc.returncode != 0:
        log(f"{name}: export FAILED (exit {proc.returncode})")
        if out.exists():
            shutil.rmtree(out)
        return False, text
    # Chat template: the exporter copies chat_template.jinja via the tokenizer; make sure it is there.
    if not (out / "chat_template.jinja").exists():
        shutil.copyfile(TOKENIZER_DIR / "chat_template.jinja", out / "chat_template.jinja")
    files = sorted(f.name for f in out.iterdir())
    log(f"{name}: exported in {time.time() - t0:.0f}s -> {out.relative_to(ROOT)} "
        f"({dir_size(out) / 1e6:.2f} MB): {', '.join(files)}")
    return True, text


# ---------------------------------------------------------------------------------------------------------------------
# 4. References (transformers, float64, eager)
# ---------------------------------------------------------------------------------------------------------------------


def load_reference_model(name: str):
    import torch

    spec = MODEL_SPECS[name]
    path = str(CHECKPOINTS / name)
    if spec["layout"] == "vl":
        from transformers import Qwen3_5ForConditionalGeneration as cls
    else:
        from transformers import AutoModelForCausalLM as cls
    kwargs = {}
    if "moe" in spec["model_type"]:
        kwargs["experts_implementation"] = "eager"  # the default grouped_mm kernel has no float64 support
    model = cls.from_pretrained(path, dtype=torch.float64, attn_implementation="eager", **kwargs)
    assert type(model).__name__ == spec["architecture"], type(model).__name__
    tied = model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    assert tied == spec["tied"], f"{name}: tied={tied}, expected {spec['tied']}"
    return model.eval()


def _log_softmax_real(logits_row, T: int) -> np.ndarray:
    x = logits_row[:T].detach().cpu().double().numpy()
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


def _top(lp: np.ndarray, k: int = TOP_K) -> list[list]:
    order = np.lexsort((np.arange(lp.size), -lp))[:k]  # logprob desc, then id asc
    return [[int(i), float(lp[i])] for i in order]


def validate_case(c: dict, T: int) -> None:
    assert set(c) <= {"name", "kind", "prompt_ids", "continuations"}, c.keys()
    assert c["kind"] in ("greedy", "distribution", "sequence"), c["kind"]
    assert c["prompt_ids"] and all(isinstance(i, int) and 0 <= i < T for i in c["prompt_ids"]), c["name"]
    if c["kind"] == "sequence":
        conts = c.get("continuations")
        assert conts and all(cc and all(isinstance(i, int) and 0 <= i < T for i in cc) for cc in conts), c["name"]
    else:
        assert "continuations" not in c, c["name"]


def load_cases(name: str) -> list[dict]:
    sys.path.insert(0, str(TOOLS))
    import importlib

    import fixture_cases

    importlib.reload(fixture_cases)
    model_dir = MODELS / name
    tok = load_tokenizer(model_dir if (model_dir / "tokenizer.json").exists() else TOKENIZER_DIR)
    cs = fixture_cases.cases(model_dir, tok)
    T = tok.get_vocab_size()
    names = set()
    for c in cs:
        validate_case(c, T)
        assert c["name"] not in names, f"duplicate case name {c['name']}"
        names.add(c["name"])
    return cs


def compute_references(name: str, model, T: int, cs: list[dict]) -> tuple[list[dict], dict]:
    """Returns (json cases, full float64 log-prob vectors for the OpenVINO check, keyed by case name)."""
    import torch

    V = model.config.get_text_config().vocab_size
    out_cases, full = [], {}
    stats = {"top1": [], "min_gap": math.inf, "pad_argmax": 0, "pad_shift": 0.0, "n": 0}

    def note(logits_row):
        x = logits_row.detach().double().numpy()
        lp = _log_softmax_real(logits_row, T)
        srt = np.sort(lp)[::-1][: TOP_K + 1]
        stats["top1"].append(float(np.exp(srt[0])))
        stats["min_gap"] = min(stats["min_gap"], float(np.min(srt[:-1] - srt[1:])))
        if int(np.argmax(x)) >= T:
            stats["pad_argmax"] += 1
        m = x.max()
        lp_all = x[:T] - (m + np.log(np.exp(x - m).sum()))
        stats["pad_shift"] = max(stats["pad_shift"], float(np.max(np.abs(lp_all - lp))))
        stats["n"] += 1
        return lp

    with torch.no_grad():
        for c in cs:
            ids = list(c["prompt_ids"])
            rec = {"name": c["name"], "kind": c["kind"], "prompt_ids": ids}
            if c["kind"] == "greedy":
                x = torch.tensor([ids])
                o = model(input_ids=x, attention_mask=torch.ones_like(x), use_cache=True)
                cache, n = o.past_key_values, len(ids)
                steps, vecs = [], []
                for step in range(GREEDY_STEPS):
                    lp = note(o.logits[0, -1])
                    tokid = int(np.argmax(lp))  # first maximum = lowest id on ties
                    steps.append({"token": tokid, "logprob": float(lp[tokid]), "top": _top(lp)})
                    vecs.append(lp)
                    if step + 1 < GREEDY_STEPS:
                        n += 1
                        o = model(
                            input_ids=torch.tensor([[tokid]]),
                            attention_mask=torch.ones((1, n), dtype=torch.long),
                            past_key_values=cache,
                            use_cache=True,
                        )
                        cache = o.past_key_values
                rec["steps"] = steps
                full[c["name"]] = vecs
            elif c["kind"] == "distribution":
                x = torch.tensor([ids])
                o = model(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False)
                lp = note(o.logits[0, -1])
                rec["logprobs"] = [float(v) for v in lp]
                full[c["name"]] = [lp]
            else:
                rec["continuations"] = [list(cc) for cc in c["continuations"]]
                rec["token_logprobs"] = []
                vecs = []
                for cc in c["continuations"]:
                    seq = ids + list(cc)
                    x = torch.tensor([seq])
                    o = model(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False)
                    row = []
                    for j, t in enumerate(cc):
                        lp = note(o.logits[0, len(ids) - 1 + j])
                        row.append(float(lp[t]))
                        vecs.append(lp)
                    rec["token_logprobs"].append(row)
                full[c["name"]] = vecs
            out_cases.append(rec)
    top1 = np.array(stats["top1"])
    log(
        f"{name}: {stats['n']} next-token distributions; top-1 prob min/median/max "
        f"{top1.min():.3f}/{np.median(top1):.3f}/{top1.max():.3f}; smallest top-6 logprob gap {stats['min_gap']:.2e}; "
        f"full-width argmax on a padded id {stats['pad_argmax']}x; max logprob shift if padded ids were kept "
        f"{stats['pad_shift']:.3f}"
    )
    if stats["min_gap"] < 1e-4:
        log(f"{name}: WARNING: near-tie in a top-5 (gap {stats['min_gap']:.2e}); float32 runtimes may reorder it")
    assert V > T
    return out_cases, full


def sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def versions() -> dict:
    import importlib.metadata as md

    out = {}
    for dist in ("transformers", "torch", "optimum", "optimum-intel", "openvino", "tokenizers", "numpy"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


def write_reference(name: str) -> dict:
    """Compute and write tests/fixtures/reference/<name>.json; returns the full vectors for the OV check."""
    spec = MODEL_SPECS[name]
    model_dir = MODELS / name
    tok = load_tokenizer(TOKENIZER_DIR)
    T = tok.get_vocab_size()
    model = load_reference_model(name)
    cfg = model.config.get_text_config()
    V = cfg.vocab_size
    assert V == model_vocab_size(T), (V, T)
    cs = load_cases(name)
    log(f"{name}: computing float64 references for {len(cs)} cases ...")
    rcases, full = compute_references(name, model, T, cs)
    sp = special_ids(tok)
    doc = {
        "format": 1,
        "model": name,
        "layout": spec["layout"],
        "model_type": spec["model_type"],
        "architecture": spec["architecture"],
        "model_dir": str(model_dir.relative_to(ROOT)),
        "checkpoint_dir": str((CHECKPOINTS / name).relative_to(ROOT)),
        "tokenizer_size": T,
        "vocab_size": V,
        "logprob_domain": "log_softmax over logits[:tokenizer_size] (ids >= tokenizer_size are padding)",
        "dtype": "float64",
        "attn_implementation": "eager",
        **({"experts_implementation": "eager"} if "moe" in spec["model_type"] else {}),
        "greedy_steps": GREEDY_STEPS,
        "top_k": TOP_K,
        "special_ids": {k: sp[k] for k in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")},
        "tied_word_embeddings": bool(spec["tied"]),
        "versions": versions(),
        "ir_sha256": {f.name: sha256_file(f) for f in sorted(model_dir.glob("*.bin"))},
        "tokenizer_json_sha256": sha256_file(TOKENIZER_DIR / "tokenizer.json"),
        "checkpoint_sha256": sha256_file(CHECKPOINTS / name / "model.safetensors"),
        "cases": rcases,
    }
    REFERENCE.mkdir(parents=True, exist_ok=True)
    path = REFERENCE / f"{name}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    log(f"{name}: reference -> {path.relative_to(ROOT)} ({path.stat().st_size / 1e3:.0f} kB)")
    return {"doc": doc, "full": full}


def merge_cases(name: str, wanted: set[str]) -> None:
    """Recompute only the `wanted` cases and put them into the existing reference/<name>.json (added at the end,
    or in place): a new case needs no rewrite of every other number."""
    tok = load_tokenizer(TOKENIZER_DIR)
    cs = [c for c in load_cases(name) if c["name"] in wanted]
    missing = wanted - {c["name"] for c in cs}
    assert not missing, f"no such case: {sorted(missing)}"
    rcases, _ = compute_references(name, load_reference_model(name), tok.get_vocab_size(), cs)
    path = REFERENCE / f"{name}.json"
    doc = json.loads(path.read_text())
    fresh = {c["name"]: c for c in rcases}
    doc["cases"] = [fresh.pop(c["name"], c) for c in doc["cases"]] + list(fresh.values())
    path.write_text(json.dumps(doc, indent=1) + "\n")
    log(f"{name}: {len(rcases)} case(s) merged into {path.relative_to(ROOT)}")


# ---------------------------------------------------------------------------------------------------------------------
# 5. Raw OpenVINO check (printed only)
# ---------------------------------------------------------------------------------------------------------------------


class _OVRunner:
    """Minimal stateful driver of the exported IR, the way the engine is meant to use it."""

    def __init__(self, model_dir: Path, layout: str):
        import openvino as ov

        core = ov.Core()
        self.layout = layout
        if layout == "text":
            self.lm = core.compile_model(str(model_dir / "openvino_model.xml"), "CPU", COMPILE_CONFIG)
            self.emb = None
        else:
            self.lm = core.compile_model(str(model_dir / "openvino_language_model.xml"), "CPU", COMPILE_CONFIG)
            self.emb = core.compile_model(str(model_dir / "openvino_text_embeddings_model.xml"), "CPU", COMPILE_CONFIG)
        self.req = self.lm.create_infer_request()
        self.past = 0

    def reset(self):
        self.req.reset_state()
        self.past = 0

    def forward(self, ids: list[int]) -> np.ndarray:
        S = len(ids)
        x = np.array([ids], dtype=np.int64)
        pos = np.arange(self.past, self.past + S, dtype=np.int64)
        feed = {
            "attention_mask": np.ones((1, self.past + S), dtype=np.int64),
            "beam_idx": np.zeros((1,), dtype=np.int32),
        }
        if self.layout == "text":
            feed["input_ids"] = x
            feed["position_ids"] = pos[None, :]
        else:
            feed["inputs_embeds"] = self.emb({"input": x})["inputs_embeds"]
            feed["position_ids"] = np.broadcast_to(pos, (4, 1, S)).copy()
        self.req.infer(feed)
        self.past += S
        return self.req.get_tensor("logits").data[0].astype(np.float64)  # [S, V]


def _lsm(row: np.ndarray, T: int) -> np.ndarray:
    x = row[:T]
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


def ov_check(name: str, ref: dict) -> dict:
    """Raw OpenVINO on the exported IR vs the float64 reference; compares the whole real-vocabulary log-prob
    vector at every position the reference covers (greedy steps are teacher-forced with the reference tokens)."""
    spec = MODEL_SPECS[name]
    doc, full = ref["doc"], ref["full"]
    T = doc["tokenizer_size"]
    runner = _OVRunner(MODELS / name, spec["layout"])
    result = {}
    all_rows, top_rows = [], []
    token_mismatch = 0

    def compare(lp, want):
        d = np.abs(lp - want)
        top = np.argsort(-want)[:TOP_K]
        all_rows.append(float(d.max()))
        top_rows.append(float(d[top].max()))
        return float(d.max())

    for c in doc["cases"]:
        deltas = []
        if c["kind"] == "greedy":
            runner.reset()
            logits = runner.forward(c["prompt_ids"])
            for k, st in enumerate(c["steps"]):
                lp = _lsm(logits[-1], T)
                deltas.append(compare(lp, full[c["name"]][k]))
                if int(np.argmax(lp)) != st["token"]:
                    token_mismatch += 1
                if k + 1 < len(c["steps"]):
                    logits = runner.forward([st["token"]])  # teacher-forced with the reference tokens
        elif c["kind"] == "distribution":
            runner.reset()
            lp = _lsm(runner.forward(c["prompt_ids"])[-1], T)
            deltas.append(compare(lp, full[c["name"]][0]))
        else:
            k = 0
            for cc in c["continuations"]:
                runner.reset()
                logits = runner.forward(c["prompt_ids"] + cc)
                for j in range(len(cc)):
                    lp = _lsm(logits[len(c["prompt_ids"]) - 1 + j], T)
                    deltas.append(compare(lp, full[c["name"]][k]))
                    k += 1
        result[c["name"]] = max(deltas)
    first_greedy = next((c["name"] for c in doc["cases"] if c["kind"] == "greedy"), None)
    overall = max(result.values())
    log(
        f"{name}: OpenVINO ({', '.join(f'{k}={v}' for k, v in COMPILE_CONFIG.items())}) vs float64 reference, "
        f"max |Δ logprob| over the real vocabulary: first greedy case '{first_greedy}' "
        f"{result.get(first_greedy, float('nan')):.2e}"
    )
    log(
        f"{name}:    all {len(all_rows)} positions: max {overall:.2e}, median of per-position max "
        f"{np.median(all_rows):.2e}, max over each position's reference top-{TOP_K} {max(top_rows):.2e}; "
        f"greedy argmax disagreements {token_mismatch}"
    )
    for k, v in result.items():
        log(f"{name}:    {k:28s} {v:.2e}")
    if overall > 2e-4 or token_mismatch:
        log(f"{name}: WARNING: OpenVINO is further from the reference than expected for float32")
    return result


# ---------------------------------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------------------------------


def fixtures_size_report() -> None:
    for sub in sorted(p for p in FIXTURES.iterdir()):
        if sub.is_dir():
            for d in sorted(p for p in sub.iterdir()):
                if d.is_dir():
                    log(f"size {d.relative_to(FIXTURES)}: {dir_size(d) / 1e6:.2f} MB")
                else:
                    log(f"size {d.relative_to(FIXTURES)}: {d.stat().st_size / 1e6:.2f} MB")
    log(f"size tests/fixtures total: {dir_size(FIXTURES) / 1e6:.2f} MB")


def write_mtp_head(name: str) -> None:
    """Random `mtp.*` tensors beside the checkpoint (a file of their own, as a sharded checkpoint would carry them):
    optimum ignores them, `decider convert` builds openvino_mtp_model.xml from them (engine/graphs/mtp_graph.py)."""
    from decider.engine.model.safetensors_file import write_tensors
    from modelkit.mtp_weights import random_mtp_tensors

    config = json.loads((CHECKPOINTS / name / "config.json").read_text())
    write_tensors(CHECKPOINTS / name / "mtp.safetensors", random_mtp_tensors(config, SEED + 77))
    log(f"{name}: wrote mtp.safetensors")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=sorted(MODEL_SPECS), action="append",
                    help="process only this model (repeatable)")
    ap.add_argument("--references-only", action="store_true",
                    help="recompute references (and the OpenVINO check) for the existing checkpoints/exports")
    ap.add_argument("--no-check", action="store_true", help="skip the raw OpenVINO comparison")
    ap.add_argument("--case", action="append", metavar="NAME",
                    help="with --references-only: recompute only this case (repeatable) and merge it into the existing "
                         "reference, every other number kept as it was")
    ap.add_argument("--mtp-only", action="store_true",
                    help="write only the seeded random MTP heads (checkpoints/<name>/mtp.safetensors); every other "
                         "fixture file stays byte-identical")
    ap.add_argument("--export-worker", metavar="NAME", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.export_worker:
        export_worker(args.export_worker)
        return 0
    if args.mtp_only:
        for name in args.only or list(MODEL_SPECS):
            write_mtp_head(name)
        return 0

    _block_broken_torchvision()
    import torch

    torch.use_deterministic_algorithms(True)
    names = args.only or list(MODEL_SPECS)
    log(f"versions: {json.dumps(versions())}")

    if not args.references_only and (args.only is None or not (TOKENIZER_DIR / "tokenizer.json").exists()):
        write_tokenizer(TOKENIZER_DIR)
    check_tokenizer_with_transformers(TOKENIZER_DIR)
    tok = load_tokenizer(TOKENIZER_DIR)
    T = tok.get_vocab_size()
    log(f"tokenizer size {T}; model vocab_size (logits width) {model_vocab_size(T)}; "
        f"padded ids {T}..{model_vocab_size(T) - 1}")

    failures = []
    for name in names:
        spec = MODEL_SPECS[name]
        if args.references_only:
            if not (MODELS / name).exists() or not (CHECKPOINTS / name).exists():
                log(f"{name}: no existing export/checkpoint, skipped")
                continue
        else:
            model = build_model(name, tok)
            log(f"{name}: {spec['architecture']} ({spec['model_type']}), {count_params(model):,} parameters")
            save_checkpoint(name, model)
            del model
            ok, text = export_model(name)
            if not ok:
                if spec["optional"]:
                    note = (f"optimum-intel export of {name} ({spec['model_type']}, task {spec['task']}) failed.\n"
                            f"versions: {json.dumps(versions())}\n\n{text}")
                    MOE_EXPORT_NOTE.write_text(note)
                    log(f"{name}: error kept in {MOE_EXPORT_NOTE.relative_to(ROOT)}; continuing")
                    ref_path = REFERENCE / f"{name}.json"
                    if ref_path.exists():
                        ref_path.unlink()
                    continue
                print(text[-5000:])
                failures.append(name)
                continue
            if spec["optional"] and MOE_EXPORT_NOTE.exists():
                MOE_EXPORT_NOTE.unlink()
        if args.references_only and args.case:
            merge_cases(name, set(args.case))
            continue
        write_preprocessor_config(name)
        ref = write_reference(name)
        if not args.no_check:
            try:
                ov_check(name, ref)
            except Exception:  # the check is informational
                log(f"{name}: OpenVINO check raised:\n{traceback.format_exc()}")
    fixtures_size_report()
    if failures:
        log(f"FAILED: {failures}")
        return 1
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
