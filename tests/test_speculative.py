"""Speculative decoding (engine/generation/speculative.py): drafts verified by the exact model keep plain decoding's
tokens (greedy) and its distribution (sampled), never put a rejected draft in a penalty window, and leave a
state equal to an exact prefill of the kept tokens."""

from __future__ import annotations

import math
from collections import Counter, deque

import numpy as np
import pytest
from PIL import Image

from support.models import FIXTURES, ROOT, model_dir
from decider.engine.generation.drafter_choice import make_drafter
from decider.engine.generation.drafts import AutoLookup, PromptLookup
from decider.engine.core.errors import SettingsError
from decider.engine.generation.generate import generate_step, make_rng
from decider.engine.runners.runner import ModelRunner
from decider.engine.generation.sampling import Candidates, draw
from decider.engine.core.settings import SamplingSettings

GREEDY = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0, repetition_penalty=1.0)
PENALISED = SamplingSettings(temperature=0.0, frequency_penalty=1.0, presence_penalty=1.5, repetition_penalty=1.3)
MODELS = {
    "text": model_dir("qwen35-text"), "moe": model_dir("qwen35-moe-text"), "vl": model_dir("qwen35-vl"),
    "int8": model_dir("qwen35-text-int8"),  # int8 weights: few-token infers may run engine/kernels (#35)
    "demo": ROOT / "resources" / "demo-model", "demo-vl": ROOT / "resources" / "demo-vl-model",
}
_RUNNERS: dict[str, ModelRunner] = {}


def runner_for(name: str) -> ModelRunner:
    if not MODELS[name].exists():
        pytest.skip(f"{MODELS[name]} is absent")
    if name not in _RUNNERS:
        _RUNNERS[name] = ModelRunner(MODELS[name])
    return _RUNNERS[name]


def repetitive_prompt(runner: ModelRunner, with_image: bool = False) -> list:
    """Text that repeats (so lookup finds matches), behind an image where the model can see one."""
    rng = np.random.default_rng(7)
    phrase = [int(t) for t in rng.integers(5, min(runner.vocab_size, 800), 9)]
    prompt: list = phrase * 3
    if with_image:
        with Image.open(FIXTURES / "images" / "small_40x24.png") as image:
            prompt = list(runner.image_tokens(np.asarray(image.convert("RGB")))) + prompt
    return prompt


class Oracle(PromptLookup):
    """Drafts the reference continuation with every third drafted token wrong: kept and rejected drafts both,
    whatever the model (a random fixture's own text may never repeat)."""

    def __init__(self, reference: list[int], prompt_length: int, wrong=lambda t: t + 1) -> None:
        super().__init__()
        self.reference, self.prompt_length, self.wrong = reference, prompt_length, wrong

    def propose(self, limit: int) -> list[int]:
        done = len(self.tokens) - self.prompt_length
        drafts = self.reference[done : done + min(limit, self.max_draft)]
        return [self.wrong(t) if (done + i) % 3 == 2 else t for i, t in enumerate(drafts)]


class ModelDrafts(PromptLookup):
    """Drafts a second runner's greedy continuation of the text so far (a point mass on its argmax): kept as often
    as the verified model draws its own argmax, so sampled decoding keeps many of them too."""

    def __init__(self, folder) -> None:
        super().__init__()
        self.draft_runner = ModelRunner(folder)

    def propose(self, limit: int) -> list[int]:
        limit = min(limit, self.max_draft)
        drafts: list[int] = []
        if limit > 0:
            logits = self.draft_runner.prefill(self.tokens)
            while True:
                drafts.append(int(np.argmax(logits)))
                if len(drafts) == limit:
                    break
                logits = self.draft_runner.step(drafts[-1])
        return drafts


def tokens(runner, prompt, settings, drafter=None, max_tokens=40, **loop) -> list[int]:
    runner.reset()
    runner.clear_snapshots()
    steps = generate_step(runner, prompt, settings, make_rng(settings.seed), max_tokens=max_tokens, drafter=drafter, **loop)
    return [s.token_id for s in steps]


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("settings", [GREEDY, PENALISED], ids=["plain", "penalties"])
def test_greedy_tokens_are_plain_decodings_with_any_drafts(name, settings):
    runner = runner_for(name)
    prompt = repetitive_prompt(runner, with_image=runner.vision is not None)
    plain = tokens(runner, prompt, settings)
    forwards = runner.stats.forwards
    oracle = Oracle(plain, len(prompt))
    assert tokens(runner, prompt, settings, oracle) == plain
    assert oracle.kept > 0 and oracle.drafted > oracle.kept  # both paths ran: kept drafts and a rollback
    assert runner.stats.forwards - forwards < len(plain) + 1  # fewer forwards than one per token
    assert tokens(runner, prompt, settings, PromptLookup()) == plain  # the real drafter (drafts where text repeats)


def test_a_rollback_leaves_the_state_a_plain_step_would_have():
    runner = runner_for("text")
    prompt = repetitive_prompt(runner)
    runner.reset()
    runner.prefill(prompt)
    want = runner.step(11)
    runner.reset()
    runner.prefill(prompt)
    rows = runner.verify([11, 12, 13, 14], 4)
    assert rows.shape == (4, runner.vocab_size)
    assert np.max(np.abs(rows[0] - want)) < 1e-4  # the same model's logits, from one multi-token forward
    assert runner.rewind() == [] and runner.history == prompt
    assert np.array_equal(runner.step(11), want)  # KV trimmed, DeltaNet states restored: bit-identical
    with pytest.raises(RuntimeError):
        runner.rewind()  # the step moved on: nothing to undo


def test_the_counted_head_gives_plain_prefill_logits_bit_for_bit():
    runner = runner_for("text")
    prompt = repetitive_prompt(runner)
    runner.reset()
    runner.prefill(prompt[:-4])
    rows = runner.verify(prompt[-4:], 2)
    runner.reset()
    runner.clear_snapshots()
    assert np.max(np.abs(runner.prefill(prompt) - rows[-1])) < 1e-4
    assert np.max(np.abs(runner.prefill(prompt[:-1]) - rows[-2])) < 1e-4


def test_a_rejected_draft_never_enters_the_penalty_window():
    runner = runner_for("text")
    prompt = repetitive_prompt(runner)
    plain = tokens(runner, prompt, PENALISED, max_tokens=24)
    # Each wrong draft is the token plain decoding draws two positions later: counted in the window, it would
    # be penalised there and the text would change.
    oracle = Oracle(plain, len(prompt), wrong=lambda t: t)
    oracle.reference = plain[2:] + plain[:2]
    window: deque[int] = deque(maxlen=PENALISED.penalty_window)
    got = tokens(runner, prompt, PENALISED, oracle, max_tokens=24, window=window)
    assert got == plain
    assert oracle.drafted > oracle.kept
    assert list(window) == plain[-PENALISED.penalty_window:]


def _sequences(runner, prompt, settings, seeds, drafter_for, length=3) -> Counter:
    counts: Counter = Counter()
    for seed in seeds:
        steps = generate_step(runner, prompt, settings, make_rng(seed), max_tokens=length, drafter=drafter_for())
        counts[tuple(s.token_id for s in steps)] += 1
    return counts


def chi_square_p(a: Counter, b: Counter) -> float:
    """Two-sample chi-square test of homogeneity (rare cells pooled); p by the Wilson–Hilferty approximation."""
    keys = sorted(set(a) | set(b), key=lambda k: -(a[k] + b[k]))
    na, nb = sum(a.values()), sum(b.values())
    cells, rest = [], [0, 0]
    for k in keys:
        if a[k] + b[k] >= 10:
            cells.append((a[k], b[k]))
        else:
            rest[0] += a[k]
            rest[1] += b[k]
    if sum(rest) > 0:
        cells.append((rest[0], rest[1]))
    stat = 0.0
    for x, y in cells:
        total = x + y
        for observed, n in ((x, na), (y, nb)):
            expected = total * n / (na + nb)
            stat += (observed - expected) ** 2 / expected
    df = len(cells) - 1
    z = ((stat / df) ** (1 / 3) - (1 - 2 / (9 * df))) / math.sqrt(2 / (9 * df))
    return 0.5 * math.erfc(z / math.sqrt(2))


def test_sampled_drafting_keeps_the_distribution_and_a_wrong_rule_is_caught(monkeypatch):
    runner = runner_for("demo")
    prompt = repetitive_prompt(runner)
    settings = SamplingSettings(temperature=1.0, top_k=4, top_p=1.0, frequency_penalty=0.0, presence_penalty=0.5)
    greedy_text = tokens(runner, prompt, settings.with_changes(temperature=0.0), max_tokens=3)
    runner.reset()
    runner.clear_snapshots()
    drafted_count = [0, 0]

    def oracle():
        drafter = Oracle(greedy_text, len(prompt), wrong=lambda t: t)  # the likeliest text: kept often, not always
        original = drafter.record

        def record(drafted, kept):
            drafted_count[0] += drafted
            drafted_count[1] += kept
            original(drafted, kept)
        drafter.record = record  # type: ignore[method-assign]
        return drafter

    seeds = range(1000)
    plain = _sequences(runner, prompt, settings, seeds, lambda: None)
    drafted = _sequences(runner, prompt, settings, range(10_000, 11_000), oracle)
    assert 0 < drafted_count[1] < drafted_count[0]  # drafts were kept and rejected
    print("\nchi-square p, drafted vs plain:", chi_square_p(plain, drafted))
    assert chi_square_p(plain, drafted) > 1e-3

    def keeps_too_often(candidates: Candidates, draft: int, rng: np.random.Generator) -> int:
        """The classic mistake: after a rejection, draw from p itself instead of p without the draft."""
        weights = np.exp(candidates.logits - candidates.logits.max())
        if rng.random() * weights.sum() < weights[candidates.ids == draft].sum():
            return int(draft)
        return draw(candidates, rng)

    monkeypatch.setattr("decider.engine.generation.sampling.verify_point_mass", keeps_too_often)
    wrong = _sequences(runner, prompt, settings, range(20_000, 21_000), oracle)
    print("chi-square p, a wrong rule vs plain:", chi_square_p(plain, wrong))
    assert chi_square_p(plain, wrong) < 1e-3


def test_lookup_drafts_the_continuation_of_the_latest_match():
    lookup = PromptLookup(max_ngram=3, min_ngram=2, max_draft=3)
    lookup.start([1, 2, 3, 4, 5, 9, 2, 3, 7, 8])
    assert lookup.propose(5) == []  # "7 8" / "8" never occurred before
    for t in (2, 3):
        lookup.push(t)
    assert lookup.propose(5) == [7, 8, 2]  # "8 2 3" is new, "2 3" last ended before 7
    assert lookup.propose(1) == [7]
    lookup.push(4)
    assert lookup.propose(5) == [5, 9, 2]  # the longest match wins: "2 3 4" (not "3 4")
    lookup.start([1, 2, 3, 4, 5, 1, 2])
    assert lookup.propose(9) == [3, 4, 5]


def test_pads_follow_the_last_tokens_latest_continuation_and_never_overflow():
    lookup = PromptLookup(max_draft=3)
    lookup.start([4, 5, 6, 4, 9, 7])
    assert lookup.fill([], 3) == [7, 7, 7]  # 7 never occurred before: repeated
    assert lookup.fill([4], 3) == [4, 9, 7]  # 4 was last followed by 9, 9 by 7
    assert lookup.fill([1, 2, 3], 2) == [1, 2] and lookup.fill([1], -1) == []


def test_every_verify_of_a_drafted_generation_has_one_width(monkeypatch):
    runner = runner_for("text")
    prompt = repetitive_prompt(runner)
    plain = tokens(runner, prompt, GREEDY, max_tokens=40)
    widths: list[tuple[int, int]] = []
    verify = runner.verify

    def recorded(fed, positions):
        widths.append((len(fed), positions))
        return verify(fed, positions)
    monkeypatch.setattr(runner, "verify", recorded)
    assert tokens(runner, prompt, GREEDY, Oracle(plain, len(prompt)), max_tokens=40) == plain
    assert len(widths) > 5 and set(widths[:-2]) == {(4, 4)}  # the last rounds may be cut by max_tokens


def test_auto_stops_drafting_once_its_drafts_are_rejected():
    auto = make_drafter("auto")
    assert isinstance(auto, AutoLookup)
    auto.start([1, 2, 3, 1, 2])
    assert auto.propose(3) == [3, 1, 2]
    auto.record(12, 2)
    assert auto.propose(3) == []
    for _ in range(31):
        assert auto.propose(3) == []
    assert auto.propose(3) == [3, 1, 2]  # tried again after 32 plain tokens
    assert make_drafter("none") is None
    with pytest.raises(SettingsError, match="not available"):
        make_drafter("mtp")


def test_auto_ends_a_failing_probe_early_and_waits_longer_after_each():
    """A probe whose first drafts are all rejected ends there, and the pause after each failed probe doubles (a
    probe costs verify rounds: at 0.8B with drafts that never match, 12-draft probes every 32 tokens made auto 0.77x
    plain decoding); a probe that pays starts the pauses over."""
    auto = AutoLookup()
    auto.start([1, 2, 3, 1, 2])

    def pause() -> int:
        waited = 0
        while auto.propose(3) == []:
            waited += 1
            assert waited < 5000
        return waited

    assert auto.propose(3) == [3, 1, 2]
    auto.record(4, 0)  # 4 drafts, none kept: no 12-draft probe needed
    assert pause() == 32
    auto.record(4, 0)
    assert pause() == 64
    auto.record(4, 0)
    assert pause() == 128
    auto.record(12, 12)  # this probe pays: drafting goes on, and the next failure pauses 32 tokens again
    assert auto.propose(3) == [3, 1, 2] and not auto.off
    auto.record(40, 0)
    assert pause() == 32


def test_auto_stops_drafting_when_its_rounds_are_slower_than_plain_steps():
    auto = AutoLookup()
    auto.start([1, 2, 3, 1, 2])
    for _ in range(4):
        auto.timed(False, 1, 0.010)  # plain: 100 tokens/s
    auto.timed(True, 3, 0.020)  # verify rounds: 150 tokens/s
    auto.record(12, 10)
    assert auto.propose(3) == [3, 1, 2]
    auto.timed(True, 1, 0.040)  # now 4 tokens in 60 ms: 67 tokens/s
    assert auto.propose(3) == [] and auto.off


def test_a_runner_that_cannot_verify_decodes_plainly():
    from support.models import npu_static_runner

    runner = npu_static_runner(model_dir("qwen35-text"), static_chunks=(16, 1))
    assert not runner.verifies
    prompt = repetitive_prompt(runner)
    plain = tokens(runner, prompt, GREEDY, max_tokens=12)
    oracle = Oracle(plain, len(prompt))
    assert tokens(runner, prompt, GREEDY, oracle, max_tokens=12) == plain
    assert oracle.drafted == 0  # never asked


def test_logprobs_of_drafted_tokens_are_the_exact_models():
    """A drafted generation reports the same entries as plain decoding (the verify rows are the model's logits)."""
    runner = runner_for("text")
    prompt = repetitive_prompt(runner)
    settings = GREEDY
    runner.reset()
    runner.clear_snapshots()
    plain = list(generate_step(runner, prompt, settings, max_tokens=20, top_logprobs=3))
    oracle = Oracle([s.token_id for s in plain], len(prompt))
    runner.reset()
    runner.clear_snapshots()
    drafted = list(generate_step(runner, prompt, settings, max_tokens=20, top_logprobs=3, drafter=oracle))
    for a, b in zip(plain, drafted, strict=True):
        assert a.token_id == b.token_id
        assert abs(a.entry.logprob - b.entry.logprob) < 1e-4
        assert [t.token_id for t in a.entry.top] == [t.token_id for t in b.entry.top]
    assert oracle.kept > 0 and oracle.drafted > oracle.kept


def _completion(runner, request, monkeypatch, drafter):
    from decider.engine.generation.generate import generate

    monkeypatch.setattr("decider.engine.generation.generate.make_drafter", lambda *_: drafter)
    runner.reset()
    runner.clear_snapshots()
    return generate(runner, request)


@pytest.mark.parametrize("shape", ["json", "bias-stop"])
def test_a_drafted_completion_is_the_plain_one_with_grammar_bias_and_stops(shape, monkeypatch):
    from decider.engine.generation.generate import GenerationRequest
    from decider.engine.constrained.structured import ResponseFormat

    runner = runner_for("text")
    prompt = tuple(repetitive_prompt(runner))
    if shape == "json":
        request = GenerationRequest(prompt, GREEDY, max_tokens=40, top_logprobs=2,
                                    response_format=ResponseFormat.from_openai({"type": "json_object"}))
    else:
        biased = ((int(repetitive_prompt(runner)[0]), 3.0), (7, -100.0))
        request = GenerationRequest(prompt, PENALISED, max_tokens=30, top_logprobs=2, logit_bias=biased, stop=("deserts",))
    plain = _completion(runner, request, monkeypatch, None)
    assert shape == "json" or (plain.finish_reason == "stop" and 10 < len(plain.token_ids) < 30)  # the stop string cut it
    oracle = Oracle(plain.token_ids, len(prompt))
    drafted = _completion(runner, request, monkeypatch, oracle)
    assert oracle.drafted > 0
    assert (drafted.content, drafted.token_ids, drafted.finish_reason) == (plain.content, plain.token_ids, plain.finish_reason)
    assert [e.token_id for e in drafted.logprobs] == [e.token_id for e in plain.logprobs]
    # the state holds the history the runner claims: a continuation equals one computed from scratch
    history = list(runner.history)
    assert history == list(prompt) + plain.token_ids[: len(history) - len(prompt)]
    want = runner_for("text").prefill(history)
    assert np.max(np.abs(runner.prefill(history) - want)) < 1e-4


@pytest.mark.parametrize("how", ["closed", "cancelled"])
def test_a_consumer_that_stops_mid_draft_leaves_the_state_in_step(how):
    from decider.engine.core.errors import Cancelled

    runner = runner_for("text")
    prompt = repetitive_prompt(runner)
    plain = tokens(runner, prompt, GREEDY, max_tokens=30)
    runner.reset()
    runner.clear_snapshots()
    seen: list[int] = []
    steps = generate_step(runner, prompt, GREEDY, max_tokens=30, drafter=Oracle(plain, len(prompt)),
                          should_stop=(lambda: len(seen) >= 8) if how == "cancelled" else None)
    try:
        for step in steps:
            seen.append(step.token_id)
            if how == "closed" and len(seen) == 8:
                steps.close()
                break
    except Cancelled:
        pass
    assert seen == plain[:8]
    history = list(runner.history)
    assert history[: len(prompt)] == prompt and history[len(prompt):] == plain[: len(history) - len(prompt)]
    # no draft past what was kept stays in the state: the next token computed from it is the plain one's
    rest = plain[len(history) - len(prompt):]
    logits = runner.prefill(history + rest[:1]) if rest else None
    if logits is not None:
        assert int(np.argmax(logits)) == plain[len(history) - len(prompt) + 1]


def test_auto_keeps_its_pause_for_the_runners_next_request():
    """A runner's next request starts where auto left off (its AutoState): drafting that did not pay stays paused
    instead of being probed again at every request; without the runner's states each request starts afresh."""
    from decider.engine.generation.drafts import AUTO_RETRY

    states: dict = {}
    first = make_drafter("auto", states=states)
    first.start([1, 2, 3, 1, 2])
    assert first.propose(3) == [3, 1, 2]
    first.record(4, 0)  # rejected: paused
    for _ in range(10):
        assert first.propose(3) == []
    second = make_drafter("auto", states=states)
    second.start([1, 2, 3, 1, 2])
    assert second.off and second.state is first.state
    waited = 0
    while second.propose(3) == []:
        waited += 1
    assert waited == AUTO_RETRY - 10  # the pause went on counting from where the first request left it
    fresh = make_drafter("auto")
    fresh.start([1, 2, 3, 1, 2])
    assert fresh.propose(3) == [3, 1, 2] and not fresh.off
    assert make_drafter("auto", states=states).state is make_drafter("auto", states=states).state
