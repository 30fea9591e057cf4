"""Labels never say more than what ran (#37 item 5), on every surface: a reduced-precision compile's bars are
never "exact"; a near-tie and a tiny coverage make the choice uncertain and say why (CLI text and --json,
/v1/decide, history, the result view, the overlay); `decider calibrate` never pools two precisions; history
shows model, precision and whether a picture was seen; token counts add up."""

from __future__ import annotations

import json

import numpy as np
import pytest

from decider.app.api.server import ApiServer
from decider.app.cli import main
from decider.app.history import HistoryStore
from decider.app.images import load_image_file
from decider.app.render import render_decision
from decider.app.service import EngineService
from decider.engine.decisions.decide import DecisionRequest, DecisionResult, OptionResult
from decider.engine.compile.devices import DeviceOptions
from decider.engine.decisions.labels import NEAR_TIE_NATS, TINY_COVERAGE, usage_text
from decider.engine.remote.engine import RemoteConfig, RemoteEngine
from decider.engine.constrained.tools import Tool
from support.gui import GREEDY
from support.models import FIXTURES, model_dir
from test_api import call

TEXT = model_dir("qwen35-text")
REQUEST = DecisionRequest("Which road?", ("left", "right", "ahead"), sampling=GREEDY)


@pytest.fixture(scope="module")
def fast(tmp_path_factory):
    """A --fast service (the session pins a reduced compile as the winner: tests/support/fast_pin.py), recording."""
    store = HistoryStore(tmp_path_factory.mktemp("fast") / "h.sqlite3")
    service = EngineService(TEXT, DeviceOptions(device="CPU", exact=False), history=store)
    assert service.info.logprobs == "reduced"
    return service


def test_reduced_precision_bars_are_never_labelled_exact_in_json_the_api_or_history(fast, capsys):
    result = fast.decide(REQUEST)
    assert [o.bar for o in result.options] == ["reduced"] * 3
    assert all(o.low <= o.probability <= o.high for o in result.options)  # the stated allowance's range
    assert [o["bar"] for o in json.loads(json.dumps(result.to_dict()))["options"]] == ["reduced"] * 3
    row = fast.history.rows(newest_first=True)[0]
    assert [o["bar"] for o in row.result["options"]] == ["reduced"] * 3 and row.precision == fast.info.precision != "f32"
    server = ApiServer(fast, "127.0.0.1", 0)
    server.start()
    try:
        status, _, body = call(server.port, "POST", "/v1/decide", {"question": "Which road?", "options": ["left", "right"]})
        remote = RemoteEngine(RemoteConfig(server.url)).decide(REQUEST)  # `decider ask --engine URL` against it
    finally:
        server.stop()
    assert status == 200 and [o["bar"] for o in body["options"]] == ["reduced"] * 2
    assert [o.bar for o in remote.options] == ["reduced"] * 3 and not remote.engine.exact
    assert "exact" not in remote.engine.bars_text and fast.info.precision in remote.engine.bars_text
    assert main(["ask", "Which road?", "--option", "left", "--option", "right", "--model", str(TEXT), "--fast",
                 "--device", "CPU", "--json", "--no-history"]) == 0
    assert [o["bar"] for o in json.loads(capsys.readouterr().out)["options"]] == ["reduced"] * 2


def _near_tie(coverage: float = 0.9) -> DecisionResult:
    """The blank picture's bars: 32.1 / 35.0 / 32.9 %."""
    shown = np.array([0.321, 0.350, 0.329])
    options = [OptionResult(label, text, float(np.log(p * coverage)), float(p))
               for label, text, p in zip("ABC", REQUEST.options, shown)]
    return DecisionResult.build(REQUEST, options, 1, mode="letters", coverage=coverage, timings={}, usage={
        "prompt_tokens": 41, "prefill_tokens": 2, "reused_tokens": 59, "completion_tokens": 21})


def test_a_lead_inside_the_near_tie_margin_is_uncertain_and_says_so():
    result = _near_tie()
    assert np.log(0.350 / 0.329) < NEAR_TIE_NATS
    assert result.uncertain and len(result.uncertain_why) == 1 and "near-tie" in result.uncertain_why[0]
    assert json.loads(json.dumps(result.to_dict()))["choice"]["uncertain_why"] == result.uncertain_why
    text = render_decision("Which road?", result, "m")
    assert "uncertain: near-tie" in text and "bounds or estimates" not in text
    # a clear lead stays settled
    clear = DecisionResult.build(REQUEST, [OptionResult(label, t, float(np.log(p)), p) for label, t, p in
                                           zip("ABC", REQUEST.options, (0.2, 0.7, 0.1))], 1, mode="letters",
                                 coverage=1.0, timings={}, usage={})
    assert not clear.uncertain and clear.uncertain_why == []


def test_token_counts_add_up():
    """41 prompt tokens, then 18 of reasoning and its close read from the cache too: never "41 (59 reused)"."""
    text = usage_text(_near_tie().usage)
    assert text == "41 prompt tokens · 61 read (59 from the cache, 2 computed) · 21 generated"
    assert "41 prompt tokens (59 reused)" not in render_decision("Which road?", _near_tie(), "m")
    assert usage_text({"prompt_tokens": 40, "prefill_tokens": 3, "reused_tokens": 37, "completion_tokens": 1}) == \
        "40 prompt tokens (37 from the cache, 3 computed) · 1 generated"


@pytest.fixture(scope="module")
def exact(tmp_path_factory):
    store = HistoryStore(tmp_path_factory.mktemp("exact") / "h.sqlite3")
    return EngineService(TEXT, DeviceOptions(device="CPU"), history=store)


LOOKUP = Tool("lookup", {"type": "object", "properties": {"word": {"type": "string"}}}, "Look a word up")
WAIT = Tool("wait", {"type": "object", "properties": {}}, "Do nothing")


@pytest.mark.parametrize("kind", ["letters", "tools"])
def test_a_tiny_coverage_is_said_and_uncertain_on_every_surface(exact, kind, qtbot, capsys):
    """The random fixture puts a tiny share on the letters (and far less on a function call's path): the bars
    renormalise almost nothing, which the CLI, --json, /v1/decide, history, the result view and the overlay say."""
    from decider.app.tool_decision import tool_request
    from decider.ui.overlay import CompanionOverlay
    from decider.ui.result_view import ResultView

    request = REQUEST if kind == "letters" else tool_request("Look up owl?", (LOOKUP, WAIT), sampling=GREEDY)
    result = exact.decide(request)
    assert result.coverage < TINY_COVERAGE and result.uncertain
    assert any(w.startswith("tiny coverage") for w in result.uncertain_why)
    text = render_decision(request.question, result, "m")
    assert f"coverage {result.coverage:.2g} (tiny" in text and "uncertain: tiny coverage" in text
    assert "coverage 0.0%" not in text
    row = exact.history.rows(newest_first=True)[0]
    assert row.uncertain and row.result["choice"]["uncertain_why"] == result.uncertain_why
    view = ResultView()
    qtbot.addWidget(view)
    view.show_result(result)
    assert "Uncertain: tiny coverage" in view.choice_meta.text() and "(tiny)" in view.coverage.text()
    overlay = CompanionOverlay()
    qtbot.addWidget(overlay)
    overlay.show_result(request.question, result)
    assert "Uncertain: tiny coverage" in overlay.hint.text()
    if kind == "letters":  # the same through the API and the CLI's --json
        server = ApiServer(exact, "127.0.0.1", 0)
        server.start()
        try:
            status, _, body = call(server.port, "POST", "/v1/decide", {"question": "Which road?", "options": list(REQUEST.options),
                                                                       "temperature": 0})
        finally:
            server.stop()
        assert status == 200 and body["choice"]["uncertain"] and body["choice"]["uncertain_why"][0].startswith("tiny coverage")
        assert main(["ask", "Which road?", "--option", "left", "--option", "right", "--model", str(TEXT), "--device", "CPU",
                     "--json", "--no-history"]) == 0
        assert json.loads(capsys.readouterr().out)["choice"]["uncertain_why"][0].startswith("tiny coverage")


def test_history_shows_model_precision_and_images_seen(exact, fast, tmp_path, qtbot, capsys, monkeypatch):
    from decider.ui.history_tab import HistoryView

    store = HistoryStore(tmp_path / "h.sqlite3")
    seeing = EngineService(model_dir("qwen35-vl"), DeviceOptions(device="CPU"), history=store)
    seeing.decide(DecisionRequest("What is shown?", ("a road", "a lake"), sampling=GREEDY,
                                  images=(load_image_file(FIXTURES / "images" / "small_40x24.png"),)))
    for service in (exact, fast):
        store.add(REQUEST, service.decide(REQUEST), model=service.model_name, device="CPU", source="test")
    rows = store.rows(newest_first=True)
    assert [(r.model, r.precision, r.images_seen) for r in rows] == [
        ("qwen35-text", fast.info.precision, 0), ("qwen35-text", "f32", 0), ("qwen35-vl", "f32", 1)]
    tab = HistoryView(lambda: store)
    qtbot.addWidget(tab)
    tab.refresh()
    shown = [tab.table.item(i, 4).text() for i in range(3)]
    assert shown == [f"qwen35-text · {fast.info.precision} · text only", "qwen35-text · f32 · text only",
                     "qwen35-vl · f32 · saw 1 image"]
    assert tab.table.horizontalHeaderItem(4).text() == "Computed by"
    monkeypatch.setattr("decider.app.history.default_store", lambda announce=None: store)
    assert main(["history", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert "1 image" in listed[-1] and "f32" in listed[-1] and fast.info.precision[:14] in listed[0]


def test_calibrate_never_pools_two_precisions(exact, fast, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DECIDER_CONFIG_DIR", str(tmp_path / "config"))
    store = HistoryStore(tmp_path / "h.sqlite3")
    monkeypatch.setattr("decider.app.history.default_store", lambda announce=None: store)
    for service, count in ((exact, 3), (fast, 2)):
        result = service.decide(REQUEST)
        for _ in range(count):
            store.label(store.add(REQUEST, result, model="qwen35-text", device="CPU", source="test"), 0)
    assert main(["calibrate", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert sorted((e["precision"], e["report"]["count"]) for e in entries) == sorted([("f32", 3), (fast.info.precision, 2)])
    assert main(["calibrate"]) == 0
    assert "(no think, f32): 3 labelled decisions" in capsys.readouterr().out


def test_the_calibration_tab_never_pools_two_precisions(exact, fast, tmp_path, qtbot):
    from decider.app.gui_ports import calibration
    from decider.ui.calibration_tab import CalibrationView

    store = HistoryStore(tmp_path / "h.sqlite3")
    for service, count in ((exact, 3), (fast, 2)):
        result = service.decide(REQUEST)
        for _ in range(count):
            store.label(store.add(REQUEST, result, model="qwen35-text", device="CPU", source="test"), 0)
    view = CalibrationView(lambda: store, calibration())
    qtbot.addWidget(view)
    view.refresh()
    assert [view.precision_box.itemData(i) for i in range(view.precision_box.count())] == ["f32", fast.info.precision]
    assert view.report.count == 3 and "· f32 ·" in view.chart_title.text()
    view.precision_box.setCurrentIndex(1)
    assert view.report.count == 2 and fast.info.precision in view.chart_title.text()
