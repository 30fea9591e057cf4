#!/usr/bin/env python
"""Train, export and evaluate Decider's bundled demo model (resources/demo-model/).

A tiny Qwen3.5-architecture text model (Qwen3_5ForCausalLM, model_type qwen3_5_text, Gated DeltaNet and
gated full-attention layers) trained from scratch on the decision tasks of tools/demo_tasks.py, asked exactly
the way the engine asks (engine.decision_prompt.build_decision_prompt, thinking off; the answer is the
option letter's token right after the prompt).

Environment: torch 2.13 (CPU), transformers 5.2, optimum-intel 2.2, openvino, tokenizers (e.g. the venv `python -m bench setup` makes, ~/.cache/decider-bench/venv).

    python tools/train_demo.py train  [--steps N] [--minutes M] [--threads 1] [--work DIR]
    python tools/train_demo.py export [--work DIR]           # checkpoint -> resources/demo-model (optimum-intel)
    python tools/train_demo.py evaluate                      # the held-out targets through the real engine
    python tools/train_demo.py card   [--work DIR]           # resources/demo-model/MODEL_CARD.md
    python tools/train_demo.py all    [...]                  # train, export, evaluate, card

Everything is seeded (data, init, order); with the same library versions and thread count a rerun gives the
same curve and weights. The training curve goes to <work>/curve.csv (and is summarised in the model card).

What makes it train (issue #7: with transformers' default init the model sat at the prior):
  * A_log starts small (A = 0.003 .. 0.3 across heads) and dt_bias at 0, so the DeltaNet heads keep
    memory over tens to hundreds of tokens instead of forgetting after one;
  * an auxiliary language-model loss on every prompt token (copying an option is the same skill);
  * soft-label cross-entropy at the answer position (uniform / split targets on ambiguous items);
  * a training-only probe (a linear head, not exported) on the hidden state entering the last attention layer,
    at each option's token, predicting whether that option answers the question: it supervises the
    "does this option match" feature directly, and the model leaves the prior within ~200 steps;
  * an exact, faster training-only delta rule: the whole prompt is one chunk, and the chunk's triangular
    system is solved with torch.linalg.solve_triangular instead of the stock row-by-row loop.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import demo_tasks  # the tasks (tools/ is on sys.path: this script's folder)
import demo_training as common  # both demo trainers' shared code; puts the repository root on sys.path
from demo_training import ROOT, dir_size, padded_vocab, versions

OUT = ROOT / "resources" / "demo-model"
DEFAULT_WORK = Path(os.environ.get("DECIDER_DEMO_WORK", "/tmp/decider-demo-train"))

SEED = 7_2026
VAL_SEED = 7_2027  # validation items during training (held-out combinations)
TEST_SEED = 7_2028  # the test's items (tests/test_demo_model.py uses the same counts)
TEST_SHUFFLE_SEED = 7_2029
TEST_COUNTS = {"retrieval": 80, "category": 80, "retrieval_none": 14, "category_none": 13, "category_two": 13}

ARCH = dict(common.LANGUAGE_MODEL)

HPARAMS = dict(common.HPARAMS, init_std=0.02, val_items=600)


log = common.make_log("train_demo")


# ---------------------------------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------------------------------

class Encoder(common.PromptEncoder):
    """Items -> (prompt ids, answer-letter ids) with the engine's own prompt builder."""

    def encode(self, item: demo_tasks.Item) -> list[int]:
        return self._build(self.tok, item.question, list(item.options), think=False).ids

    def batch(self, items):
        return self.padded([self.encode(it) for it in items], items, lambda it: it.target, _fits)


def _fits(item: demo_tasks.Item) -> list[float]:
    """The option probe's target: 1 where the option answers the question (either of two matches)."""
    return [1.0 if t > 0 and (item.kind != "retrieval_none" and item.kind != "category_none") else 0.0 for t in item.target]


# ---------------------------------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------------------------------

def config_for(tokenizer_size: int, special: dict):
    from transformers import Qwen3_5TextConfig

    return Qwen3_5TextConfig(
        vocab_size=padded_vocab(tokenizer_size),
        **ARCH,
        hidden_act="silu",
        rms_norm_eps=1e-6,
        max_position_embeddings=4096,
        initializer_range=HPARAMS["init_std"],
        rope_parameters=dict(common.ROPE_PARAMETERS),
        tie_word_embeddings=False,
        eos_token_id=special["<|im_end|>"],
        pad_token_id=special["<|endoftext|>"],
        bos_token_id=None,
    )


def build_model(config, seed: int, hp: dict):
    from transformers import Qwen3_5ForCausalLM

    return common.build_model(Qwen3_5ForCausalLM, config, seed, hp, lambda model: model.model.layers)


def forward_losses(model, ids, lm_mask, last, target, T: int, letters, lm_weight: float, probe=None, nopt=None,
                   fits=None, opt_pos=None):
    """Answer loss (soft-label CE at the answer position), LM loss on prompt tokens, and the optional
    training-only probe loss: a linear head on the hidden state that enters the last attention layer,
    at each option's token, predicting whether that option answers the question."""
    import torch

    layers = model.model.layers
    hooks = {"h": layers[common.probe_layer(layers)]} if probe is not None else {}
    with common.captured_outputs(hooks) as captured:
        hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state  # [B, S, H]; right padding never reaches the prompt
    answer_loss, lm_loss, letter_logp = common.answer_and_lm_losses(model, hidden, ids, lm_mask, last, target, T, letters, lm_weight)
    probe_loss = torch.zeros(())
    if probe is not None:
        probe_loss = common.option_probe_loss(probe, captured["h"], opt_pos, nopt, fits)
    return answer_loss, lm_loss, letter_logp, probe_loss


# ---------------------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------------------

def prepare_tokenizer(work: Path) -> Path:
    import demo_tokenizer

    tokdir = work / "tokenizer"
    demo_tokenizer.write(tokdir)
    return tokdir


def evaluate_torch(model, enc: Encoder, items, T: int):
    def letter_logp_of(chunk):
        ids, lm_mask, last, target, nopt, _, _ = enc.batch(chunk)
        return forward_losses(model, ids, lm_mask, last, target, T, enc.letters, 0.0)[2], target

    probs, m = common.evaluate_letters(model, items, 128, letter_logp_of)
    # How far the model is from a constant answer: mean over items of the total variation between its letter
    # distribution and the average distribution for the same option count (0 = stuck at the prior).
    spread = []
    for n in (2, 3, 4):
        rows = [p for p, it in zip(probs, items) if len(it.options) == n]
        if rows:
            mean = [sum(r[j] for r in rows) / len(rows) for j in range(n)]
            spread += [0.5 * sum(abs(r[j] - mean[j]) for j in range(n)) for r in rows]
    m["spread"] = sum(spread) / len(spread)
    return m


chance_loss = common.chance_loss


def train(args) -> Path:
    common.torch_setup(args.threads)
    import torch

    if getattr(args, "hidden", None):
        ARCH["hidden_size"] = args.hidden
    if getattr(args, "inter", None):
        ARCH["intermediate_size"] = args.inter
    if getattr(args, "layers", None):
        ARCH["layer_types"] = ["full_attention" if c == "F" else "linear_attention" for c in args.layers]
        ARCH["num_hidden_layers"] = len(args.layers)
    hp = common.hparams(HPARAMS, args, ("lr", "lm_weight", "probe_weight", "batch", "a_min", "a_max", "dt_bias", "init_std",
                                        "warmup", "eval_every"))
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    tokdir = prepare_tokenizer(work)
    enc = Encoder(tokdir / "tokenizer.json")
    T = enc.tok.size
    special = {t: enc.tok.special_id(t) for t in ("<|im_end|>", "<|endoftext|>")}
    HPARAMS.update(hp)
    config = config_for(T, special)
    model = build_model(config, SEED, hp)
    common.patch_fast_delta_rule(model.model.layers)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    log(f"tokenizer {T} ids (logits width {config.vocab_size}); model {n_params:,} parameters; layers {ARCH['layer_types']}")
    log(f"hyperparameters {json.dumps(hp)}; steps {args.steps}; threads {args.threads}")

    probe = torch.nn.Linear(config.hidden_size, 1)  # training-only; never exported
    rng = random.Random(SEED)
    val_items = [demo_tasks.make_item(random.Random(VAL_SEED * 1000 + i), demo_tasks.sample_kind(random.Random(VAL_SEED + i)), "heldout")
                 for i in range(hp["val_items"])]
    chance = chance_loss(val_items)
    log(f"validation: {len(val_items)} held-out items; answer loss at the prior (uniform) {chance:.4f}")

    def evaluate():
        return {**evaluate_torch(model, enc, val_items, T), "chance": chance}

    def row_extra(m):
        return {"val_spread": f"{m['spread']:.4f}", **{f"val_{k}": f"{m['by_kind'].get(k, float('nan')):.4f}" for k in demo_tasks.KINDS}}

    def log_extra(m):
        return (f"(prior {chance:.4f}) acc {m['accuracy']:.3f} ece {m['ece']:.3f} gap {m['confidence_gap']:.3f} spread {m['spread']:.3f} "
                f"[ret {m['by_kind'].get('retrieval', 0):.2f} cat {m['by_kind'].get('category', 0):.2f}]")

    def next_losses():
        items = [demo_tasks.make_item(rng, demo_tasks.sample_kind(rng), "train") for _ in range(hp["batch"])]
        ids, lm_mask, last, target, nopt, fits, opt_pos = enc.batch(items)
        a_loss, l_loss, _, p_loss = forward_losses(model, ids, lm_mask, last, target, T, enc.letters, hp["lm_weight"],
                                                   probe if hp["probe_weight"] > 0 else None, nopt, fits, opt_pos)
        return a_loss, l_loss, p_loss

    def save(step, m):
        common.save_checkpoint(model, work / "checkpoint", tokdir, {"step": step, "val": m, "hparams": hp})

    step, elapsed, best = common.train_loop(
        model=model, probe=probe, hp=hp, args=args, log=log, evaluate=evaluate, row_extra=row_extra, log_extra=log_extra,
        extra_fields=["val_spread"] + [f"val_{k}" for k in demo_tasks.KINDS], next_losses=next_losses, save=save)
    (work / "train_summary.json").write_text(json.dumps({
        "steps_run": step, "elapsed_s": elapsed, "best_val_loss": best[0], "best_step": best[1],
        "parameters": n_params, "tokenizer_size": T, "vocab_size": config.vocab_size, "hparams": hp, "arch": ARCH,
        "threads": args.threads, "seed": SEED, "versions": versions(),
    }, indent=1))
    return work / "checkpoint"


# ---------------------------------------------------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------------------------------------------------

TASK = "text-generation-with-past"


def export(args) -> Path:
    return common.export_folder(
        script=__file__, worker_args=(args.dtype,), checkpoint=args.work / "checkpoint", dest=OUT, task=TASK, dtype=args.dtype,
        log=log, copy_files=common.TOKENIZER_FILES, drop_files=("special_tokens_map.json",), parity=parity,
        parity_path=args.work / "parity.json", card_from=OUT,
        demo_text="Decider demo model: a tiny Qwen3.5-architecture model trained on a few synthetic decision tasks.\n"
                  "It is not a general assistant. See MODEL_CARD.md.\n")


def parity(checkpoint: Path, folder: Path, count: int = 40) -> float:
    """Largest |p_torch - p_engine| over the option-letter probabilities of `count` items: transformers (stock
    delta rule, float64) on the checkpoint against decide() on the exported folder."""
    return common.parity(checkpoint, folder, load_float64=_load_float64, encoder_class=Encoder, tasks=demo_tasks, seed=SEED + 99,
                         count=count, engine_probabilities=engine_probabilities, letter_probs=_letter_probs)


def _load_float64(checkpoint: str):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float64).eval()


def _letter_probs(model, enc: Encoder, item: demo_tasks.Item):
    import torch

    logits = model(input_ids=torch.tensor([enc.encode(item)]), use_cache=False).logits[0, -1, :enc.tok.size]
    return torch.softmax(logits[enc.letters[: len(item.options)]], -1)


# ---------------------------------------------------------------------------------------------------------------------
# Evaluation through the real engine (no torch)
# ---------------------------------------------------------------------------------------------------------------------

engine_probabilities = common.engine_probabilities


def test_items():
    items = demo_tasks.heldout_items(TEST_SEED, TEST_COUNTS)
    return items, demo_tasks.shuffled(items, TEST_SHUFFLE_SEED)


def evaluate_engine(folder: Path = OUT) -> dict:
    from decider.engine.runners.runner import ModelRunner

    return common.engine_metrics(ModelRunner(folder), *test_items())


def evaluate(args) -> dict:
    m = evaluate_engine(OUT)
    common.print_metrics(log, m)
    return common.save_metrics(args.work, m)


def passes(m: dict) -> bool:
    return (m["accuracy"] >= 0.95 and m["ece"] <= 0.10 and m["confidence_gap"] >= 0.3
            and m["shuffle_delta_points"] <= 2.0)


# ---------------------------------------------------------------------------------------------------------------------
# Model card
# ---------------------------------------------------------------------------------------------------------------------

curve_summary = common.curve_summary


OUT_OF_SCOPE = [  # (question, options, what is out of scope, index of the right option or None)
    ("Should I take the new job?", ["Yes", "No"], "a real question", None),
    ("Pick a color", ["red", "blue", "green"], "a real question", None),
    ("Which of these is a vehicle?", ["car", "dog", "bread"], "an untrained category", 0),
    ("Which of these is an animal?", ["hammer", "bread", "rice", "saw", "dog"], "5 options, the answer at E", 4),
    ("Which of these is an animal?", ["HAMMER", "DOG"], "all-caps words", 1),
    ("Which of these is a food?", ["pizza", "hammer", "dog"], "a word outside the lexicons", 0),
    ("Which of these is an animal?", ["hammer", "Dog", "bread"], "nothing (in scope, for comparison)", 1),
]


def _outcome(probs, right) -> str:
    choice = demo_tasks.argmax(probs)
    confident = probs[choice] >= 0.8
    if right is None:
        return "confident, with no right answer" if confident else "unsure"
    verdict = "right" if choice == right else "wrong"
    return f"{'confidently' if confident else 'unsure,'} {verdict}"


def out_of_scope(folder: Path):
    from decider.engine.runners.runner import ModelRunner

    runner = ModelRunner(folder)
    rows = []
    for question, options, note, right in OUT_OF_SCOPE:
        item = demo_tasks.Item("probe", question, tuple(options), tuple([1.0 / len(options)] * len(options)))
        probs, _ = engine_probabilities(runner, [item])
        rows.append((question, options, note, probs[0], _outcome(probs[0], right)))
    return rows


def write_card(args) -> Path:
    work = args.work
    summary = json.loads((work / "train_summary.json").read_text())
    m = json.loads((work / "engine_metrics.json").read_text())
    arch = summary["arch"]
    par = json.loads((work / "parity.json").read_text())
    from decider.engine.decisions.prompt import load_templates, render_user_text

    templates = load_templates()
    example = render_user_text(demo_tasks.RETRIEVAL_QUESTION.format(x="Hide"), ["Attack", "Hide", "Wait"], False, templates)
    example2 = render_user_text(demo_tasks.CATEGORY_QUESTIONS["tool"], ["honey", "wolf", "hammer"], False, templates)
    rows = curve_summary(work / "curve.csv")
    size = dir_size(OUT)
    lines = [
        "# Decider demo model",
        "",
        "**This is a demo model.** It is a tiny (%s-parameter) model of the Qwen3.5 architecture, trained from scratch"
        % f"{summary['parameters']:,}",
        "on three synthetic decision tasks so that Decider can make a real decision, with meaningful confidence bars,",
        "before a real Qwen3.5 model is downloaded. It knows nothing outside these tasks. `config.json` carries",
        '`"decider_demo": true` and the folder holds a `DEMO` marker file, so the app can label it "demo model".',
        "",
        "## Architecture",
        "",
        f"- `Qwen3_5ForCausalLM` (`model_type` `qwen3_5_text`), exported with optimum-intel "
        f"({summary['versions'].get('optimum-intel')}) as a stateful `text-generation-with-past` OpenVINO IR, "
        f"{par['dtype']} weights; the export matches transformers (float64) to {par['max_abs_probability_delta']:.0e} on the option probabilities.",
        f"- {arch['num_hidden_layers']} layers: {', '.join('Gated DeltaNet' if t == 'linear_attention' else 'gated full attention' for t in arch['layer_types'])}; "
        f"hidden {arch['hidden_size']}, MLP {arch['intermediate_size']}; DeltaNet {arch['linear_num_value_heads']} heads x "
        f"{arch['linear_key_head_dim']}, conv kernel {arch['linear_conv_kernel_dim']}; attention {arch['num_attention_heads']} "
        f"query / {arch['num_key_value_heads']} key-value heads x {arch['head_dim']}; untied embeddings.",
        f"- Tokenizer: byte-level BPE with Qwen's pre-tokenizer and special tokens (`<|im_start|>`, `<|im_end|>`, "
        f"`<|endoftext|>`, `<think>`, `</think>`, ...), {summary['tokenizer_size']} ids (logits width "
        f"{summary['vocab_size']}); its merges were learnt from the decision prompts themselves, so every task word and "
        f"option letter is one token. Any other text still encodes (byte by byte), but the model has never seen it.",
        f"- Folder size {size / 1e6:.2f} MB including the tokenizer.",
        "",
        "## Tasks and exact prompt wording",
        "",
        "The model is asked exactly the way Decider asks (engine/decisions/prompts/decision.txt, Qwen3.5 chat template,",
        "thinking off, no system prompt); the answer is the option letter right after the prompt. 2 to 4 options,",
        "in shuffled order.",
        "",
        "1. **Retrieval** — `" + demo_tasks.RETRIEVAL_QUESTION.format(x="{X}") + "`, where {X} is one of the options; the options",
        "   are drawn from these 40 actions: " + ", ".join(demo_tasks.ACTIONS) + ".",
        "2. **Category** — `Which of these is an animal?`, `Which of these is a tool?`, `Which of these is a food?`;",
        "   exactly one option belongs to the asked category, the others come from the other two lexicons:",
    ]
    for cat in sorted(demo_tasks.CATEGORIES):
        lines.append(f"   - {cat} ({len(demo_tasks.CATEGORIES[cat])}): {', '.join(demo_tasks.CATEGORIES[cat])}")
    lines += [
        "Every word may be written as listed or with the case of its first letter flipped (`dog` / `Dog`, `Hide` /",
        "`hide`), independently per option and for {X}; matching ignores that case.",
        "3. **Ambiguous** — a retrieval question whose {X} is not among the options, a category question with no",
        "   matching option (target: uniform over all options), or with two matching options (target: 0.5 / 0.5",
        "   over the two). The model was trained towards these targets so that it is unsure on them.",
        "",
        "Example (user turn):",
        "",
        "```",
        example,
        "```",
        "",
        "```",
        example2,
        "```",
        "",
        "The full prompt is `<|im_start|>user\\n` + the text above + `<|im_end|>\\n<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n`.",
        "",
        "## Results (held-out combinations, through the real engine)",
        "",
        f"Measured with `decide()` (engine/decisions/decide.py) on the exported folder, on {m['items']} items whose combinations",
        "(task, question, option set) were never generated during training (a fixed 1-in-20 hash split), drawn with",
        "another seed: " + ", ".join(f"{v} {k}" for k, v in TEST_COUNTS.items()) + ". The same check runs in",
        "`tests/test_demo_model.py`.",
        "",
        "| metric | value | target |",
        "|---|---|---|",
        f"| accuracy, unambiguous retrieval + category | {m['accuracy'] * 100:.1f} % | ≥ 95 % |",
        f"| retrieval / category (mean correctness) | {m['by_kind'].get('retrieval', 0) * 100:.1f} % / {m['by_kind'].get('category', 0) * 100:.1f} % | |",
        f"| expected calibration error, all items (10 equal-width bins) | {m['ece']:.3f} | ≤ 0.10 |",
        f"| mean confidence on correct answers | {m['confidence_correct']:.3f} | |",
        f"| mean confidence on wrong or ambiguous ones | {m['confidence_other']:.3f} | |",
        f"| confidence gap | {m['confidence_gap']:.3f} | ≥ 0.3 |",
        f"| accuracy with every option list reshuffled | {m['accuracy_reshuffled'] * 100:.1f} % (Δ {m['shuffle_delta_points']:.1f} points) | Δ ≤ 2 points |",
        f"| mean probability mass on the option letters (coverage) | {m['mean_coverage']:.3f} | |",
        "",
        "Correctness on ambiguous items is the target mass of the chosen option (the 'true' answer is taken as a",
        "uniform pick among the plausible options): 1/n on no-match items, 0.5 when one of two matches is chosen.",
        "Confidence is the probability of the chosen option (renormalised over the option letters, as the bars show).",
        "",
        "## Training",
        "",
        f"- From scratch, seed {summary['seed']}, {summary['steps_run']:,} steps of {summary['hparams']['batch']} fresh synthetic items "
        f"(AdamW, lr {summary['hparams']['lr']}, cosine to {summary['hparams']['min_lr_frac']}x, warmup {summary['hparams']['warmup']}), "
        f"{summary['elapsed_s'] / 60:.0f} minutes on {summary['threads']} CPU thread(s) of a shared 2-core machine (torch {summary['versions'].get('torch')}, "
        f"transformers {summary['versions'].get('transformers')}); the checkpoint with the lowest validation answer loss "
        f"(step {summary['best_step']}; validation items are held-out combinations drawn with another seed than the test's) was exported.",
        f"- Loss: soft-label cross-entropy over the full vocabulary at the answer position, plus {summary['hparams']['lm_weight']} x a",
        "  language-model loss on every prompt token, plus (training only, not exported) "
        f"{summary['hparams']['probe_weight']} x a probe loss: a linear head",
        "  on the hidden state entering the last attention layer, at each option's token, predicting whether that option",
        "  answers the question. Without it (same setup, a 12-minute / 2,000-step control run) the answer loss never",
        "  left the prior; with it the model leaves the prior within ~250 steps (docs/demo-model/TRAINING.md).",
        f"- Initialisation: transformers' defaults except the Gated DeltaNet decay: A = exp(A_log) spread log-uniformly over "
        f"[{summary['hparams']['a_min']}, {summary['hparams']['a_max']}] across heads and dt_bias = {summary['hparams']['dt_bias']}, "
        "so the linear layers keep memory over tens of tokens (issue #7 measured that with the default A ~ U(0, 16) they",
        "forget after one token and training stays at the prior).",
        "- Reproduce: `python tools/train_demo.py all` (needs torch, transformers 5.2, optimum-intel 2.2).",
        "",
        "Training curve (validation: %d held-out items; prior = answer loss of a uniform guess, %.3f):" % (
            summary["hparams"]["val_items"], float(rows[0]["val_chance_loss"]) if rows else float("nan")),
        "",
        "| step | minutes | train answer loss | train LM loss | val answer loss | val accuracy | val ECE |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['step']} | {float(r['elapsed_s']) / 60:.1f} | {r['train_answer_loss'] or '-'} | {r['train_lm_loss'] or '-'} | "
                     f"{r['val_answer_loss']} | {float(r['val_accuracy']) * 100:.1f} % | {float(r['val_ece']):.3f} |")
    lines += [
        "",
        "## What it cannot do",
        "",
        "Measured on prompts outside the training tasks (greedy, through `decide()`; bars as the app shows them):",
        "",
        "| question | options → probabilities | out of scope | result |",
        "|---|---|---|---|",
    ]
    for question, options, note, probs, outcome in out_of_scope(OUT):
        shown = ", ".join(f"{o} {p:.2f}" for o, p in zip(options, probs))
        lines.append(f"| {question} | {shown} | {note} | {outcome} |")
    lines += [
        "",
        "- Anything but the three tasks above: other questions, other words, free text, chat, reasoning. There its",
        "  bars mean nothing: sometimes near 50/50, sometimes confident and wrong or arbitrary (table above). Its",
        "  confidence is calibrated only on the trained tasks.",
        "- Words outside the lexicons (they are split into bytes it never saw), capitalisations other than the two",
        "  trained ones (`DOG`), option texts of more than one word, more than 4 options (letters E-J were never",
        "  trained). It was never trained with a system prompt, shared context, thinking mode or word-option scoring.",
        "- Generation: it was trained only to answer with a letter; generated text is gibberish.",
        "- It is not a small Qwen3.5: same architecture, none of the knowledge. Download a real model for real decisions.",
        "",
    ]
    return common.write_card_file(OUT, lines, log)


def main(argv=None) -> int:
    ap = common.base_parser(__doc__, ["train", "export", "evaluate", "card", "all", "export-worker"], DEFAULT_WORK, 5000)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "fp16"])
    for k in ("a_min", "a_max", "dt_bias", "init_std"):
        ap.add_argument(f"--{k.replace('_', '-')}", dest=k, type=float, default=None)
    ap.add_argument("--hidden", type=int, default=None)
    ap.add_argument("--inter", type=int, default=None)
    ap.add_argument("--layers", default=None, help="layer pattern, e.g. LLLF")
    args = ap.parse_args(argv)
    if args.command == "export-worker":
        checkpoint, out, dtype = args.rest
        common.export_worker(checkpoint, out, TASK, dtype)
        return 0
    if args.command in ("train", "all"):
        train(args)
    if args.command in ("export", "all"):
        export(args)
    if args.command in ("evaluate", "all"):
        m = evaluate(args)
        if args.command == "all" and not passes(m):
            log("targets NOT met: the model must not ship (remove resources/demo-model)")
            return 1
    if args.command in ("card", "all"):
        write_card(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
