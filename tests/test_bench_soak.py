"""bench/soak.py: the one soak tool — its request mix, and section 11 rendered from its three kinds of result."""

import json
import random
from pathlib import Path

from bench import soak


def test_soak_section_judges_growth_against_the_target_and_draws_every_variant(tmp_path):
    def result(variant, growth, probe):
        rss = [(i, 200.0 + growth * i / 2000) for i in range(0, 2001, 100)]
        return {"variant": variant, "requests": 2000, "rss_mib": rss, "rss_after_100_mib": rss[1][1], "rss_final_mib": rss[-1][1],
                "growth_after_100_mib": rss[-1][1] - rss[1][1], "probe_summary": {"median": probe, "min": probe, "max": probe}}

    results = {"demo/soak-one-pass": result("one-pass", 1000.0, 0.1), "demo/soak-dynamic": result("dynamic", 10.0, 0.11)}
    text = "\n".join(soak.section(results, tmp_path))
    rows = {line.split("|")[2].strip(): line for line in text.splitlines() if line.startswith("| demo |")}
    assert "❌" in rows["one-pass"] and "✅" in rows["dynamic"]
    assert "1.10×" in rows["dynamic"] and "1.00×" in rows["one-pass"]
    figure = soak.figures(results)["soak-demo.svg"]
    assert figure.count("<polyline") == 2 and "one-pass" in figure and "dynamic" in figure


def test_section_renders_the_api_soak_and_the_paired_latency_from_their_files(tmp_path):
    samples = [{"i": i, "rss_mib": 150.0 + (40.0 if i > 50 else 0.0) + i / 1000, "prompt_tokens": 10 + i} for i in range(1, 301)]
    api = {"model": "/m/qwen35-0.8b/ov-int8", "requests": 2000, "done": 300, "max_words": 400, "spread": "log",
           "statuses": {"200": 300}, "prompt_tokens": {"median": 160, "max": 310, "n": 300}, "rss_after_first": 150.0,
           "rss_after_100": samples[99]["rss_mib"], "rss_last": samples[-1]["rss_mib"],
           "growth_after_100_mib": samples[-1]["rss_mib"] - samples[99]["rss_mib"], "target_met": True, "wall_s": 3600,
           "samples": samples}
    soak.save(api, tmp_path / "soak-api-0.8b")
    latency = {"model": "/m/demo-model", "prompts": 60, "max_words": 600, "median_s": {"chunked": 0.4, "fixed": 0.5, "one-shot": 0.3},
               "mean_infers": {"chunked": 2.1, "fixed": 4.0, "one-shot": 1.0}, "median_ratio_chunked_vs_one_shot": 1.04,
               "median_ratio_fixed_vs_one_shot": 1.39, "chunked_split": [1024, 32]}
    (tmp_path / "prefill-latency-demo.json").write_text(json.dumps(latency))
    text = "\n".join(soak.section({}, tmp_path))
    row = next(line for line in text.splitlines() if line.startswith("| qwen35-0.8b/ov-int8 |"))
    assert "300 of 2000" in row and "1–400, log" in row and "✅" in row and "300× 200" in row
    assert "(docs/benchmarks/soak-api-0.8b.svg)" in text
    figure = (tmp_path / "soak-api-0.8b.svg").read_text()
    assert figure.count("<polyline") == 1 and "stroke-dasharray" in figure  # the curve and the target line
    latency_row = next(line for line in text.splitlines() if line.startswith("| demo-model |"))
    assert "**1.04×**" in latency_row and "2.1 / 4.0 / 1.0" in latency_row and "1024 / base 32" in latency_row


def test_every_mode_draws_the_same_mix_of_requests():
    rng = random.Random(1)
    drawn = [soak.make_request(rng, 400, "log", 4) for _ in range(2000)]
    paths = [path for path, _ in drawn]
    assert 0.45 < paths.count("/v1/decide") / len(paths) < 0.55
    assert 0.2 < paths.count("/v1/completions") / len(paths) < 0.3
    words = [len((b.get("question") or b.get("prompt") or b["messages"][0]["content"]).split()) for _, b in drawn]
    assert min(words) == 1 and max(words) > 300 and sorted(words)[len(words) // 2] < 60  # short-tailed, still reaching 400
    assert all(b.get("max_tokens", 1) <= (16 if "tools" in b else 4) for _, b in drawn)
    chats = [b for path, b in drawn if path == "/v1/chat/completions"]
    with_tools = [b for b in chats if "tools" in b]
    several = [b for b in chats if b.get("n", 1) > 1]
    assert 0.07 < len(with_tools) / len(drawn) < 0.13 and {b["tool_choice"] for b in with_tools} == {"auto", "required", "none"}
    assert 0.03 < len(several) / len(drawn) < 0.07 and all(2 <= b["n"] <= 4 for b in several)


def test_a_short_api_soak_with_tools_and_several_draws_answers_every_request(tmp_path):
    """The soak's mix through `decider serve` on the fixture model: tool calls and n > 1 answered (200), RSS sampled."""
    from support.models import model_dir

    plan = soak.Plan(model_dir("qwen35-text"), requests=40, max_words=30, seed=11, max_tokens=4)
    rng = random.Random(plan.seed)  # the requests the soak draws, in its order
    drawn = [body for _, body in (soak.make_request(rng, plan.max_words, plan.spread, plan.max_tokens) for _ in range(40))]
    assert any("tools" in body for body in drawn) and any(body.get("n", 1) > 1 for body in drawn)
    result = soak.soak_api(plan)
    paths = {(s["path"]) for s in result["samples"]}
    assert result["statuses"] == {200: 40} and "/v1/chat/completions" in paths
    assert all(s["rss_mib"] > 50 for s in result["samples"])


def test_the_window_soak_decides_in_the_window_and_through_its_api(tmp_path, monkeypatch, qtbot):
    """A short window soak on the fixture model: both front ends answer, RSS is sampled, the section names it."""
    from support.models import model_dir

    from bench.soak_window import soak_window

    monkeypatch.setenv("DECIDER_DATA_DIR", str(tmp_path / "data"))  # soak_window points these at its own folder;
    monkeypatch.setenv("DECIDER_CONFIG_DIR", str(tmp_path / "config"))  # monkeypatch puts them back afterwards
    result = soak_window(soak.Plan(model_dir("qwen35-text"), requests=12, max_words=40, seed=3, max_tokens=2))
    paths = [s["path"] for s in result["samples"]]
    assert "window" in paths and "/v1/decide" in paths and len(paths) == 12
    assert result["statuses"] == {200: 12} and result["mode"] == "window"
    assert all(s["rss_mib"] > 50 for s in result["samples"])
    soak.save(result, tmp_path / "docs" / "soak-window-fixture")
    text = "\n".join(soak.section({}, tmp_path / "docs"))
    assert "| qwen35-text | window + its API | 12 |" in text
    assert "window + API RSS over 12 requests" in (tmp_path / "docs" / "soak-window-fixture.svg").read_text()


def test_a_checkpoint_of_a_window_soak_is_still_a_window_run(tmp_path):
    """A run cut short keeps its checkpoint: that file must say which front end it measured, as the whole run does."""
    samples = [{"i": i, "rss_mib": 100.0, "prompt_tokens": 5, "t": i} for i in range(1, 151)]
    partial = soak.summarise(soak.Plan(Path("/m/demo-model"), requests=2000), samples, {200: 150}, "window")
    soak.save(partial, tmp_path / "soak-window-demo")
    row = next(line for line in soak.section({}, tmp_path) if line.startswith("| demo-model |"))
    assert "| window + its API | 150 of 2000 |" in row
    assert "window + API RSS over 150 requests" in (tmp_path / "soak-window-demo.svg").read_text()


def test_a_labelled_soak_says_which_code_it_measured(tmp_path):
    samples = [{"i": i, "rss_mib": 100.0, "prompt_tokens": 5} for i in range(1, 201)]
    run = {"model": "/m/demo-model", "requests": 200, "done": 200, "max_words": 10, "statuses": {"200": 200},
           "rss_after_first": 100.0, "rss_after_100": 100.0, "rss_last": 100.0, "growth_after_100_mib": 0.0,
           "target_met": True, "wall_s": 60, "samples": samples}
    soak.save(run, tmp_path / "soak-api-demo")
    soak.save({**run, "label": "before the fix"}, tmp_path / "soak-api-demo-before")
    rows = [line for line in soak.section({}, tmp_path) if line.startswith("| demo-model |")]
    assert len(rows) == 2 and sum("`decider serve` (before the fix)" in row for row in rows) == 1
    assert "decider serve (before the fix) RSS" in (tmp_path / "soak-api-demo-before.svg").read_text()
    assert "(before the fix)" not in (tmp_path / "soak-api-demo.svg").read_text()


def test_an_api_soak_run_from_the_command_line_keeps_its_label(tmp_path, capsys):
    """`python -m bench.soak --label …` through a real `decider serve` on the fixture model: the label reaches the JSON,
    the figure's title and the section's row, and the run's checkpoints carry it too."""
    from support.models import model_dir

    out = tmp_path / "soak-api-fixture"
    assert soak.main(["--model", str(model_dir("qwen35-text")), "--requests", "3", "--max-words", "20", "--max-tokens", "2",
                      "--label", "after the fix", "--out", str(out)]) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    assert result["label"] == "after the fix" and result["done"] == 3 and result["statuses"] == {"200": 3}
    assert "decider serve (after the fix) RSS over 3 requests" in out.with_suffix(".svg").read_text()
    row = next(line for line in soak.section({}, tmp_path) if line.startswith("| qwen35-text |"))
    assert "`decider serve` (after the fix)" in row


def test_a_long_title_is_set_smaller_to_fit_the_picture():
    import re

    title = "decider serve (a label that says which code ran) RSS over 2000 requests — a-model"
    long = soak.svg({"api": [(1, 100.0), (2, 101.0)]}, title)
    short = soak.svg({"api": [(1, 100.0), (2, 101.0)]}, "RSS — demo")
    size = lambda figure: float(re.search(r'<text x="60" y="18" font-size="([\d.]+)"', figure).group(1))  # noqa: E731
    assert size(short) == 13.0 and size(long) < 13.0
    assert 0.58 * size(long) * len(title) <= 640 - 60  # the title's estimated width fits beside the axis
