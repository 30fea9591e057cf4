#!/usr/bin/env python
"""Train the text demo's MTP draft head (resources/demo-model/openvino_mtp_model.xml), the demo model frozen.

The demo (tools/train_demo.py) has no MTP head of its own, so this trains one the way Qwen3.5's is used: for each
position p of a demo prompt, the head reads the embedding of token p and the frozen model's last hidden state at
p − 1 (after its final norm: the runner's last_hidden output) and predicts token p + 1 through the model's own lm head.
The hidden states come from the exported model through OpenVINO (the engine's graph edits), the embedding table and
lm head are read from the same IR: nothing but the head's own layer is trained or shipped (f16, ~130 KB).

Environment: torch (CPU) and openvino, e.g. ~/.cache/decider-bench/venv; run from anywhere:

    PYTHONPATH=<a folder holding a `decider` link to this checkout> python tools/train_demo_mtp.py [--steps 2400] [--threads 1]

Then it measures, on held-out prompts: teacher-forced top-1 of the head (token p + 1 from the exact hidden state at
p − 1), and through the real engine the acceptance of `--draft mtp` on greedy continuations and its speed-up over
plain decoding (load average stated), and writes them into the demo's MODEL_CARD.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

import demo_tasks  # noqa: E402
import demo_training as common  # noqa: E402  (puts the repository root on sys.path)
from train_demo import OUT, SEED, TEST_COUNTS, TEST_SEED, Encoder  # noqa: E402

import numpy as np  # noqa: E402
import openvino as ov  # noqa: E402
import openvino.opset13 as ops  # noqa: E402

from decider.engine.graphs.logits import LAST_HIDDEN, expose_hidden, lm_head_weight, slice_to_counted_positions  # noqa: E402
from decider.engine.model.folder import MTP_IR  # noqa: E402
from decider.engine.graphs.mtp_graph import build_mtp_model, mtp_tensor_names  # noqa: E402
from decider.engine.runners.mtp_head import _copy, embedding_table  # noqa: E402

MTP_SEED = 36_2026
TRAIN_ITEMS = 3000
CARD_MARK = "## MTP draft head"
log = common.make_log("train_demo_mtp")


class Frozen:
    """The exported demo model run whole-sequence through OpenVINO: the last hidden state at every position."""

    def __init__(self, folder: Path):
        core = ov.Core()
        model = core.read_model(folder / "openvino_model.xml")
        slice_to_counted_positions(model)
        expose_hidden(model)
        self.embed = self._value(embedding_table(model))
        weight, transposed = lm_head_weight(model)
        head = self._value(weight)
        self.head = head if transposed else head.T  # [V, H]
        self.request = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"}).create_infer_request()

    @staticmethod
    def _value(output: ov.Output) -> np.ndarray:
        model = ov.Model([ops.result(ops.convert(_copy(output, {}), ov.Type.f32))], [])
        return ov.Core().compile_model(model, "CPU").create_infer_request().infer({})[0].copy()

    def hidden(self, ids: list[int]) -> np.ndarray:
        self.request.reset_state()
        n = len(ids)
        self.request.infer({"input_ids": np.array([ids]), "attention_mask": np.ones((1, n), dtype=np.int64),
                            "position_ids": np.arange(n)[None], "beam_idx": np.zeros(1, dtype=np.int32),
                            "logits_positions": np.array([n])})
        return self.request.get_tensor(LAST_HIDDEN).data[0].copy()


def _torch_head(config: dict, seed: int):
    import torch

    from modelkit.mtp_weights import random_mtp_tensors

    init = random_mtp_tensors(config, seed, scale=0.05)
    return torch.nn.ParameterDict({k[len("mtp."):].replace(".", "__"): torch.nn.Parameter(torch.tensor(v))
                                   for k, v in init.items()})


def _forward(p, config: dict, embeds, hidden, positions):
    """The head in torch, as engine/graphs/mtp_graph.py builds it (tests/support/mtp_reference.py in float64)."""
    import torch

    def w(name):
        return p[name.replace(".", "__")]

    def rms(x, name):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + config["rms_norm_eps"]) * (1 + w(name))

    heads, kv, dim = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    rot = int(dim * config["rope_parameters"]["partial_rotary_factor"])
    theta = config["rope_parameters"]["rope_theta"]
    x = torch.cat([rms(embeds, "pre_fc_norm_embedding.weight"), rms(hidden, "pre_fc_norm_hidden.weight")], -1) @ w("fc.weight").T
    h = rms(x, "layers.0.input_layernorm.weight")
    b, s, _ = h.shape
    a = "layers.0.self_attn."
    qg = (h @ w(a + "q_proj.weight").T).view(b, s, heads, 2 * dim)
    q, gate = rms(qg[..., :dim], a + "q_norm.weight"), qg[..., dim:].reshape(b, s, heads * dim)
    k = rms((h @ w(a + "k_proj.weight").T).view(b, s, kv, dim), a + "k_norm.weight")
    v = (h @ w(a + "v_proj.weight").T).view(b, s, kv, dim)
    inv = 1.0 / theta ** (torch.arange(0, rot, 2, dtype=torch.float32) / rot)
    ang = positions[..., None].float() * inv
    cos, sin = torch.cat([ang, ang], -1).cos()[:, :, None], torch.cat([ang, ang], -1).sin()[:, :, None]

    def rope(t):
        head, rest = t[..., :rot], t[..., rot:]
        turned = torch.cat([-head[..., rot // 2:], head[..., : rot // 2]], -1)
        return torch.cat([head * cos + turned * sin, rest], -1)

    q, k = rope(q).transpose(1, 2), rope(k).transpose(1, 2)
    k, v = k.repeat_interleave(heads // kv, 1), v.transpose(1, 2).repeat_interleave(heads // kv, 1)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, -1)
    x = x + (out * torch.sigmoid(gate)) @ w(a + "o_proj.weight").T
    m = rms(x, "layers.0.post_attention_layernorm.weight")
    act = torch.nn.functional.silu(m @ w("layers.0.mlp.gate_proj.weight").T) * (m @ w("layers.0.mlp.up_proj.weight").T)
    return rms(x + act @ w("layers.0.mlp.down_proj.weight").T, "norm.weight")


def _examples(frozen: Frozen, prompts: list[list[int]]):
    """Per prompt: (embeddings of x_1..x_{S-2}, hidden at 0..S-3, positions 1..S-2, targets x_2..x_{S-1})."""
    out = []
    for ids in prompts:
        hidden = frozen.hidden(ids)
        ids_a = np.array(ids)
        out.append((frozen.embed[ids_a[1:-1]], hidden[:-2], np.arange(1, len(ids) - 1), ids_a[2:]))
    return out


def _batch(examples, picks):
    import torch

    width = max(len(examples[i][3]) for i in picks)
    e = np.zeros((len(picks), width, examples[0][0].shape[1]), np.float32)
    h, pos, tgt = np.zeros_like(e), np.zeros((len(picks), width), np.int64), np.full((len(picks), width), -100)
    for row, i in enumerate(picks):
        emb, hid, p, t = examples[i]
        e[row, : len(t)], h[row, : len(t)], pos[row, : len(t)], tgt[row, : len(t)] = emb, hid, p, t
    return torch.tensor(e), torch.tensor(h), torch.tensor(pos), torch.tensor(tgt)


def train(frozen: Frozen, config: dict, examples, steps: int, real: int):
    import torch

    params = _torch_head(config, MTP_SEED)
    head = torch.tensor(frozen.head[:real], dtype=torch.float32)
    opt = torch.optim.AdamW(params.values(), lr=3e-3, weight_decay=0.01)
    rng = random.Random(MTP_SEED)
    started, step = time.monotonic(), 0
    while step < steps:
        e, h, pos, tgt = _batch(examples, rng.sample(range(len(examples)), 16))
        logits = _forward(params, config, e, h, pos) @ head.T
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, real), tgt.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
        opt.step()
        step += 1
        if step % 100 == 0:
            log(f"step {step}: loss {loss.item():.4f} ({time.monotonic() - started:.0f} s)")
    return params, (time.monotonic() - started) / 60


def top1(params, config, frozen: Frozen, examples, real: int) -> float:
    import torch

    head = torch.tensor(frozen.head[:real], dtype=torch.float32)
    hits = total = 0
    with torch.no_grad():
        for i in range(len(examples)):
            e, h, pos, tgt = _batch(examples, [i])
            guess = (_forward(params, config, e, h, pos) @ head.T).argmax(-1)
            hits += int((guess == tgt).sum())
            total += int((tgt >= 0).sum())
    return hits / total


def export(params, config: dict) -> Path:
    weights = {name: params[name.replace(".", "__")].detach().numpy().astype(np.float32) for name in mtp_tensor_names()}
    path = OUT / MTP_IR
    ov.save_model(build_mtp_model(weights, config), path, compress_to_fp16=True)
    return path


def engine_acceptance(prompts: list[list[int]], tokens: int = 24) -> dict:
    """Greedy continuations of held-out prompts cut mid-way, plain and with --draft mtp, through the real engine."""
    from decider.engine.generation.generate import generate_step
    from decider.engine.generation.mtp_drafts import MtpDrafts
    from decider.engine.runners.runner import ModelRunner
    from decider.engine.core.settings import SamplingSettings

    runner = ModelRunner(OUT)
    greedy = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0, repetition_penalty=1.0)
    drafted = kept = 0
    seconds = {"plain": 0.0, "mtp": 0.0}
    produced = {"plain": 0, "mtp": 0}
    same = True
    for ids in prompts:
        cut = ids[: max(8, len(ids) // 2)]
        texts = {}
        for mode in ("plain", "mtp"):
            runner.reset()
            runner.clear_snapshots()
            drafter = MtpDrafts(runner.mtp) if mode == "mtp" else None
            started = time.perf_counter()
            texts[mode] = [s.token_id for s in generate_step(runner, cut, greedy, max_tokens=tokens, drafter=drafter)]
            seconds[mode] += time.perf_counter() - started
            produced[mode] += len(texts[mode])
            if drafter is not None:
                drafted, kept = drafted + drafter.drafted, kept + drafter.kept
        same = same and texts["plain"] == texts["mtp"]
    return {"acceptance": kept / max(drafted, 1), "drafted": drafted, "kept": kept, "identical": same,
            "plain_tps": produced["plain"] / seconds["plain"], "mtp_tps": produced["mtp"] / seconds["mtp"],
            "load": os.getloadavg()[0]}


def write_card(result: dict) -> None:
    card = OUT / "MODEL_CARD.md"
    text = card.read_text(encoding="utf-8").split(CARD_MARK)[0].rstrip() + "\n\n"
    text += "\n".join([
        CARD_MARK, "",
        "`openvino_mtp_model.xml` is a multi-token prediction head of Qwen3.5's kind (one full-attention layer over",
        "[norm(embedding of token p); norm(hidden state at p − 1)], the model's own embedding and lm head), trained by",
        f"tools/train_demo_mtp.py with the model frozen ({result['steps']} steps, {result['minutes']} min, 1 thread) on the",
        f"prompts of {TRAIN_ITEMS} training items. It only drafts (`--draft mtp`): every kept token is the exact model's.",
        "",
        f"- teacher-forced top-1 (token p + 1 from the exact hidden state at p − 1), {result['heldout']} held-out prompts:",
        f"  **{result['top1']:.3f}** (train prompts {result['train_top1']:.3f})",
        f"- greedy continuations of {result['prompts']} held-out prompts cut mid-way, {result['tokens']} tokens each, through",
        f"  the engine: acceptance **{result['acceptance']:.3f}** ({result['kept']} of {result['drafted']} drafts kept), text",
        f"  identical to plain decoding: {result['identical']}",
        f"- speed: {result['mtp_tps']:.1f} tokens/s with MTP drafts vs {result['plain_tps']:.1f} plain "
        f"({result['mtp_tps'] / result['plain_tps']:.2f}×), measured under load (1-min load average "
        f"{result['load']:.2f} on 2 shared cores): a tiny model's step is dominated by per-call overhead, so this is not a"
        " projection for real models (bench/mtp_costs.py gives those).",
        "",
    ])
    card.write_text(text, encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2400, help="batches of 16 prompts (~3 min on 1 thread); a fixed count "
                    "so a rerun gives the same head")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prompts", type=int, default=40, help="held-out prompts for the engine's acceptance")
    args = ap.parse_args(argv)
    common.torch_setup(args.threads)
    config = json.loads((OUT / "config.json").read_text())
    enc = Encoder(OUT / "tokenizer.json")
    real = enc.tok.size
    train_items = [demo_tasks.make_item(random.Random(SEED * 1000 + i), demo_tasks.sample_kind(random.Random(SEED + i)))
                   for i in range(TRAIN_ITEMS)]
    held = demo_tasks.heldout_items(TEST_SEED, TEST_COUNTS)
    frozen = Frozen(OUT)
    train_examples = _examples(frozen, [enc.encode(it) for it in train_items])
    held_prompts = [enc.encode(it) for it in held]
    held_examples = _examples(frozen, held_prompts)
    log(f"{len(train_examples)} training prompts, {len(held_examples)} held-out; vocabulary {real}")
    params, minutes = train(frozen, config, train_examples, args.steps, real)
    result = {"steps": args.steps, "minutes": round(minutes, 1), "heldout": len(held_examples), "tokens": 24,
              "top1": top1(params, config, frozen, held_examples, real),
              "train_top1": top1(params, config, frozen, train_examples[:200], real)}
    log(f"teacher-forced top-1: held-out {result['top1']:.3f}, train {result['train_top1']:.3f}")
    log(f"exported {export(params, config)}")
    result.update(engine_acceptance(held_prompts[: args.prompts]), prompts=args.prompts)
    log(json.dumps(result))
    write_card(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
