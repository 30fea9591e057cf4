"""What the two demo trainers share (issue #29): tools/train_demo.py (the text demo) and tools/train_demo_vl.py
(the seeing demo) differ in their model, data and model card; this module holds the rest, once.

  environment      offline Hugging Face settings, set on import (before transformers is imported)
  prompt encoding  PromptEncoder: the engine's prompt builder, option-token positions, padded training batches
  model            the DeltaNet decay initialisation, the exact one-chunk delta rule (training only), the probe layer
  losses           answer (soft-label CE at the answer position), LM on the prompt, the option probe
  training loop    train_loop: evaluation, curve CSV, best checkpoint, time budget, AdamW with warmup + cosine
  export           optimum-intel in a child process, the parity check against transformers in float64
  evaluation       engine_probabilities / engine_metrics through the real engine (decide()), printing
  CLI              base_parser: the options both trainers take

Nothing here changes a result: the trainers call these in the same order, with the same random draws, as before.
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
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import demo_tasks  # noqa: E402  (metrics: the same definitions for both demos)

# The language model both demos use (the text demo as it is; the seeing demo with other layer types): hidden 64,
# MLP 128, 4 layers; attention 4 query / 2 key-value heads of 32; Gated DeltaNet 4 heads of 32, conv kernel 4.
LANGUAGE_MODEL = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=4,
    layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
    linear_conv_kernel_dim=4, linear_num_key_heads=4, linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32,
)

# The training recipe both demos share (each trainer adds its own): AdamW with warmup and cosine, gradient
# clipping, the auxiliary LM loss and the option probe, and the Gated DeltaNet decay A spread over [a_min, a_max]
# across heads with dt_bias 0 (see build_model).
HPARAMS = dict(
    batch=16, lr=3e-3, min_lr_frac=0.05, warmup=50, weight_decay=0.01, clip=1.0,
    lm_weight=0.3, probe_weight=1.0,
    a_min=0.003, a_max=0.3, dt_bias=0.0,
    eval_every=250,
)

# The repository root (for resources/ and docs/); tools/ is on sys.path already (the trainer's own folder).
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")
PAD_MULTIPLE = 64  # the logits width is the tokenizer size rounded up to this
ROPE_PARAMETERS = {"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.25,
                   "mrope_section": [2, 1, 1], "mrope_interleaved": True}


def make_log(name: str) -> Callable[[str], None]:
    def log(msg: str) -> None:
        print(f"[{name} {time.strftime('%H:%M:%S')}] {msg}", flush=True)

    return log


def dir_size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def versions() -> dict:
    import importlib.metadata as md

    out = {}
    for dist in ("torch", "transformers", "optimum-intel", "openvino", "tokenizers"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


def _block_broken_torchvision() -> None:
    if "torchvision" not in sys.modules:
        sys.modules["torchvision"] = None


def padded_vocab(tokenizer_size: int) -> int:
    return int(math.ceil(tokenizer_size / PAD_MULTIPLE) * PAD_MULTIPLE)


# ---------------------------------------------------------------------------------------------------------------------
# Prompt encoding
# ---------------------------------------------------------------------------------------------------------------------

class PromptEncoder:
    """Items -> the engine's decision prompt ids (engine.decision_prompt), and padded training batches."""

    def __init__(self, tokenizer_json: Path):
        from decider.engine.decisions.prompt import build_decision_prompt, letter_ids
        from decider.engine.model.tokenizer import ChatTokenizer

        self.tok = ChatTokenizer(tokenizer_json)
        self._build = build_decision_prompt
        self.letters = letter_ids(self.tok, 4)
        self.letters_all = letter_ids(self.tok, 10)
        self.pad = self.tok.end_of_text
        self.dot = self.tok.encode_text(".")[0]
        self.options_word = self.tok.encode_text("Options")[0]

    def option_positions(self, ids: list[int], n: int) -> list[int]:
        """Index of each option's (one-token) text: the token after 'X' '.' on its line."""
        start = ids.index(self.options_word)
        out = []
        for i in range(n):
            j = start
            while not (ids[j] == self.letters_all[i] and ids[j + 1] == self.dot):
                j += 1
            out.append(j + 2)
            start = j + 2
        return out

    def padded(self, seqs: list[list[int]], items, target_of, fits_of, lm_keep=None):
        """(ids, lm_mask, last, target, nopt, fits, opt_pos): right-padded ids; the positions whose next token the LM
        loss predicts (every prompt position unless `lm_keep(ids)` says otherwise); the answer target; the option
        probe's targets (`fits_of`: 1 where the option answers) at each option's token."""
        import torch

        S = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), S), self.pad, dtype=torch.long)
        lm_mask = torch.zeros((len(seqs), S), dtype=torch.bool)
        target = torch.zeros((len(seqs), 4))
        fits = torch.zeros((len(seqs), 4))
        opt_pos = torch.zeros((len(seqs), 4), dtype=torch.long)
        last = torch.tensor([len(s) - 1 for s in seqs])
        nopt = torch.tensor([len(it.options) for it in items])
        for b, (s, it) in enumerate(zip(seqs, items)):
            n = len(it.options)
            ids[b, : len(s)] = torch.tensor(s)
            lm_mask[b, : len(s) - 1] = True if lm_keep is None else lm_keep(s)  # position t predicts token t+1
            target[b, :n] = torch.tensor(target_of(it))
            fits[b, :n] = torch.tensor(fits_of(it))
            opt_pos[b, :n] = torch.tensor(self.option_positions(s, n))
        return ids, lm_mask, last, target, nopt, fits, opt_pos


# ---------------------------------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------------------------------

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


def build_model(model_class, config, seed: int, hp: dict, layers_of: Callable):
    """A fresh seeded model whose Gated DeltaNet decay A is spread log-uniformly over [a_min, a_max] across heads
    (from ~hundreds of tokens of memory down to a few: per-token decay exp(-A * softplus(a + dt_bias)))."""
    import torch

    torch.manual_seed(seed)
    model = model_class(config)
    with torch.no_grad():
        for layer in layers_of(model):
            if layer.layer_type == "linear_attention":
                attn = layer.linear_attn
                A = torch.logspace(math.log10(hp["a_min"]), math.log10(hp["a_max"]), attn.A_log.numel())
                attn.A_log.copy_(A.log())
                attn.dt_bias.fill_(hp["dt_bias"])
    return model


def patch_fast_delta_rule(layers) -> None:
    for layer in layers:
        if layer.layer_type == "linear_attention":
            layer.linear_attn.chunk_gated_delta_rule = fast_chunk_gated_delta_rule


def probe_layer(layers) -> int:
    """The decoder layer whose output feeds the last full-attention layer (where the option probe reads)."""
    types = [layer.layer_type for layer in layers]
    return max(i for i, t in enumerate(types) if t == "full_attention") - 1


# ---------------------------------------------------------------------------------------------------------------------
# Losses
# ---------------------------------------------------------------------------------------------------------------------

@contextmanager
def captured_outputs(modules: dict):
    """Record each module's forward output under its name while the block runs (for the training-only probes)."""
    captured: dict = {}
    handles = [module.register_forward_hook(
        lambda mod, inp, out, name=name: captured.__setitem__(name, out[0] if isinstance(out, tuple) else out))
        for name, module in modules.items()]
    try:
        yield captured
    finally:
        for handle in handles:
            handle.remove()


def answer_and_lm_losses(model, hidden, ids, lm_mask, last, target, T: int, letters, lm_weight: float, weights=None):
    """(answer loss, LM loss, letter log-probabilities): soft-label CE over the full vocabulary at the answer
    position (each item's times its weight, if `weights`), and the LM loss on the prompt positions lm_mask keeps (0
    when lm_weight is 0)."""
    import torch
    import torch.nn.functional as F

    logits = model.lm_head(hidden)[..., :T]  # ids >= T are padding rows of the head
    logp = F.log_softmax(logits.float(), dim=-1)
    B = ids.shape[0]
    letter_logp = logp[torch.arange(B), last][:, letters]  # [B, 4]
    per_item = -(target * letter_logp).sum(-1)
    answer_loss = (per_item if weights is None else per_item * weights).mean()
    lm_loss = torch.zeros(())
    if lm_weight > 0:
        tok_logp = logp[:, :-1].gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        m = lm_mask[:, :-1]
        lm_loss = -(tok_logp * m).sum() / m.sum()
    return answer_loss, lm_loss, letter_logp


def option_probe_loss(probe, h, opt_pos, nopt, fits):
    """The probe at each option's token (hidden state entering the last attention layer): does it answer?"""
    import torch
    import torch.nn.functional as F

    B = h.shape[0]
    at = h[torch.arange(B)[:, None], opt_pos]  # [B, 4, H]
    z = probe(F.rms_norm(at, (at.shape[-1],))).squeeze(-1)
    valid = torch.arange(4)[None, :] < nopt[:, None]
    return (F.binary_cross_entropy_with_logits(z, fits, reduction="none") * valid).sum() / valid.sum()


def evaluate_letters(model, items, chunk_size: int, letter_logp_of) -> tuple[list[list[float]], dict]:
    """(probabilities per item, metrics with the mean answer loss): `letter_logp_of(chunk)` gives the letters'
    log-probabilities and the targets of a chunk of items."""
    import torch

    model.eval()
    probs, losses = [], []
    with torch.no_grad():
        for i in range(0, len(items), chunk_size):
            chunk = items[i:i + chunk_size]
            letter_logp, target = letter_logp_of(chunk)
            for b, it in enumerate(chunk):
                n = len(it.options)
                lp = letter_logp[b, :n]
                probs.append([float(x) for x in torch.softmax(lp, -1)])
                losses.append(-float((target[b, :n] * torch.log_softmax(lp, -1)).sum()))
    model.train()
    m = demo_tasks.metrics(items, probs)
    m["loss"] = sum(losses) / len(losses)
    return probs, m


# ---------------------------------------------------------------------------------------------------------------------
# Training loop
# ---------------------------------------------------------------------------------------------------------------------

def torch_setup(threads: int) -> None:
    _block_broken_torchvision()
    import torch

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    torch.use_deterministic_algorithms(True)


def hparams(defaults: dict, args, keys: Sequence[str]) -> dict:
    """The defaults with every command-line override among `keys` applied."""
    hp = dict(defaults)
    for k in keys:
        v = getattr(args, k, None)
        if v is not None:
            hp[k] = v
    return hp


def optimizer(model, probe, hp: dict):
    """AdamW; no weight decay on norms, biases and the DeltaNet decay parameters; the probe is decayed."""
    import torch

    decay, no_decay = list(probe.parameters()), []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "norm" in name or name.endswith(("A_log", "dt_bias")) else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": hp["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=hp["lr"], betas=(0.9, 0.98), eps=1e-8)


def lr_schedule(hp: dict, steps: int, budget_s: float = 0.0, t0: float = 0.0) -> Callable[[int], float]:
    """Linear warmup, then cosine down to min_lr_frac of lr over the planned steps -- or, given a time budget
    (hp['anneal_by_time'] with --minutes), by the budget's end if that comes first, whatever a shared machine's speed."""
    def lr_at(step):
        if step < hp["warmup"]:
            return hp["lr"] * (step + 1) / hp["warmup"]
        progress = min(1.0, (step - hp["warmup"]) / max(1, steps - hp["warmup"]))
        if budget_s:
            progress = max(progress, min(1.0, (time.time() - t0) / budget_s))
        return hp["lr"] * (hp["min_lr_frac"] + (1 - hp["min_lr_frac"]) * 0.5 * (1 + math.cos(math.pi * progress)))

    return lr_at


def train_loop(*, model, probe, hp: dict, args, log, evaluate, extra_fields: list[str], row_extra, log_extra,
               next_losses, save) -> tuple[int, float, tuple[float, int]]:
    """Run args.steps steps (or until args.minutes): every hp['eval_every'] steps and at the end, `evaluate()`
    gives the validation metrics, a row goes to <work>/curve.csv and the log, and the checkpoint is saved by
    `save(step, metrics)` when its validation answer loss is the best so far. `next_losses()` draws a batch and
    returns (answer, LM, probe) losses. Returns (last step, seconds, (best loss, best step))."""
    import torch

    opt = optimizer(model, probe, hp)
    budget_s = args.minutes * 60 if hp.get("anneal_by_time") else 0.0
    lr_at = lr_schedule(hp, args.steps, budget_s, time.time())
    curve_path = args.work / "curve.csv"
    fields = ["step", "elapsed_s", "lr", "train_answer_loss", "train_lm_loss", "train_probe_loss", "val_answer_loss",
              "val_chance_loss", "val_accuracy", "val_ece", "val_conf_gap"] + extra_fields
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
        out_of_time = bool(deadline and time.time() > deadline)
        if step % hp["eval_every"] == 0 or step == args.steps or out_of_time:
            m = evaluate()
            row = {
                "step": step, "elapsed_s": round(time.time() - t0, 1), "lr": f"{lr_at(step):.2e}",
                "train_answer_loss": f"{acc_a / n_acc:.4f}" if n_acc else "",
                "train_lm_loss": f"{acc_l / n_acc:.4f}" if n_acc else "",
                "train_probe_loss": f"{acc_p / n_acc:.4f}" if n_acc else "",
                "val_answer_loss": f"{m['loss']:.4f}", "val_chance_loss": f"{m['chance']:.4f}",
                "val_accuracy": f"{m['accuracy']:.4f}", "val_ece": f"{m['ece']:.4f}", "val_conf_gap": f"{m['confidence_gap']:.4f}",
                **row_extra(m),
            }
            writer.writerow(row)
            curve.flush()
            log(f"step {step:6d} {row['elapsed_s']:7.0f}s lr {row['lr']} train ans {row['train_answer_loss'] or '-':>6} "
                f"lm {row['train_lm_loss'] or '-':>6} probe {row['train_probe_loss'] or '-':>6} | val ans {m['loss']:.4f} "
                + log_extra(m))
            acc_a = acc_l = acc_p = 0.0
            n_acc = 0
            if best is None or m["loss"] < best[0]:
                best = (m["loss"], step)
                save(step, m)
            elif hp.get("keep_last"):  # a continuation judged by other measures than the validation loss
                save(step, m, "checkpoint_last")
            if out_of_time:
                log(f"time budget of {args.minutes} min reached at step {step}")
                break
        if step == args.steps:
            break
        for g_ in opt.param_groups:
            g_["lr"] = lr_at(step)
        a_loss, l_loss, p_loss = next_losses()
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
    log(f"done: {step} steps in {elapsed / 60:.1f} min; best val answer loss {best[0]:.4f} at step {best[1]}; curve -> {curve_path}")
    return step, elapsed, best


def chance_loss(items) -> float:
    """Answer loss of the best constant answer (uniform over the options), the 'prior' level."""
    return sum(math.log(len(it.options)) for it in items) / len(items)


def save_checkpoint(model, out: Path, tokdir: Path, meta: dict, extra_files: dict[str, str] | None = None) -> None:
    """The model (stock code: the training-only delta rule is an attribute, not a weight), its tokenizer, any
    extra files and train_meta.json, replacing `out` at once."""
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    model.save_pretrained(str(tmp))
    model.generation_config.save_pretrained(str(tmp))
    for f in TOKENIZER_FILES:
        shutil.copyfile(tokdir / f, tmp / f)
    for name, text in (extra_files or {}).items():
        (tmp / name).write_text(text)
    (tmp / "train_meta.json").write_text(json.dumps(meta, indent=1, default=str))
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)


# ---------------------------------------------------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------------------------------------------------

def export_worker(checkpoint: str, out: str, task: str, dtype: str) -> None:
    _block_broken_torchvision()
    from optimum.exporters.openvino import main_export
    from optimum.intel import OVConfig

    main_export(checkpoint, output=out, task=task, ov_config=OVConfig(dtype=dtype), convert_tokenizer=False, stateful=True)


def export_folder(*, script: str, worker_args: Sequence[str], checkpoint: Path, dest: Path, task: str, dtype: str, log, demo_text: str,
                  copy_files: Sequence[str], drop_files: Sequence[str], parity, parity_path: Path,
                  card_from: Path, finish=None) -> Path:
    """Checkpoint → an OpenVINO folder at `dest`: optimum-intel in a child process (`script export-worker`), the
    tokenizer files it leaves out copied, files the engine does not read dropped, config.json marked
    decider_demo, a DEMO marker, `finish(folder)` for anything else; then `parity(checkpoint, folder)` (largest
    option-probability difference against transformers) must be ≤ 1e-3, and the model card of `card_from` is kept.
    `script export-worker CHECKPOINT OUT *worker_args` must call export_worker."""
    tmp = dest.with_name(dest.name + ".export")
    if tmp.exists():
        shutil.rmtree(tmp)
    log(f"exporting {checkpoint} with optimum-intel ({task}, {dtype}) ...")
    t0 = time.time()
    proc = subprocess.run([sys.executable, script, "export-worker", str(checkpoint), str(tmp), *worker_args],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONHASHSEED="0"))
    if proc.returncode != 0:
        print(proc.stdout[-5000:])
        raise SystemExit("export failed")
    for f in copy_files:
        if not (tmp / f).exists():
            shutil.copyfile(checkpoint / f, tmp / f)
    if finish is not None:
        finish(tmp)
    for f in drop_files:  # the engine reads none of these; keep the folder small and plain
        if (tmp / f).exists():
            (tmp / f).unlink()
    config = json.loads((tmp / "config.json").read_text())
    config["decider_demo"] = True
    (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (tmp / "DEMO").write_text(demo_text)
    delta = parity(checkpoint, tmp)
    log(f"parity: max |p_torch(float64) - p_engine| over the option probabilities {delta:.2e}")
    parity_path.write_text(json.dumps({"max_abs_probability_delta": delta, "dtype": dtype}))
    if delta > 1e-3:
        raise SystemExit(f"export does not match the checkpoint (max probability delta {delta:.2e})")
    if (card_from / "MODEL_CARD.md").exists():
        shutil.copyfile(card_from / "MODEL_CARD.md", tmp / "MODEL_CARD.md")
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    log(f"exported in {time.time() - t0:.0f}s -> {dest} ({dir_size(dest) / 1e6:.2f} MB): {', '.join(sorted(f.name for f in dest.iterdir()))}")
    return dest


def parity(checkpoint: Path, folder: Path, *, load_float64, encoder_class, tasks, seed: int, count: int,
           engine_probabilities, letter_probs) -> float:
    """Largest |p_torch - p_engine| over the option probabilities of `count` items: transformers (stock code,
    `load_float64(checkpoint)`) against decide() on the exported folder; `letter_probs(model, encoder, item)`."""
    _block_broken_torchvision()
    import torch

    from decider.engine.runners.runner import ModelRunner

    model = load_float64(str(checkpoint))
    enc = encoder_class(checkpoint / "tokenizer.json")
    rng = random.Random(seed)
    items = [tasks.make_item(rng, tasks.sample_kind(rng), "any") for _ in range(count)]
    engine_probs, _ = engine_probabilities(ModelRunner(folder), items)
    with torch.no_grad():
        torch_probs = [letter_probs(model, enc, it) for it in items]
    return max(abs(float(a) - b) for pt, pe in zip(torch_probs, engine_probs) for a, b in zip(pt, pe))


# ---------------------------------------------------------------------------------------------------------------------
# Evaluation through the real engine (no torch)
# ---------------------------------------------------------------------------------------------------------------------

def engine_probabilities(runner, items, image_of=None):
    """Bars from decide() (greedy) for each item, with the picture `image_of(item)` when given."""
    from decider.engine.decisions.decide import DecisionRequest, decide
    from decider.engine.core.settings import SamplingSettings

    out, coverage = [], []
    for it in items:
        extra = {} if image_of is None else {"images": (image_of(it),)}
        result = decide(runner, DecisionRequest(it.question, tuple(it.options), sampling=SamplingSettings(temperature=0.0), **extra))
        out.append([o.probability for o in result.options])
        coverage.append(result.coverage)
    return out, coverage


def engine_metrics(runner, items, reshuffled, image_of=None) -> dict:
    """The held-out metrics, the same items reshuffled (order must not decide), coverage and timing."""
    t0 = time.time()
    probs, coverage = engine_probabilities(runner, items, image_of)
    probs2, _ = engine_probabilities(runner, reshuffled, image_of)
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


def print_metrics(log, m: dict, extra_lines: Sequence[str] = ()) -> None:
    log(f"engine, {m['items']} held-out items (+ the same reshuffled) in {m['seconds']:.1f}s:")
    log(f"  accuracy (unambiguous) {m['accuracy'] * 100:.1f}%  reshuffled {m['accuracy_reshuffled'] * 100:.1f}%  "
        f"delta {m['shuffle_delta_points']:.2f} points")
    log(f"  ECE {m['ece']:.4f} (reshuffled {m['ece_reshuffled']:.4f})  confidence correct {m['confidence_correct']:.3f} "
        f"vs wrong/ambiguous {m['confidence_other']:.3f}  gap {m['confidence_gap']:.3f}  coverage {m['mean_coverage']:.3f}")
    for line in extra_lines:
        log(line)
    log(f"  by kind (mean correctness): {json.dumps({k: round(v, 3) for k, v in m['by_kind'].items()})}")
    for lo, hi, n, acc, conf in m["bins"]:
        log(f"    bin ({lo:.1f},{hi:.1f}] n={n:3d} accuracy {acc:.3f} confidence {conf:.3f}")


def save_metrics(work: Path, m: dict) -> dict:
    path = work / "engine_metrics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(m, indent=1))
    return m


# ---------------------------------------------------------------------------------------------------------------------
# Model card and command line
# ---------------------------------------------------------------------------------------------------------------------

def write_card_file(folder: Path, lines: list[str], log) -> Path:
    path = folder / "MODEL_CARD.md"
    path.write_text("\n".join(lines))
    log(f"model card -> {path}")
    return path


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


def base_parser(doc: str, commands: Sequence[str], default_work: Path, default_steps: int) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=list(commands))
    ap.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, default=default_work, help=f"training directory (default {default_work})")
    ap.add_argument("--steps", type=int, default=default_steps)
    ap.add_argument("--minutes", type=float, default=0.0, help="stop training after this many minutes (0: no limit)")
    ap.add_argument("--threads", type=int, default=1)
    for k in ("lr", "lm_weight", "probe_weight"):
        ap.add_argument(f"--{k.replace('_', '-')}", dest=k, type=float, default=None)
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--eval-every", dest="eval_every", type=int, default=None)
    return ap
