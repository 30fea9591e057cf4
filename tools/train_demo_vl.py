#!/usr/bin/env python
"""Train, export and evaluate Decider's seeing demo model (resources/demo-vl-model/).

A tiny Qwen3.5 vision-language model (Qwen3_5ForConditionalGeneration, model_type qwen3_5: a small vision tower,
Gated DeltaNet and gated full-attention text layers) trained from scratch on the picture questions of
tools/demo_vl_tasks.py, asked exactly the way the engine asks about an image: engine.decision_prompt's
build_decision_prompt with the image's placeholder tokens (engine/model/vision_tokens.py) first in the user turn,
thinking off, the answer being the option letter's token right after the prompt. The pixels are preprocessed by
the engine's own preprocess() (engine/vision/preprocess.py), so training sees the patches the engine feeds.

    python tools/train_demo_vl.py train  [--steps N] [--minutes M] [--threads 1] [--work DIR]
    python tools/train_demo_vl.py export [--work DIR]     # checkpoint -> resources/demo-vl-model (optimum-intel)
    python tools/train_demo_vl.py evaluate                # the held-out items through the real engine
    python tools/train_demo_vl.py card   [--work DIR]     # MODEL_CARD.md (+ docs/demo-model/curve_vl.csv / .png)
    python tools/train_demo_vl.py ship   [--work DIR]     # export to a candidate folder, evaluate, replace + card if targets met
    python tools/train_demo_vl.py all    [...]            # train, then ship
    python tools/train_demo_vl.py rebuild [--work DIR]    # <work>/checkpoint from the shipped IR, to continue training

Seeded (data, init, order). The recipe is the text demo's (tools/train_demo.py): small DeltaNet decay, an
auxiliary LM loss on the prompt's text, soft-label cross-entropy at the answer, and the training-only probe on
each option's token (does this option answer the question about this picture?) that got the text demo off the
prior; the exact one-chunk delta rule makes training faster, the export uses the stock code.
"""

from __future__ import annotations

import csv
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

import demo_tasks  # metrics and argmax: the same definitions as the text demo's
import demo_training as common  # what both demo trainers share; sets the offline environment
import demo_vl_tasks as tasks
from demo_training import ROOT, curve_summary, dir_size, padded_vocab, versions

from modelkit.qwen35_config import preprocessor_config

OUT = ROOT / "resources" / "demo-vl-model"
DOCS = ROOT / "docs" / "demo-model"
DEFAULT_WORK = Path(os.environ.get("DECIDER_DEMO_VL_WORK", "/tmp/decider-demo-vl-train"))

SEED = 8_2026
VAL_SEED = 8_2027
TEST_SEED = 8_2028  # tests/test_demo_vl_model.py uses the same seeds and counts
TEST_SHUFFLE_SEED = 8_2029
TEST_COUNTS = {"colour": 40, "star": 30, "door": 40, "colour_none": 10, "star_none": 10, "door_none": 10}

TEXT = dict(common.LANGUAGE_MODEL, layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"])

VISION = dict(  # 2 blocks of width 64 (2 heads, MLP 128), patch 16, temporal patch 2, 2 × 2 merger to the text width
    depth=2, hidden_size=64, intermediate_size=128, num_heads=2, in_channels=3,
    patch_size=16, spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=TEXT["hidden_size"],
    num_position_embeddings=36,  # a 6 × 6 table: exactly the patch grid of a 96 × 96 picture
    hidden_act="gelu_pytorch_tanh", initializer_range=0.02,
)

# The engine reads this file (engine/vision/preprocess.py). The budget keeps every picture small: a 96 × 96 scene is
# used as it is (9 image tokens); a larger picture is scaled down into at most 128 × 128 pixels' worth (16 tokens).
# 96 × 96 was too small a budget for thin pictures: a 120 × 300 one became 32 × 128, a single token column, and
# left from right was a 6-pixel star inside one token (issue 27 item 8).
MIN_PIXELS = 64 * 64


def preprocessor_for(max_pixels: int) -> dict:
    return preprocessor_config(MIN_PIXELS, max_pixels, VISION)


HPARAMS = dict(
    common.HPARAMS,
    val_items=400,
    style_share=0.7,       # share of each batch drawn in the training styles (other sizes, shapes, backgrounds)
    style_smoothing=0.25,  # label smoothing on those: a styled picture's bar tops out near 0.9, not 1.0
    style_val_items=160,
    anneal_by_time=True,   # with --minutes, the cosine ends by the budget (steps per minute vary on a shared machine)
    extras=None,           # --extras: words, lit doorways, painted doors on the styled scenes (demo_vl_tasks.EXTRAS)
    new_val_items=96,      # validation: pictures of something else, word distractors, lit doors in the training styles
    max_pixels=128 * 128,  # --max-pixels: the pixel budget (preprocessor_config.json) the run trains and ships with
    junk_weight=1.0,       # --junk-weight: the answer loss of a picture of something else, times this
    kind_weights=None,     # --kind-weights: other kinds' answer loss times this, e.g. {"door": 2} (junk stays --junk-weight)
    junk_tail=0.0,         # --junk-tail: weight of the worst quarter of a batch's pictures of something else (junk_tail_loss)
)
PREPROCESSOR = preprocessor_for(HPARAMS["max_pixels"])  # a run's checkpoint and export carry its own budget's file

# Set by train(): label smoothing for items in the training styles (0 for the 96 × 96 scenes, as before).
STYLE_SMOOTHING = [0.0]


def soft_target(item: tasks.Item) -> list[float]:
    """The training target: the item's own, smoothed towards even for a styled scene (see HPARAMS)."""
    eps = STYLE_SMOOTHING[0] if item.scene.get("style") else 0.0
    n = len(item.options)
    return [(1 - eps) * t + eps / n for t in item.target]

log = common.make_log("train_demo_vl")


# ---------------------------------------------------------------------------------------------------------------------
# Tokenizer: byte-level BPE whose merges come from the task prompts (every option word, both casings, one token)
# ---------------------------------------------------------------------------------------------------------------------

def tokenizer_corpus() -> list[str]:
    from decider.engine.decisions.prompt import LABELS, load_templates, render_user_text

    templates = load_templates()
    words = [v for w in tasks.vocabulary() for v in tasks.variants(w)]
    lines = ["system\n", "user\n", "assistant\n", "\n", "\n\n"]
    for i, question in enumerate(tasks.QUESTIONS.values()):
        for k in range(0, len(words), 2):
            lines.append(render_user_text(question, [words[(k + j) % len(words)] for j in range(4)], False, templates))
    for n in range(2, len(LABELS) + 1):
        lines.append(render_user_text(tasks.QUESTIONS["colour"], (words * 3)[:n], False, templates))
    return lines + list(LABELS)


def write_tokenizer(out: Path):
    from make_fixtures import ADDED_TOKENS, CHAT_TEMPLATE, QWEN_SPLIT_REGEX, special_tokens_map_dict, tokenizer_config_dict
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=100_000, min_frequency=1, show_progress=False, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(tokenizer_corpus(), trainer=trainer)
    n_regular = tok.get_vocab_size(with_added_tokens=False)
    tok.add_tokens([AddedToken(t, special=s, normalized=False, single_word=False, lstrip=False, rstrip=False) for t, s in ADDED_TOKENS])
    for i, (t, _) in enumerate(ADDED_TOKENS):
        assert tok.token_to_id(t) == n_regular + i, t
    for w in [v for w in tasks.vocabulary() for v in tasks.variants(w)]:
        assert len(tok.encode(" " + w, add_special_tokens=False).ids) == 1, w
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"), pretty=False)
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config_dict(tok), indent=2, ensure_ascii=False) + "\n")
    (out / "special_tokens_map.json").write_text(json.dumps(special_tokens_map_dict(), indent=2) + "\n")
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    return tok


# ---------------------------------------------------------------------------------------------------------------------
# Data: items -> the engine's prompt ids (image tokens as <|image_pad|>) and the engine's patches
# ---------------------------------------------------------------------------------------------------------------------

class Encoder(common.PromptEncoder):
    def __init__(self, tokenizer_json: Path, preprocessor: dict | None = None):
        """`preprocessor`: the pixel budget's config; by default the preprocessor_config.json beside the tokenizer (a
        checkpoint's), else PREPROCESSOR."""
        from decider.engine.vision.preprocess import ProcessorConfig
        from decider.engine.model.vision_tokens import IMAGE_PAD

        super().__init__(tokenizer_json)
        if preprocessor is None:
            beside = Path(tokenizer_json).parent / "preprocessor_config.json"
            preprocessor = json.loads(beside.read_text()) if beside.is_file() else PREPROCESSOR
        self.processor = ProcessorConfig.from_dict(preprocessor, VISION)
        self.image_pad = self.tok.special_id(IMAGE_PAD)

    def encode(self, item: tasks.Item, pixels=None):
        """(prompt ids, patches): exactly the prompt the engine builds for this question about this picture."""
        from decider.engine.vision.preprocess import preprocess
        from decider.engine.model.vision_tokens import image_tokens, token_ids

        patches = preprocess(item.image() if pixels is None else pixels, self.processor)
        rows, cols = (side // self.processor.merge_size for side in patches.token_grid)
        prompt = self._build(self.tok, item.question, list(item.options), think=False, images=[image_tokens("x", rows, cols)])
        return [int(i) for i in token_ids(prompt.ids, self.image_pad)], patches

    def _text_only(self, s: list[int]):
        """The LM loss predicts the prompt's text only: never an image placeholder (there is nothing to predict)."""
        import torch

        return (torch.tensor(s[1:]) != self.image_pad) & (torch.tensor(s[:-1]) != self.image_pad)

    def batch(self, items):
        import numpy as np
        import torch

        encoded = [self.encode(it) for it in items]
        ids, lm_mask, last, target, nopt, fits, opt_pos = self.padded(
            [s for s, _ in encoded], items, soft_target, lambda it: [0.0 if it.ambiguous else t for t in it.target], self._text_only)
        pixel_values = torch.from_numpy(np.concatenate([p.values for _, p in encoded]))
        grid = torch.tensor([list(p.grid) for _, p in encoded], dtype=torch.long)
        seen = torch.tensor([SCENE_CLASSES.index(scene_answer(it)) for it in items])
        return ids, pixel_values, grid, lm_mask, last, target, nopt, fits, opt_pos, seen


# ---------------------------------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------------------------------

def special_ids(enc: "Encoder") -> dict[str, int]:
    """The special tokens' ids config_for needs."""
    return {t: enc.tok.special_id(t) for t in ("<|im_end|>", "<|endoftext|>", "<|image_pad|>", "<|video_pad|>",
                                               "<|vision_start|>", "<|vision_end|>")}


def config_for(tokenizer_size: int, special: dict):
    from transformers import Qwen3_5Config

    text = dict(
        vocab_size=padded_vocab(tokenizer_size), **TEXT, hidden_act="silu", rms_norm_eps=1e-6, max_position_embeddings=4096,
        initializer_range=0.02, rope_parameters=dict(common.ROPE_PARAMETERS),
        tie_word_embeddings=True, eos_token_id=special["<|im_end|>"], pad_token_id=special["<|endoftext|>"], bos_token_id=None,
    )
    return Qwen3_5Config(
        text_config=text, vision_config=dict(VISION),
        image_token_id=special["<|image_pad|>"], video_token_id=special["<|video_pad|>"],
        vision_start_token_id=special["<|vision_start|>"], vision_end_token_id=special["<|vision_end|>"],
        tie_word_embeddings=True,
    )


SCENE_CLASSES = ("red", "green", "blue", "yellow", "left", "middle", "right", "nothing")


def scene_answer(item: tasks.Item) -> str:
    """What the picture shows, whatever the question's options: the answer word, or nothing."""
    return "nothing" if item.ambiguous else item.options[item.answer].lower()


def Probes(text_width: int, image_width: int):
    """Training-only heads (never exported): per option token, 'does this option answer the question?'; on the
    9 image tokens' features, 'what does the scene show?' (supervises the vision tower directly)."""
    import torch

    class _Probes(torch.nn.Linear):
        def __init__(self):
            super().__init__(text_width, 1)
            self.vision = torch.nn.Linear(image_width, len(SCENE_CLASSES))

    return _Probes()


def language_layers(model):
    return model.model.language_model.layers


def build_model(config, seed: int, hp: dict):
    from transformers import Qwen3_5ForConditionalGeneration

    return common.build_model(Qwen3_5ForConditionalGeneration, config, seed, hp, language_layers)


def patch_fast_paths(model) -> None:
    """Training-only, exact: the one-chunk delta rule, and the patch embedding's Conv3d (kernel = stride = one
    patch, so one output per patch) as the matrix product it is -- the Conv3d's backward was the slowest op."""
    import torch.nn.functional as F

    common.patch_fast_delta_rule(language_layers(model))
    embed = model.model.visual.patch_embed

    def linear_patch_embed(hidden_states):
        weight = embed.proj.weight
        return F.linear(hidden_states.to(weight.dtype).reshape(-1, weight[0].numel()), weight.reshape(weight.shape[0], -1), embed.proj.bias)

    embed.forward = linear_patch_embed


def forward_losses(model, batch, T: int, letters, lm_weight: float, probe=None, weights=None):
    import torch
    import torch.nn.functional as F

    ids, pixel_values, grid, lm_mask, last, target, nopt, fits, opt_pos, seen = batch
    mask = (torch.arange(ids.shape[1])[None, :] <= last[:, None]).long()  # right padding
    layers = language_layers(model)
    hooks = {"h": layers[common.probe_layer(layers)], "image": model.model.visual.merger} if probe is not None else {}
    with common.captured_outputs(hooks) as captured:
        model.model.rope_deltas = None  # every batch is a fresh prompt
        # The attention mask is not optional here: without one, transformers reads the image tokens' repeated
        # temporal positions as the starts of packed sequences and cuts the full attention at every image token.
        hidden = model.model(input_ids=ids, attention_mask=mask, pixel_values=pixel_values.to(model.dtype), image_grid_thw=grid,
                             use_cache=False).last_hidden_state
    answer_loss, lm_loss, letter_logp = common.answer_and_lm_losses(model, hidden, ids, lm_mask, last, target, T, letters, lm_weight,
                                                                    weights)
    probe_loss = torch.zeros(())
    if probe is not None:
        probe_loss = common.option_probe_loss(probe, captured["h"], opt_pos, nopt, fits)
        # The vision probe: what the scene shows (the answer word, or nothing), read from the image tokens' features,
        # each picture's token grid pooled to 3 × 3 (pictures of other sizes have other grids).
        feats, start = [], 0
        for _, h_, w_ in grid.tolist():
            rows, cols = h_ // 2, w_ // 2
            tok = captured["image"][start:start + rows * cols].reshape(rows, cols, -1).permute(2, 0, 1)
            feats.append(F.adaptive_avg_pool2d(tok, (3, 3)).permute(1, 2, 0).reshape(-1))
            start += rows * cols
        image = torch.stack(feats)
        probe_loss = probe_loss + F.cross_entropy(probe.vision(image), seen)
    return answer_loss, lm_loss, letter_logp, probe_loss


def evaluate_torch(model, enc: Encoder, items, T: int) -> dict:
    def letter_logp_of(chunk):
        batch = enc.batch(chunk)
        return forward_losses(model, batch, T, enc.letters, 0.0)[2], batch[5]

    return common.evaluate_letters(model, items, 64, letter_logp_of)[1]


# ---------------------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------------------

def junk_tail_loss(items, letter_logp, share: float = 0.25):
    """The mean distance from even (KL(even || bars), 0 when even) of the worst `share` of a batch's pictures of
    something else. Issue 39 item 5 is judged by the largest |bar - 1/n| of 288 pictures, a tail the mean
    cross-entropy hardly weighs: r9f's training-style pictures still reach 0.37 with a median of 0.004."""
    import math

    import torch

    rows = [i for i, it in enumerate(items) if it.kind.endswith("_junk")]
    if not rows:
        return torch.zeros(())
    n = torch.tensor([len(items[i].options) for i in rows])
    logp = letter_logp[rows]
    valid = torch.arange(logp.shape[1])[None, :] < n[:, None]
    distance = -(logp * valid).sum(-1) / n - torch.log(n.to(logp.dtype))
    return distance.topk(max(1, math.ceil(share * len(rows)))).values.mean()


def train(args) -> Path:
    common.torch_setup(args.threads)

    hp = common.hparams(HPARAMS, args, ("lr", "lm_weight", "probe_weight", "batch", "warmup", "eval_every", "style_mix", "keep_last",
                                               "extras", "max_pixels", "junk_weight",
                                               "kind_weights", "junk_tail"))
    preprocessor = preprocessor_for(hp["max_pixels"])
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    tokdir = work / "tokenizer"
    write_tokenizer(tokdir)
    enc = Encoder(tokdir / "tokenizer.json", preprocessor)
    T = enc.tok.size
    config = config_for(T, special_ids(enc))
    model = build_model(config, SEED, hp)
    if args.init:  # a continuation: the weights of an earlier run's checkpoint (the probes start afresh)
        from transformers import Qwen3_5ForConditionalGeneration

        model = Qwen3_5ForConditionalGeneration.from_pretrained(str(args.init))
        log(f"continuing from {args.init} (step {json.loads((args.init / 'train_meta.json').read_text())['step']})")
    patch_fast_paths(model)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    n_vision = sum(p.numel() for p in model.model.visual.parameters())
    log(f"tokenizer {T} ids (logits width {config.text_config.vocab_size}); model {n_params:,} parameters "
        f"({n_vision:,} in the vision tower); text layers {TEXT['layer_types']}")
    log(f"hyperparameters {json.dumps(hp)}; steps {args.steps}; threads {args.threads}")

    probe = Probes(config.text_config.hidden_size, 9 * config.text_config.hidden_size)  # training-only; never exported
    rng = random.Random(SEED)
    vrng = random.Random(VAL_SEED)
    STYLE_SMOOTHING[0] = hp["style_smoothing"]
    val_items = [tasks.make_item(vrng, tasks.sample_kind(vrng), "heldout") for _ in range(hp["val_items"])]
    # Styled validation items are in the training styles: the held-out styles are for the final check only.
    val_items += [tasks.make_styled_item(vrng, tasks.sample_kind(vrng), "train") for _ in range(hp["style_val_items"])]
    if hp.get("extras"):  # issue 39 item 5's kinds, in the training styles (the held-out ones are for the final check)
        k = hp["new_val_items"] // 6
        val_items += (tasks.irrelevant_items(VAL_SEED + 1, max(1, k // 6), "train") + tasks.word_items(VAL_SEED + 2, k, "train")
                      + tasks.lit_door_items(VAL_SEED + 3, k, "train"))
    chance = common.chance_loss(val_items)
    log(f"validation: {len(val_items)} held-out items; answer loss of a uniform guess {chance:.4f}")

    style_mix = hp.get("style_mix") or tasks.TRAIN_MIX

    def evaluate():
        return {**evaluate_torch(model, enc, val_items, T), "chance": chance}

    def log_extra(m):
        return (f"(uniform {chance:.4f}) acc {m['accuracy']:.3f} ece {m['ece']:.3f} "
                f"[{' '.join(f'{k} {v:.2f}' for k, v in m['by_kind'].items())}]")

    def next_losses():
        styled = round(hp["batch"] * hp["style_share"])
        items = [tasks.make_item(rng, tasks.sample_kind(rng), "train") for _ in range(hp["batch"] - styled)]
        items += [tasks.make_styled_item(rng, tasks.sample_kind(rng, style_mix), "train", extras=hp.get("extras"))
                  for _ in range(styled)]
        weights = None
        by_kind = hp.get("kind_weights") or {}
        if hp["junk_weight"] != 1.0 or by_kind:  # pictures of something else (or other kinds) weigh more in the answer loss
            import torch

            weights = torch.tensor([hp["junk_weight"] if it.kind.endswith("_junk") else
                                    by_kind.get(it.kind, 1.0) * (by_kind.get("words", 1.0) if it.scene.get("words") else 1.0)
                                    for it in items])
        a_loss, l_loss, letter_logp, p_loss = forward_losses(model, enc.batch(items), T, enc.letters, hp["lm_weight"],
                                                             probe if hp["probe_weight"] > 0 else None, weights)
        if hp["junk_tail"]:
            a_loss = a_loss + hp["junk_tail"] * junk_tail_loss(items, letter_logp)
        return a_loss, l_loss, p_loss

    def save(step, m, name="checkpoint"):
        common.save_checkpoint(model, work / name, tokdir, {"step": step, "val": m, "hparams": hp},
                               {"preprocessor_config.json": json.dumps(preprocessor, indent=2) + "\n"})

    cpu0 = time.process_time()
    step, elapsed, best = common.train_loop(
        model=model, probe=probe, hp=hp, args=args, log=log, evaluate=evaluate, log_extra=log_extra,
        row_extra=lambda m: {f"val_{k}": f"{m['by_kind'].get(k, float('nan')):.4f}" for k in tasks.KINDS},
        extra_fields=[f"val_{k}" for k in tasks.KINDS], next_losses=next_losses, save=save)
    (work / "train_summary.json").write_text(json.dumps({
        "steps_run": step, "elapsed_s": elapsed, "best_val_loss": best[0], "best_step": best[1], "parameters": n_params,
        "vision_parameters": n_vision, "tokenizer_size": T, "vocab_size": config.text_config.vocab_size, "hparams": hp,
        "text": TEXT, "vision": VISION, "threads": args.threads, "seed": SEED, "versions": versions(),
        "init": str(args.init) if args.init else None, "cpu_s": time.process_time() - cpu0,
        "init_note": json.loads((args.init / "train_meta.json").read_text()).get("note") if args.init else None,
    }, indent=1))
    return work / "checkpoint"


# ---------------------------------------------------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------------------------------------------------

TASK = "image-text-to-text"


def rebuild(args) -> Path:
    """<work>/checkpoint rebuilt from the shipped folder's IR (tools/checkpoint_from_ir.py), for a continuation when
    the shipped model's own checkpoint was not kept; checked against the shipped folder through the engine."""
    import subprocess

    import checkpoint_from_ir

    common.torch_setup(args.threads)
    work = args.work
    tokdir = work / "tokenizer"
    write_tokenizer(tokdir)
    if json.loads((tokdir / "tokenizer.json").read_text()) != json.loads((OUT / "tokenizer.json").read_text()):
        raise SystemExit("the tokenizer written today differs from the shipped one: the prompts changed")
    enc = Encoder(tokdir / "tokenizer.json")
    model = build_model(config_for(enc.tok.size, special_ids(enc)), SEED, HPARAMS)
    checkpoint_from_ir.fill_probe(model)
    extra = {"preprocessor_config.json": (OUT / "preprocessor_config.json").read_text()}
    common.save_checkpoint(model, work / "probe", tokdir, {"step": 0}, extra)
    log("exporting the probe (every parameter element a value of its own) ...")
    subprocess.run([sys.executable, __file__, "export-worker", str(work / "probe"), str(work / "probe-ir")], check=True,
                   stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONHASHSEED="0"))
    report = checkpoint_from_ir.rebuild(model, work / "probe-ir", OUT)
    log(f"rebuilt: {report}")
    common.save_checkpoint(model, work / "checkpoint", tokdir, {"step": 0, "rebuilt": report}, extra)
    delta = parity(work / "checkpoint", OUT)
    log(f"parity of the rebuilt checkpoint (transformers float64) against the shipped folder (engine): {delta:.2e}")
    if delta > 1e-5:
        raise SystemExit("the rebuilt checkpoint does not match the shipped folder")
    card = (OUT / "MODEL_CARD.md").read_text().splitlines()
    note = f"the shipped model (its transformers checkpoint rebuilt from its OpenVINO IR, which it matches to {delta:.1e})"
    (work / "checkpoint" / "train_meta.json").write_text(json.dumps({"step": 0, "rebuilt": report, "note": note}, indent=1))
    (work / "train_summary.json").write_text(json.dumps({"card_lines": [l for l in card if l.startswith("- Run ")],
                                                          "init": None, "note": note}, indent=1))
    return work / "checkpoint"


def export(args, dest: Path = OUT) -> Path:
    """Checkpoint → an OpenVINO folder at `dest` (its MODEL_CARD.md kept from resources/demo-vl-model)."""
    return common.export_folder(
        script=__file__, worker_args=(), checkpoint=args.work / "checkpoint", dest=dest, task=TASK, dtype="fp32", log=log,
        copy_files=("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "preprocessor_config.json"),
        drop_files=("special_tokens_map.json", "openvino_config.json"), parity=parity,
        # the run's pixel budget, as it trained (the exporter writes a processor config of its own)
        finish=lambda folder: shutil.copyfile(args.work / "checkpoint" / "preprocessor_config.json", folder / "preprocessor_config.json"),
        parity_path=args.work / "parity.json", card_from=OUT,
        demo_text="Decider's seeing demo model: a tiny Qwen3.5 vision-language model trained on three synthetic picture\n"
                  "questions. It is not a general assistant and sees nothing but those scenes. See MODEL_CARD.md.\n")


def parity(checkpoint: Path, folder: Path, count: int = 30) -> float:
    """Largest |p_torch - p_engine| over the option probabilities of `count` items: transformers (stock code,
    float64) on the checkpoint against decide() on the exported folder."""
    return common.parity(checkpoint, folder, load_float64=_load_float64, encoder_class=Encoder, tasks=tasks, seed=SEED + 99,
                         count=count, engine_probabilities=engine_probabilities, letter_probs=_letter_probs)


def _load_float64(checkpoint: str):
    import torch
    from transformers import Qwen3_5ForConditionalGeneration

    return Qwen3_5ForConditionalGeneration.from_pretrained(checkpoint, dtype=torch.float64, attn_implementation="eager").eval()


def _letter_probs(model, enc: Encoder, item: tasks.Item):
    import torch

    ids, patches = enc.encode(item)
    model.model.rope_deltas = None
    out = model(input_ids=torch.tensor([ids]), attention_mask=torch.ones((1, len(ids)), dtype=torch.long),
                pixel_values=torch.from_numpy(patches.values).double(), image_grid_thw=torch.tensor([list(patches.grid)]),
                use_cache=False)
    return torch.softmax(out.logits[0, -1, : enc.tok.size][enc.letters[: len(item.options)]], -1)


# ---------------------------------------------------------------------------------------------------------------------
# Evaluation through the real engine (no torch)
# ---------------------------------------------------------------------------------------------------------------------

def engine_probabilities(runner, items, pixels=None):
    """Bars from decide() with each item's picture (or the one `pixels` picture for every item)."""
    return common.engine_probabilities(runner, items, (lambda it: it.image()) if pixels is None else (lambda it: pixels))


def test_items():
    items = tasks.heldout_items(TEST_SEED, TEST_COUNTS)
    return items, tasks.shuffled(items, TEST_SHUFFLE_SEED)


# Plain greys like the trained backgrounds (which are greys of any shade, faintly tinted), and two colours outside them.
BLANKS = ((128, 128, 128), (255, 255, 255), (40, 40, 40))
UNTRAINED_BLANKS = ((0, 0, 0), (200, 170, 120))


def blank_items() -> list[tasks.Item]:
    """Every question with every option count it has, to be asked over blank pictures."""
    rng = random.Random(TEST_SEED + 7)
    out = []
    for kind in ("colour_none", "star_none", "door_none"):
        for _ in range(4):
            out.append(tasks.make_item(rng, kind, "any"))
    return out


def blank_spread(runner, colours=BLANKS) -> dict:
    """Per plain colour: the largest |bar - 1/n| over every question asked about it (nothing to see: even bars)."""
    items = blank_items()
    out = {}
    for colour in colours:
        probs, _ = engine_probabilities(runner, items, tasks.blank(colour))
        out[str(colour)] = max(abs(p - 1 / len(ps)) for ps in probs for p in ps)
    return out


def evaluate_engine(folder: Path = OUT) -> dict:
    from decider.engine.runners.runner import ModelRunner

    runner = ModelRunner(folder)
    m = common.engine_metrics(runner, *test_items(), image_of=lambda it: it.image())
    m["blank_deviation"] = blank_spread(runner)
    m["blank_max_deviation"] = max(m["blank_deviation"].values())
    m["untrained_blank_deviation"] = blank_spread(runner, UNTRAINED_BLANKS)
    return m


# Styles training never saw (tools/demo_vl_tasks.py STYLE_VALUES["heldout"]) and the issue's own cases (#27 item 8).
STYLE_SEED = 8_2030
STYLE_COUNTS = {"colour": 24, "star": 24, "door": 24, "colour_none": 8, "star_none": 8, "door_none": 8}
ISSUE_SEED = 8_2031
ISSUE_PER_CASE = 8  # per picture size: stars, circles and narrow outside-leaf doors
STYLE_TARGETS = {"accuracy": 0.90, "largest_wrong_bar": 0.90, "blank_max_deviation": 0.25}


def largest_wrong_bar(items, probs) -> float:
    """The highest bar given to a wrong answer on an answerable item (0 when none is wrong)."""
    wrong = [max(p) for it, p in zip(items, probs) if not it.ambiguous and demo_tasks.argmax(p) != it.answer]
    return max(wrong, default=0.0)


def style_metrics(runner, items) -> dict:
    """Accuracy, ECE, largest wrong bar on `items`, and the largest |bar - 1/n| over each scene's background alone."""
    probs, _ = engine_probabilities(runner, items)
    m = demo_tasks.metrics(items, probs)
    m["largest_wrong_bar"] = largest_wrong_bar(items, probs)
    blanks = [engine_probabilities(runner, [it], tasks.styled_blank(it.scene))[0][0] for it in items if not it.ambiguous]
    m["blank_max_deviation"] = max(abs(p - 1 / len(ps)) for ps in blanks for p in ps)
    m["items"] = len(items)
    return m


def evaluate_styles(folder: Path = OUT) -> dict:
    from decider.engine.runners.runner import ModelRunner

    runner = ModelRunner(folder)
    return {"heldout_styles": style_metrics(runner, tasks.heldout_style_items(STYLE_SEED, STYLE_COUNTS)),
            "issue_cases": style_metrics(runner, tasks.issue_case_items(ISSUE_SEED, ISSUE_PER_CASE))}


def style_passes(m: dict) -> bool:
    s = m["heldout_styles"]
    return (s["accuracy"] >= STYLE_TARGETS["accuracy"] and s["largest_wrong_bar"] <= STYLE_TARGETS["largest_wrong_bar"]
            and s["blank_max_deviation"] <= STYLE_TARGETS["blank_max_deviation"])


def print_style_metrics(m: dict) -> None:
    for name, s in m.items():
        log(f"  {name} ({s['items']} items): accuracy {s['accuracy'] * 100:.1f}%  ECE {s['ece']:.3f}  "
            f"largest wrong bar {s['largest_wrong_bar']:.3f}  blank max |bar - 1/n| {s['blank_max_deviation']:.3f}  "
            f"by kind {json.dumps({k: round(v, 3) for k, v in s['by_kind'].items()})}")


def style_card_lines(sm: dict) -> list[str]:
    """The model card's section on styles training never saw and on the issue's cases (#27 item 8)."""
    heldout = STYLE_VALUES_TEXT
    lines = [
        "## Results on styles training never saw (through the real engine)",
        "",
        f"**Held-out styles** ({sm['heldout_styles']['items']} items, `heldout_style_items({STYLE_SEED})`: "
        + ", ".join(f"{v} {k}" for k, v in STYLE_COUNTS.items()) + f"): every scene in {heldout}.",
        f"**Issue cases** ({sm['issue_cases']['items']} items, `issue_case_items({ISSUE_SEED}, {ISSUE_PER_CASE})`): five-point "
        "stars (filled and outlined), circles, and narrow doors with the leaf swung outside the frame, on 120×300 and "
        "320×180 pictures. Blank: each answerable scene's background alone at its size, asked the same question.",
        "",
        "| set | accuracy (answerable) | colour / star / door | ECE | largest wrong bar | blank: largest \\|bar − 1/n\\| |",
        "|---|---|---|---|---|---|",
    ]
    for name in ("heldout_styles", "issue_cases"):
        s = sm[name]
        kinds = " / ".join(f"{s['by_kind'].get(k, float('nan')) * 100:.0f} %" for k in ("colour", "star", "door"))
        lines.append(f"| {name.replace('_', ' ')} | {s['accuracy'] * 100:.1f} % | {kinds} | {s['ece']:.3f} | "
                     f"{s['largest_wrong_bar']:.3f} | {s['blank_max_deviation']:.3f} |")
    lines += [
        f"| target (held-out styles) | ≥ {STYLE_TARGETS['accuracy'] * 100:.0f} % | | | ≤ {STYLE_TARGETS['largest_wrong_bar']:.2f} | "
        f"≤ {STYLE_TARGETS['blank_max_deviation']:.2f} |",
        "",
        "The held-out styles were never drawn in training, but their results chose each continued training run "
        "(docs/demo-model/TRAINING_VL.md): they served as a validation set; fresh draws of the same styles are recorded "
        "there, and styles outside every axis above (other shapes and door drawings, photographs) are untested.",
        "",
        "`tests/test_demo_vl_model.py` measures the held-out styles the same way.",
        "",
    ]
    return lines


# Issue 39 item 5: pictures of something else, written words, lit and coloured doorways, all in held-out styles.
# Two draws: "choice" was measured while choosing among runs (and is ship's gate); "fresh" was never looked at while
# choosing: the card reports both. tests/test_demo_vl_model.py draws with the fresh seed. A new fresh seed for each
# model shipped (82041 was r9a's, looked at when it shipped; 82042 r9f's).
NEW_SEEDS = {"choice": 8_2040, "fresh": 8_2042}
# 288 + 144 + 80 pictures per draw. Was 72 + 72 + 40 until r8c: the largest deviation of one model then varied
# 0.22-0.56 between draws of 72 (one picture decided it), too noisy to choose a run or to state a model by.
NEW_COUNTS = {"irrelevant_per_case": 24, "word_per_task": 48, "lit_doors": 80}
NEW_TARGETS = {"irrelevant_max_deviation": 0.15, "word_accuracy": 0.90, "lit_door_accuracy": 0.90}


def follows_word(item: tasks.Item, probs) -> bool:
    """Whether the chosen option is the word written on the picture (a wrong option's name)."""
    words = [w["text"].lower() for w in item.scene.get("words", ())]
    return item.options[demo_tasks.argmax(probs)].lower() in words


def new_kind_sets(seed: int, counts: dict = NEW_COUNTS) -> dict:
    return {"irrelevant": tasks.irrelevant_items(seed, counts["irrelevant_per_case"]),
            "words": tasks.word_items(seed + 100, counts["word_per_task"]),
            "lit_doors": tasks.lit_door_items(seed + 200, counts["lit_doors"])}


def new_kind_metrics(runner, seed: int, counts: dict = NEW_COUNTS) -> dict:
    """Irrelevant pictures: largest and median |bar - 1/n| (by picture kind and question); word distractors:
    accuracy, how often the written word won, largest wrong bar; lit or coloured doorways: accuracy, largest wrong bar."""
    import statistics

    sets = new_kind_sets(seed, counts)
    out = {"seed": seed}
    irr = sets["irrelevant"]
    probs, _ = engine_probabilities(runner, irr)
    dev = [max(abs(p - 1 / len(ps)) for p in ps) for ps in probs]
    out["irrelevant"] = {
        "items": len(irr), "max_deviation": max(dev), "median_deviation": statistics.median(dev),
        "over_target": sum(d > NEW_TARGETS["irrelevant_max_deviation"] for d in dev),
        "by_picture": {j: max(d for it, d in zip(irr, dev) if it.scene["junk"]["kind"] == j) for j in tasks.JUNK_KINDS},
        "by_question": {q: max(d for it, d in zip(irr, dev) if it.scene["task"] == q) for q in ("colour", "star", "door")},
    }
    for name in ("words", "lit_doors"):
        items = sets[name]
        probs, _ = engine_probabilities(runner, items)
        m = demo_tasks.metrics(items, probs)
        out[name] = {"items": len(items), "accuracy": m["accuracy"], "by_kind": m["by_kind"],
                     "largest_wrong_bar": largest_wrong_bar(items, probs)}
        if name == "words":
            out[name]["follows_word"] = sum(follows_word(it, p) for it, p in zip(items, probs)) / len(items)
    return out


def evaluate_new(folder: Path = OUT) -> dict:
    from decider.engine.runners.runner import ModelRunner

    runner = ModelRunner(folder)
    return {name: new_kind_metrics(runner, seed) for name, seed in NEW_SEEDS.items()}


def new_passes(m: dict) -> bool:
    c = m["choice"]
    return (c["irrelevant"]["max_deviation"] <= NEW_TARGETS["irrelevant_max_deviation"]
            and c["words"]["accuracy"] >= NEW_TARGETS["word_accuracy"]
            and c["lit_doors"]["accuracy"] >= NEW_TARGETS["lit_door_accuracy"])


def unmet_new_targets(c: dict) -> list[str]:
    t = NEW_TARGETS
    return [name for name, ok in (
        ("irrelevant pictures: largest |bar − 1/n|", c["irrelevant"]["max_deviation"] <= t["irrelevant_max_deviation"]),
        ("words: accuracy", c["words"]["accuracy"] >= t["word_accuracy"]),
        ("lit doors: accuracy", c["lit_doors"]["accuracy"] >= t["lit_door_accuracy"])) if not ok]


def new_better(c: dict, before: dict) -> bool:
    """Each of the three measures met or better than `before`'s (the shipped model on the same draw); for the
    pictures of something else: the largest deviation no worse (within 0.01) and fewer pictures beyond the target.
    (Until r8c the second half was "the median smaller". Changed after r9a's measurement, which had a third of
    r8c's pictures beyond the target on the choice draw and a median 0.001 larger: the medians, 0.007-0.009, are a
    rounding's width apart, while the target is about the pictures that stray.)"""
    t = NEW_TARGETS
    i, j = c["irrelevant"], before["irrelevant"]
    return ((i["max_deviation"] <= t["irrelevant_max_deviation"]
             or (i["max_deviation"] <= j["max_deviation"] + 0.01 and i["over_target"] < j["over_target"]))
            and (c["words"]["accuracy"] >= t["word_accuracy"] or c["words"]["accuracy"] > before["words"]["accuracy"])
            and (c["lit_doors"]["accuracy"] >= t["lit_door_accuracy"] or c["lit_doors"]["accuracy"] > before["lit_doors"]["accuracy"]))


def print_new_metrics(m: dict) -> None:
    for name, s in m.items():
        i, w, d = s["irrelevant"], s["words"], s["lit_doors"]
        log(f"  {name} draw (seed {s['seed']}): irrelevant ({i['items']}) max |bar - 1/n| {i['max_deviation']:.3f} ({i.get('over_target')} beyond target) median "
            f"{i['median_deviation']:.3f} {json.dumps({k: round(v, 3) for k, v in {**i['by_picture'], **i['by_question']}.items()})}")
        log(f"    words ({w['items']}) accuracy {w['accuracy'] * 100:.1f}% (word won {w['follows_word'] * 100:.1f}%, largest wrong "
            f"bar {w['largest_wrong_bar']:.3f}, {json.dumps({k: round(v, 3) for k, v in w['by_kind'].items()})}); lit doors "
            f"({d['items']}) accuracy {d['accuracy'] * 100:.1f}% (largest wrong bar {d['largest_wrong_bar']:.3f})")


def new_card_lines(m: dict) -> list[str]:
    """The model card's section on pictures of something else, written words and lit doorways (issue 39 item 5)."""
    t = NEW_TARGETS
    lines = [
        "## Pictures of something else, written words, lit doorways (through the real engine)",
        "",
        "All in held-out styles (every style axis above at its held-out values, and these axes too). **Irrelevant**: "
        f"{NEW_COUNTS['irrelevant_per_case']} pictures per kind and question of faces (oval, with hair, eyes with pupils, a "
        "nose), written words (a bold font; LEFT, RIGHT, colour names and other words), shapes (arrows, trapezoids, "
        "chevrons, some in the circle colours) and photograph-like textures (fractal noise, marble), asked each of the "
        "three questions: nothing answers it, the bars should stay even. **Words**: "
        f"{NEW_COUNTS['word_per_task']} colour, star and door scenes each with a wrong option's name written on them (the "
        "star's other side, mostly on that side; a closed door's side above it; another colour, half the time in that "
        f"colour). **Lit doors**: {NEW_COUNTS['lit_doors']} door scenes whose open doorway glows or shows teal or pink, "
        "half of them with mustard or plum doors. Training drew none of these values (faces round or square, a pixel or "
        "plain font, squares, triangles, bars, diamonds, ellipses, L shapes, pentagons, crosses, parallelograms, kites and "
        "T shapes, cloudy or blobby textures, dark, warm-lit, "
        "white, sky, grass, red, purple or orange doorways and dusk or dawn gradients, red, green, white, blue or black doors).",
        "",
        "| draw | irrelevant: largest \\|bar − 1/n\\| (median) | by picture: face / text / shapes / texture | words: accuracy "
        "(word won) | words: largest wrong bar | lit doors: accuracy | lit doors: largest wrong bar | irrelevant: "
        f"pictures beyond {t['irrelevant_max_deviation']:.2f} |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in ("choice", "fresh"):
        s = m[name]
        i, w, d = s["irrelevant"], s["words"], s["lit_doors"]
        label = ("while choosing (seed " if name == "choice" else "fresh (seed ") + f"{s['seed']})"
        lines.append(f"| {label} | {i['max_deviation']:.3f} ({i['median_deviation']:.3f}) | "
                     + " / ".join(f"{i['by_picture'][j]:.3f}" for j in tasks.JUNK_KINDS)
                     + f" | {w['accuracy'] * 100:.1f} % ({w['follows_word'] * 100:.1f} %) | {w['largest_wrong_bar']:.3f} | "
                     f"{d['accuracy'] * 100:.1f} % | {d['largest_wrong_bar']:.3f} | {i['over_target']} of {i['items']} |")
    lines += [
        f"| target | ≤ {t['irrelevant_max_deviation']:.2f} | | ≥ {t['word_accuracy'] * 100:.0f} % | | ≥ {t['lit_door_accuracy'] * 100:.0f} % | | none |",
        "",
        *([f"**Not met** (on the draw used while choosing): {'; '.join(unmet_new_targets(m['choice']))}. This model shipped "
           "because it meets every other target and is better than the model it replaced on these (on the "
           "pictures of something else: the largest deviation no worse, fewer pictures beyond the target; "
           "docs/demo-model/TRAINING_VL.md gives both)."] if unmet_new_targets(m["choice"]) else []),
        "",
        "The first draw was measured while choosing among training runs (it is `ship`'s gate); the fresh draw "
        f"(`new_kind_sets({NEW_SEEDS['fresh']})`) was not looked at until the model was chosen. `tests/test_demo_vl_model.py` "
        "draws with the fresh seed.",
        "",
    ]
    return lines


NEW_TRAIN_TEXT = ("round or square faces with dot or line eyes (a yellow smiley only for the star and door questions), "
                  "words in a pixel or a plain font (LEFT, RIGHT, MIDDLE, colour names, other words, some in the circle "
                  "colours), squares, triangles, bars, diamonds, ellipses, L shapes and (from r9) pentagons, crosses, "
                  "parallelograms, kites and T shapes (half of them in the circle colours, or the share a run's extras "
                  "give as junk_colour; never a circle), cloudy or blobby textures; the doorways dark, warm-lit, white, sky, grass, red, purple, "
                  "orange or a dusk or dawn gradient; doors red, green, white, blue or black; the word names a wrong "
                  "option: the star's other side, a closed door, another colour")


STYLE_VALUES_TEXT = ("styles no training picture had: aspect ratios 1:3 to 1:2.2 or 2.2:1 to 3:1 (60 to 400 pixels a "
                     "side), six-point stars, doors whose leaf swings outside the frame, blue or yellow frames, "
                     "two-grey gradient backgrounds")


def evaluate(args, folder: Path = OUT) -> dict:
    m = evaluate_engine(folder)
    m["styles"] = evaluate_styles(folder)
    common.print_metrics(log, m, [f"  blank pictures: largest |bar - 1/n| {json.dumps(m['blank_deviation'])}; "
                                  f"untrained colours {json.dumps(m['untrained_blank_deviation'])}"])
    print_style_metrics(m["styles"])
    m["new"] = evaluate_new(folder)
    print_new_metrics(m["new"])
    return common.save_metrics(args.work, m)


def passes(m: dict, new_before: dict | None = None) -> bool:
    """Every target met; or, given the shipped model's issue-39 numbers, those met or each better than the shipped's."""
    new_ok = "new" not in m or new_passes(m["new"]) or (new_before is not None and new_better(m["new"]["choice"], new_before))
    return (m["accuracy"] >= 0.90 and m["ece"] <= 0.10 and m["blank_max_deviation"] <= 0.15
            and ("styles" not in m or style_passes(m["styles"])) and new_ok)



# ---------------------------------------------------------------------------------------------------------------------
# Curves (CSV + PNG, drawn with Pillow: no plotting library needed) and the model card
# ---------------------------------------------------------------------------------------------------------------------

def plot_curve(rows: list[dict], path: Path) -> None:
    """Validation answer loss (with the uniform guess's level) and validation accuracy against the step."""
    from PIL import Image, ImageDraw

    width, height, pad = 720, 300, 48
    image = Image.new("RGB", (width * 2, height), "white")
    draw = ImageDraw.Draw(image)
    steps = [int(r["step"]) for r in rows]
    last = max(steps) or 1
    panels = [
        ("validation answer loss (nats); dashed: uniform guess", [float(r["val_answer_loss"]) for r in rows],
         float(rows[0]["val_chance_loss"]), (0.0, max(1.2, max(float(r["val_answer_loss"]) for r in rows)))),
        ("validation accuracy (unambiguous items); dashed: 90 %", [float(r["val_accuracy"]) for r in rows], 0.9, (0.0, 1.0)),
    ]
    for k, (title, values, level, (lo, hi)) in enumerate(panels):
        x0 = k * width
        def xy(step, v):
            return (x0 + pad + (width - 2 * pad) * step / last, height - pad - (height - 2 * pad) * (v - lo) / (hi - lo))
        draw.rectangle((x0 + pad, pad, x0 + width - pad, height - pad), outline="black")
        draw.text((x0 + pad, 16), title, fill="black")
        for frac in (0.0, 0.5, 1.0):
            v = lo + frac * (hi - lo)
            draw.text((x0 + 6, xy(0, v)[1] - 6), f"{v:.2f}", fill="black")
        draw.text((x0 + pad, height - pad + 8), "0", fill="black")
        draw.text((x0 + width - pad - 30, height - pad + 8), f"{last} steps", fill="black")
        ly = xy(0, level)[1]
        for x in range(x0 + pad, x0 + width - pad, 12):
            draw.line((x, ly, x + 6, ly), fill=(150, 150, 150))
        draw.line([xy(s_, v) for s_, v in zip(steps, values)], fill=(30, 90, 200), width=2)
        for s_, v in zip(steps, values):
            cx, cy = xy(s_, v)
            draw.ellipse((cx - 3, cy - 3, cx + 3, cy + 3), fill=(30, 90, 200))
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)


def write_curves(work: Path) -> None:
    DOCS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(work / "curve.csv", DOCS / "curve_vl.csv")
    plot_curve(list(csv.DictReader(open(work / "curve.csv"))), DOCS / "curve_vl.png")
    log(f"curves -> {DOCS / 'curve_vl.csv'}, {DOCS / 'curve_vl.png'}")


STYLE_TRAIN_TEXT = ("60 to 400 pixels a side at 1:2.15 to 2.15:1 for half of them, 1:4.5 to 1:3.2 or 3.2:1 to 4.5:1 for the "
                    "rest; four-, five-, seven- and eight-point stars, filled or outlined; wide or narrow doors with the leaf "
                    "inside the frame, half out of it or out of sight; white, black, red, green, grey, purple or orange "
                    "frames; grey, tinted or noisy backgrounds, or banded and radial ones that may run from dark to light; small "
                    "squares and triangles as distractors; half the 'no open door' scenes have no door at all")


def training_run_lines(summary: dict) -> list[str]:
    """The card's lines on how the exported checkpoint was trained: one run, or a run continued from another's."""
    def run(s: dict, how: str) -> str:
        hp = s["hparams"]
        until = "the time budget" if hp.get("anneal_by_time") and s.get("minutes_budget") else "the planned steps"
        extra = f", styled kinds weighted {json.dumps(hp['style_mix'])}" if hp.get("style_mix") else ""
        extra += f", extras {json.dumps(hp['extras'])}" if hp.get("extras") else ""
        extra += f", pictures of something else weighted {hp['junk_weight']}× in the answer loss" if hp.get("junk_weight", 1) != 1 else ""
        extra += f", other kinds weighted {json.dumps(hp['kind_weights'])} in the answer loss" if hp.get("kind_weights") else ""
        extra += (f", the worst quarter of a batch's pictures of something else added {hp['junk_tail']}× to the answer loss"
                  if hp.get("junk_tail") else "")
        extra += f", pixel budget up to {hp['max_pixels']:,} pixels" if hp.get("max_pixels", 128 * 128) != HPARAMS["max_pixels"] else ""
        if s.get("minutes_budget"):
            until = f"a {s['minutes_budget']}-minute budget"
        kept = s.get("note") or f"its checkpoint with the lowest validation answer loss (step {s['best_step']}) was kept"
        return (f"{how}, seed {s['seed']}: {s['steps_run']:,} steps of {hp['batch']} fresh scenes (AdamW, lr {hp['lr']}, warmup "
                f"{hp['warmup']}, cosine to {hp['min_lr_frac']}x planned by the end of {until}{extra}), {s['elapsed_s'] / 60:.0f} minutes; "
                f"{kept}")
    chain = [summary]  # this run, then the run it continued, and so on back to the one from scratch
    while chain[-1].get("init"):
        chain.append(json.loads((Path(chain[-1]["init"]).parent / "train_summary.json").read_text()))
    chain.reverse()
    # A checkpoint rebuilt from an exported folder (its own checkpoint not kept) carries the card lines of the runs
    # that made it instead of their summaries.
    lines = list(chain[0].get("card_lines", []))
    if lines:
        chain = chain[1:]
    for i, s in enumerate(chain):
        how = "From scratch" if i == 0 and not lines else "Continued from that checkpoint (the training-only probes afresh)"
        if lines and i == 0 and chain[0].get("init_note"):
            how = f"Continued from {chain[0]['init_note']} (the training-only probes afresh)"
        lines.append(f"- Run {len(lines) + 1}. {run(s, how)}" + (", and exported." if i == len(chain) - 1 and not s.get("note") else "."))
    lines.append(f"- {summary['threads']} CPU thread(s) of a heavily shared 2-core machine (torch {summary['versions'].get('torch')}, "
                 f"transformers {summary['versions'].get('transformers')}).")
    return lines


def pixel_budget(folder: Path, width: int, height: int) -> tuple[dict, tuple[int, int, int]]:
    """The folder's pixel budget ({"shortest_edge", "longest_edge"}) and what it makes of a width × height picture:
    (width, height, image tokens), by the engine's own resize rule."""
    from decider.engine.vision.preprocess import ProcessorConfig, target_size

    data = json.loads((folder / "preprocessor_config.json").read_text())
    config = ProcessorConfig.from_dict(data, VISION)
    h, w = target_size(height, width, config)
    return data["size"], (w, h, (h // config.factor) * (w // config.factor))


def write_card(args) -> Path:
    from decider.engine.decisions.prompt import load_templates, render_user_text

    work = args.work
    summary = json.loads((work / "train_summary.json").read_text())
    m = json.loads((work / "engine_metrics.json").read_text())
    par = json.loads((work / "parity.json").read_text())
    text, vision = summary["text"], summary["vision"]
    example = render_user_text(tasks.QUESTIONS["colour"], ["red", "Blue", "yellow"], False, load_templates())
    budget, scaled = pixel_budget(OUT, 320, 180)
    rows = curve_summary(work / "curve.csv")
    hp = summary["hparams"]
    lines = [
        "# Decider seeing demo model",
        "",
        f"**This is a demo model.** A tiny ({summary['parameters']:,}-parameter) Qwen3.5 vision-language model, trained from",
        "scratch on three synthetic picture questions so that Decider can show a decision made *from an image*, with",
        "meaningful bars, without a download. It sees nothing but these rendered scenes. `config.json` carries",
        '`"decider_demo": true` and the folder holds a `DEMO` marker file.',
        "",
        "```bash",
        "decider ask --model resources/demo-vl-model --image scene.png \"Which colour is the circle?\" --option red --option green --option blue",
        "```",
        "",
        "## Architecture",
        "",
        f"- `Qwen3_5ForConditionalGeneration` (`model_type` `qwen3_5`), exported with optimum-intel "
        f"({summary['versions'].get('optimum-intel')}) as `image-text-to-text` (stateful language model, text embeddings, "
        f"the three vision IRs), {par['dtype']} weights; the export matches transformers (float64) to "
        f"{par['max_abs_probability_delta']:.0e} on the option probabilities.",
        f"- Vision tower ({summary['vision_parameters']:,} parameters): patch {vision['patch_size']}, temporal patch "
        f"{vision['temporal_patch_size']}, {vision['depth']} blocks of width {vision['hidden_size']} ({vision['num_heads']} heads, "
        f"MLP {vision['intermediate_size']}), a {int(vision['num_position_embeddings'] ** 0.5)}×{int(vision['num_position_embeddings'] ** 0.5)} "
        f"learned position table, 2×2 merger to the text width {vision['out_hidden_size']}.",
        f"- Pixel budget (`preprocessor_config.json`): {budget['shortest_edge']} to {budget['longest_edge']} pixels, so a "
        f"{tasks.SIZE}×{tasks.SIZE} scene is 36 patches and 9 image tokens; a larger picture is scaled down into the same "
        f"budget (a 320×180 picture becomes {scaled[0]}×{scaled[1]}, {scaled[2]} image tokens).",
        f"- Language model: {text['num_hidden_layers']} layers "
        f"({', '.join('Gated DeltaNet' if t == 'linear_attention' else 'gated full attention' for t in text['layer_types'])}), "
        f"hidden {text['hidden_size']}, MLP {text['intermediate_size']}, tied embeddings.",
        f"- Tokenizer: byte-level BPE with Qwen's pre-tokenizer and special tokens (including `<|vision_start|>`, "
        f"`<|image_pad|>`, `<|vision_end|>`), {summary['tokenizer_size']} ids; its merges were learnt from the task prompts,",
        "  so every option word is one token. Other text still encodes (byte by byte), but the model never saw it.",
        f"- Folder size {dir_size(OUT) / 1e6:.2f} MB.",
        "",
        "## Tasks and exact prompt wording",
        "",
        f"Pictures are {tasks.SIZE}×{tasks.SIZE} RGB, drawn with Pillow (tools/demo_vl_tasks.py): a grey background of any",
        "shade, sometimes with pixel noise, and",
        "",
        "1. **Colour** — `Which colour is the circle?` over one circle (any size and place) of red, green, blue or yellow;",
        "   2 to 4 colour options, one of them right.",
        "2. **Star** — `Where is the star: left or right?` over one light-on-dark or dark-on-light star in the left or the",
        "   right half; options left, right.",
        "3. **Door** — `Which door is open?` over 2 or 3 doors in a row, one open (a dark doorway and its swung leaf);",
        "   options left, right (and middle with 3 doors).",
        "4. **Nothing to see** — the same questions over a blank picture (colour, star) or doors that are all closed:",
        "   trained towards even bars, so the model says it cannot tell.",
        "",
        "Options come in shuffled order; every word may have its first letter's case flipped (`red` / `Red`).",
        "Example (user turn after the image):",
        "",
        "```",
        example,
        "```",
        "",
        "The full prompt is exactly what the engine builds for a decision with one image: `<|im_start|>user\\n"
        "<|vision_start|>` + 9 × `<|image_pad|>` + `<|vision_end|>` + the text above + "
        "`<|im_end|>\\n<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n`, with Qwen3.5's 3-D positions for the image tokens.",
        "",
        "## Results (held-out layouts, through the real engine)",
        "",
        f"Measured with `decide()` on the exported folder (`--image` path: pixels → engine preprocessing → the vision IRs),"
        f" on {m['items']} items whose scene layouts (task, option set, answer, object place and size cells, background",
        "shade cell) were never generated in training (a fixed 1-in-10 hash split), drawn with another seed: "
        + ", ".join(f"{v} {k}" for k, v in TEST_COUNTS.items()) + ". The same check runs in `tests/test_demo_vl_model.py`.",
        "",
        "| metric | value | target |",
        "|---|---|---|",
        f"| accuracy, unambiguous items | {m['accuracy'] * 100:.1f} % | ≥ 90 % |",
        f"| colour / star / door (mean correctness) | {m['by_kind'].get('colour', 0) * 100:.1f} % / {m['by_kind'].get('star', 0) * 100:.1f} % / "
        f"{m['by_kind'].get('door', 0) * 100:.1f} % | |",
        f"| expected calibration error, all items (10 equal-width bins) | {m['ece']:.3f} | ≤ 0.10 |",
        f"| mean confidence on correct answers | {m['confidence_correct']:.3f} | |",
        f"| mean confidence on wrong or nothing-to-see ones | {m['confidence_other']:.3f} | |",
        f"| accuracy with every option list reshuffled | {m['accuracy_reshuffled'] * 100:.1f} % (Δ {m['shuffle_delta_points']:.1f} points) | |",
        f"| blank grey pictures (grey 128, white, grey 40; 12 questions each): largest \\|bar − 1/n\\| | {m['blank_max_deviation']:.3f} | ≤ 0.15 |",
        "| blank pictures in colours no training background had: largest \\|bar − 1/n\\| | "
        + ", ".join(f"{k}: {v:.2f}" for k, v in m["untrained_blank_deviation"].items()) + " | (a limit) |",
        f"| mean probability mass on the option letters (coverage) | {m['mean_coverage']:.3f} | |",
        "",
        "Correctness on nothing-to-see items is 1/n (any choice is a guess); confidence is the chosen option's bar.",
        "",
        *style_card_lines(m["styles"]),
        *(new_card_lines(m["new"]) if "new" in m else []),
        "## Training",
        "",
        *training_run_lines(summary),
        f"- Loss: soft-label cross-entropy at the answer position + {hp['lm_weight']} × LM loss on the prompt's text + "
        f"{hp['probe_weight']} × two training-only probes (not exported): on each option's token, is this option the answer (as for",
        "  the text demo model); on the image tokens' features, what the scene shows (colour, side, or nothing). Without the",
        "  second, the answer stayed at the prior for 400 steps (docs/demo-model/TRAINING_VL.md).",
        "- Pixels go through the engine's own preprocessing in training too, so the model learnt on the patches the engine feeds.",
        f"- Each batch: {1 - hp.get('style_share', 0):.0%} 96×96 scenes as above, {hp.get('style_share', 0):.0%} scenes in the training "
        f"styles of `STYLE_VALUES['train']` ({STYLE_TRAIN_TEXT}), their targets smoothed by "
        f"{hp.get('style_smoothing', 0)} towards even, so a styled picture's bar tops out near {1 - hp.get('style_smoothing', 0) / 2:.2f} for two options."
        + (f" {summary['data_changes']}" if summary.get("data_changes") else ""),
        *([f"- In the runs with extras (issue 39 item 5): pictures of something else among the styled "
           f"scenes (colour_junk, star_junk, door_junk in the kind weights above; {NEW_TRAIN_TEXT}), and on the styled scenes "
           "written words, lit or coloured doorways and painted doors, each on the share of the scenes its run's extras "
           "give (doorway and paint: of the door scenes)."] if hp.get("extras") else []),
        "- Reproduce: `python tools/train_demo_vl.py all` (needs torch, transformers 5.2, optimum-intel 2.2)"
        + (", then `train --init <previous run>/checkpoint` with each later run's options (docs/demo-model/TRAINING_VL.md)" if summary.get("init") else "")
        + ". Curve (of the last run): `docs/demo-model/curve_vl.csv` and `curve_vl.png`.",
        "",
        f"Training curve (validation: {hp['val_items']} held-out layouts + {hp.get('style_val_items', 0)} scenes in the training styles; uniform guess = {float(rows[0]['val_chance_loss']):.3f}):",
        "",
        "| step | minutes | train answer loss | val answer loss | val accuracy | val ECE |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['step']} | {float(r['elapsed_s']) / 60:.1f} | {r['train_answer_loss'] or '-'} | {r['val_answer_loss']} | "
                     f"{float(r['val_accuracy']) * 100:.1f} % | {float(r['val_ece']):.3f} |")
    lines += [
        "",
        "## What it cannot do",
        "",
        "- Blank pictures of a colour no training background had (pure black, a tan) can give confident bars on the",
        "  colour question (table above); the trained backgrounds are greys of any shade with a faint tint.",
        "- Pictures of something else were trained towards even bars only as drawn here (faces, words, shapes, textures:",
        "  table above). Photographs, screenshots, several circles or stars, more doors, other wordings are untested: its",
        "  bars there mean nothing (they may be confident and wrong). A non-round shape in one of the four colours may",
        "  still pull the colour question towards its colour (the largest irrelevant deviations above are such shapes).",
        f"- Pictures of another size are scaled into the {budget['shortest_edge']} to "
        f"{budget['longest_edge']}-pixel budget; very thin ones (beyond 1:3) become a strip one or two tokens wide.",
        "- It never saw text without a picture, several pictures, a system prompt, context or thinking mode; generated text is gibberish.",
        "- It is not a small Qwen3.5: same architecture, none of the knowledge.",
        "",
    ]
    return common.write_card_file(OUT, lines, log)


def main(argv=None) -> int:
    ap = common.base_parser(__doc__, ["train", "export", "evaluate", "card", "all", "ship", "export-worker", "rebuild"], DEFAULT_WORK, 4000)
    ap.add_argument("--init", type=Path, default=None, help="start from this checkpoint's weights (continue a run)")
    ap.add_argument("--max-pixels", dest="max_pixels", type=int, default=None,
                    help=f"the pixel budget's upper end (default {HPARAMS['max_pixels']}): trained with, shipped with")
    ap.add_argument("--junk-weight", dest="junk_weight", type=float, default=None,
                    help="weight of a picture of something else in the answer loss (default 1)")
    ap.add_argument("--kind-weights", dest="kind_weights", type=json.loads, default=None,
                    help='answer-loss weights of other kinds, as JSON, e.g. \'{"door": 2}\' (default 1 each); "words": '
                         'also times this for a scene with a word written on it')
    ap.add_argument("--junk-tail", dest="junk_tail", type=float, default=None,
                    help="weight of the worst quarter of a batch's pictures of something else, by distance from even (default 0)")
    ap.add_argument("--keep-last", dest="keep_last", action="store_true", default=None,
                    help="also keep the latest evaluated weights in <work>/checkpoint_last")
    ap.add_argument("--extras", type=json.loads, default=None,
                    help='probabilities of words / lit doorways / paint on styled scenes, e.g. \'{"words": 0.3, ...}\'')
    ap.add_argument("--style-mix", dest="style_mix", type=json.loads, default=None,
                    help='kinds of the styled scenes, as JSON weights (default: the 96×96 mix), e.g. \'{"star": 0.4, ...}\'')
    args = ap.parse_args(argv)
    if args.command == "export-worker":
        checkpoint, out = args.rest
        common.export_worker(checkpoint, out, TASK, "fp32")
        return 0
    if args.command == "rebuild":
        rebuild(args)
        return 0
    if args.command in ("train", "all"):
        train(args)
    if args.command == "export":
        export(args)
    if args.command == "evaluate":
        evaluate(args)
    if args.command in ("all", "ship"):
        # The new model replaces the shipped one only if it meets every target: a worse model never ships. Issue 39's
        # three targets (pictures of something else, words, lit doorways) may instead be missed by a candidate that is
        # better than the shipped model on each of them (it meets every other target); the card then says so.
        candidate = export(args, args.work / "candidate")
        m = evaluate(args, candidate)
        if OUT.exists() and not new_passes(m["new"]):
            from decider.engine.runners.runner import ModelRunner

            m["new_shipped_before"] = new_kind_metrics(ModelRunner(OUT), NEW_SEEDS["choice"])
            common.save_metrics(args.work, m)
        if not passes(m, m.get("new_shipped_before")):
            log(f"targets NOT met: the shipped model stays; the candidate is left in {candidate}")
            return 1
        shutil.rmtree(OUT)
        candidate.rename(OUT)
    if args.command in ("card", "all", "ship"):
        write_curves(args.work)
        write_card(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
