"""Seeded random `mtp.*` tensors at a Qwen3.5 text config's geometry: the fixtures' and the bench's checkpoints
have no MTP head, and a random one is enough to test and time the drafting path (its acceptance means nothing)."""

from __future__ import annotations

import numpy as np


def random_mtp_tensors(config: dict, seed: int, scale: float = 0.15) -> dict[str, np.ndarray]:
    """{"mtp.<name>": float32 array} for a config (`text_config` of a vision-language one is read); a
    mixture-of-experts config gets the MoE layer's router, experts and shared expert, as its checkpoint names them."""
    config = config.get("text_config", config)
    h = int(config["hidden_size"])
    heads, kv, dim = int(config["num_attention_heads"]), int(config["num_key_value_heads"]), int(config["head_dim"])
    rng = np.random.default_rng(seed)
    shapes = {
        "fc.weight": (h, 2 * h),
        "layers.0.self_attn.q_proj.weight": (2 * heads * dim, h),
        "layers.0.self_attn.k_proj.weight": (kv * dim, h),
        "layers.0.self_attn.v_proj.weight": (kv * dim, h),
        "layers.0.self_attn.o_proj.weight": (h, heads * dim),
    }
    experts = int(config.get("num_experts") or 0)
    mlps = {"layers.0.mlp.": int(config["intermediate_size"])} if not experts else {
        **{f"layers.0.mlp.experts.{e}.": int(config["moe_intermediate_size"]) for e in range(experts)},
        "layers.0.mlp.shared_expert.": int(config["shared_expert_intermediate_size"])}
    for prefix, inter in mlps.items():
        shapes.update({prefix + "gate_proj.weight": (inter, h), prefix + "up_proj.weight": (inter, h),
                       prefix + "down_proj.weight": (h, inter)})
    if experts:
        shapes.update({"layers.0.mlp.gate.weight": (experts, h), "layers.0.mlp.shared_expert_gate.weight": (1, h)})
    norms = {"pre_fc_norm_embedding.weight": h, "pre_fc_norm_hidden.weight": h, "norm.weight": h,
             "layers.0.input_layernorm.weight": h, "layers.0.post_attention_layernorm.weight": h,
             "layers.0.self_attn.q_norm.weight": dim, "layers.0.self_attn.k_norm.weight": dim}
    out = {}
    for name, shape in shapes.items():  # std scale/sqrt(fan_in)·√... kept O(1) per output like the fixtures' init
        out["mtp." + name] = (rng.standard_normal(shape) * scale * np.sqrt(64.0 / shape[1])).astype(np.float32)
    for name, size in norms.items():  # (1 + w) norms: w near 0, perturbed so a wrong norm shows
        out["mtp." + name] = (rng.standard_normal(size) * 0.1).astype(np.float32)
    return out
