"""Soak: a long evening of varied requests against `decider serve`, the server's RSS sampled throughout.

    python -m bench.soak --model resources/demo-model --requests 2000 --out docs/benchmarks/soak-demo
    python -m bench.soak --latency --model DIR          # chunked vs one-shot prefill, paired, in-process

The soak mixes /v1/decide, /v1/completions and /v1/chat/completions (half of them with logprobs), with prompt
lengths spread over the model's context, in a seeded random order. The server runs in its own process; its
VmRSS is read after every request. Output: `<out>.json` (every sample) and `<out>.png` (the curve). Target:
RSS after the last request ≤ RSS after the first 100 + 150 MB.

`--latency` times decisions over prompts of random lengths with the runner's chunked prefill and with one
forward per prompt (what the runner did before chunking), alternating per prompt in one process: the
median ratio says what bounding memory costs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("scouts report that the north gate is safe while the river crossing floods and the dragon sleeps "
         "near the old mill where traders wait with bread rice and lamps for the patrol at dawn").split()
OPTIONS = ("Attack", "Retreat", "Trade", "Hide", "Explore", "Wait", "Scout", "Defend")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def decider_path() -> str:
    """PYTHONPATH for the server: the folder holding the `decider` this process imports (a checkout's link
    or site-packages), so the server runs the code under test."""
    import decider

    parent = str(Path(decider.__file__).parent.parent)  # not resolved: a link to a checkout stays the link
    return os.pathsep.join([parent] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def prompt_words(rng: random.Random, max_words: int, spread: str) -> int:
    """uniform: every length up to max_words equally likely; log: log-uniform (short-tailed, mean ≈ max/ln max),
    for a model too slow to prefill thousands of long prompts — lengths still reach max_words."""
    if spread == "log":
        return min(max_words, int(math.exp(rng.uniform(0.0, math.log(max_words + 1)))))
    return rng.randint(1, max_words)


def make_request(rng: random.Random, max_words: int, spread: str = "uniform", max_tokens: int = 8) -> tuple[str, dict]:
    words = max(1, prompt_words(rng, max_words, spread))
    kind = rng.random()
    if kind < 0.5:
        options = rng.sample(OPTIONS, rng.randint(2, 5))
        return "/v1/decide", {"question": text(rng, words) + "?", "options": options, "temperature": 0}
    logprobs = rng.random() < 0.5
    if kind < 0.75:
        body = {"model": "decider", "prompt": text(rng, words), "max_tokens": rng.randint(1, max_tokens), "temperature": 0}
        if logprobs:
            body["logprobs"] = rng.randint(0, 5)
        return "/v1/completions", body
    body = {"model": "decider", "messages": [{"role": "user", "content": text(rng, words)}],
            "max_tokens": rng.randint(1, max_tokens), "temperature": 0}
    if logprobs:
        body.update(logprobs=True, top_logprobs=rng.randint(0, 5))
    return "/v1/chat/completions", body


def post(url: str, body: dict) -> tuple[int, int | None]:
    """The reply's status and, when it says, how many prompt tokens the server computed over."""
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=1800) as reply:
            payload = reply.read()
            status = reply.status
    except urllib.error.HTTPError as exc:
        return exc.code, None
    try:
        return status, json.loads(payload).get("usage", {}).get("prompt_tokens")
    except (ValueError, AttributeError):
        return status, None


@dataclass(frozen=True)
class Plan:
    model: Path
    requests: int = 2000
    max_words: int = 1200
    seed: int = 0
    spread: str = "uniform"  # prompt lengths: "uniform" or "log" (see prompt_words)
    max_tokens: int = 8  # completions and chats answer 1..max_tokens tokens


def summarise(plan: Plan, samples: list, statuses: dict) -> dict:
    first100 = samples[min(99, len(samples) - 1)]["rss_mib"]
    last = samples[-1]["rss_mib"]
    tokens = sorted(s["prompt_tokens"] for s in samples if s.get("prompt_tokens"))
    return {"model": str(plan.model), "requests": plan.requests, "done": len(samples), "max_words": plan.max_words,
            "seed": plan.seed, "spread": plan.spread, "max_tokens": plan.max_tokens, "statuses": statuses,
            "prompt_tokens": {"median": tokens[len(tokens) // 2], "max": tokens[-1], "n": len(tokens)} if tokens else None,
            "rss_after_first": samples[0]["rss_mib"], "rss_after_100": first100,
            "rss_last": last, "growth_after_100_mib": last - first100, "target_met": last <= first100 + 150,
            "wall_s": samples[-1]["t"], "samples": samples}


def soak(plan: Plan, checkpoint=None) -> dict:
    port = free_port()
    data = tempfile.mkdtemp(prefix="decider-soak-")
    env = {**os.environ, "DECIDER_DATA_DIR": data, "DECIDER_CONFIG_DIR": data, "PYTHONPATH": decider_path()}
    server = subprocess.Popen([sys.executable, "-m", "decider.app.cli", "serve", "--model", str(plan.model), "--port", str(port)],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/v1/models", timeout=2).read()
                break
            except OSError:
                time.sleep(0.5)
        else:
            raise RuntimeError("the server did not start: " + server.stderr.read().decode()[-2000:])
        rng = random.Random(plan.seed)
        samples, statuses, started = [], {}, time.time()
        for i in range(plan.requests):
            path, body = make_request(rng, plan.max_words, plan.spread, plan.max_tokens)
            t0 = time.perf_counter()
            status, prompt_tokens = post(base + path, body)
            samples.append({"i": i + 1, "path": path, "status": status, "s": time.perf_counter() - t0,
                            "prompt_tokens": prompt_tokens, "rss_mib": rss_mib(server.pid), "t": time.time() - started})
            statuses[status] = statuses.get(status, 0) + 1
            if checkpoint and (i + 1) % 50 == 0:  # a run cut short still leaves its curve
                checkpoint(summarise(plan, samples, statuses))
    finally:
        server.terminate()
        server.wait(timeout=30)
    return summarise(plan, samples, statuses)


def plot(result: dict, png: Path) -> None:
    """The RSS curve as a PNG, drawn with Qt (already a dependency) on an offscreen surface."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QPointF, QRectF, Qt
    from PySide6.QtGui import QColor, QGuiApplication, QImage, QPainter, QPen, QPolygonF

    app = QGuiApplication.instance() or QGuiApplication([])  # noqa: F841  (fonts need an application)
    width, height, left, bottom, top, right = 900, 420, 70, 50, 40, 20
    image = QImage(width, height, QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    samples = result["samples"]
    xs = [s["i"] for s in samples]
    ys = [s["rss_mib"] for s in samples]
    y_max = max(max(ys), result["rss_after_100"] + 150) * 1.1
    plot_w, plot_h = width - left - right, height - top - bottom

    def point(x: float, y: float) -> QPointF:
        return QPointF(left + plot_w * x / max(xs), top + plot_h * (1 - y / y_max))

    painter.setPen(QPen(QColor("#888"), 1))
    painter.drawRect(QRectF(left, top, plot_w, plot_h))
    for k in range(6):
        value = y_max * k / 5
        painter.drawText(QRectF(0, point(0, value).y() - 8, left - 6, 16), Qt.AlignmentFlag.AlignRight, f"{value:.0f}")
    for k in range(5):
        x = max(xs) * k / 4
        painter.drawText(QRectF(point(x, 0).x() - 30, height - bottom + 4, 60, 16), Qt.AlignmentFlag.AlignCenter, f"{x:.0f}")
    painter.setPen(QPen(QColor("#d33"), 1, Qt.PenStyle.DashLine))
    limit = result["rss_after_100"] + 150
    painter.drawLine(point(0, limit), point(max(xs), limit))
    painter.setPen(QPen(QColor("#1764d6"), 2))
    painter.drawPolyline(QPolygonF([point(x, y) for x, y in zip(xs, ys)]))
    painter.setPen(QColor("black"))
    painter.drawText(QRectF(left, 8, plot_w, 24), Qt.AlignmentFlag.AlignLeft,
                     f"decider serve RSS (MiB) over {len(xs)} mixed requests — {Path(result['model']).name}; "
                     "dashed: RSS after 100 + 150 MiB")
    painter.drawText(QRectF(left, height - 22, plot_w, 18), Qt.AlignmentFlag.AlignCenter, "requests")
    painter.end()
    image.save(str(png))


# The prefill variants the latency run compares: (largest chunk, base of the rest's digits); None: one infer.
PREFILL_MODES = {"chunked": "shipped", "binary": (256, 2), "one-shot": None}


def latency(model: Path, prompts: int, max_words: int, seed: int) -> dict:
    """Decisions under each prefill mode, rotating the order per prompt, cold state each time.

    chunked: the runner as shipped; binary: the earlier power-of-two split (up to 8 chunks for a prompt's
    rest); one-shot: one infer per prompt segment (no bound on the shapes the plugin sees).
    """
    sys.path.insert(0, str(ROOT))
    from decider.engine.decide import DecisionRequest, decide
    from decider.engine.devices import DeviceOptions
    from decider.engine.runner import ModelRunner
    from decider.engine.settings import SamplingSettings

    runner = ModelRunner(model, DeviceOptions(device="CPU"))
    shipped = (type(runner).prefill_chunk, type(runner).prefill_base)
    rng = random.Random(seed)
    sampling = SamplingSettings(temperature=0.0)
    modes = list(PREFILL_MODES)
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    infers: dict[str, list[int]] = {mode: [] for mode in modes}
    for i in range(prompts):
        request = DecisionRequest(text(rng, rng.randint(1, max_words)) + "?", tuple(rng.sample(OPTIONS, 3)), sampling=sampling)
        for mode in modes[i % len(modes):] + modes[: i % len(modes)]:
            setting = shipped if PREFILL_MODES[mode] == "shipped" else PREFILL_MODES[mode]
            runner.prefill_chunk, runner.prefill_base = setting if setting else (None, shipped[1])
            runner.reset()
            runner.clear_snapshots()
            before = runner.stats.infers
            t0 = time.perf_counter()
            decide(runner, request)
            times[mode].append(time.perf_counter() - t0)
            infers[mode].append(runner.stats.infers - before)
        print(f"  {i + 1}/{prompts}: " + ", ".join(f"{m} {times[m][-1] * 1e3:.0f} ms" for m in modes), file=sys.stderr, flush=True)
    ratio = lambda a, b: statistics.median(x / y for x, y in zip(times[a], times[b]))  # noqa: E731
    return {"model": str(model), "prompts": prompts, "max_words": max_words, "seed": seed,
            "median_s": {m: statistics.median(times[m]) for m in modes},
            "mean_infers": {m: statistics.fmean(infers[m]) for m in modes},
            "median_ratio_chunked_vs_one_shot": ratio("chunked", "one-shot"),
            "median_ratio_binary_vs_one_shot": ratio("binary", "one-shot"),
            "median_ratio_chunked_vs_binary": ratio("chunked", "binary"),
            "times_s": times}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "resources" / "demo-model")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--max-words", type=int, default=1200, help="longest prompt, in words (keep under the context)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write OUT.json and OUT.png")
    parser.add_argument("--spread", choices=("uniform", "log"), default="uniform", help="prompt-length distribution")
    parser.add_argument("--max-tokens", type=int, default=8, help="completions and chats answer 1..N tokens")
    parser.add_argument("--latency", action="store_true", help="paired chunked vs one-shot decision latency instead")
    args = parser.parse_args(argv)
    if args.latency:
        result = latency(args.model, args.requests, args.max_words, args.seed)
    else:
        plan = Plan(args.model, args.requests, args.max_words, args.seed, args.spread, args.max_tokens)
        result = soak(plan, lambda r: save(r, args.out))
    save(result, args.out)
    print(json.dumps({k: v for k, v in result.items() if k not in ("samples", "times_s")}, indent=1))
    return 0


def save(result: dict, out: Path | None) -> None:
    if out is None:
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result))
    if "samples" in result:
        plot(result, out.with_suffix(".png"))


if __name__ == "__main__":
    sys.exit(main())
