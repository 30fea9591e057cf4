"""A Qwen3.5 text config (transformers' Qwen3_5TextConfig keywords) from a geometry, as every model built outside
the package needs it: the fixtures (tools/make_fixtures.py) and the benchmark models (bench/common.py's
geometries)."""

from __future__ import annotations


def layer_types(layers: int) -> list[str]:
    """Qwen3.5's hybrid stack: three Gated DeltaNet (linear attention) layers, then one full attention."""
    return ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)]


def text_config_kwargs(*, vocab: int, hidden: int, layers: int, heads: int, kv_heads: int, head_dim: int,
                       intermediate: int, linear_k_heads: int, linear_v_heads: int, linear_dim: int, tied: bool,
                       max_positions: int, mrope_section: list[int], conv_kernel: int = 4,
                       special: dict | None = None) -> dict:
    """Qwen3_5TextConfig's keywords for a geometry (the names of bench/common.py's Geometry fields): the hybrid
    stack (layer_types), Gated DeltaNet heads with equal key and value head dims, SiLU, RMSNorm eps 1e-6, rope θ 1e7
    on a quarter of each head's dims (partial_rotary_factor 0.25) with interleaved M-RoPE sections summing to half
    the rotated dims (real checkpoints: [11, 11, 10] for 64 of 256); with `special` (token → id) the end-of-turn
    and padding ids, no BOS."""
    kwargs = dict(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate, tie_word_embeddings=tied,
        num_hidden_layers=layers, layer_types=layer_types(layers), max_position_embeddings=max_positions,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,  # full attention
        linear_num_key_heads=linear_k_heads, linear_num_value_heads=linear_v_heads,  # Gated DeltaNet
        linear_key_head_dim=linear_dim, linear_value_head_dim=linear_dim, linear_conv_kernel_dim=conv_kernel,
        hidden_act="silu", rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": list(mrope_section), "mrope_interleaved": True},
    )
    if special is not None:
        kwargs.update(eos_token_id=special["<|im_end|>"], pad_token_id=special["<|endoftext|>"], bos_token_id=None)
    return kwargs
