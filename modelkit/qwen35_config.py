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


def vision_config(*, depth: int, hidden: int, intermediate: int, heads: int, out_hidden: int, positions: int,
                  initializer_range: float) -> dict:
    """Qwen3.5's vision_config for a tower size: 16-pixel patches, 2 frames per temporal patch, 2×2 patches merged
    into one token of the text model's width (`out_hidden`), a position table of `positions` (a square grid)."""
    return dict(depth=depth, hidden_size=hidden, intermediate_size=intermediate, num_heads=heads, in_channels=3,
                patch_size=16, spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=out_hidden,
                num_position_embeddings=positions, hidden_act="gelu_pytorch_tanh", initializer_range=initializer_range)


def preprocessor_config(min_pixels: int, max_pixels: int, vision: dict) -> dict:
    """A preprocessor_config.json of the shape a real Qwen3.5 export's has (Qwen2-VL image processor, mean/std 0.5,
    bicubic), with the pixel budget given and the patch sizes of `vision` (a vision_config)."""
    return {
        "image_processor_type": "Qwen2VLImageProcessor",
        "do_convert_rgb": True,
        "do_resize": True,
        "size": {"shortest_edge": min_pixels, "longest_edge": max_pixels},
        "resample": 3,
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "patch_size": vision["patch_size"],
        "temporal_patch_size": vision["temporal_patch_size"],
        "merge_size": vision["spatial_merge_size"],
    }
