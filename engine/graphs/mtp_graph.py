"""Qwen3.5's Multi-Token Prediction head as an OpenVINO graph, built from the checkpoint's `mtp.*` tensors.

    x = fc([rmsnorm_e(embedding of token t+1); rmsnorm_h(hidden at t)])
    x = x + attention(rmsnorm(x));  x = x + mlp(rmsnorm(x))      (one full-attention decoder layer)
    out = rmsnorm_final(x)                                          → the shared lm head gives token t+2

as vLLM's Qwen3NextMultiTokenPredictor computes it (vllm/model_executor/models/qwen3_next_mtp.py: the embedding
first in the concatenation, the main model's hidden state *after* its final norm, i.e. what Qwen3NextModel.forward
returns and the lm head reads). The layer is the main model's full-attention kind (engine facts: q_proj gives
[q | gate] per head, q/k norms, partial NeoX RoPE, GQA, the output times sigmoid(gate)); every RMSNorm is the
x·rsqrt(mean x² + eps)·(1 + w) kind.

The graph is stateless: fed a window of positions (causal attention over them), it returns the head's hidden
state at each — at the last one only where the layer's MLP is a mixture of experts (Qwen3.5-35B-A3B's head): the
MLP of one position then reads only its routed experts' weights (a Gather of k of E), where every position's would
need k of them each; the draft reads the last position alone anyway. A draft of k tokens runs it k times over the
recent window plus the drafts so far (engine/runners/mtp_head.py); the embedding and the vocabulary projection are the
main model's, joined at load, so the export holds only the layer's own weights.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import openvino as ov
import openvino.opset13 as ops

from ..core.errors import ModelError

EMBEDS, HIDDEN, POSITIONS, OUTPUT = "inputs_embeds", "hidden_states", "position_ids", "mtp_hidden"

_LAYER = ("pre_fc_norm_embedding.weight", "pre_fc_norm_hidden.weight", "fc.weight", "norm.weight",
          "layers.0.input_layernorm.weight", "layers.0.post_attention_layernorm.weight",
          "layers.0.self_attn.q_proj.weight", "layers.0.self_attn.k_proj.weight", "layers.0.self_attn.v_proj.weight",
          "layers.0.self_attn.o_proj.weight", "layers.0.self_attn.q_norm.weight", "layers.0.self_attn.k_norm.weight")
_DENSE_MLP = ("layers.0.mlp.gate_proj.weight", "layers.0.mlp.up_proj.weight", "layers.0.mlp.down_proj.weight")
_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")
# A mixture-of-experts MLP (Qwen3_5MoeSparseMoeBlock): a router, E experts, a shared expert behind a sigmoid gate.
_MOE_MLP = ("layers.0.mlp.gate.weight", "layers.0.mlp.shared_expert_gate.weight",
            *(f"layers.0.mlp.shared_expert.{p}.weight" for p in _PROJECTIONS))


def mtp_tensor_names(config: dict | None = None) -> tuple[str, ...]:
    """The tensors (without the `mtp.` prefix) a Qwen3.5 MTP head has: the dense layer's, or with a config naming
    `num_experts`, the mixture of experts' (each expert's three projections as the checkpoint stores them)."""
    experts = int((config or {}).get("num_experts") or 0)
    if not experts:
        return _LAYER + _DENSE_MLP
    return _LAYER + _MOE_MLP + tuple(f"layers.0.mlp.experts.{e}.{p}.weight" for e in range(experts) for p in _PROJECTIONS)


def _const(array: np.ndarray) -> ov.Output:
    return ops.constant(np.ascontiguousarray(array, dtype=np.float32)).output(0)


def _i64(values) -> ov.Output:
    return ops.constant(np.asarray(values, dtype=np.int64)).output(0)


def _rms(x: ov.Output, weight: np.ndarray, eps: float) -> ov.Output:
    """x · rsqrt(mean(x²) + eps) · (1 + w) over the last axis."""
    mean = ops.reduce_mean(ops.multiply(x, x), _i64([-1]), keep_dims=True)
    scaled = ops.multiply(x, ops.sqrt(ops.divide(_const(np.ones(1)), ops.add(mean, _const(np.array([eps]))))))
    return ops.multiply(scaled, _const(1.0 + weight.astype(np.float64))).output(0)


def _linear(x: ov.Output, weight: np.ndarray) -> ov.Output:
    """x @ weightᵀ (weight [out, in], as the checkpoint stores it)."""
    return ops.matmul(x, _const(weight), transpose_a=False, transpose_b=True).output(0)


def _rope(x: ov.Output, cos: ov.Output, sin: ov.Output, rot: int, head_dim: int) -> ov.Output:
    """NeoX rotate_half RoPE on the first `rot` dims of each head ([1, heads, S, D])."""
    if rot == 0:
        return x
    parts = ops.variadic_split(x, _i64(-1), _i64([rot // 2, rot // 2, head_dim - rot]))
    x1, x2, rest = parts.output(0), parts.output(1), parts.output(2)
    rotated = ops.concat([ops.negative(x2), x1], -1)
    both = ops.add(ops.multiply(ops.concat([x1, x2], -1), cos), ops.multiply(rotated, sin))
    return ops.concat([both, rest], -1).output(0) if head_dim > rot else both.output(0)


def _heads(x: ov.Output, count: int, dim: int) -> ov.Output:
    """[1, S, count·dim] → [1, count, S, dim]."""
    shaped = ops.reshape(x, _i64([0, 0, count, dim]), special_zero=True)
    return ops.transpose(shaped, _i64([0, 2, 1, 3])).output(0)


def _attention(x: ov.Output, w: Mapping[str, np.ndarray], positions: ov.Output, config: dict) -> ov.Output:
    heads, kv_heads = int(config["num_attention_heads"]), int(config["num_key_value_heads"])
    dim, eps = int(config["head_dim"]), float(config["rms_norm_eps"])
    rope = config.get("rope_parameters") or {}
    factor = float(rope.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0)))
    theta = float(rope.get("rope_theta", config.get("rope_theta", 10000.0)))
    rot = int(dim * factor)
    p = "layers.0.self_attn."
    q_gate = ops.reshape(_linear(x, w[p + "q_proj.weight"]), _i64([0, 0, heads, 2 * dim]), special_zero=True)
    split = ops.split(q_gate, _i64(-1), 2)
    q = ops.transpose(_rms(split.output(0), w[p + "q_norm.weight"], eps), _i64([0, 2, 1, 3])).output(0)
    gate = ops.reshape(split.output(1), _i64([0, 0, heads * dim]), special_zero=True)
    k_flat = ops.reshape(_linear(x, w[p + "k_proj.weight"]), _i64([0, 0, kv_heads, dim]), special_zero=True)
    k = ops.transpose(_rms(k_flat.output(0), w[p + "k_norm.weight"], eps), _i64([0, 2, 1, 3])).output(0)
    v = _heads(_linear(x, w[p + "v_proj.weight"]), kv_heads, dim)
    inv_freq = 1.0 / theta ** (np.arange(0, rot, 2, dtype=np.float64) / max(rot, 1))
    angles = ops.multiply(ops.unsqueeze(ops.convert(positions, ov.Type.f32), _i64([-1])), _const(inv_freq))
    angles = ops.unsqueeze(ops.concat([angles, angles], -1), _i64([1]))  # [1, 1, S, rot]
    cos, sin = ops.cos(angles).output(0), ops.sin(angles).output(0)
    q, k = _rope(q, cos, sin, rot, dim), _rope(k, cos, sin, rot, dim)
    if heads != kv_heads:  # GQA: query head h reads kv head h // (heads / kv_heads)
        group = heads // kv_heads
        k, v = (ops.reshape(ops.concat([ops.unsqueeze(t, _i64([2]))] * group, 2), _i64([0, heads, -1, dim]),
                            special_zero=True).output(0) for t in (k, v))
    scale = _const(np.array(dim ** -0.5))
    out = ops.scaled_dot_product_attention(q, k, v, scale=scale, causal=True)
    out = ops.reshape(ops.transpose(out, _i64([0, 2, 1, 3])), _i64([0, 0, heads * dim]), special_zero=True)
    return _linear(ops.multiply(out, ops.sigmoid(gate)).output(0), w[p + "o_proj.weight"])


def _dense_mlp(m: ov.Output, w: Mapping[str, np.ndarray], prefix: str) -> ov.Output:
    act = ops.multiply(ops.swish(_linear(m, w[prefix + "gate_proj.weight"])), _linear(m, w[prefix + "up_proj.weight"]))
    return _linear(act.output(0), w[prefix + "down_proj.weight"])


def _moe_mlp(m: ov.Output, w: Mapping[str, np.ndarray], config: dict) -> ov.Output:
    """Qwen3_5MoeSparseMoeBlock on one position (m [1, 1, H]): the router's softmax, its top k renormalised, those
    k experts' SwiGLU MLPs weighted and summed, plus the shared expert times sigmoid(its gate)."""
    experts, k = int(config["num_experts"]), int(config["num_experts_per_tok"])
    size = int(config["hidden_size"])
    p = "layers.0.mlp."
    probs = ops.softmax(_linear(m, w[p + "gate.weight"]), -1)  # [1, 1, E]
    top = ops.topk(probs, _i64(k), -1, "max", "value", ov.Type.i64)
    chosen = top.output(0)
    if config.get("norm_topk_prob", True):
        chosen = ops.divide(chosen, ops.reduce_sum(chosen, _i64([-1]), keep_dims=True)).output(0)
    ids = ops.reshape(top.output(1), _i64([k]), special_zero=False)

    def stacked(name: str) -> ov.Output:  # [k, out, in]: the routed experts' weights of one projection
        table = np.stack([w[f"{p}experts.{e}.{name}.weight"] for e in range(experts)])
        return ops.gather(_const(table), ids, _i64(0)).output(0)

    column = ops.reshape(m, _i64([size, 1]), special_zero=False)
    act = ops.multiply(ops.swish(ops.matmul(stacked("gate_proj"), column, False, False)),
                       ops.matmul(stacked("up_proj"), column, False, False))  # [k, I, 1]
    out = ops.matmul(stacked("down_proj"), act, False, False)  # [k, H, 1]
    weighted = ops.multiply(out, ops.reshape(chosen, _i64([k, 1, 1]), special_zero=False))
    routed = ops.reshape(ops.reduce_sum(weighted, _i64([0]), keep_dims=False), _i64([1, 1, size]), special_zero=False)
    shared = ops.multiply(_dense_mlp(m, w, p + "shared_expert."),
                          ops.sigmoid(_linear(m, w[p + "shared_expert_gate.weight"])))
    return ops.add(routed, shared).output(0)


def build_mtp_model(weights: Mapping[str, np.ndarray], config: dict) -> ov.Model:
    """The MTP head's graph: inputs_embeds and hidden_states [1, S, H] f32, position_ids [1, S] i64 →
    mtp_hidden [1, S, H] (after the head's final norm; [1, 1, H], the last position's, for a mixture-of-experts
    layer). `weights` are named without the `mtp.` prefix."""
    moe = bool(config.get("num_experts"))
    missing = [n for n in mtp_tensor_names(config) if n not in weights]
    if missing:
        kind = "mixture-of-experts " if moe else ""
        raise ModelError(f"the checkpoint's {kind}MTP head lacks {', '.join(missing[:3])}"
                         + (f" and {len(missing) - 3} more" if len(missing) > 3 else ""))
    hidden_size, eps = int(config["hidden_size"]), float(config["rms_norm_eps"])
    embeds = ops.parameter([1, -1, hidden_size], ov.Type.f32, name=EMBEDS)
    hidden = ops.parameter([1, -1, hidden_size], ov.Type.f32, name=HIDDEN)
    positions = ops.parameter([1, -1], ov.Type.i64, name=POSITIONS)
    joined = ops.concat([_rms(embeds.output(0), weights["pre_fc_norm_embedding.weight"], eps),
                         _rms(hidden.output(0), weights["pre_fc_norm_hidden.weight"], eps)], -1)
    x = _linear(joined.output(0), weights["fc.weight"])
    x = ops.add(x, _attention(_rms(x, weights["layers.0.input_layernorm.weight"], eps), weights, positions.output(0),
                              config)).output(0)
    if moe:  # the last position alone (see the module doc)
        x = ops.gather(x, _i64([-1]), _i64(1)).output(0)
    m = _rms(x, weights["layers.0.post_attention_layernorm.weight"], eps)
    mlp = _moe_mlp(m, weights, config) if moe else _dense_mlp(m, weights, "layers.0.mlp.")
    x = ops.add(x, mlp).output(0)
    out = ops.result(_rms(x, weights["norm.weight"], eps))
    out.output(0).get_tensor().set_names({OUTPUT})
    for p in (embeds, hidden, positions):
        p.output(0).get_tensor().set_names({p.get_friendly_name()})
    return ov.Model([out], [embeds, hidden, positions], "qwen3_5_mtp")
