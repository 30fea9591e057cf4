"""Images on the static-shape runner (the NPU path): image features as input embeddings and 3-D positions fed to
the fixed-shape variants, against transformers float64 — on the CPU, and through the NPU plugin (NPUW on the CPU)
with the vision encoder there too."""

import numpy as np
import pytest

from support.models import model_dir, npu_static_runner
from decider.engine.decisions.decide import DecisionRequest, decide
from decider.engine.compile.devices import DeviceOptions
from decider.engine.generation.generate import generate_step, make_rng
from decider.engine.generation.sampling import make_sampler
from decider.engine.core.logprobs import log_softmax
from test_vision import CASES, GREEDY, TOLERANCE, chat_prompt, load

FIXTURE = model_dir("qwen35-vl")
# Chunks that cut through the images (the screenshot is 60 tokens), so positions must follow across chunks.
CHUNKS = (16, 4, 1)


@pytest.fixture(scope="module")
def static_vl():
    from decider.engine.runners.static import StaticRunner

    return StaticRunner(FIXTURE, DeviceOptions(device="CPU", path="static", static_chunks=CHUNKS, npu_max_prompt_len=256))


def check_case(runner, name: str) -> float:
    case = CASES[name]
    prompt = chat_prompt(runner, case)
    runner.reset()
    runner.clear_snapshots()
    got = log_softmax(runner.prefill(prompt.ids))
    worst = float(np.max(np.abs(got - np.array(case["logprobs"]))))
    steps = list(generate_step(runner, prompt.ids, make_sampler(GREEDY, make_rng(0)), max_tokens=len(case["steps"]), top_logprobs=5))
    assert [s.token_id for s in steps] == [s["token"] for s in case["steps"]]
    for got_step, want in zip(steps, case["steps"]):
        worst = max(worst, max(abs(t.logprob - w[1]) for t, w in zip(got_step.entry.top, want["top"])))
    return worst


@pytest.mark.parametrize("name", ["wide", "tall", "screen", "two_images"])
def test_static_runner_images_match_transformers_float64(static_vl, name):
    assert static_vl.vision is not None
    assert check_case(static_vl, name) < TOLERANCE


def test_static_runner_reuses_the_image_state(static_vl):
    screen = load("screen_640x360")
    static_vl.reset()
    static_vl.clear_snapshots()
    first = decide(static_vl, DecisionRequest("Attack or wait?", ("Attack", "Wait"), context="Rules: be brave.",
                                              images=(screen,), sampling=GREEDY))
    second = decide(static_vl, DecisionRequest("Trade or wait?", ("Trade", "Wait"), context="Rules: be brave.",
                                               images=(screen,), sampling=GREEDY))
    assert second.usage["images_encoded"] == 0 and second.usage["reused_tokens"] > 60
    static_vl.reset()
    static_vl.clear_snapshots()
    cold = decide(static_vl, DecisionRequest("Trade or wait?", ("Trade", "Wait"), context="Rules: be brave.",
                                             images=(screen,), sampling=GREEDY))
    assert max(abs(a.logprob - b.logprob) for a, b in zip(cold.options, second.options)) < 1e-5
    assert first.options[0].text == "Attack"


def test_the_npu_path_sees_images_through_the_npu_plugin():
    runner = npu_static_runner(FIXTURE, static_chunks=CHUNKS, npu_max_prompt_len=256, vision_device="NPU",
                               npu_vision_max_pixels=256 * 256)
    assert runner.device == "NPU" and runner.vision.device == "NPU"
    worst = max(check_case(runner, name) for name in ("wide", "screen"))
    print(f"\nNPU path (NPUW on CPU), images: max |Δ logprob| vs transformers float64 = {worst:.2e}")
    assert worst < TOLERANCE
