"""Speculative decoding with the MTP head's drafts (engine/generation/mtp_drafts.py): greedy keeps plain decoding's tokens,
sampled decoding keeps its distribution (drafts drawn from q, verified with min(1, p/q) and the residual), a
rejected draft never enters a penalty window, and the head is fed the exact model's hidden states at the right
positions. The fixtures' heads are random (seeded): their drafts are mostly rejected, which exercises rollbacks;
the sampled test uses a head made to agree with the model often."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from decider.engine.generation.drafter_choice import make_drafter
from decider.engine.generation.drafts import AutoLookup
from decider.engine.core.errors import SettingsError
from decider.engine.generation.generate import generate_step, make_rng
from decider.engine.generation.mtp_drafts import AutoMtp, MtpDrafts
from decider.engine.runners.runner import ModelRunner
from decider.engine.generation.sampling import Candidates, draw
from decider.engine.core.settings import SamplingSettings
from support.models import model_dir
from support.mtp_reference import folder_with_mtp
from test_speculative import GREEDY, PENALISED, _sequences, chi_square_p, repetitive_prompt, tokens

_RUNNERS: dict[str, ModelRunner] = {}


@pytest.fixture(scope="module")
def runner_for(tmp_path_factory):
    def get(name: str) -> ModelRunner:
        if name not in _RUNNERS:
            _RUNNERS[name] = ModelRunner(folder_with_mtp(name, tmp_path_factory.mktemp("mtp") / name))
        return _RUNNERS[name]
    return get


@pytest.mark.parametrize("name", ["qwen35-text", "qwen35-vl", "qwen35-moe-text"])
@pytest.mark.parametrize("settings", [GREEDY, PENALISED], ids=["plain", "penalties"])
def test_greedy_tokens_are_plain_decodings_with_mtp_drafts(runner_for, name, settings):
    runner = runner_for(name)
    assert runner.mtp is not None
    prompt = repetitive_prompt(runner, with_image=runner.vision is not None)
    plain = tokens(runner, prompt, settings)
    drafter = make_drafter("mtp", runner.folder.name, runner.mtp)
    assert isinstance(drafter, MtpDrafts)
    assert tokens(runner, prompt, settings, drafter) == plain
    assert drafter.drafted > 0  # the head drafted (a random head's drafts: mostly rolled back)


def test_the_head_reads_the_exact_hidden_state_before_each_token(runner_for):
    """Each window entry (token x_p, hidden, p) holds the exact model's hidden state at p − 1, as an exact prefill of
    the text up to x_p gives it: the drafts' plumbing through verify rows, rollbacks and plain steps."""
    runner = runner_for("qwen35-text")
    prompt = repetitive_prompt(runner)
    drafter = MtpDrafts(runner.mtp)
    text = prompt + tokens(runner, prompt, GREEDY, drafter, max_tokens=30)
    entries = list(drafter._seen)
    assert len(entries) == drafter.window
    for token, hidden, position in entries[::5] + entries[-1:]:
        assert text[position] == token
        runner.reset()
        runner.prefill(text[:position])
        assert np.max(np.abs(runner.hidden_rows(1)[0] - hidden)) < 1e-4


def test_a_rejected_mtp_draft_never_enters_the_penalty_window(runner_for):
    runner = runner_for("qwen35-text")
    prompt = repetitive_prompt(runner)
    plain = tokens(runner, prompt, PENALISED, max_tokens=24)
    drafter = MtpDrafts(runner.mtp)
    window: deque[int] = deque(maxlen=PENALISED.penalty_window)
    assert tokens(runner, prompt, PENALISED, drafter, max_tokens=24, window=window) == plain
    assert drafter.drafted > drafter.kept
    assert list(window) == plain[-PENALISED.penalty_window:]


def test_mtp_needs_a_head_and_auto_uses_it_where_there_is_one(runner_for):
    with pytest.raises(SettingsError, match="no MTP head"):
        make_drafter("mtp", "x", None)
    assert type(make_drafter("auto", "x", None)) is AutoLookup
    runner = runner_for("qwen35-text")
    auto = make_drafter("auto", "x", runner.mtp)
    assert isinstance(auto, AutoMtp)
    prompt = repetitive_prompt(runner)
    assert tokens(runner, prompt, GREEDY, auto) == tokens(runner, prompt, GREEDY)
    assert auto.drafted > 0
    # a random head's drafts are rejected: auto pauses them (AutoLookup's rule over the head's drafts)
    assert auto.off or auto.drafted < 40


class _AgreeingHead:
    """A stand-in head whose guesses are a second runner's exact logits for the text so far, sharpened (× 3): q
    has p's ranking but not its shape, so drafts are kept often, rejected often, and the residual draw matters."""

    def __init__(self, folder, drafter_ref: list) -> None:
        self.runner, self.drafter_ref = ModelRunner(folder), drafter_ref

    def step(self, ids, hidden, positions):
        drafter = self.drafter_ref[0]
        text = drafter.tokens + [int(t) for t in ids[len(drafter._seen):]]
        logits = self.runner.prefill(text)
        return logits * 3.0, hidden[-1]


def test_sampled_mtp_drafting_keeps_the_distribution_and_a_wrong_rule_is_caught(runner_for, monkeypatch):
    runner = runner_for("qwen35-text")
    prompt = repetitive_prompt(runner)
    settings = SamplingSettings(temperature=1.0, top_k=4, top_p=1.0, frequency_penalty=0.0, presence_penalty=0.5)
    counts = [0, 0]
    ref: list = [None]
    head = _AgreeingHead(model_dir("qwen35-text"), ref)

    def drafter():
        made = MtpDrafts(head, max_draft=2)  # type: ignore[arg-type]
        ref[0] = made
        original = made.record

        def record(drafted, kept):
            counts[0] += drafted
            counts[1] += kept
            original(drafted, kept)
        made.record = record  # type: ignore[method-assign]
        return made

    plain = _sequences(runner, prompt, settings, range(600), lambda: None)
    drafted = _sequences(runner, prompt, settings, range(10_000, 10_600), drafter)
    assert 0 < counts[1] < counts[0]
    print("\nchi-square p, MTP-drafted vs plain:", chi_square_p(plain, drafted), "kept", counts)
    assert chi_square_p(plain, drafted) > 1e-3

    def no_residual(candidates: Candidates, draft: int, q: Candidates, rng: np.random.Generator) -> int:
        """A wrong rule: accept with min(1, p/q) but, rejected, draw from p itself instead of max(0, p − q)."""
        p = np.exp(candidates.logits - candidates.logits.max())
        p /= p.sum()
        qw = np.exp(q.logits - q.logits.max())
        q_draft = float((qw / qw.sum())[q.ids == draft].sum())
        if q_draft > 0 and rng.random() * q_draft < float(p[candidates.ids == draft].sum()):
            return int(draft)
        return draw(candidates, rng)

    monkeypatch.setattr("decider.engine.generation.sampling.verify_distribution", no_residual)
    wrong = _sequences(runner, prompt, settings, range(20_000, 20_600), drafter)
    print("chi-square p, a wrong rule vs plain:", chi_square_p(plain, wrong))
    assert chi_square_p(plain, wrong) < 1e-3


def test_the_demos_trained_head_drafts_well_and_keeps_the_text():
    """The text demo ships a trained head (tools/train_demo_mtp.py): on held-out decision prompts cut mid-way, greedy
    continuations with its drafts are plain decoding's and a good share of its drafts is kept (its card: ~0.54)."""
    import sys

    from support.models import ROOT

    sys.path.insert(0, str(ROOT / "tools"))
    import demo_tasks
    from decider.engine.decisions.prompt import build_decision_prompt

    runner = ModelRunner(ROOT / "resources" / "demo-model")
    assert runner.mtp is not None
    items = demo_tasks.heldout_items(7_2028, {"retrieval": 3, "category": 3})
    drafted = kept = 0
    for item in items:
        ids = list(build_decision_prompt(runner.tokenizer, item.question, list(item.options), think=False).ids)
        cut = ids[: len(ids) // 2]
        drafter = MtpDrafts(runner.mtp)
        assert tokens(runner, cut, GREEDY, drafter, max_tokens=24) == tokens(runner, cut, GREEDY, max_tokens=24)
        drafted, kept = drafted + drafter.drafted, kept + drafter.kept
    assert kept > 0.3 * drafted  # a random head keeps ~1/vocabulary of its drafts


@pytest.mark.parametrize("draft", ["mtp", "auto"])
def test_a_think_decision_with_mtp_drafts_is_the_plain_one(draft, monkeypatch):
    """Through decide(): the reasoning drafted by the demo's head (greedy) is plain decoding's, the bars the same."""
    from support.models import ROOT

    from decider.engine.decisions.decide import DecisionRequest, decide

    proposed: list[int] = []
    original = MtpDrafts.propose

    def spy(self, limit):
        drafts = original(self, limit)
        proposed.extend(drafts)
        return drafts
    monkeypatch.setattr(MtpDrafts, "propose", spy)

    runner = ModelRunner(ROOT / "resources" / "demo-model")
    results = {}
    for mode in ("none", draft):
        sampling = SamplingSettings(temperature=0.0, draft=mode)
        results[mode] = decide(runner, DecisionRequest("Which is a fruit?", ("apple", "stone"), think=True,
                                                       reasoning_budget=24, sampling=sampling, fast_reasoning=False))
    plain, drafted = results["none"], results[draft]
    assert drafted.reasoning == plain.reasoning and proposed  # the head drafted the reasoning
    assert [o.probability for o in drafted.options] == pytest.approx([o.probability for o in plain.options], abs=1e-6)


class _FixedHead:
    """A head that always guesses token 7 (a model-free stand-in for auto's bookkeeping)."""

    def step(self, ids, hidden, positions):
        logits = np.zeros(16)
        logits[7] = 5.0
        return logits, hidden[-1]


def test_auto_times_plain_steps_first_and_pauses_a_head_slower_than_them():
    auto = AutoMtp(_FixedHead())  # type: ignore[arg-type]
    auto.start([1, 2, 3])
    auto.seen(np.zeros(4))
    for _ in range(4):  # the head always has a draft: plain steps come first, to time them
        assert auto.propose(3) == []
        auto.timed(False, 1, 0.1)
    assert auto.propose(3) == [7, 7, 7]  # as many as lookup's: one verify width for every drafter
    auto.record(12, 12)  # every draft kept, but a round yielding 3 tokens took 1 s: slower than 10 steps a second
    auto.timed(True, 3, 1.0)
    assert auto.propose(3) == [] and auto.off


def test_auto_takes_lookups_free_drafts_where_the_text_repeats_and_the_heads_elsewhere():
    auto = AutoMtp(_FixedHead())  # type: ignore[arg-type]
    auto.start([1, 2, 3, 1, 2])
    auto.seen(np.zeros(4))
    for _ in range(4):
        assert auto.propose(3) == []
        auto.timed(False, 1, 0.1)
    assert auto.propose(3) == [3, 1, 2] and auto.q(0) is None  # lookup: a point mass, at the head's draft count
    auto.push(9)  # "… 1 2 9": nothing earlier continues it
    auto.seen(np.zeros(4))
    assert auto.propose(3) == [7, 7, 7]  # no repeat: the head's drafts


def test_every_drafter_verifies_at_one_width():
    """One verify compile serves lookup, the head and auto (the runner compiles again for another width)."""
    head = _FixedHead()
    widths = {make_drafter(draft, head=head).max_draft + 1 for draft in ("lookup", "mtp", "auto")}  # type: ignore[arg-type]
    assert widths == {AutoLookup().max_draft + 1}


def test_auto_pauses_a_head_that_does_not_pay_and_keeps_lookups_drafts():
    """Each source is judged on its own rounds: a head whose drafts are rejected is paused while lookup's drafts,
    which pay, go on (judged together, the head's slow rounds paused lookup too: 0.95x on the demo)."""
    auto = AutoMtp(_FixedHead())  # type: ignore[arg-type]
    auto.start([1, 2, 3, 1, 2])
    auto.seen(np.zeros(4))
    for _ in range(4):
        assert auto.propose(3) == []
        auto.timed(False, 1, 0.1)
    assert auto.propose(3) == [3, 1, 2]  # lookup
    auto.record(3, 3)
    auto.timed(True, 4, 0.1)  # 40 tokens/s against plain steps' 10
    for token in (9, 8):  # "… 9", "… 9 8": nothing earlier continues them, the head drafts
        auto.push(token)
        auto.seen(np.zeros(4))
        assert auto.propose(3) == [7, 7, 7]
        auto.record(3, 0)
        auto.timed(True, 1, 0.2)
    auto.push(5)
    auto.seen(np.zeros(4))
    assert auto.propose(3) == [] and auto.off and not auto.state.off  # the head paused, lookup not
    for token in (1, 2):
        auto.push(token)
        auto.seen(np.zeros(4))
    assert auto.propose(3) == [9, 8, 5]  # "… 1 2" repeats (its latest continuation): lookup drafts, the head paused


def test_auto_keeps_both_sources_states_on_the_runner():
    states: dict = {}
    first = make_drafter("auto", head=_FixedHead(), states=states)  # type: ignore[arg-type]
    second = make_drafter("auto", head=_FixedHead(), states=states)  # type: ignore[arg-type]
    assert first.state is second.state is states["lookup"] and first.head_state is second.head_state is states["mtp"]
    assert states["lookup"] is not states["mtp"]
