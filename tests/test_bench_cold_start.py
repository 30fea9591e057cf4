"""bench/cold_start.py's bookkeeping: medians and ratios per kind, both clocks, and the commands it launches.
(The launches themselves need a built bundle: `python -m bench.cold_start` is run by hand, BENCHMARKS.md.)"""

from __future__ import annotations

from pathlib import Path

from bench import cold_start


def test_a_row_holds_the_medians_and_the_bundle_over_installed_ratio_on_both_clocks():
    sides = {"bundle": [(1.0, 0.5), (3.0, 0.7), (2.0, 0.6)], "installed": [(2.0, 0.6), (2.5, 0.5), (4.0, 0.9)]}
    row = cold_start._row(sides)
    assert row["runs"] == 3
    assert (row["wall_bundle_median_s"], row["wall_installed_median_s"], row["wall_ratio"]) == (2.0, 2.5, 0.8)
    assert (row["cpu_bundle_median_s"], row["cpu_installed_median_s"]) == (0.6, 0.6)
    assert row["bundle_wall_s"] == [1.0, 3.0, 2.0]


def test_the_window_run_saves_a_picture_and_the_ask_run_prints_json(tmp_path):
    shot = tmp_path / "w.png"
    ask = cold_start.decision_args("ask", shot)
    window = cold_start.decision_args("window", shot)
    assert ask[:2] == ["ask", "--json"] and str(shot) not in ask
    assert window[0] == "gui" and window[-2:] == ["--screenshot", str(shot)]
    assert ask.count("--option") == window.count("--option") == len(cold_start.OPTIONS)


def test_the_cpu_flags_are_read_from_this_machine():
    flags = cold_start.cpu_flags()
    if Path("/proc/cpuinfo").is_file():
        text = Path("/proc/cpuinfo").read_text()
        assert all(f" {flag}" in text for flag in flags)
    assert set(flags) <= set(cold_start.CPU_FLAGS)
