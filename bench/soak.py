"""Soak: an evening of varied requests, memory sampled throughout — the one soak tool, four ways to run it.

    python -m bench.soak --model DIR --requests 2000 --out docs/benchmarks/soak-api-NAME      # through `decider serve`
    python -m bench.soak --mode window --model DIR --out docs/benchmarks/soak-window-NAME    # the window and its API
    python -m bench.soak --mode engine --model DIR --variant dynamic --out result.json        # in one process
    python -m bench.soak --mode latency --model DIR --requests 60 --out docs/benchmarks/prefill-latency-NAME

Every mode draws the same requests: /v1/decide 50 %, /v1/completions 25 %, /v1/chat/completions 25 % (half of
the last two with logprobs; of the chats 10 % of all requests offer three functions — tool_choice auto, required
or none — and 5 % ask for n = 2..4 draws), prompt lengths spread over 1..--max-words words (uniform, or log-uniform with
`--spread log` for a model too slow to prefill thousands of long prompts), in a seeded random order.

- api (default): the server runs in its own process; its VmRSS is read after every request. Writes OUT.json
  (every sample) and OUT.svg (the curve). Target: RSS after the last request ≤ RSS after the first 100 + 150 MiB.
- window: the main window (offscreen) and its embedded API in one process, every other decision through the
  window's Decide button (bench/soak_window.py); the same files as api.
- engine: the same requests through the engine service the window, CLI and API share, in this process, for
  one runner variant — dynamic (as shipped: chunked prefill), one-pass (each prompt segment in one infer, as
  before chunking), capped (one-pass with CPU_RUNTIME_CACHE_CAPACITY=0), static (the static-shape runner on
  the CPU). RSS every --sample-every requests; every --probe-every requests one fixed decision runs cold and
  is timed. `python -m bench run` runs this per variant into results.json.
- latency: the price of bounding memory, paired: decisions over prompts of random lengths under each prefill
  mode (shipped chunking: the model's plan; 256-token chunks for every model; one infer per prompt), the order rotating per
  prompt, cold state each time; medians of the per-prompt ratios.

`section(results)` renders BENCHMARKS.md section 11 from all three (results.json's engine rows, and the
api / latency JSON files in docs/benchmarks); `figures(results)` the SVG curves of the engine rows.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from .common import table_head
from .soak_requests import (  # noqa: F401 (re-exported: tests and the report read them here)
    ROOT, DOCS, WORDS, OPTIONS, TARGET_MIB, PROBE, PREFILL_MODES, Plan, text, prompt_words, make_request, rss_of, decider_path, free_port, post, summarise,
)


def soak_api(plan: Plan, checkpoint=None) -> dict:
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
                            "prompt_tokens": prompt_tokens, "rss_mib": rss_of(server.pid), "t": time.time() - started})
            statuses[status] = statuses.get(status, 0) + 1
            if checkpoint and (i + 1) % 50 == 0:  # a run cut short still leaves its curve
                checkpoint(summarise(plan, samples, statuses))
    finally:
        server.terminate()
        server.wait(timeout=30)
    return summarise(plan, samples, statuses)


# ----- engine: in this process, one runner variant -----


def _engine_options(variant: str):
    from decider.engine.compile.devices import DeviceOptions

    path = "static" if variant == "static" else "dynamic"
    # The static window must hold the longest request (prompt + answer).
    return DeviceOptions(device="CPU", path=path, runtime_cache_capacity=0 if variant == "capped" else None,
                         npu_max_prompt_len=2048, npu_min_response_len=128)


def _engine_call(service, path: str, body: dict) -> str:
    """The API request `body` through the engine service, as the route would run it (greedy)."""
    from decider.engine.model.chat_template import Message
    from decider.engine.decisions.decide import DecisionRequest
    from decider.engine.core.settings import SamplingSettings

    greedy = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0)
    if path == "/v1/decide":
        service.decide(DecisionRequest(body["question"], tuple(body["options"]), sampling=greedy))
        return "decide"
    if path == "/v1/completions":
        service.run(service.completion_request(body["prompt"], greedy, body["max_tokens"], None))
        return "complete"
    from decider.engine.constrained.tools import tools_from_openai

    tools = tools_from_openai(body["tools"]) if body.get("tools") else ()  # rendered into the prompt; the call unconstrained
    request = service.chat_request([Message("user", body["messages"][0]["content"])], False, greedy, body["max_tokens"], None,
                                   tools=tools)
    for _ in range(body.get("n", 1)):
        service.run(request)
    return "chat"


def _probe(service) -> float:
    from decider.engine.decisions.decide import DecisionRequest
    from decider.engine.core.settings import SamplingSettings

    service.runner.reset()
    service.runner.clear_snapshots()
    started = time.perf_counter()
    service.decide(DecisionRequest(PROBE[0], PROBE[1], sampling=SamplingSettings(temperature=0.0)))
    return time.perf_counter() - started


def soak_engine(plan: Plan, variant: str, sample_every: int = 10, probe_every: int = 100, checkpoint=None) -> dict:
    from decider.app.service import EngineService

    from .common import rss_mib, summary

    service = EngineService(plan.model, _engine_options(variant))
    if variant in ("one-pass", "capped"):
        service.runner.prefill_chunk = None  # each prompt segment in one infer, as before the chunked prefill
    rng = random.Random(plan.seed)
    rss, probes, kinds = [(0, rss_mib())], [], {"decide": 0, "complete": 0, "chat": 0}
    started = time.perf_counter()

    def result() -> dict:
        at = dict(rss)
        first = at.get(100, rss[min(len(rss) - 1, 1)][1])
        return {"variant": variant, "requests": rss[-1][0], "planned": plan.requests, "max_words": plan.max_words,
                "spread": plan.spread, "kinds": dict(kinds), "rss_mib": list(rss), "probe_s": list(probes),
                "probe_summary": summary([p for _, p in probes]) if probes else None,
                "rss_after_100_mib": first, "rss_final_mib": rss[-1][1], "growth_after_100_mib": rss[-1][1] - first,
                "wall_s": time.perf_counter() - started, "execution_path": service.runner.execution_path}

    for i in range(1, plan.requests + 1):
        kinds[_engine_call(service, *make_request(rng, plan.max_words, plan.spread, plan.max_tokens))] += 1
        if i % sample_every == 0:
            rss.append((i, rss_mib()))
        if i % probe_every == 0:
            probes.append((i, _probe(service)))
            print(f"  {i} requests: RSS {rss[-1][1]:.0f} MiB, probe decision {probes[-1][1] * 1e3:.0f} ms", file=sys.stderr, flush=True)
            if checkpoint:  # a soak cut short still leaves its curve so far ("requests" says how far)
                checkpoint(result())
    return result()


# ----- latency: what bounding memory costs, paired -----


def latency(plan: Plan) -> dict:
    """Decisions under each prefill mode, rotating the order per prompt, cold state each time.

    chunked: the runner as shipped (its model's plan); fixed: 256-token chunks in base 16 for every model, as
    before the plan; one-shot: one infer per prompt segment (no bound on the shapes the plugin sees).
    """
    from decider.engine.decisions.decide import DecisionRequest, decide
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.runners.runner import ModelRunner
    from decider.engine.core.settings import SamplingSettings

    runner = ModelRunner(plan.model, DeviceOptions(device="CPU"))
    shipped = (runner.prefill_chunk, runner.prefill_base)
    rng = random.Random(plan.seed)
    sampling = SamplingSettings(temperature=0.0)
    modes = list(PREFILL_MODES)
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    infers: dict[str, list[int]] = {mode: [] for mode in modes}
    for i in range(plan.requests):
        words = prompt_words(rng, plan.max_words, plan.spread)
        request = DecisionRequest(text(rng, words) + "?", tuple(rng.sample(OPTIONS, 3)), sampling=sampling)
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
        print(f"  {i + 1}/{plan.requests}: " + ", ".join(f"{m} {times[m][-1] * 1e3:.0f} ms" for m in modes), file=sys.stderr, flush=True)
    ratio = lambda a, b: statistics.median(x / y for x, y in zip(times[a], times[b]))  # noqa: E731
    return {"model": str(plan.model), "prompts": plan.requests, "max_words": plan.max_words, "seed": plan.seed,
            "spread": plan.spread, "median_s": {m: statistics.median(times[m]) for m in modes},
            "mean_infers": {m: statistics.fmean(infers[m]) for m in modes},
            "median_ratio_chunked_vs_one_shot": ratio("chunked", "one-shot"),
            "median_ratio_fixed_vs_one_shot": ratio("fixed", "one-shot"),
            "chunked_split": list(shipped),
            "times_s": times}


# ----- pictures and the report section -----

COLORS = {"one-pass": "#c0392b", "capped": "#e67e22", "dynamic": "#2471a3", "static": "#1e8449", "api": "#2471a3", "window": "#2471a3"}


def _title(title: str, left: int, width: int) -> str:
    """The chart's title, in a smaller type when 13 px would run past the picture (a character ~0.58 em)."""
    size = min(13.0, (width - left - 10) / (0.58 * max(1, len(title))))
    return f'<text x="{left}" y="18" font-size="{size:.1f}">{html.escape(title)}</text>'


def svg(series: dict[str, list[tuple[float, float]]], title: str, limit: float | None = None,
        width: int = 640, height: int = 320) -> str:
    """A line chart without a plotting library; `limit`: a dashed horizontal line (the target)."""
    left, right, top, bottom = 60, 110, 30, 40
    xs = [x for points in series.values() for x, _ in points] or [0, 1]
    ys = [y for points in series.values() for _, y in points] + ([limit] if limit else []) or [0, 1]
    x_max, y_min, y_max = max(xs) or 1, 0.0, max(ys) * 1.1 or 1
    sx = lambda x: left + (width - left - right) * x / x_max  # noqa: E731
    sy = lambda y: height - bottom - (height - top - bottom) * (y - y_min) / (y_max - y_min)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           _title(title, left, width),
           f'<line x1="{left}" y1="{sy(0)}" x2="{width - right}" y2="{sy(0)}" stroke="#888"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{sy(0)}" stroke="#888"/>']
    for i in range(5):
        y = y_max * i / 4
        out.append(f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.0f}</text>')
        x = x_max * i / 4
        out.append(f'<text x="{sx(x):.1f}" y="{height - bottom + 16}" text-anchor="middle">{x:.0f}</text>')
    out.append(f'<text x="{(left + width - right) / 2}" y="{height - 6}" text-anchor="middle">requests</text>')
    out.append(f'<text x="14" y="{(top + height - bottom) / 2}" transform="rotate(-90 14 {(top + height - bottom) / 2})" text-anchor="middle">RSS (MiB)</text>')
    if limit:
        out.append(f'<line x1="{left}" y1="{sy(limit):.1f}" x2="{width - right}" y2="{sy(limit):.1f}" stroke="#d33" stroke-dasharray="5,4"/>')
        out.append(f'<text x="{width - right + 8}" y="{sy(limit) + 4:.1f}" fill="#d33">target</text>')
    for i, (name, points) in enumerate(series.items()):
        color = COLORS.get(name.split()[-1], "#555")
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        out.append(f'<text x="{width - right + 8}" y="{top + 16 * i + 10}" fill="{color}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out)


def api_figure(result: dict) -> str:
    points = [(s["i"], s["rss_mib"]) for s in result["samples"]]
    name = model_name(result["model"])
    mode = result.get("mode", "api")
    who = _labelled(FIGURE_FRONT_ENDS[mode], result)
    return svg({mode: points}, f"{who} RSS over {len(points)} requests — {name}", result["rss_after_100"] + TARGET_MIB)


FRONT_ENDS = {"api": "`decider serve`", "window": "window + its API"}  # as the section's table names them
FIGURE_FRONT_ENDS = {"api": "decider serve", "window": "window + API"}


def _labelled(front_end: str, result: dict) -> str:
    """A front end's name with the run's label (which code it measured), if it has one."""
    return front_end + (f" ({result['label']})" if result.get("label") else "")


def _by_model(results: dict) -> dict[str, dict[str, dict]]:
    keys = sorted(k for k, v in results.items() if "/soak-" in k and isinstance(v, dict) and "error" not in v)
    by_model: dict[str, dict[str, dict]] = {}
    for key in keys:
        model, variant = key.rsplit("/soak-", 1)
        by_model.setdefault(model, {})[variant] = results[key]
    return by_model


def figure_name(model: str) -> str:
    return f"soak-{model.replace('/', '-')}.svg"


def figures(results: dict) -> dict[str, str]:
    """SVG text per model, keyed by file name (written beside results.json by `python -m bench report`)."""
    return {
        figure_name(model): svg({v: [tuple(p) for p in r["rss_mib"]] for v, r in variants.items()}, f"RSS over requests — {model}")
        for model, variants in _by_model(results).items()
    }


def _saved(docs: Path, add, what: str, *patterns: str) -> list[tuple[Path, dict]]:
    """The runs saved under docs/benchmarks matching `patterns` (each sorted by name), read; without any, a
    '(what not measured)' line."""
    paths = [path for pattern in patterns for path in sorted(docs.glob(pattern))]
    if not paths:
        add(f"({what} not measured)\n")
    return [(path, json.loads(path.read_text())) for path in paths]


def _engine_rows(results: dict, add) -> None:
    by_model = _by_model(results)
    if not by_model:
        add("(in-process soak not measured)\n")
        return
    add("**In one process** (`--mode engine`, one process per variant, `python -m bench run`): VmRSS every 10 requests; "
        "every 100 requests a fixed decision runs cold and is timed. Variants: *dynamic* (as shipped: chunked prefill), "
        "*one-pass* (each prompt in one infer, as before chunking: a new prompt length is a new shape for the CPU plugin), "
        "*capped* (one-pass with `CPU_RUNTIME_CACHE_CAPACITY=0`), *static* (the static-shape runner). *requests* says how "
        "far a soak cut short got; *mix* is the run's decide/complete/chat counts. *probe / one-pass*: the cold probe "
        "decision's median against the one-pass variant's (variants that ran at the same time on a loaded machine: noisy).\n")
    add(table_head("| model | variant | requests | mix | RSS after 100 | RSS at the end | growth | target | probe decision (median, min–max) | probe / one-pass |"))
    for model, variants in by_model.items():
        base = (variants.get("one-pass") or {}).get("probe_summary")
        for variant, r in variants.items():
            p = r.get("probe_summary")
            ratio = f"{p['median'] / base['median']:.2f}×" if p and base else "—"
            ok = "✅" if r["growth_after_100_mib"] <= TARGET_MIB else "❌"
            kinds = r.get("kinds") or {}
            mix = "/".join(str(kinds.get(k, "?")) for k in ("decide", "complete", "chat"))
            add(f"| {model} | {variant} | {r['requests']} | {mix} | {r['rss_after_100_mib']:.0f} MiB | {r['rss_final_mib']:.0f} MiB | "
                f"{r['growth_after_100_mib']:+.0f} MiB | {ok} | "
                + (f"{p['median'] * 1e3:.0f} ms ({p['min'] * 1e3:.0f}–{p['max'] * 1e3:.0f})" if p else "—") + f" | {ratio} |")
    add("")
    for model in by_model:
        add(f"![RSS over requests, {model}](docs/benchmarks/{figure_name(model)})\n")


def model_name(path: str) -> str:
    """A model folder as the tables show it: the bench's exports are named by size and format (qwen35-0.8b/ov-int8)."""
    folder = Path(path)
    return f"{folder.parent.name}/{folder.name}" if folder.name.startswith("ov-") else folder.name


def _api_rows(docs: Path, add) -> None:
    runs = _saved(docs, add, "API soak", "soak-api-*.json", "soak-window-*.json")
    if not runs:
        return
    add("**Through the API server and the window** (`python -m bench.soak [--mode window] --model DIR --requests 2000 --out "
        "docs/benchmarks/soak-api|window-NAME [--label 'which code']`): `decider serve` in its own process, or the main window (offscreen) "
        "with its embedded API in one process, every other decision typed into the window and decided with its button "
        "(bench/soak_window.py); VmRSS after every request.\n")
    add(table_head("| model | front end | requests | prompts (words, spread) | prompt tokens (median, max) | answers | RSS after 1 | after 100 | at the end | growth | target | wall time |"))
    for _, r in runs:
        tokens = r.get("prompt_tokens") or {}
        statuses = ", ".join(f"{n}× {code}" for code, n in sorted(r["statuses"].items()))
        done = f"{r['done']} of {r['requests']}" if r["done"] < r["requests"] else str(r["done"])
        ok = ("✅" if r["target_met"] else "❌") if r["done"] > 100 else "— (nothing after 100)"
        front = _labelled(FRONT_ENDS[r.get("mode", "api")], r)
        add(f"| {model_name(r['model'])} | {front} | {done} | 1–{r['max_words']}, {r.get('spread', 'uniform')} | "
            f"{tokens.get('median', '—')}, {tokens.get('max', '—')} | {statuses} | {r['rss_after_first']:.0f} MiB | "
            f"{r['rss_after_100']:.0f} MiB" + ("" if r["done"] > 100 else f" (after {r['done']})") + " | "
            f"{r['rss_last']:.0f} MiB | {r['growth_after_100_mib']:+.1f} MiB | {ok} | "
            f"{r.get('wall_s', 0) / 60:.0f} min |")
    add("")
    for path, _ in runs:
        add(f"![{path.stem}: RSS over requests](docs/benchmarks/{path.stem}.svg)\n")


def _latency_rows(docs: Path, add) -> None:
    runs = _saved(docs, add, "prefill latency", "prefill-latency-*.json")
    if not runs:
        return
    add("**What bounding costs, paired** (`python -m bench.soak --mode latency --model DIR --requests N`): the same "
        "decision, cold state, under each prefill mode, the order rotating per prompt in one process; medians of the "
        "per-prompt ratios. *chunked*: as shipped, the model's plan (engine/runners/prefill_chunks.py: full chunks of the "
        "longest length its DeltaNet memory allows, then one chunk per digit of the rest); *fixed*: 256-token chunks "
        "in base 16 for every model (the split before the plan); *one-shot*: one infer per prompt (unbounded shapes).\n")
    add(table_head("| model | prompts (words) | chunked split | chunked | fixed | one-shot | infers per decision (c / f / o) | chunked / one-shot | fixed / one-shot |"))
    for _, r in runs:
        m, n = r["median_s"], r["mean_infers"]
        split = "{} / base {}".format(*r["chunked_split"])
        add(f"| {model_name(r['model'])} | {r['prompts']} (1–{r['max_words']}) | {split} | {m['chunked']:.3f} s | {m['fixed']:.3f} s | "
            f"{m['one-shot']:.3f} s | {n['chunked']:.1f} / {n['fixed']:.1f} / {n['one-shot']:.1f} | "
            f"**{r['median_ratio_chunked_vs_one_shot']:.2f}×** | {r['median_ratio_fixed_vs_one_shot']:.2f}× |")
    add("")
    add("Where the price comes from (`PERF_COUNT` profiles and infer timings by shape, demo model): every infer whose "
        "input shapes differ from the previous one's pays the CPU plugin's per-node shape preparation — every node "
        "type's time grows, one thread or two alike — which is most of a decision on the 2 MB demo model and little "
        "beside the arithmetic of the 0.8B. Fewer chunks per prompt lowers it; long chunks cost activation memory "
        "at real geometries (1 MiB per token at 0.8B), hence a plan per model.\n")


def section(results: dict, docs: Path = DOCS) -> list[str]:
    lines: list[str] = []
    add = lines.append
    add("## 11. Soak: memory over an evening of varied requests\n")
    add("Requests: decide 50 %, completions 25 %, chat 25 % (half with logprobs), prompt lengths spread over 1..N words, "
        f"seeded (`bench/soak.py`). Target: RSS after all requests ≤ RSS after the first 100 + {TARGET_MIB} MiB.\n")
    _api_rows(docs, add)
    _engine_rows(results, add)
    _latency_rows(docs, add)
    return lines


# ----- command line -----


def save(result: dict, out: Path | None) -> None:
    if out is None:
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path = out if out.suffix == ".json" else out.parent / (out.name + ".json")  # "soak-api-0.8b": no suffix to replace
    tmp = json_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, json_path)
    if "samples" in result:
        json_path.with_suffix(".svg").write_text(api_figure(result))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("api", "window", "engine", "latency"), default="api")
    parser.add_argument("--model", type=Path, default=ROOT / "resources" / "demo-model")
    parser.add_argument("--requests", type=int, default=2000, help="requests (latency: prompts)")
    parser.add_argument("--max-words", type=int, default=1200, help="longest prompt, in words (keep under the context)")
    parser.add_argument("--spread", choices=("uniform", "log"), default="uniform", help="prompt-length distribution")
    parser.add_argument("--max-tokens", type=int, default=8, help="completions and chats answer 1..N tokens")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variant", default="dynamic", choices=("dynamic", "one-pass", "capped", "static"), help="engine mode")
    parser.add_argument("--sample-every", type=int, default=10, help="engine mode: RSS every N requests")
    parser.add_argument("--probe-every", type=int, default=100, help="engine mode: a cold probe decision every N requests")
    parser.add_argument("--prompts", help=argparse.SUPPRESS)  # accepted for the bench orchestrator's common arguments
    parser.add_argument("--out", type=Path, help="write OUT.json (api and window modes: and OUT.svg)")
    parser.add_argument("--label", help="which code this run measured, shown beside its front end and in its figure's title")
    args = parser.parse_args(argv)
    plan = Plan(args.model, args.requests, args.max_words, args.seed, args.spread, args.max_tokens)
    labelled = {"label": args.label} if args.label else {}

    def checkpoint(r: dict) -> None:
        save({**r, **labelled}, args.out)

    if args.mode == "latency":
        result = latency(plan)
    elif args.mode == "window":
        from .soak_window import soak_window

        result = soak_window(plan, checkpoint)
    elif args.mode == "engine":
        result = soak_engine(plan, args.variant, args.sample_every, args.probe_every, checkpoint)
    else:
        result = soak_api(plan, checkpoint)
    result = {**result, **labelled}
    save(result, args.out)
    print(json.dumps({k: v for k, v in result.items() if k not in ("samples", "times_s", "rss_mib", "probe_s")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
