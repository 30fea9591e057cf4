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

import argparse
import csv
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
for _p in (str(ROOT), str(TOOLS)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import demo_tasks  # noqa: E402

OUT = ROOT / "resources" / "demo-model"
DEFAULT_WORK = Path(os.environ.get("DECIDER_DEMO_WORK", "/tmp/decider-demo-train"))

SEED = 7_2026
VAL_SEED = 7_2027  # validation items during training (held-out combinations)
TEST_SEED = 7_2028  # the test's items (tests/test_demo_model.py uses the same counts)
TEST_SHUFFLE_SEED = 7_2029
TEST_COUNTS = {"retrieval": 80, "category": 80, "retrieval_none": 14, "category_none": 13, "category_two": 13}

PAD_MULTIPLE = 64

ARCH = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=4,
    layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    linear_conv_kernel_dim=4,
    linear_num_key_heads=4,
    linear_num_value_heads=4,
    linear_key_head_dim=32,
    linear_value_head_dim=32,
)

HPARAMS = dict(
    batch=16,
    lr=3e-3,
    min_lr_frac=0.05,
    warmup=50,
    weight_decay=0.01,
    clip=1.0,
    lm_weight=0.3,
    probe_weight=1.0,
    a_min=0.003,
    a_max=0.3,
    dt_bias=0.0,
    init_std=0.02,
    eval_every=250,
    val_items=600,
)


def log(msg: str) -> None:
    print(f"[train_demo {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def dir_size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


# ---------------------------------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------------------------------

class Encoder:
    """Items -> (prompt ids, answer-letter ids) with the engine's own prompt builder."""

    def __init__(self, tokenizer_json: Path):
        from decider.engine.decision_prompt import build_decision_prompt, letter_ids
        from decider.engine.tokenizer import ChatTokenizer

        self.tok = ChatTokenizer(tokenizer_json)
        self._build = build_decision_prompt
        self.letters = letter_ids(self.tok, 4)
        self.letters_all = letter_ids(self.tok, 10)
        self.pad = self.tok.end_of_text

    def encode(self, item: demo_tasks.Item) -> list[int]:
        return self._build(self.tok, item.question, list(item.options), think=False).ids

    def option_positions(self, ids: list[int], n: int) -> list[int]:
        """Index of each option's (one-token) text: the token after 'X' '.' on its line."""
        dot = self.tok.encode_text(".")[0]
        start = ids.index(self.tok.encode_text("Options")[0])
        out = []
        for i in range(n):
            j = start
            while not (ids[j] == self.letters_all[i] and ids[j + 1] == dot):
                j += 1
            out.append(j + 2)
            start = j + 2
        return out

    def batch(self, items):
        import torch

        seqs = [self.encode(it) for it in items]
        S = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), S), self.pad, dtype=torch.long)
        lm_mask = torch.zeros((len(seqs), S), dtype=torch.bool)
        target = torch.zeros((len(seqs), 4))
        fits = torch.zeros((len(seqs), 4))  # 1 where the option answers the question (probe target)
        opt_pos = torch.zeros((len(seqs), 4), dtype=torch.long)
        last = torch.tensor([len(s) - 1 for s in seqs])
        nopt = torch.tensor([len(it.options) for it in items])
        for b, (s, it) in enumerate(zip(seqs, items)):
            n = len(it.options)
            ids[b, : len(s)] = torch.tensor(s)
            lm_mask[b, : len(s) - 1] = True  # position t predicts token t+1, inside the prompt
            target[b, :n] = torch.tensor(it.target)
            fits[b, :n] = torch.tensor([1.0 if t > 0 and (it.kind != "retrieval_none" and it.kind != "category_none") else 0.0
                                        for t in it.target])
            opt_pos[b, :n] = torch.tensor(self.option_positions(s, n))
        return ids, lm_mask, last, target, nopt, fits, opt_pos


# ---------------------------------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------------------------------

def _block_broken_torchvision() -> None:
    if "torchvision" not in sys.modules:
        sys.modules["torchvision"] = None


def fast_chunk_gated_delta_rule(query, key, value, g, beta, chunk_size=64, initial_state=None,
                                output_final_state=False, use_qk_l2norm_in_kernel=False):
    """Exact replacement of transformers' torch_chunk_gated_delta_rule for a zero initial state.

    The whole sequence is one chunk: with decay D[i,j] = exp(G_i - G_j) (j <= i, G = cumsum g),
    the WY form gives  U = (I + tril(diag(beta) K K^T * D, -1))^-1 (beta V)  and
    out = tril(Q K^T * D) U  -- the stock code computes the same inverse row by row per 64-token chunk.
    """
    import torch

    assert initial_state is None and not output_final_state, "training-only path"
    dtype = query.dtype
    if use_qk_l2norm_in_kernel:
        query = query * torch.rsqrt((query * query).sum(-1, keepdim=True) + 1e-6)
        key = key * torch.rsqrt((key * key).sum(-1, keepdim=True) + 1e-6)
    q, k, v, b, gg = [x.transpose(1, 2).to(torch.float32) for x in (query, key, value, beta, g)]
    S = k.shape[-2]
    q = q * (q.shape[-1] ** -0.5)
    G = gg.cumsum(-1)
    diff = G.unsqueeze(-1) - G.unsqueeze(-2)
    lower = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
    decay = torch.where(lower, diff, torch.full_like(diff, -math.inf)).exp()
    strict = torch.ones(S, S, dtype=torch.bool, device=q.device).tril(-1)
    kb = k * b.unsqueeze(-1)
    A = (kb @ k.transpose(-1, -2)) * decay * strict
    eye = torch.eye(S, dtype=A.dtype, device=A.device)
    U = torch.linalg.solve_triangular(eye + A, v * b.unsqueeze(-1), upper=False, unitriangular=True)
    out = ((q @ k.transpose(-1, -2)) * decay) @ U
    return out.transpose(1, 2).contiguous().to(dtype), None


def config_for(tokenizer_size: int, special: dict):
    from transformers import Qwen3_5TextConfig

    vocab = int(math.ceil(tokenizer_size / PAD_MULTIPLE) * PAD_MULTIPLE)
    return Qwen3_5TextConfig(
        vocab_size=vocab,
        **ARCH,
        hidden_act="silu",
        rms_norm_eps=1e-6,
        max_position_embeddings=4096,
        initializer_range=HPARAMS["init_std"],
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10_000.0,
            "partial_rotary_factor": 0.25,
            "mrope_section": [2, 1, 1],
            "mrope_interleaved": True,
        },
        tie_word_embeddings=False,
        eos_token_id=special["<|im_end|>"],
        pad_token_id=special["<|endoftext|>"],
        bos_token_id=None,
    )


def build_model(config, seed: int, hp: dict):
    import torch
    from transformers import Qwen3_5ForCausalLM

    torch.manual_seed(seed)
    model = Qwen3_5ForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            if layer.layer_type == "linear_attention":
                attn = layer.linear_attn
                H = attn.A_log.numel()
                # A spread log-uniformly over [a_min, a_max] across heads: from ~hundreds of tokens of memory
                # down to a few tokens (per-token decay exp(-A * softplus(a + dt_bias))).
                A = torch.logspace(math.log10(hp["a_min"]), math.log10(hp["a_max"]), H)
                attn.A_log.copy_(A.log())
                attn.dt_bias.fill_(hp["dt_bias"])
    return model


def patch_fast_delta_rule(model) -> None:
    for layer in model.model.layers:
        if layer.layer_type == "linear_attention":
            layer.linear_attn.chunk_gated_delta_rule = fast_chunk_gated_delta_rule


def probe_layer(model) -> int:
    """The decoder layer whose output feeds the last full-attention layer (where the probe reads)."""
    types = [layer.layer_type for layer in model.model.layers]
    last_full = max(i for i, t in enumerate(types) if t == "full_attention")
    return last_full - 1


def forward_losses(model, ids, lm_mask, last, target, T: int, letters, lm_weight: float, probe=None, nopt=None,
                   fits=None, opt_pos=None):
    """Answer loss (soft-label CE at the answer position), LM loss on prompt tokens, and the optional
    training-only probe loss: a linear head on the hidden state that enters the last attention layer,
    at each option's token, predicting whether that option answers the question."""
    import torch
    import torch.nn.functional as F

    captured = {}
    handle = None
    if probe is not None:
        layer = model.model.layers[probe_layer(model)]
        handle = layer.register_forward_hook(lambda mod, inp, out: captured.__setitem__("h", out[0] if isinstance(out, tuple) else out))
    try:
        hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state  # [B, S, H]; right padding never reaches the prompt
    finally:
        if handle is not None:
            handle.remove()
    logits = model.lm_head(hidden)[..., :T]  # ids >= T are padding rows of the head
    logp = F.log_softmax(logits.float(), dim=-1)
    B = ids.shape[0]
    answer_logp = logp[torch.arange(B), last]  # [B, T]
    letter_logp = answer_logp[:, letters]  # [B, 4]
    answer_loss = -(target * letter_logp).sum(-1).mean()
    if lm_weight > 0:
        nxt = ids[:, 1:]
        tok_logp = logp[:, :-1].gather(-1, nxt.unsqueeze(-1)).squeeze(-1)
        m = lm_mask[:, :-1]
        lm_loss = -(tok_logp * m).sum() / m.sum()
    else:
        lm_loss = torch.zeros(())
    probe_loss = torch.zeros(())
    if probe is not None:
        h = captured["h"]
        at = h[torch.arange(B)[:, None], opt_pos]  # [B, 4, H]
        z = probe(F.rms_norm(at, (at.shape[-1],))).squeeze(-1)
        valid = torch.arange(4)[None, :] < nopt[:, None]
        probe_loss = (F.binary_cross_entropy_with_logits(z, fits, reduction="none") * valid).sum() / valid.sum()
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
    import torch

    model.eval()
    probs, losses = [], []
    with torch.no_grad():
        for i in range(0, len(items), 128):
            chunk = items[i:i + 128]
            ids, lm_mask, last, target, nopt, _, _ = enc.batch(chunk)
            _, _, letter_logp, _ = forward_losses(model, ids, lm_mask, last, target, T, enc.letters, 0.0)
            for b, it in enumerate(chunk):
                n = len(it.options)
                lp = letter_logp[b, :n]
                p = torch.softmax(lp, -1)
                probs.append([float(x) for x in p])
                losses.append(-float((target[b, :n] * torch.log_softmax(lp, -1)).sum()))
    model.train()
    m = demo_tasks.metrics(items, probs)
    m["loss"] = sum(losses) / len(losses)
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


def chance_loss(items) -> float:
    """Answer loss of the best constant answer (uniform over the options), the 'prior' level."""
    return sum(math.log(len(it.options)) for it in items) / len(items)


def train(args) -> Path:
    _block_broken_torchvision()
    import torch

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.use_deterministic_algorithms(True)
    hp = dict(HPARAMS)
    if getattr(args, "hidden", None):
        ARCH["hidden_size"] = args.hidden
    if getattr(args, "inter", None):
        ARCH["intermediate_size"] = args.inter
    if getattr(args, "layers", None):
        ARCH["layer_types"] = ["full_attention" if c == "F" else "linear_attention" for c in args.layers]
        ARCH["num_hidden_layers"] = len(args.layers)
    for k in ("lr", "lm_weight", "probe_weight", "batch", "a_min", "a_max", "dt_bias", "init_std", "warmup", "eval_every"):
        v = getattr(args, k, None)
        if v is not None:
            hp[k] = v
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    tokdir = prepare_tokenizer(work)
    enc = Encoder(tokdir / "tokenizer.json")
    T = enc.tok.size
    special = {t: enc.tok.special_id(t) for t in ("<|im_end|>", "<|endoftext|>")}
    HPARAMS.update(hp)
    config = config_for(T, special)
    model = build_model(config, SEED, hp)
    patch_fast_delta_rule(model)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    log(f"tokenizer {T} ids (logits width {config.vocab_size}); model {n_params:,} parameters; layers {ARCH['layer_types']}")
    log(f"hyperparameters {json.dumps(hp)}; steps {args.steps}; threads {args.threads}")

    probe = torch.nn.Linear(config.hidden_size, 1)  # training-only; never exported
    decay, no_decay = list(probe.parameters()), []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "norm" in name or name.endswith(("A_log", "dt_bias")) else decay).append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": hp["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=hp["lr"], betas=(0.9, 0.98), eps=1e-8,
    )

    def lr_at(step):
        if step < hp["warmup"]:
            return hp["lr"] * (step + 1) / hp["warmup"]
        progress = min(1.0, (step - hp["warmup"]) / max(1, args.steps - hp["warmup"]))
        return hp["lr"] * (hp["min_lr_frac"] + (1 - hp["min_lr_frac"]) * 0.5 * (1 + math.cos(math.pi * progress)))

    rng = random.Random(SEED)
    val_items = [demo_tasks.make_item(random.Random(VAL_SEED * 1000 + i), demo_tasks.sample_kind(random.Random(VAL_SEED + i)), "heldout")
                 for i in range(hp["val_items"])]
    chance = chance_loss(val_items)
    log(f"validation: {len(val_items)} held-out items; answer loss at the prior (uniform) {chance:.4f}")
    curve_path = work / "curve.csv"
    fields = ["step", "elapsed_s", "lr", "train_answer_loss", "train_lm_loss", "train_probe_loss", "val_answer_loss", "val_chance_loss",
              "val_accuracy", "val_ece", "val_conf_gap", "val_spread",
              "val_retrieval", "val_category", "val_retrieval_none", "val_category_none", "val_category_two"]
    curve = open(curve_path, "w", newline="")
    writer = csv.DictWriter(curve, fieldnames=fields)
    writer.writeheader()

    t0 = time.time()
    acc_a = acc_l = acc_p = 0.0
    n_acc = 0
    best = None
    deadline = t0 + args.minutes * 60 if args.minutes else None
    step = 0
    for step in range(args.steps + 1):
        if step % hp["eval_every"] == 0 or step == args.steps or (deadline and time.time() > deadline):
            m = evaluate_torch(model, enc, val_items, T)
            row = {
                "step": step, "elapsed_s": round(time.time() - t0, 1), "lr": f"{lr_at(step):.2e}",
                "train_answer_loss": f"{acc_a / max(1, n_acc):.4f}" if n_acc else "",
                "train_lm_loss": f"{acc_l / max(1, n_acc):.4f}" if n_acc else "",
                "train_probe_loss": f"{acc_p / max(1, n_acc):.4f}" if n_acc else "",
                "val_answer_loss": f"{m['loss']:.4f}", "val_chance_loss": f"{chance:.4f}",
                "val_accuracy": f"{m['accuracy']:.4f}", "val_ece": f"{m['ece']:.4f}",
                "val_conf_gap": f"{m['confidence_gap']:.4f}", "val_spread": f"{m['spread']:.4f}",
            }
            for k in demo_tasks.KINDS:
                row[f"val_{k}"] = f"{m['by_kind'].get(k, float('nan')):.4f}"
            writer.writerow(row)
            curve.flush()
            log(f"step {step:6d} {row['elapsed_s']:7.0f}s lr {row['lr']} train ans {row['train_answer_loss'] or '-':>6} "
                f"lm {row['train_lm_loss'] or '-':>6} probe {row['train_probe_loss'] or '-':>6} | val ans {m['loss']:.4f} (prior {chance:.4f}) acc {m['accuracy']:.3f} "
                f"ece {m['ece']:.3f} gap {m['confidence_gap']:.3f} spread {m['spread']:.3f} "
                f"[ret {m['by_kind'].get('retrieval', 0):.2f} cat {m['by_kind'].get('category', 0):.2f}]")
            acc_a = acc_l = acc_p = 0.0
            n_acc = 0
            score = m["loss"]
            if best is None or score < best[0]:
                best = (score, step)
                save_checkpoint(model, work / "checkpoint", tokdir, {"step": step, "val": m, "hparams": hp})
            if deadline and time.time() > deadline:
                log(f"time budget of {args.minutes} min reached at step {step}")
                break
        if step == args.steps:
            break
        items = [demo_tasks.make_item(rng, demo_tasks.sample_kind(rng), "train") for _ in range(hp["batch"])]
        ids, lm_mask, last, target, nopt, fits, opt_pos = enc.batch(items)
        for g_ in opt.param_groups:
            g_["lr"] = lr_at(step)
        a_loss, l_loss, _, p_loss = forward_losses(model, ids, lm_mask, last, target, T, enc.letters, hp["lm_weight"],
                                                   probe if hp["probe_weight"] > 0 else None, nopt, fits, opt_pos)
        loss = a_loss + hp["lm_weight"] * l_loss + hp["probe_weight"] * p_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), hp["clip"])
        opt.step()
        acc_a += float(a_loss.detach())
        acc_l += float(l_loss.detach())
        acc_p += float(p_loss.detach())
        n_acc += 1
    curve.close()
    elapsed = time.time() - t0
    (work / "train_summary.json").write_text(json.dumps({
        "steps_run": step, "elapsed_s": elapsed, "best_val_loss": best[0], "best_step": best[1],
        "parameters": n_params, "tokenizer_size": T, "vocab_size": config.vocab_size, "hparams": hp, "arch": ARCH,
        "threads": args.threads, "seed": SEED, "versions": versions(),
    }, indent=1))
    log(f"done: {step} steps in {elapsed / 60:.1f} min; best val answer loss {best[0]:.4f} at step {best[1]}; "
        f"curve -> {curve_path}")
    return work / "checkpoint"


def save_checkpoint(model, out: Path, tokdir: Path, meta: dict) -> None:
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    # The saved model must not carry the training-only delta rule (it is an attribute, not a weight).
    model.save_pretrained(str(tmp))
    model.generation_config.save_pretrained(str(tmp))
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
        shutil.copyfile(tokdir / f, tmp / f)
    (tmp / "train_meta.json").write_text(json.dumps(meta, indent=1, default=str))
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)


def versions() -> dict:
    import importlib.metadata as md

    out = {}
    for dist in ("torch", "transformers", "optimum-intel", "openvino", "tokenizers"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------------------------------------------------

def export_worker(checkpoint: str, out: str, dtype: str) -> None:
    _block_broken_torchvision()
    from optimum.exporters.openvino import main_export
    from optimum.intel import OVConfig

    main_export(checkpoint, output=out, task="text-generation-with-past", ov_config=OVConfig(dtype=dtype),
                convert_tokenizer=False, stateful=True)


def export(args) -> Path:
    checkpoint = args.work / "checkpoint"
    out = OUT
    tmp = out.with_name(out.name + ".export")
    if tmp.exists():
        shutil.rmtree(tmp)
    log(f"exporting {checkpoint} with optimum-intel ({args.dtype}) ...")
    t0 = time.time()
    proc = subprocess.run([sys.executable, __file__, "export-worker", str(checkpoint), str(tmp), args.dtype],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ, PYTHONHASHSEED="0"))
    if proc.returncode != 0:
        print(proc.stdout[-5000:])
        raise SystemExit("export failed")
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
        if not (tmp / f).exists():
            shutil.copyfile(checkpoint / f, tmp / f)
    for f in ("special_tokens_map.json",):  # the engine reads tokenizer.json only; keep the folder small and plain
        if (tmp / f).exists():
            (tmp / f).unlink()
    config = json.loads((tmp / "config.json").read_text())
    config["decider_demo"] = True
    (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (tmp / "DEMO").write_text(
        "Decider demo model: a tiny Qwen3.5-architecture model trained on a few synthetic decision tasks.\n"
        "It is not a general assistant. See MODEL_CARD.md.\n"
    )
    delta = parity(checkpoint, tmp)
    log(f"parity: max |p_torch(float64) - p_engine| over 40 items' option probabilities {delta:.2e}")
    (args.work / "parity.json").write_text(json.dumps({"max_abs_probability_delta": delta, "dtype": args.dtype}))
    if delta > 1e-3:
        raise SystemExit(f"export does not match the checkpoint (max probability delta {delta:.2e})")
    if out.exists():
        card = out / "MODEL_CARD.md"
        if card.exists():
            shutil.copyfile(card, tmp / "MODEL_CARD.md")
        shutil.rmtree(out)
    tmp.rename(out)
    log(f"exported in {time.time() - t0:.0f}s -> {out} ({dir_size(out) / 1e6:.2f} MB): "
        f"{', '.join(sorted(f.name for f in out.iterdir()))}")
    return out


def parity(checkpoint: Path, folder: Path, count: int = 40) -> float:
    """Largest |p_torch - p_engine| over the option-letter probabilities of `count` items: transformers (stock
    delta rule, float64) on the checkpoint against decide() on the exported folder."""
    _block_broken_torchvision()
    import torch
    from transformers import AutoModelForCausalLM

    from decider.engine.runner import ModelRunner

    model = AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.float64).eval()
    enc = Encoder(checkpoint / "tokenizer.json")
    T = enc.tok.size
    rng = random.Random(SEED + 99)
    items = [demo_tasks.make_item(rng, demo_tasks.sample_kind(rng), "any") for _ in range(count)]
    engine_probs, _ = engine_probabilities(ModelRunner(folder), items)
    worst = 0.0
    with torch.no_grad():
        for it, pe in zip(items, engine_probs):
            ids = torch.tensor([enc.encode(it)])
            logits = model(input_ids=ids, use_cache=False).logits[0, -1, :T]
            pt = torch.softmax(logits[enc.letters[: len(it.options)]], -1)
            worst = max(worst, max(abs(float(a) - b) for a, b in zip(pt, pe)))
    return worst


# ---------------------------------------------------------------------------------------------------------------------
# Evaluation through the real engine (no torch)
# ---------------------------------------------------------------------------------------------------------------------

def engine_probabilities(runner, items):
    from decider.engine.decide import DecisionRequest, decide
    from decider.engine.settings import SamplingSettings

    out, coverage = [], []
    for it in items:
        result = decide(runner, DecisionRequest(it.question, tuple(it.options), sampling=SamplingSettings(temperature=0.0)))
        out.append([o.probability for o in result.options])
        coverage.append(result.coverage)
    return out, coverage


def test_items():
    items = demo_tasks.heldout_items(TEST_SEED, TEST_COUNTS)
    return items, demo_tasks.shuffled(items, TEST_SHUFFLE_SEED)


def evaluate_engine(folder: Path = OUT) -> dict:
    from decider.engine.runner import ModelRunner

    runner = ModelRunner(folder)
    items, reshuffled = test_items()
    t0 = time.time()
    probs, coverage = engine_probabilities(runner, items)
    probs2, _ = engine_probabilities(runner, reshuffled)
    elapsed = time.time() - t0
    m = demo_tasks.metrics(items, probs)
    m2 = demo_tasks.metrics(reshuffled, probs2)
    m["accuracy_reshuffled"] = m2["accuracy"]
    m["shuffle_delta_points"] = abs(m["accuracy"] - m2["accuracy"]) * 100
    m["ece_reshuffled"] = m2["ece"]
    m["mean_coverage"] = sum(coverage) / len(coverage)
    m["seconds"] = elapsed
    m["items"] = len(items)
    return m


def print_metrics(m: dict) -> None:
    log(f"engine, {m['items']} held-out items (+ the same reshuffled) in {m['seconds']:.1f}s:")
    log(f"  accuracy (unambiguous) {m['accuracy'] * 100:.1f}%  reshuffled {m['accuracy_reshuffled'] * 100:.1f}%  "
        f"delta {m['shuffle_delta_points']:.2f} points")
    log(f"  ECE {m['ece']:.4f} (reshuffled {m['ece_reshuffled']:.4f})  confidence correct {m['confidence_correct']:.3f} "
        f"vs wrong/ambiguous {m['confidence_other']:.3f}  gap {m['confidence_gap']:.3f}  coverage {m['mean_coverage']:.3f}")
    log(f"  by kind (mean correctness): {json.dumps({k: round(v, 3) for k, v in m['by_kind'].items()})}")
    for lo, hi, n, acc, conf in m["bins"]:
        log(f"    bin ({lo:.1f},{hi:.1f}] n={n:3d} accuracy {acc:.3f} confidence {conf:.3f}")


def evaluate(args) -> dict:
    m = evaluate_engine(OUT)
    print_metrics(m)
    path = args.work / "engine_metrics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(m, indent=1))
    return m


def passes(m: dict) -> bool:
    return (m["accuracy"] >= 0.95 and m["ece"] <= 0.10 and m["confidence_gap"] >= 0.3
            and m["shuffle_delta_points"] <= 2.0)


# ---------------------------------------------------------------------------------------------------------------------
# Model card
# ---------------------------------------------------------------------------------------------------------------------

def curve_summary(curve_path: Path, every: int = 0) -> list[dict]:
    rows = list(csv.DictReader(open(curve_path)))
    if not rows:
        return []
    if every <= 0:
        every = max(1, len(rows) // 12)
    picked = rows[::every]
    if picked[-1] is not rows[-1]:
        picked.append(rows[-1])
    return picked


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
    from decider.engine.runner import ModelRunner

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
    from decider.engine.decision_prompt import load_templates, render_user_text

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
        "The model is asked exactly the way Decider asks (engine/prompts/decision.txt, Qwen3.5 chat template,",
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
        f"Measured with `decide()` (engine/decide.py) on the exported folder, on {m['items']} items whose combinations",
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
    path = OUT / "MODEL_CARD.md"
    path.write_text("\n".join(lines))
    log(f"model card -> {path}")
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["train", "export", "evaluate", "card", "all", "export-worker"])
    ap.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, default=DEFAULT_WORK, help=f"training directory (default {DEFAULT_WORK})")
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--minutes", type=float, default=0.0, help="stop training after this many minutes (0: no limit)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "fp16"])
    for k in ("lr", "lm_weight", "probe_weight", "a_min", "a_max", "dt_bias", "init_std"):
        ap.add_argument(f"--{k.replace('_', '-')}", dest=k, type=float, default=None)
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--eval-every", dest="eval_every", type=int, default=None)
    ap.add_argument("--hidden", type=int, default=None)
    ap.add_argument("--inter", type=int, default=None)
    ap.add_argument("--layers", default=None, help="layer pattern, e.g. LLLF")
    args = ap.parse_args(argv)
    if args.command == "export-worker":
        export_worker(*args.rest)
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
