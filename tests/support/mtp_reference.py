"""A float64 numpy reference of Qwen3.5's MTP head (written from the model's description, not from the graph
builder), and seeded random `mtp.*` tensors for the fixtures."""

from __future__ import annotations

import numpy as np


def rms(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (1.0 + w)


def _rotate(x: np.ndarray, positions: np.ndarray, rot: int, theta: float) -> np.ndarray:
    """NeoX RoPE on the first `rot` dims; x [S, heads, D]."""
    if rot == 0:
        return x
    inv = 1.0 / theta ** (np.arange(0, rot, 2) / rot)
    ang = positions[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1))[:, None], np.sin(np.concatenate([ang, ang], -1))[:, None]
    head, rest = x[..., :rot], x[..., rot:]
    half = rot // 2
    rotated = np.concatenate([-head[..., half:], head[..., :half]], -1)
    return np.concatenate([head * cos + rotated * sin, rest], -1)


def mtp_forward(w: dict, config: dict, embeds: np.ndarray, hidden: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The head's output hidden state at each position ([S, H] in, [S, H] out), causal over the window."""
    w = {k: np.asarray(v, dtype=np.float64) for k, v in w.items()}
    x, m = _before_mlp(w, config, embeds, hidden, positions)
    mlp = _moe(w, config, m) if config.get("num_experts") else _swiglu(w, "layers.0.mlp.", m)
    return rms(x + mlp, w["norm.weight"], eps=config["rms_norm_eps"])


def routed_experts(w: dict, config: dict, embeds: np.ndarray, hidden: np.ndarray, positions: np.ndarray) -> list[int]:
    """The experts the MoE head's last position is routed to (the reference's top k, best first)."""
    w = {k: np.asarray(v, dtype=np.float64) for k, v in w.items()}
    _, m = _before_mlp(w, config, embeds, hidden, positions)
    return [int(e) for e in np.argsort(-(m[-1] @ w["layers.0.mlp.gate.weight"].T))[: config["num_experts_per_tok"]]]


def _before_mlp(w: dict, config: dict, embeds, hidden, positions) -> tuple[np.ndarray, np.ndarray]:
    """(the residual stream after attention, the MLP's normed input)."""
    eps, heads, kv = config["rms_norm_eps"], config["num_attention_heads"], config["num_key_value_heads"]
    dim = config["head_dim"]
    rope = config.get("rope_parameters") or {}
    rot = int(dim * rope.get("partial_rotary_factor", 1.0))
    theta = rope.get("rope_theta", 10000.0)
    x = np.concatenate([rms(embeds, w["pre_fc_norm_embedding.weight"], eps),
                        rms(hidden, w["pre_fc_norm_hidden.weight"], eps)], -1) @ w["fc.weight"].T
    p = "layers.0.self_attn."
    h = rms(x, w["layers.0.input_layernorm.weight"], eps)
    s = h.shape[0]
    qg = (h @ w[p + "q_proj.weight"].T).reshape(s, heads, 2 * dim)
    q, gate = rms(qg[..., :dim], w[p + "q_norm.weight"], eps), qg[..., dim:].reshape(s, heads * dim)
    k = rms((h @ w[p + "k_proj.weight"].T).reshape(s, kv, dim), w[p + "k_norm.weight"], eps)
    v = (h @ w[p + "v_proj.weight"].T).reshape(s, kv, dim)
    q, k = _rotate(q, positions, rot, theta), _rotate(k, positions, rot, theta)
    out = np.zeros((s, heads, dim))
    for head in range(heads):
        g = head // (heads // kv)
        scores = q[:, head] @ k[:, g].T / np.sqrt(dim)
        scores = np.where(np.tril(np.ones((s, s), dtype=bool)), scores, -np.inf)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        out[:, head] = (probs / probs.sum(-1, keepdims=True)) @ v[:, g]
    x = x + (out.reshape(s, heads * dim) / (1 + np.exp(-gate))) @ w[p + "o_proj.weight"].T
    return x, rms(x, w["layers.0.post_attention_layernorm.weight"], eps)


def _swiglu(w: dict, prefix: str, m: np.ndarray) -> np.ndarray:
    gate = m @ w[prefix + "gate_proj.weight"].T
    return (gate / (1 + np.exp(-gate)) * (m @ w[prefix + "up_proj.weight"].T)) @ w[prefix + "down_proj.weight"].T


def _moe(w: dict, config: dict, m: np.ndarray) -> np.ndarray:
    """Qwen3_5MoeSparseMoeBlock row by row: softmax router, top k renormalised, the shared expert gated."""
    p, k = "layers.0.mlp.", config["num_experts_per_tok"]
    out = np.zeros_like(m)
    for row, x in enumerate(m):
        scores = x @ w[p + "gate.weight"].T
        probs = np.exp(scores - scores.max())
        probs /= probs.sum()
        chosen = np.argsort(-probs)[:k]
        weights = probs[chosen] / probs[chosen].sum()
        for expert, weight in zip(chosen, weights):
            out[row] += weight * _swiglu(w, f"{p}experts.{expert}.", x)
        out[row] += _swiglu(w, p + "shared_expert.", x) / (1 + np.exp(-(x @ w[p + "shared_expert_gate.weight"].T)))
    return out


def folder_with_mtp(name: str, dest, source=None):
    """A copy of fixture export `name` (or of the folder `source`) in `dest` (links to its files) plus the MTP head
    `decider convert` builds from the fixture checkpoint's mtp.safetensors."""
    from pathlib import Path

    from decider.app.mtp_export import export_mtp

    from .models import FIXTURES, model_dir

    src = Path(source) if source is not None else model_dir(name)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for path in src.iterdir():
        if path.is_file():
            (dest / path.name).symlink_to(path)
    assert export_mtp(FIXTURES / "checkpoints" / name, dest) is not None
    return dest

