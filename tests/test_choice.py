"""Choice semantics and one number everywhere: the big letter is the longest shown bar unless the choice
was explicitly drawn, and every surface (result JSON, CLI, history, export, calibration) shows the same value."""

import csv
import io
import json
import math

import numpy as np
import pytest

from decider.app.cli import main
from decider.app.history import HistoryStore
from support.models import model_dir
from decider.engine.decisions.decide import DecisionRequest, decide
from decider.engine.core.settings import SamplingSettings

MODEL = str(model_dir("qwen35-text"))
QUESTION = "Scouts report that Hide is the safe choice. What should we do?"
OPTIONS = ("Attack", "Defend", "Hide", "Trade")
# Hot enough that a drawn choice often differs from the most likely option.
HOT = SamplingSettings(temperature=1.5, top_k=0, top_p=1.0, frequency_penalty=0.0, presence_penalty=0.0)


def test_by_default_the_choice_is_the_largest_bar_whatever_the_temperature(text_runner):
    rng = np.random.default_rng(0)
    for _ in range(30):
        result = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=HOT), rng=rng)
        shown = [o.shown for o in result.options]
        assert result.choice_index == int(np.argmax(shown)) == result.most_likely_index
        assert result.choice_mode == "argmax" and not result.drawn


def test_sample_choice_draws_and_says_which_option_was_most_likely(text_runner):
    rng = np.random.default_rng(1)
    choices = set()
    for _ in range(60):
        result = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=HOT, sample_choice=True), rng=rng)
        choices.add(result.choice_index)
        body = result.to_dict()
        assert body["choice"]["mode"] == "sampled"
        likely = body["choice"]["most_likely"]
        assert likely["index"] == int(np.argmax([o.probability for o in result.options]))
        assert likely["probability"] == max(o.probability for o in result.options)
        assert body["choice"]["probability"] == result.options[result.choice_index].probability
    assert len(choices) > 1  # a draw, not the argmax


def test_permute_choice_is_the_argmax_of_the_debiased_bars_and_json_names_them(text_runner):
    result = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=HOT, permute=True))
    debiased = [o.debiased_probability for o in result.options]
    assert result.choice_index == int(np.argmax(debiased))
    body = result.to_dict()
    assert body["shown"] == "debiased_probability"
    assert body["choice"]["probability"] == debiased[result.choice_index]


def test_permute_with_sample_choice_draws_from_the_debiased_bars(text_runner):
    greedy = HOT.with_changes(temperature=0.0)
    result = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=greedy, permute=True, sample_choice=True))
    # temperature 0 makes the draw the argmax of the debiased bars
    assert result.drawn and result.choice_index == result.most_likely_index


def test_score_options_with_permute_averages_the_rotated_orders(text_runner):
    greedy = HOT.with_changes(temperature=0.0)
    result = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=greedy, score_options=True, permute=True))
    count = len(OPTIONS)
    expected = np.zeros(count)
    for shift in range(count):
        order = [(i + shift) % count for i in range(count)]
        rotated = decide(text_runner, DecisionRequest(QUESTION, tuple(OPTIONS[i] for i in order), sampling=greedy, score_options=True))
        for position, option in enumerate(order):
            expected[option] += rotated.options[position].probability
    expected /= count
    assert [o.debiased_probability for o in result.options] == pytest.approx(expected.tolist(), abs=1e-12)
    single = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=greedy, score_options=True))
    assert [o.probability for o in result.options] == pytest.approx([o.probability for o in single.options], abs=1e-12)
    assert result.choice_index == int(np.argmax(expected))


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_refuses_top_logprobs_without_logprobs_like_the_api(capsys):
    code, out, err = run(capsys, "chat", "--model", MODEL, "--message", "Hi", "--top-logprobs", "3")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--top-logprobs needs --logprobs" in err


def test_cli_word_scoring_coverage_is_a_number_not_zero_percent(capsys):
    code, out, _ = run(capsys, "ask", QUESTION, *sum((["--option", o] for o in OPTIONS), []), "--model", MODEL,
                       "--score-options", "--permute", "--temperature", "0", "--no-history")
    assert code == 0
    assert "coverage 0.0%" not in out
    assert "probability of the whole option texts" in out
    assert "debiased" in out


def test_cli_sample_choice_says_drawn_and_most_likely(capsys):
    seen_drawn_elsewhere = False
    for seed in range(12):
        code, out, _ = run(capsys, "ask", QUESTION, *sum((["--option", o] for o in OPTIONS), []), "--model", MODEL,
                           "--sample-choice", "--temperature", "1.5", "--top-k", "0", "--top-p", "1", "--seed", str(seed),
                           "--json", "--no-history")
        body = json.loads(out)
        assert body["choice"]["mode"] == "sampled"
        if body["choice"]["index"] != body["choice"]["most_likely"]["index"]:
            seen_drawn_elsewhere = True
            code, text, _ = run(capsys, "ask", QUESTION, *sum((["--option", o] for o in OPTIONS), []), "--model", MODEL,
                                "--sample-choice", "--temperature", "1.5", "--top-k", "0", "--top-p", "1", "--seed",
                                str(seed), "--no-history")
            assert "← drawn" in text and "← most likely" in text and "sample-choice mode" in text
            break
    assert seen_drawn_elsewhere


def test_history_list_export_and_calibration_show_the_window_number_for_a_permuted_decision(tmp_path, capsys, monkeypatch):
    import decider.app.history

    store = HistoryStore(tmp_path / "h.sqlite3")
    monkeypatch.setattr(decider.app.history, "default_store", lambda *_, **__: store)
    code, out, _ = run(capsys, "ask", QUESTION, *sum((["--option", o] for o in OPTIONS), []), "--model", MODEL,
                       "--permute", "--temperature", "0", "--json")
    body = json.loads(out)
    shown = body["options"][body["choice"]["index"]]["debiased_probability"]
    raw = body["options"][body["choice"]["index"]]["probability"]
    assert abs(shown - raw) > 1e-4  # otherwise this test could not tell the two apart
    code, out, _ = run(capsys, "history", "list")
    assert f"({shown:.1%} debiased)" in out
    row = store.rows()[0]
    assert row.shown_probabilities == [o["debiased_probability"] for o in body["options"]]
    exported = list(csv.DictReader(io.StringIO(store.export_csv())))[0]
    assert exported["shown"] == "debiased_probability" and exported["choice_mode"] == "argmax"
    assert float(exported[f"shown_{body['choice']['label']}"]) == shown
    # calibration measures the shown bars: its confidence for this row is the debiased value
    store.label(row.id, body["choice"]["label"])
    from decider.app.calibration_history import labelled, report

    measured = report(labelled(store, None, None), bins=10)
    confidences = [b.confidence for b in measured.bins if b.count]
    assert confidences == [pytest.approx(max(row.shown_probabilities), abs=1e-12)]
    assert row.shown_logprobs == [math.log(p) for p in row.shown_probabilities]


def test_calibration_of_a_single_order_row_is_unchanged_by_using_the_shown_bars(text_runner):
    from decider.app.calibration_history import calibrated_probabilities

    result = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=HOT))
    from_logprobs = calibrated_probabilities([o.logprob for o in result.options], 2.0)
    from_shown = calibrated_probabilities([math.log(o.shown) for o in result.options], 2.0)
    assert from_shown == pytest.approx(from_logprobs, abs=1e-12)


def test_api_decision_accepts_sample_choice_and_checks_its_type():
    from pydantic import ValidationError

    from decider.app.api.errors import from_validation
    from decider.app.api.protocol import DecideRequest

    def parse(body):
        return DecideRequest.model_validate(body).to_request(SamplingSettings())

    assert parse({"question": QUESTION, "options": list(OPTIONS), "sample_choice": True}).sample_choice is True
    assert parse({"question": QUESTION, "options": list(OPTIONS)}).sample_choice is False
    with pytest.raises(ValidationError) as caught:
        parse({"question": QUESTION, "options": list(OPTIONS), "sample_choice": "yes"})
    error = from_validation(caught.value)
    assert (error.status, error.param) == (400, "sample_choice")


def test_window_and_overlay_say_drawn_and_most_likely_when_the_choice_was_sampled(qtbot, text_runner):
    from decider.ui.overlay import CompanionOverlay
    from decider.ui.result_view import ResultView

    rng = np.random.default_rng(3)
    result = None
    for _ in range(60):
        result = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=HOT, sample_choice=True), rng=rng)
        if result.choice_index != result.most_likely_index:
            break
    assert result.choice_index != result.most_likely_index
    likely = result.options[result.most_likely_index]
    view = ResultView()
    qtbot.addWidget(view)
    view.show_result(result)
    assert view.choice_meta.text().startswith("Drawn with")
    assert f"most likely: {likely.label}. {likely.text}" in view.choice_meta.text()
    overlay = CompanionOverlay()
    qtbot.addWidget(overlay)
    overlay.show_result(QUESTION, result)
    assert "(drawn)" in overlay.choice.text() and f"most likely: {likely.label}." in overlay.hint.text()
    # the default mode: the window's big letter is the largest bar and nothing claims a draw
    argmax = decide(text_runner, DecisionRequest(QUESTION, OPTIONS, sampling=HOT), rng=rng)
    view.show_result(argmax)
    assert view.choice_meta.text().startswith("Chosen with") and "most likely" not in view.choice_meta.text()
    assert view.choice_badge.text() == argmax.options[argmax.most_likely_index].label


@pytest.mark.parametrize("argv,message", [
    (["--engine", "http://127.0.0.1:9/v1", "--model", MODEL], "--model sets up the local engine: not with --engine"),
    (["--engine", "http://127.0.0.1:9/v1", "--fast", "--device", "CPU"], "--device, --fast set up the local engine"),
    (["--model", MODEL, "--engine-method", "forced"], "--engine-method needs --engine URL"),
    (["--model", MODEL, "--engine-key", "k", "--engine-constraint", "vllm"], "--engine-key, --engine-constraint need --engine"),
])
def test_cli_refuses_flags_of_the_other_engine(capsys, argv, message):
    code, out, err = run(capsys, "ask", QUESTION, "--option", "A", "--option", "B", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err
