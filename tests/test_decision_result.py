"""engine/decisions/types.DecisionResult: one constructor (`build`, and `from_dict` through it) for every engine's result."""

import dataclasses
import json
import re
from pathlib import Path

import pytest

from decider.engine.decisions.decide import decide
from decider.engine.core.logprobs import Alternative
from decider.engine.core.settings import SamplingSettings
from decider.engine.decisions.types import LABELS, DecisionRequest, DecisionResult, OptionResult

ROOT = Path(__file__).resolve().parents[1]
REQUEST = DecisionRequest("Which way?", ("North", "South", "East"))
GREEDY = SamplingSettings(temperature=0.0)


def options(texts=REQUEST.options):
    return [OptionResult(label, text, -1.0, 1 / len(texts)) for label, text in zip(LABELS, texts)]


def build(request=REQUEST, opts=None, choice=0, **fields):
    fields = {"mode": "letters", "coverage": 0.5, "timings": {}, "usage": {}, **fields}
    return DecisionResult.build(request, options() if opts is None else opts, choice, **fields)


def test_no_engine_assembles_a_result_field_by_field():
    # Production code (engine, app, ui) builds every result through DecisionResult.build / from_dict, and so do
    # the tests (tests/support/results.py); bench/ and tools/ take results from the engine.
    calls = {
        str(path.relative_to(ROOT)): len(re.findall(r"\bDecisionResult\(", path.read_text(encoding="utf-8")))
        for package in ("engine", "app", "ui", "tests", "bench", "tools")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name != "types.py"
    }
    assert {name: n for name, n in calls.items() if n} == {}


def test_the_choice_mode_follows_the_request_unless_a_server_said_otherwise():
    assert build().choice_mode == "argmax" and not build().drawn
    drawn = DecisionRequest(REQUEST.question, REQUEST.options, sample_choice=True)
    assert build(drawn).choice_mode == "sampled" and build(drawn).drawn
    assert build(choice_mode="sampled").choice_mode == "sampled"


@pytest.mark.parametrize(
    "opts, choice, fields, message",
    [
        (options(("South", "North", "East")), 0, {}, "not the request's"),  # reordered
        (options(REQUEST.options[:2]), 0, {}, "not the request's"),  # one missing
        ([OptionResult("B", t, -1.0, 0.3) for t in REQUEST.options], 0, {}, "under their letters"),
        (None, 3, {}, "choice 3 is not one of the 3 options"),
        (None, -1, {}, "choice -1"),
        (None, 0, {"mode": "guess"}, "mode 'guess'"),
        (None, 0, {"choice_mode": "random"}, "choice mode 'random'"),
    ],
)
def test_a_result_that_does_not_answer_its_request_is_refused(opts, choice, fields, message):
    with pytest.raises(ValueError, match=message):
        build(opts=opts, choice=choice, **fields)


def test_a_result_reads_back_from_its_json_unchanged(text_runner):
    request = DecisionRequest("The scouts say the river is safe. Where do we camp?", ("River", "Hill", "Forest"),
                              sampling=GREEDY, alternatives=3)
    result = decide(text_runner, request)
    assert result.alternatives and all(isinstance(a, Alternative) for a in result.alternatives)
    assert DecisionResult.from_dict(json.loads(json.dumps(result.to_dict())), request) == result


def test_a_servers_answer_for_other_options_is_not_read_as_this_requests():
    body = build().to_dict()
    other = DecisionRequest(REQUEST.question, ("North", "South", "West"))
    with pytest.raises(ValueError, match="not the request's"):
        DecisionResult.from_dict(body, other)


def test_a_result_stays_as_built_and_a_derived_one_is_checked_again():
    result = build()
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.choice_index = 1  # type: ignore[misc]
    moved = dataclasses.replace(result, choice_index=2, history_id=7)
    assert (moved.choice.text, moved.history_id) == ("East", 7) and (result.choice_index, result.history_id) == (0, None)
    for change, message in (({"choice_index": 3}, "choice 3"), ({"mode": "guess"}, "mode 'guess'"),
                            ({"choice_mode": "random"}, "choice mode 'random'")):
        with pytest.raises(ValueError, match=message):
            dataclasses.replace(result, **change)


def test_a_derived_result_keeps_its_uncertainty_reasons_once_and_shares_no_list():
    tied = build()  # three equal bars: a tie engine/decisions/labels.py names
    assert tied.uncertain and tied.uncertain_why
    again = dataclasses.replace(tied, history_id=1)
    assert again.uncertain_why == tied.uncertain_why and again.uncertain_why is not tied.uncertain_why
    assert again.options is not tied.options


def test_reduced_bars_are_a_new_result_with_each_bar_ranged():
    clear = build(opts=[OptionResult(label, text, lp, p) for label, text, lp, p
                        in zip(LABELS, REQUEST.options, (-0.01, -6.0, -7.0), (0.996, 0.0025, 0.0015))], coverage=0.99)
    reduced = clear.with_reduced_bars()
    assert {o.bar for o in clear.options} == {"exact"} and {o.bar for o in reduced.options} == {"reduced"}
    assert all(o.low is not None and o.high is not None and o.low <= o.shown <= o.high for o in reduced.options)
