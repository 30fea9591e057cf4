"""The parts of a Qwen3.5 text config (transformers' Qwen3_5TextConfig keywords) that every model built outside
the package shares, whatever its size: the fixtures (tools/make_fixtures.py) and the benchmark models
(bench/common.py's geometries)."""

from __future__ import annotations


def layer_types(layers: int) -> list[str]:
    """Qwen3.5's hybrid stack: three Gated DeltaNet (linear attention) layers, then one full attention."""
    return ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)]


def shared_text_kwargs(max_positions: int, mrope_section: list[int], tied: bool, special: dict | None = None) -> dict:
    """SiLU, RMSNorm eps 1e-6, rope θ 1e7 on a quarter of each head's dims (partial_rotary_factor 0.25) with
    interleaved M-RoPE sections summing to half the rotated dims (real checkpoints: [11, 11, 10] for 64 of 256);
    with `special` (token → id) the end-of-turn and padding ids, no BOS."""
    kwargs = dict(
        hidden_act="silu",
        rms_norm_eps=1e-6,
        max_position_embeddings=max_positions,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10_000_000.0,
            "partial_rotary_factor": 0.25,
            "mrope_section": list(mrope_section),
            "mrope_interleaved": True,
        },
        tie_word_embeddings=tied,
    )
    if special is not None:
        kwargs.update(eos_token_id=special["<|im_end|>"], pad_token_id=special["<|endoftext|>"], bos_token_id=None)
    return kwargs
