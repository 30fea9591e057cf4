"""The prompt cache on disk (issue 27 item 7): a shared context's state outlives the process that computed it,
is exact, never goes stale, and stays under its bound."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from decider.engine.decisions.decide import DecisionRequest, decide
from decider.engine.compile.devices import DeviceOptions
from decider.engine.compile.precision import Precision
from decider.engine.runners.prompt_cache import PromptCache, runner_identity
from decider.engine.runners.runner import ModelRunner
from decider.engine.core.settings import SamplingSettings
from decider.engine.runners.static import StaticRunner

from support.models import model_dir
from support.gui import dirs, make_window  # noqa: F401 (pytest fixtures)

FIXTURE = model_dir("qwen35-text")
RULES = "".join(f"Rule {i}: a knight moves in an L shape; archers shoot {i % 3 + 2} squares; scouts see far.\n" for i in range(40))
GREEDY = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0)


def ask(tmp_path: Path, context: Path, *extra: str, model: Path = FIXTURE, cache_mb: str | None = None,
        question: str = "Which unit moves first?") -> dict:
    """One `decider ask --context` in a process of its own; its JSON."""
    env = {**os.environ, "DECIDER_CACHE_DIR": str(tmp_path / "cache")}
    if cache_mb is not None:
        env["DECIDER_PROMPT_CACHE_MB"] = cache_mb
    argv = [sys.executable, "-m", "decider.app.cli", "ask", question, "--option", "Archers", "--option", "Knights",
            "--option", "Scouts", "--context", str(context), "--model", str(model), "--device", "CPU",
            "--json", "--no-history", *extra]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def logprobs(result: dict) -> np.ndarray:
    return np.array([option["logprob"] for option in result["options"]])


@pytest.fixture
def rules(tmp_path) -> Path:
    path = tmp_path / "rules.txt"
    path.write_text(RULES, encoding="utf-8")
    return path


def test_a_second_process_reuses_the_context_and_gives_the_same_bars(tmp_path, rules):
    first = ask(tmp_path, rules)
    second = ask(tmp_path, rules)
    cold = ask(tmp_path, rules, cache_mb="0")  # the cache turned off: a cold prefill in a third process
    assert first["usage"]["reused_tokens"] == 0
    context_tokens = second["usage"]["reused_tokens"]
    assert context_tokens > 1000 and second["usage"]["prefill_tokens"] < 80
    assert context_tokens + second["usage"]["prefill_tokens"] == first["usage"]["prompt_tokens"]
    assert cold["usage"]["reused_tokens"] == 0
    delta = max(np.max(np.abs(logprobs(second) - logprobs(first))), np.max(np.abs(logprobs(second) - logprobs(cold))))
    print(f"\nprompt cache: {context_tokens} context tokens reused, max |Δ logprob| = {delta:.1e}")
    assert delta <= 1e-6
    entries = list((tmp_path / "cache" / "prompts").glob("*.npz"))
    assert len(entries) == 1


def test_a_changed_context_file_model_or_precision_never_reuses_a_stale_state(tmp_path, rules):
    model = tmp_path / "model"
    shutil.copytree(FIXTURE, model)
    assert ask(tmp_path, rules, model=model)["usage"]["reused_tokens"] == 0
    assert ask(tmp_path, rules, model=model)["usage"]["reused_tokens"] > 1000  # the same: reused

    rules.write_text(RULES.replace("Rule 39", "Rule 0039"), encoding="utf-8")  # a changed file: its tokens differ
    assert ask(tmp_path, rules, model=model)["usage"]["reused_tokens"] == 0

    config = model / "config.json"  # a changed model file (same tokens): another model as far as the cache knows
    config.write_text(config.read_text() + "\n")
    assert ask(tmp_path, rules, model=model)["usage"]["reused_tokens"] == 0

    assert ask(tmp_path, rules, "--fast", model=model)["usage"]["reused_tokens"] == 0  # another precision


def test_the_identity_names_device_execution_path_and_options():
    runner = ModelRunner(FIXTURE, DeviceOptions(device="CPU"))
    base = runner_identity(runner)
    fields = {name: getattr(runner, name) for name in ("folder", "options", "device", "execution_path", "precision")}
    for change in ({"device": "GPU"}, {"execution_path": "static"},
                   {"options": DeviceOptions(device="CPU", exact=False)},
                   {"precision": Precision("bf16", "f32")}):  # what the compiled model reported running
        other = types.SimpleNamespace(**{**fields, **change})
        assert runner_identity(other) != base, change
    assert runner_identity(types.SimpleNamespace(**fields)) == base


def test_the_folder_stays_under_its_bound_least_recently_used_first(tmp_path):
    state = {"kv": np.arange(100_000, dtype=np.float32)}  # 400 kB a piece
    cache = PromptCache(tmp_path, max_bytes=1_000_000)
    logits = np.zeros(8)
    for i in range(2):
        assert cache.store(f"k{i}", [i], state, logits)
    assert cache.load("k0", [0]) is not None  # k0 used again: k1 is now the oldest
    os.utime(tmp_path / "k1.npz", (1, 1))
    assert cache.store("k2", [2], state, logits)
    assert cache.size() <= 1_000_000
    assert cache.has("k0") and cache.has("k2") and not cache.has("k1")
    assert not cache.store("big", [3], {"kv": np.zeros(300_000, dtype=np.float32)}, logits)  # over the cap alone
    assert not list(tmp_path.glob(".tmp-*"))


def test_a_torn_or_foreign_entry_is_a_miss_and_goes(tmp_path):
    cache = PromptCache(tmp_path)
    (tmp_path / "k.npz").write_bytes(b"not a zip")
    assert cache.load("k", [1]) is None and not cache.has("k")
    cache.store("k", [1, 2], {"s": np.ones(3, dtype=np.float32)}, np.zeros(2))
    assert cache.load("k", [1, 3]) is None  # same key, other ids (a collision): never restored
    # an entry holding a pickled object is refused, not unpickled
    np.savez(tmp_path / "p.npz", ids=np.array([1]), names=np.array(["s"]), s0=np.array([object()], dtype=object),
             logits=np.zeros(2))
    assert cache.load("p", [1]) is None


def test_the_static_path_takes_the_state_from_disk_exactly(tmp_path):
    options = DeviceOptions(device="CPU", static_chunks=(16, 4, 1), npu_max_prompt_len=1024, npu_min_response_len=16)
    request = DecisionRequest("Which unit moves first?", ("Archers", "Knights", "Scouts"), context=RULES[:1200], sampling=GREEDY)
    cold = decide(StaticRunner(FIXTURE, options), request)
    writer = StaticRunner(FIXTURE, options)
    writer.use_prompt_cache(PromptCache(tmp_path))
    decide(writer, request)
    reader = StaticRunner(FIXTURE, options)  # a fresh runner: nothing in memory, as in another process
    reader.use_prompt_cache(PromptCache(tmp_path))
    warm = decide(reader, request)
    assert warm.usage["reused_tokens"] == reader.stats.last_prefill_from_disk > 200
    assert [o.logprob for o in warm.options] == [o.logprob for o in cold.options]


def test_decider_serve_takes_the_context_a_cli_process_left(tmp_path, rules):
    import socket
    import time
    import urllib.request

    first = ask(tmp_path, rules)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "DECIDER_CACHE_DIR": str(tmp_path / "cache")}
    server = subprocess.Popen([sys.executable, "-m", "decider.app.cli", "serve", "--model", str(FIXTURE), "--device", "CPU",
                               "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        body = json.dumps({"question": "Which unit moves first?", "options": ["Archers", "Knights", "Scouts"],
                           "context": RULES}).encode()
        deadline = time.monotonic() + 120
        while True:
            try:
                request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/decide", body, {"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=60) as response:
                    answer = json.load(response)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, server.stderr.read().decode() if server.poll() is not None else "no answer"
                time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert answer["usage"]["reused_tokens"] == first["usage"]["prompt_tokens"] - answer["usage"]["prefill_tokens"] > 1000
    assert np.max(np.abs(logprobs(answer) - logprobs(first))) <= 1e-6


def test_the_window_keeps_and_takes_the_shared_prefix_on_disk(qtbot, make_window, monkeypatch, tmp_path):
    """Two windows, each with its own engine thread and runner (as two runs of the app): the second prefills
    only the question after the system prompt the first computed."""
    pytest.importorskip("pytestqt")
    from decider.app.preferences import GuiSettings

    from support.gui import ask as fill, load

    monkeypatch.setenv("DECIDER_CACHE_DIR", str(tmp_path / "cache"))
    settings = GuiSettings(device="CPU", system_prompt=RULES[:1500], temperature=0.0)
    results = []
    for _ in range(2):
        window = make_window(settings, register_global_hotkey=False)
        load(qtbot, window)
        fill(window, "Which unit moves first?", ["Archers", "Knights", "Scouts"])
        with qtbot.waitSignal(window.decision_shown, timeout=60_000) as blocker:
            assert window.decide()
        results.append(blocker.args[0])
    assert results[0].usage["reused_tokens"] == 0 and results[1].usage["reused_tokens"] > 300
    assert [o.logprob for o in results[0].options] == [o.logprob for o in results[1].options]
    assert len(list((tmp_path / "cache" / "prompts").glob("*.npz"))) == 1
