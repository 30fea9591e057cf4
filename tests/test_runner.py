"""The runner: last-position head, state reuse, snapshots, limits."""

import dataclasses

import numpy as np
import openvino as ov
import pytest

from support.models import case, model_dir
from decider.engine.compile.devices import DeviceCaps
from decider.engine.core.errors import ContextLimitError, SettingsError
from decider.engine.runners.runner import ModelRunner

PROMPT = case("dist_ten_options")["prompt_ids"]


def full_position_logits(ids):
    """The unedited export's logits at every position, fed in the same chunks as the runner's prefill."""
    from decider.engine.model.folder import inspect_folder
    from decider.engine.runners.prefill_chunks import chunk_sizes, prefill_plan

    plan = prefill_plan(inspect_folder(model_dir("qwen35-text")).text_config)
    core = ov.Core()
    compiled = core.compile_model(
        core.read_model(model_dir("qwen35-text") / "openvino_model.xml"), "CPU",
        {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"},
    )
    request = compiled.create_infer_request()
    rows, past = [], 0
    for size in chunk_sizes(len(ids), *plan):
        chunk = np.array([ids[past : past + size]], dtype=np.int64)
        request.infer({
            "input_ids": chunk, "attention_mask": np.ones((1, past + size), dtype=np.int64),
            "position_ids": np.arange(past, past + size)[None], "beam_idx": np.zeros(1, np.int32),
        })
        rows.append(request.get_tensor("logits").data.copy())
        past += size
    return np.concatenate(rows, axis=1)


def test_last_position_head_equals_the_full_models_last_row(text_runner):
    full = full_position_logits(PROMPT)
    assert full.shape[1] == len(PROMPT)  # the export computes every position
    text_runner.reset()
    last = text_runner.prefill(PROMPT)
    assert text_runner._request.get_tensor("logits").data.shape[1] == 1
    assert np.array_equal(last, full[0, -1, : text_runner.vocab_size].astype(np.float64))


def test_prefix_reuse_prefills_only_the_rest_and_matches_cold(text_runner):
    text_runner.reset()
    text_runner.clear_snapshots()
    cold = text_runner.prefill(PROMPT + [5, 6, 7])
    text_runner.reset()
    text_runner.prefill(PROMPT)
    warm = text_runner.prefill(PROMPT + [5, 6, 7])
    assert text_runner.stats.last_prefill_reused == len(PROMPT)
    assert text_runner.stats.last_prefill_tokens == 3
    assert np.max(np.abs(warm - cold)) < 1e-4


def test_divergence_restores_the_snapshot_bit_identically(text_runner):
    text_runner.reset()
    text_runner.clear_snapshots()
    cut = 40
    a = PROMPT[:cut] + [11, 12, 13]
    b = PROMPT[:cut] + [21, 22, 23]
    cold_b = text_runner.prefill(b, checkpoints=[cut])
    text_runner.reset()
    text_runner.clear_snapshots()
    text_runner.prefill(a, checkpoints=[cut])
    restored = text_runner.stats.snapshots_restored
    warm_b = text_runner.prefill(b, checkpoints=[cut])
    assert text_runner.stats.snapshots_restored == restored + 1
    assert text_runner.stats.last_prefill_tokens == 3
    assert np.array_equal(warm_b, cold_b)


def test_full_match_never_runs_an_empty_prefill(text_runner):
    text_runner.reset()
    text_runner.clear_snapshots()
    first = text_runner.prefill(PROMPT)
    forwards = text_runner.stats.forwards
    again = text_runner.prefill(PROMPT)  # identical: no snapshot → clear and prefill everything
    assert text_runner.stats.forwards == forwards + 1
    assert text_runner.stats.last_prefill_tokens == len(PROMPT)
    assert np.array_equal(first, again)


def test_full_match_with_a_snapshot_restores_state_and_logits(text_runner):
    text_runner.reset()
    text_runner.clear_snapshots()
    first = text_runner.prefill(PROMPT, checkpoints=[len(PROMPT)])
    after_first = text_runner.step(9)
    forwards = text_runner.stats.forwards
    again = text_runner.prefill(PROMPT, checkpoints=[len(PROMPT)])
    assert text_runner.stats.forwards == forwards
    assert np.array_equal(first, again)
    assert np.array_equal(text_runner.step(9), after_first), "the restored state continues exactly"


def test_a_snapshot_restored_twice_continues_exactly_and_is_never_written(text_runner):
    """Restores hand the plugin the snapshot's own memory (set_state copies it in): a plugin that wrote into it would
    make the second restore continue from the first one's steps."""
    text_runner.reset()
    text_runner.clear_snapshots()
    text_runner.prefill(PROMPT, checkpoints=[len(PROMPT)])
    snapshot = text_runner._snapshots[tuple(PROMPT)]
    kept = {name: array.copy() for name, array in snapshot.states.items()}
    runs = []
    for _ in range(2):
        text_runner.prefill(PROMPT, checkpoints=[len(PROMPT)])
        runs.append([text_runner.step(t) for t in (9, 10, 11)])
    assert all(np.array_equal(a, b) for a, b in zip(*runs))
    assert all(np.array_equal(snapshot.states[name], array) for name, array in kept.items())


def test_without_snapshots_every_request_reprefills(text_runner, monkeypatch):
    # The NPU path: no query_state() snapshots, no continuation prefill.
    caps = DeviceCaps("NPU", snapshots=False, prefix_reuse=False, max_prompt_len=len(PROMPT) + 5, max_total_len=200)
    monkeypatch.setattr(text_runner, "caps", caps)
    text_runner.reset()
    cold = text_runner.prefill(PROMPT, checkpoints=[10, len(PROMPT)])
    again = text_runner.prefill(PROMPT, checkpoints=[10, len(PROMPT)])
    assert text_runner.stats.last_prefill_tokens == len(PROMPT)
    assert np.array_equal(cold, again)
    with pytest.raises(ContextLimitError, match=r"compiled for at most \d+"):
        text_runner.prefill(PROMPT + list(range(6)))


def test_prompt_over_the_context_limit_is_a_clear_error(text_runner, monkeypatch):
    folder = dataclasses.replace(text_runner.folder, text_config={**text_runner.folder.text_config, "max_position_embeddings": 32})
    monkeypatch.setattr(text_runner, "folder", folder)
    with pytest.raises(ContextLimitError, match=r"the prompt has \d+ tokens; the model's context limit is 32"):
        text_runner.prefill(PROMPT)
    with pytest.raises(SettingsError, match="empty"):
        text_runner.prefill([])
    with pytest.raises(SettingsError, match=rf"token id {text_runner.vocab_size}, outside this model's 0\.\."):
        text_runner.prefill(PROMPT[:3] + [text_runner.vocab_size])
    with pytest.raises(SettingsError, match="token id -1"):
        text_runner.prefill([-1])


def test_vision_language_layout_loads_and_matches_text_tokens(vl_runner):
    assert vl_runner.folder.layout == "vl"
    vl_runner.reset()
    logits = vl_runner.prefill(PROMPT)
    assert logits.shape == (vl_runner.vocab_size,) and np.isfinite(logits).all()


# ----- steps that run ahead (the next forward overlaps the host's work on the current step) -----


def test_a_step_started_ahead_gives_the_same_logits_as_a_plain_step(text_runner):
    text_runner.reset()
    text_runner.prefill(PROMPT)
    plain = [text_runner.step(t) for t in (5, 9, 11)]
    text_runner.reset()
    text_runner.prefill(PROMPT)
    ahead = []
    for t in (5, 9, 11):
        text_runner.start_step(t)
        with pytest.raises(RuntimeError, match="already running"):
            text_runner.start_step(t)
        ahead.append(text_runner.finish_step())
    assert all(np.array_equal(a, b) for a, b in zip(plain, ahead))
    assert text_runner.history == list(PROMPT) + [5, 9, 11]


def test_a_consumer_that_stops_early_leaves_state_and_history_in_step(text_runner):
    from decider.engine.generation.generate import generate_step, make_rng
    from decider.engine.generation.sampling import make_sampler
    from decider.engine.core.settings import SamplingSettings

    greedy = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0)
    text_runner.reset()
    text_runner.clear_snapshots()
    steps = generate_step(text_runner, PROMPT, make_sampler(greedy, make_rng(0)), max_tokens=10)
    first, second = next(steps), next(steps)
    steps.close()  # the forward of `second` was already running: it completes, nothing is left pending
    assert not text_runner._pending
    assert text_runner.history == list(PROMPT) + [first.token_id, second.token_id]
    # the state really holds that history: continuing from it equals a cold computation
    warm = text_runner.prefill(list(PROMPT) + [first.token_id, second.token_id, 7])
    assert text_runner.stats.last_prefill_tokens == 1
    text_runner.reset()
    text_runner.clear_snapshots()
    cold = text_runner.prefill(list(PROMPT) + [first.token_id, second.token_id, 7])
    assert np.allclose(warm, cold, atol=1e-5)
    # an abandoned generator that is never closed: the next prefill settles it first
    text_runner.reset()
    abandoned = generate_step(text_runner, PROMPT, make_sampler(greedy, make_rng(0)), max_tokens=10)
    next(abandoned)
    assert text_runner._pending
    text_runner.prefill(PROMPT)
    assert not text_runner._pending
    del abandoned


@pytest.mark.parametrize("largest, base", [(256, 16), (1024, 32)])
def test_prefill_chunks_come_from_a_fixed_set_of_lengths(largest, base):
    from decider.engine.runners.prefill_chunks import chunk_shapes, chunk_sizes

    # Full chunks, then one chunk per non-zero digit of the rest: for 256/16: 256; 16, 32 … 240; 1 … 15.
    allowed = {largest} | {d * base for d in range(1, base)} | set(range(1, base))
    assert chunk_shapes(largest, base) == allowed
    seen = set()
    for length in range(1, 3 * largest + 7):
        sizes = chunk_sizes(length, largest, base)
        assert sum(sizes) == length and sizes == sorted(sizes, reverse=True)
        assert len(sizes) <= length // largest + 2  # at most two chunks beyond the full ones
        seen |= set(sizes)
    assert seen == allowed  # 31 shapes (256/16) or 63 (1024/32) for every prompt length


def test_chunk_sizes_in_base_two_are_the_binary_digits():
    from decider.engine.runners.prefill_chunks import chunk_sizes

    assert chunk_sizes(903, 256, 2) == [256, 256, 256, 128, 4, 2, 1]
    assert chunk_sizes(903, 256, 16) == [256, 256, 256, 128, 7]
    assert chunk_sizes(1000, 512, 16) == [512, 256, 224, 8]
    assert chunk_sizes(1000, 1024, 32) == [992, 8]


def test_the_chunk_length_follows_the_models_deltanet_memory():
    """Small models get long chunks (few infers); the real geometries 256 (bounded activation memory)."""
    from decider.engine.runners.prefill_chunks import PREFILL_MEMORY_BUDGET, deltanet_bytes_per_token, prefill_plan

    demo = {"linear_num_value_heads": 4, "linear_key_head_dim": 32, "linear_value_head_dim": 32}
    qwen35_08b = {"linear_num_value_heads": 16, "linear_key_head_dim": 128, "linear_value_head_dim": 128}
    qwen35_9b = {"linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128}
    assert deltanet_bytes_per_token(qwen35_08b) == 2**20
    assert prefill_plan(demo) == (1024, 32)
    assert prefill_plan(qwen35_08b) == (256, 16)
    assert prefill_plan(qwen35_9b) == (256, 16)  # never below 256: compute dominates there, not the infer count
    edge = {"linear_num_value_heads": 1, "linear_key_head_dim": 1, "linear_value_head_dim": PREFILL_MEMORY_BUDGET // 4096}
    assert prefill_plan(edge) == (1024, 32)
    assert prefill_plan({**edge, "linear_value_head_dim": edge["linear_value_head_dim"] + 1}) == (256, 16)


def test_the_runner_splits_by_its_models_plan(text_runner):
    from decider.engine.runners.prefill_chunks import prefill_plan

    assert (text_runner.prefill_chunk, text_runner.prefill_base) == prefill_plan(text_runner.folder.text_config)


def test_chunked_prefill_equals_token_by_token_decoding():
    """A prompt split into chunks says what feeding its tokens one at a time says (the same state)."""
    runner = ModelRunner(model_dir("qwen35-text"))
    ids = runner.tokenizer.encode_text("Scouts report that the north gate is the safe choice. " * 4)[:37]
    logits = runner.prefill(ids)
    assert runner.stats.infers >= 2  # 32 + 5
    runner.reset()
    stepped = runner.prefill(ids[:1])
    for token in ids[1:]:
        stepped = runner.step(token)
    assert np.max(np.abs(logits - stepped)) < 1e-4


def test_a_runner_imported_from_the_compiled_cache_does_not_keep_the_ir_mapped(tmp_path):
    """A warm start imports the compiled model, which holds its own weights: the IR (read only to hash the model)
    is let go, or its weights would be resident twice. Same logits either way; a twin reads the IR again."""
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.compile.precision import cpu_capabilities, fast_inference

    options = DeviceOptions(device="CPU", cache_dir=tmp_path)
    cold = ModelRunner(model_dir("qwen35-text"), options)
    assert not cold.compiled.get_property("LOADED_FROM_CACHE") and cold._model is not None
    warm = ModelRunner(model_dir("qwen35-text"), options)
    assert warm.compiled.get_property("LOADED_FROM_CACHE") and warm._model is None
    ids = warm.tokenizer.encode_text("Scouts report that the north gate is the safe choice. " * 3)
    expected = cold.prefill(ids)
    assert np.array_equal(warm.prefill(ids), expected)
    twin = warm.twin(DeviceOptions(device="CPU", exact=False))
    assert twin._model is not None and twin.vocab_size == warm.vocab_size
    # The reduced-precision compile of the same model (the one measured fastest on this machine, see
    # engine/compile/fast_tuning.py), held to what its compiled arithmetic implies: a u8 KV cache alone (f32 arithmetic)
    # stays within 0.05 here; bf16 arithmetic (avx512_bf16/AMX) moves this random-weight model's logits by tenths
    # of a nat, but not to another model.
    inference = twin.precision.inference
    assert not twin.precision.exact and inference in {"f32", fast_inference(cpu_capabilities(twin._core))}
    drift = np.max(np.abs(twin.prefill(ids) - expected))
    assert 0 < drift < {"f32": 0.05, "f16": 0.5, "bf16": 1.5}[inference], (inference, drift)
