"""A decision's progress has its own callback, apart from the cancel poll: progress(done, total) after each
reasoning token (counted across every option order with permute), should_stop only asked whether to stop.
Through the engine (engine/decisions/decide.py), the service, the engine thread's signal and the window's running view."""

import pytest

from support.models import model_dir
from decider.engine.decisions.decide import DecisionRequest, decide
from decider.engine.core.errors import Cancelled
from decider.engine.core.settings import SamplingSettings

GREEDY = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0)
HOT = SamplingSettings(temperature=1.0, top_k=0, top_p=1.0, seed=7)  # long reasoning on the random fixture
QUESTION = "Scouts report that Hide is the safe choice. What should we do?"
OPTIONS = ("Attack", "Defend", "Hide")


def run(runner, request):
    """(progress calls, should_stop polls: how many tokens progress had reported at each) of one decision."""
    reported: list[tuple[int, int]] = []
    polls: list[int] = []

    def should_stop() -> bool:
        polls.append(len(reported))
        return False

    decide(runner, request, should_stop=should_stop, progress=lambda done, total: reported.append((done, total)))
    return reported, polls


def test_each_reasoning_token_is_reported_once_with_the_budget(text_runner):
    request = DecisionRequest(QUESTION, OPTIONS, think=True, reasoning_budget=12, sampling=HOT)
    reported, polls = run(text_runner, request)
    drawn = len(reported)
    assert 1 <= drawn <= 12
    assert reported == [(done, 12) for done in range(1, drawn + 1)]
    # the cancel poll is asked once before each reasoning token, and counts nothing itself
    assert polls == list(range(drawn))
    assert request.reasoning_limit == 12


def test_with_permute_the_count_runs_across_every_option_order(text_runner):
    request = DecisionRequest(QUESTION, OPTIONS, think=True, reasoning_budget=5, permute=True, sampling=HOT)
    reported, _ = run(text_runner, request)
    total = 5 * len(OPTIONS)
    assert request.reasoning_limit == total
    assert [done for done, _ in reported] == list(range(1, len(reported) + 1))
    assert {t for _, t in reported} == {total}
    # each order reasons at least one token, so the count passes one order's budget only by reasoning again
    assert len(OPTIONS) <= len(reported) <= total


@pytest.mark.parametrize("changes", [{}, {"permute": True}, {"score_options": True}])
def test_without_think_nothing_is_reported(text_runner, changes):
    request = DecisionRequest(QUESTION, OPTIONS, sampling=GREEDY, **changes)
    reported, _ = run(text_runner, request)
    assert reported == [] and request.reasoning_limit == 0


def test_a_stop_between_tokens_ends_the_count_there(text_runner):
    request = DecisionRequest(QUESTION, OPTIONS, think=True, reasoning_budget=500, sampling=HOT)
    reported: list[tuple[int, int]] = []
    with pytest.raises(Cancelled):
        decide(text_runner, request, should_stop=lambda: len(reported) >= 3,
               progress=lambda done, total: reported.append((done, total)))
    assert reported == [(1, 500), (2, 500), (3, 500)]


def test_the_engine_thread_signals_done_and_total_and_the_window_shows_them(qtbot):
    from decider.app.engine_thread import EngineWorker
    from decider.app.service import EngineService
    from decider.engine.compile.devices import DeviceOptions
    from decider.ui.result_view import ResultView

    worker = EngineWorker()
    worker.service = EngineService(model_dir("qwen35-text"), DeviceOptions(device="CPU"))
    signalled: list[tuple[int, int]] = []
    decided: list[object] = []
    worker.progress.connect(lambda done, total: signalled.append((done, total)))
    worker.decided.connect(lambda request, result: decided.append(result))
    request = DecisionRequest(QUESTION, OPTIONS, think=True, reasoning_budget=8, permute=True, sampling=HOT)
    worker._decide_job(request, worker._submitted + 1)  # in this thread: the signals arrive directly
    assert decided and signalled == [(done, 24) for done in range(1, len(signalled) + 1)]
    view = ResultView()
    qtbot.addWidget(view)
    view.show_running(request.think, request.reasoning_limit)
    view.show_progress(*signalled[-1])
    assert view.running_label.text() == f"Thinking… {signalled[-1][0]} of at most 24 tokens"
    assert (view.running_bar.value(), view.running_bar.maximum()) == (signalled[-1][0], 24)
