"""The MTP head's OpenVINO graph (engine/graphs/mtp_graph.py) against a float64 numpy reference of the layer, on the
fixtures' seeded random `mtp.*` tensors, read by our own safetensors reader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import openvino as ov
import pytest

from decider.engine.core.errors import ModelError
from decider.engine.graphs.mtp_graph import build_mtp_model
from decider.engine.model.safetensors_file import checkpoint_tensors, read_tensors, write_tensors

from support.mtp_reference import mtp_forward

CHECKPOINTS = Path(__file__).parent / "fixtures" / "checkpoints"
EXACT = {"INFERENCE_PRECISION_HINT": "f32"}


def _head(name: str) -> tuple[dict, dict]:
    config = json.loads((CHECKPOINTS / name / "config.json").read_text())
    tensors = checkpoint_tensors(CHECKPOINTS / name, "mtp.")
    return {k[len("mtp."):]: v for k, v in tensors.items()}, config.get("text_config", config)


def test_safetensors_round_trip_and_bf16(tmp_path):
    tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1, -2], dtype=np.int64),
               "c": np.float16([0.5, -3.0])}
    write_tensors(tmp_path / "x.safetensors", tensors)
    back = read_tensors(tmp_path / "x.safetensors")
    assert set(back) == set(tensors)
    for name, array in tensors.items():
        assert back[name].dtype == array.dtype and np.array_equal(back[name], array)
    # bf16: the high half of a float32; our reader widens it exactly
    values = np.float32([1.5, -0.15625, 3.0e38])
    raw = (values.view(np.uint32) >> 16).astype("<u2").tobytes()
    header = json.dumps({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, len(raw)]}}).encode()
    (tmp_path / "bf.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + raw)
    widened = read_tensors(tmp_path / "bf.safetensors")["w"]
    assert np.array_equal(widened, (values.view(np.uint32) & 0xFFFF0000).view(np.float32))


def test_damaged_safetensors_is_a_model_error(tmp_path):
    (tmp_path / "bad.safetensors").write_bytes((10).to_bytes(8, "little") + b"{not json}")
    with pytest.raises(ModelError):
        read_tensors(tmp_path / "bad.safetensors")


@pytest.mark.parametrize("name", ["qwen35-text", "qwen35-vl"])
def test_graph_matches_float64_reference(name):
    weights, config = _head(name)
    assert weights, "the fixture checkpoint carries mtp.* tensors (tools/make_fixtures.py --mtp-only)"
    compiled = ov.Core().compile_model(build_mtp_model(weights, config), "CPU", EXACT)
    rng = np.random.default_rng(3)
    size = int(config["hidden_size"])
    embeds, hidden = rng.standard_normal((7, size)), rng.standard_normal((7, size)) * 3
    positions = np.arange(40, 47)
    got = compiled({"inputs_embeds": embeds[None].astype(np.float32), "hidden_states": hidden[None].astype(np.float32),
                    "position_ids": positions[None]})[0][0]
    want = mtp_forward(weights, config, embeds, hidden, positions.astype(np.float64))
    assert np.max(np.abs(got - want)) < 2e-4
    # causal: a later position never changes an earlier one's output; RoPE: a shifted position does
    short = compiled({"inputs_embeds": embeds[None, :3].astype(np.float32),
                      "hidden_states": hidden[None, :3].astype(np.float32), "position_ids": positions[None, :3]})[0][0]
    assert np.max(np.abs(short - got[:3])) < 1e-5
    # RoPE is relative: the same shift everywhere changes nothing, a gap before the last position changes it
    shifted = compiled({"inputs_embeds": embeds[None].astype(np.float32),
                        "hidden_states": hidden[None].astype(np.float32), "position_ids": positions[None] + 5})[0][0]
    assert np.max(np.abs(shifted - got)) < 1e-5
    gap = positions.copy()
    gap[-1] += 5
    moved = compiled({"inputs_embeds": embeds[None].astype(np.float32), "hidden_states": hidden[None].astype(np.float32),
                      "position_ids": gap[None]})[0][0]
    assert np.max(np.abs(moved[:-1] - got[:-1])) < 1e-5 and np.max(np.abs(moved[-1] - got[-1])) > 1e-3
    assert np.max(np.abs(moved[-1] - mtp_forward(weights, config, embeds, hidden, gap.astype(np.float64))[-1])) < 2e-4


def test_a_mixture_of_experts_head_matches_float64_reference_at_the_last_position():
    """Qwen3.5-35B-A3B's head: its MLP routes each position to k of E experts. The graph computes the last position
    (the one a draft reads) through the k routed experts' weights only."""
    weights, config = _head("qwen35-moe-text")
    assert config["num_experts"] > config["num_experts_per_tok"] and "layers.0.mlp.experts.0.up_proj.weight" in weights
    compiled = ov.Core().compile_model(build_mtp_model(weights, config), "CPU", EXACT)
    rng = np.random.default_rng(5)
    size = int(config["hidden_size"])
    embeds, hidden, positions = rng.standard_normal((6, size)), rng.standard_normal((6, size)) * 3, np.arange(20, 26)

    def run(w=None):
        model = compiled if w is None else ov.Core().compile_model(build_mtp_model(w, config), "CPU", EXACT)
        return model({"inputs_embeds": embeds[None].astype(np.float32), "hidden_states": hidden[None].astype(np.float32),
                      "position_ids": positions[None]})[0][0]

    got = run()
    assert got.shape == (1, size)
    want = mtp_forward(weights, config, embeds, hidden, positions.astype(np.float64))[-1]
    assert np.max(np.abs(got[0] - want)) < 2e-4
    # The routing is the reference's: an expert the last position does not use changes nothing, a routed one does.
    from support.mtp_reference import routed_experts

    used = routed_experts(weights, config, embeds, hidden, positions.astype(np.float64))
    unused = next(e for e in range(config["num_experts"]) if e not in used)
    for expert, changes in ((unused, False), (used[0], True)):
        bent = dict(weights)
        name = f"layers.0.mlp.experts.{expert}.down_proj.weight"
        bent[name] = weights[name] * 3
        assert (np.max(np.abs(run(bent) - got)) > 1e-3) == changes, expert


def test_missing_tensor_is_named():
    weights, config = _head("qwen35-text")
    weights.pop("layers.0.mlp.up_proj.weight")
    with pytest.raises(ModelError, match="up_proj"):
        build_mtp_model(weights, config)


def test_convert_keeps_the_mtp_head(tmp_path, monkeypatch):
    """`decider convert` writes openvino_mtp_model.xml from the checkpoint's mtp.* tensors (optimum stubbed by a copy
    of the fixture export); its graph is the head's, with f16 weights."""
    from decider.app import convert as convert_module
    from decider.engine.model.folder import inspect_folder
    from support.models import model_dir

    def fake_exporter(command, log):
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        for path in model_dir("qwen35-text").iterdir():
            (out / path.name).write_bytes(path.read_bytes())

    monkeypatch.setattr(convert_module, "optimum_available", lambda: True)
    monkeypatch.setattr(convert_module, "_run_exporter", fake_exporter)
    lines: list[str] = []
    convert_module.convert(CHECKPOINTS / "qwen35-text", tmp_path / "out", "fp16", log=lines.append, run_decision=False)
    folder = inspect_folder(tmp_path / "out")
    assert folder.mtp_ir is not None and any("MTP head" in line for line in lines)
    weights, config = _head("qwen35-text")
    saved = ov.Core().compile_model(folder.mtp_ir, "CPU", EXACT)
    rng = np.random.default_rng(5)
    feed = {"inputs_embeds": rng.standard_normal((1, 4, 64)).astype(np.float32),
            "hidden_states": rng.standard_normal((1, 4, 64)).astype(np.float32), "position_ids": np.arange(4)[None]}
    want = mtp_forward(weights, config, feed["inputs_embeds"][0], feed["hidden_states"][0], np.arange(4.0))
    assert np.max(np.abs(saved(feed)[0][0] - want)) < 2e-2  # f16 weights


def test_a_checkpoint_without_mtp_tensors_exports_no_head(tmp_path):
    from decider.app.mtp_export import export_mtp

    bare = tmp_path / "checkpoint"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        (bare / name).symlink_to(CHECKPOINTS / "qwen35-text" / name)
    out = tmp_path / "out"
    out.mkdir()
    assert export_mtp(bare, out) is None
    assert not list(out.iterdir())


@pytest.fixture(scope="module")
def runners(tmp_path_factory):
    from decider.engine.runners.runner import ModelRunner
    from support.models import model_dir
    from support.mtp_reference import folder_with_mtp

    folder = folder_with_mtp("qwen35-text", tmp_path_factory.mktemp("mtp") / "qwen35-text")
    return ModelRunner(folder), ModelRunner(model_dir("qwen35-text"))


def test_runner_exposes_hidden_states_without_changing_logits(runners):
    """With a head in the folder the runner gains a last_hidden output: the logits stay bit-identical, and the
    hidden rows are the lm head's input (logits = hidden @ lm_headᵀ, from the checkpoint's own weights)."""
    with_head, plain = runners
    assert with_head.mtp is not None and plain.mtp is None and plain.hidden_rows(1) is None
    ids = list(range(5, 40))
    assert np.array_equal(with_head.prefill(ids), plain.prefill(ids))
    for token in (7, 9, 11):
        assert np.array_equal(with_head.step(token), plain.step(token))
    rows = with_head.verify([3, 4, 5, 6], 4)
    assert np.array_equal(rows, plain.verify([3, 4, 5, 6], 4))
    hidden = with_head.hidden_rows(4)
    head = read_tensors(CHECKPOINTS / "qwen35-text" / "model.safetensors", ["lm_head.weight"])["lm_head.weight"]
    projected = hidden.astype(np.float64) @ head.T.astype(np.float64)
    assert np.max(np.abs(projected[:, : rows.shape[1]] - rows)) < 1e-4
    with_head.rewind(), plain.rewind()


def _f32_head(runner, vocabulary=None):
    from decider.engine.runners.mtp_head import load_head

    return load_head(runner._core, runner.folder.mtp_ir, runner._model, None, "CPU", EXACT, runner.vocab_size, vocabulary)


def test_head_logits_match_reference(runners):
    """The joined head (the export's layer + the main model's embedding and lm head), compiled in f32, against the
    float64 reference."""
    with_head, _ = runners
    with_head.prefill(list(range(5, 30)))
    hidden = with_head.hidden_rows(1)
    weights, config = _head("qwen35-text")
    tensors = read_tensors(CHECKPOINTS / "qwen35-text" / "model.safetensors",
                           ["lm_head.weight", "model.language_model.embed_tokens.weight"])
    ids, positions = np.array([17, 23]), np.array([25, 26])
    second = np.random.default_rng(1).standard_normal((1, 64))
    logits, state = _f32_head(with_head).step(ids, np.concatenate([hidden, second]).astype(np.float32), positions)
    embeds = tensors["model.language_model.embed_tokens.weight"][ids].astype(np.float64)
    want = mtp_forward(weights, config, embeds, np.concatenate([hidden, second]).astype(np.float64), positions * 1.0)
    assert np.max(np.abs(state - want[-1])) < 2e-2  # the export's f16 weights
    want_logits = want[-1] @ tensors["lm_head.weight"].T.astype(np.float64)
    assert np.max(np.abs(logits - want_logits[: logits.size])) < 5e-2
    assert int(np.argmax(logits)) == int(np.argmax(want_logits[: logits.size]))


def test_the_runners_head_drafts_in_the_cpus_fastest_arithmetic(runners):
    """Drafts only: the runner compiles its head in bf16 where the CPU has it (stated); its logits stay those of the
    f32 head to that arithmetic's rounding, and the exact model's are untouched (the test above)."""
    from decider.engine.compile.precision import cpu_capabilities, fast_inference

    with_head, _ = runners
    assert with_head.mtp.inference == fast_inference(cpu_capabilities(with_head._core))
    feed = (np.array([5, 9, 14]), np.random.default_rng(4).standard_normal((3, 64)).astype(np.float32), np.arange(3))
    fast, _ = with_head.mtp.step(*feed)
    exact, _ = _f32_head(with_head).step(*feed)
    gap = np.max(np.abs(fast - exact))
    assert gap < 0.05 * np.max(np.abs(exact))  # bf16 keeps 8 bits: ~1e-2 relative
    if with_head.mtp.inference != "f32":
        assert gap > 1e-6  # the check can fail: another arithmetic ran


def test_a_trimmed_head_gives_the_full_heads_logits_at_its_ids(runners):
    with_head, _ = runners
    keep = np.arange(0, with_head.vocab_size, 3)
    rng = np.random.default_rng(2)
    feed = (np.array([5, 9, 14]), rng.standard_normal((3, 64)).astype(np.float32), np.arange(3))
    full, state = _f32_head(with_head).step(*feed)
    cut, cut_state = _f32_head(with_head, keep).step(*feed)
    assert np.array_equal(state, cut_state)
    assert np.max(np.abs(cut[keep] - full[keep])) < 1e-5
    assert np.all(np.isneginf(np.delete(cut, keep)))


def test_a_fast_twin_drafts_with_its_parents_head(runners):
    """Fast reasoning's twin compiles the parent's edited graph: it has the hidden-state output and shares the head."""
    from decider.engine.compile.devices import DeviceOptions

    with_head, _ = runners
    twin = with_head.twin(DeviceOptions(device="CPU", exact=False), {"INFERENCE_PRECISION_HINT": "f32"})
    assert twin.mtp is with_head.mtp
    twin.prefill(list(range(5, 30)))
    with_head.prefill(list(range(5, 30)))
    assert np.max(np.abs(twin.hidden_rows(1) - with_head.hidden_rows(1))) < 1e-4


def test_the_draft_vocabulary_is_the_first_ids_unless_asked_otherwise(monkeypatch):
    from decider.engine.core.errors import ModelError
    from decider.engine.runners.mtp_head import DRAFT_VOCABULARY, DRAFT_VOCABULARY_ENV, draft_vocabulary

    monkeypatch.delenv(DRAFT_VOCABULARY_ENV, raising=False)
    assert np.array_equal(draft_vocabulary(248_320), np.arange(DRAFT_VOCABULARY))
    assert draft_vocabulary(DRAFT_VOCABULARY) is None  # nothing to cut
    monkeypatch.setenv(DRAFT_VOCABULARY_ENV, "0")
    assert draft_vocabulary(248_320) is None
    monkeypatch.setenv(DRAFT_VOCABULARY_ENV, "lots")
    with pytest.raises(ModelError, match=DRAFT_VOCABULARY_ENV):
        draft_vocabulary(248_320)


def test_a_runner_drafts_over_the_vocabulary_asked_for(monkeypatch, tmp_path):
    """The runner's head cut to the ids asked for: its logits are the whole head's there, and drafted greedy decoding
    keeps plain decoding's tokens (the verifier decides)."""
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.core.settings import SamplingSettings
    from decider.engine.generation.generate import generate_step, make_rng
    from decider.engine.generation.mtp_drafts import MtpDrafts
    from decider.engine.runners.mtp_head import DRAFT_VOCABULARY_ENV
    from decider.engine.runners.runner import ModelRunner
    from support.mtp_reference import folder_with_mtp

    greedy = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0, repetition_penalty=1.0)
    folder = folder_with_mtp("qwen35-text", tmp_path / "qwen35-text")
    monkeypatch.setenv(DRAFT_VOCABULARY_ENV, "1000")
    runner = ModelRunner(folder, DeviceOptions(device="CPU", exact=True))
    assert runner.mtp is not None and np.array_equal(runner.mtp.vocabulary, np.arange(1000))
    feed = (np.array([5, 9, 14]), np.random.default_rng(5).standard_normal((3, 64)).astype(np.float32), np.arange(3))
    cut, _ = runner.mtp.step(*feed)
    assert np.all(np.isneginf(cut[1000:])) and np.all(np.isfinite(cut[:1000]))
    prompt = list(range(5, 40))
    plain = [s.token_id for s in generate_step(runner, prompt, greedy, make_rng(0), max_tokens=16)]
    drafter = MtpDrafts(runner.mtp)
    drafted = [s.token_id for s in generate_step(runner, prompt, greedy, make_rng(0), max_tokens=16, drafter=drafter)]
    assert drafted == plain and drafter.drafted > 0
