"""How the dynamic runner splits a prompt segment into chunks: a bounded set of shapes, few infers.

The CPU plugin keeps compiled kernels and their buffers for every prompt length it has run: a process fed
prompts of many lengths grew by 1.0–1.6 MiB per new length on the demo model and 0.8–2.5 MiB at the 0.8B
geometry, without bound (bench/soak.py). Prefill therefore runs in chunks whose lengths come from a fixed
set, so the plugin sees a bounded number of prompt shapes whatever the traffic: full chunks of `largest`,
then the rest written in base `base`, one chunk per non-zero digit.

Two costs pull the chunk length in opposite directions, and which one matters depends on the model:
- every chunk is one more infer, and an infer whose input shapes differ from the previous one's pays the
  plugin's per-node shape preparation (demo model, 2 threads or 1 alike: a 12-token chunk after a 48-token
  one took 3.6 ms where a whole 60-token prompt took 3.4 ms). On a 2 MB model that is most of a decision:
  chunks of 256 (≤ 4 infers for 700 tokens) made decisions 1.39× slower than one infer per prompt, chunks of
  1024 in base 32 (≤ 2 infers below 1,024 tokens) 1.04× (`python -m bench.soak --mode latency`);
- the plugin sizes its activation memory by the longest chunk it has run, and Gated DeltaNet's prefill holds
  a key × value matrix per value head per token: at the 0.8B geometry (16 heads of 128 × 128, f32: 1 MiB a
  token) RSS after one chunk of 256 tokens was 2,374 MiB, of 1,024 tokens 3,472 MiB, of 2,048 tokens 4,726.

So the chunk is as long as the model's per-token DeltaNet memory allows within PREFILL_MEMORY_BUDGET: 1,024
tokens in base 32 (63 shapes) for small models, 256 in base 16 (31 shapes) for the real geometries.
The split depends only on the segment's length, so warm and cold runs of the same tokens stay bit-identical.
"""

from __future__ import annotations

from math import isqrt

PREFILL_CHUNKS = (1024, 256)  # the longest chunk allowed first; each is a power of four (base = its root)
PREFILL_MEMORY_BUDGET = 256 * 2**20  # bytes of DeltaNet key × value matrices one chunk may hold


def deltanet_bytes_per_token(text_config: dict) -> int:
    """f32 key × value matrices of every value head for one token (the prefill's largest per-token buffer)."""
    heads = int(text_config.get("linear_num_value_heads", 0))
    return heads * int(text_config.get("linear_key_head_dim", 0)) * int(text_config.get("linear_value_head_dim", 0)) * 4


def prefill_plan(text_config: dict) -> tuple[int, int]:
    """(largest chunk, base of the rest's digits) for a model: the longest chunk within the memory budget."""
    per_token = deltanet_bytes_per_token(text_config)
    for largest in PREFILL_CHUNKS:
        if largest * per_token <= PREFILL_MEMORY_BUDGET:
            return largest, isqrt(largest)
    return PREFILL_CHUNKS[-1], isqrt(PREFILL_CHUNKS[-1])


def chunk_sizes(length: int, largest: int = PREFILL_CHUNKS[-1], base: int = 16) -> list[int]:
    """`length` as full chunks of `largest`, then one chunk per non-zero base-`base` digit of the rest, largest first."""
    sizes = [largest] * (length // largest)
    rest = length % largest
    place = 1
    while place * base < largest:
        place *= base
    while rest:
        digit, rest = divmod(rest, place)
        if digit:
            sizes.append(digit * place)
        place //= base
    return sizes


def chunk_shapes(largest: int, base: int) -> set[int]:
    """Every chunk length chunk_sizes(·, largest, base) can produce."""
    shapes, place = {largest}, 1
    while place < largest:
        shapes |= {d * place for d in range(1, base) if d * place < largest}
        place *= base
    return shapes
