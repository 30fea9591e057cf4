"""BENCHMARKS.md from the stored results (python -m bench report --out BENCHMARKS.md).

Only stored numbers are printed; nothing is measured here. Ratios are medians of ratios taken pair by
pair in the same process (interleaved), with the min–max of those per-pair ratios.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from .common import FORMATS, GEOMETRIES, LENGTHS, RESULTS, ROOT, ir_dir, is_built, hf_dir, gguf_path, model_dir, table_head

ANALYSIS = ROOT / "docs" / "benchmarks" / "analysis.md"
RAW = ROOT / "docs" / "benchmarks" / "results.json"


def load_results() -> dict[str, dict]:
    """The committed results (docs/benchmarks/results.json), overlaid by this machine's newer ones: a
    partial rerun (`bench run --only …`) updates its rows and keeps the rest, each with its date."""
    out = json.loads(RAW.read_text()) if RAW.exists() else {}
    for path in sorted(RESULTS.glob("*.json")):
        if path.name == "prompts.json":
            continue
        out[path.stem.replace("__", "/")] = json.loads(path.read_text())
    return out


# ----- formatting -----
def s(x, unit="s") -> str:
    if not x:
        return "—"
    med, lo, hi = x["median"], x["min"], x["max"]
    if unit == "s":
        if med < 1:
            return f"{med * 1e3:.0f} ms ({lo * 1e3:.0f}–{hi * 1e3:.0f})"
        return f"{med:.2f} s ({lo:.2f}–{hi:.2f})"
    if unit == "ms":
        return f"{med:.1f} ms ({lo:.1f}–{hi:.1f})"
    return f"{med:.2f} ({lo:.2f}–{hi:.2f})"


def ratio(x) -> str:
    if not x:
        return "—"
    return f"**{x['median']:.3f}×** ({x['min']:.3f}–{x['max']:.3f})"


def pct(x) -> str:
    if not x:
        return "—"
    return f"**{(x['median'] - 1) * 100:+.1f} %** ({(x['min'] - 1) * 100:+.1f} to {(x['max'] - 1) * 100:+.1f})"


def mib(v) -> str:
    return "—" if v is None else f"{v:,.0f} MiB"


def ok(value: float | None, target: float) -> str:
    if value is None:
        return "not measured"
    return "met" if value <= target else "**missed**"


def get(results, key):
    r = results.get(key)
    return None if r is None or "error" in r else r


def error_line(results, key) -> str | None:
    r = results.get(key)
    if r and "error" in r:
        return f"`{key}` failed ({r['error']}): " + " / ".join(r.get("log_tail", [])[-2:])
    return None


# ----- machine -----
def _cmd(argv) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout
    except Exception:
        return ""


def machine() -> list[str]:
    lscpu = _cmd(["lscpu"])
    fields = {}
    for line in lscpu.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            fields[k.strip()] = v.strip()
    flags = fields.get("Flags", "").split()
    isa = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "avx_vnni") if f in flags]
    mem = 0
    try:
        mem = int(next(l for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")).split()[1]) / 2**20
    except Exception:
        pass
    return [
        f"- CPU: {fields.get('Model name', platform.processor() or '?')}, {os.cpu_count()} logical CPUs "
        f"({fields.get('Core(s) per socket', '?')} cores/socket, {fields.get('Thread(s) per core', '?')} thread/core, "
        f"{fields.get('Hypervisor vendor', 'bare metal') and ('VM: ' + fields.get('Hypervisor vendor', '')) if fields.get('Hypervisor vendor') else 'no hypervisor reported'}), "
        f"L2 {fields.get('L2 cache', '?')}, L3 {fields.get('L3 cache', '?')}; ISA: {', '.join(isa) or '?'}",
        f"- RAM: {mem:.1f} GiB; OS: {platform.platform()}",
    ]


def versions() -> str:
    from .common import decider_python, tools_python

    code = ("import importlib.metadata as m, json, sys\nout={'python': sys.version.split()[0]}\n"
            "for d in ('openvino','openvino-genai','openvino-tokenizers','optimum-intel','nncf','torch','transformers',"
            "'llama_cpp_python','gguf','numpy','tokenizers'):\n"
            "  try: out[d]=m.version(d)\n  except Exception: pass\nprint(json.dumps(out))")
    rows = []
    for label, python in (("Decider runtime", decider_python()), ("comparison engines", tools_python())):
        try:
            data = json.loads(_cmd([python, "-c", code]) or "{}")
        except json.JSONDecodeError:
            data = {}
        rows.append(f"- {label} (`{python}`): " + ", ".join(f"{k} {v}" for k, v in data.items()))
    return "\n".join(rows)


def runs(results: dict[str, dict]) -> str:
    """Which rows this machine measured and which were kept from the committed results."""
    fresh = {path.stem.replace("__", "/") for path in RESULTS.glob("*.json")}
    kept = sorted(k for k in results if k not in fresh)
    dates = sorted({(r.get("_meta") or {}).get("finished", "")[:10] for r in results.values() if isinstance(r, dict)} - {""})
    when = f"measured {dates[0]}" + (f" to {dates[-1]}" if len(dates) > 1 else "")
    if not kept:
        return f"- Every row {when} on this machine."
    rerun = len(results) - len(kept)
    return (f"- Rows {when}. {rerun} measurement{'s' if rerun != 1 else ''} rerun here; kept from an earlier run "
            f"(docs/benchmarks/results.json, same machine kind and pins): " + ", ".join(f"`{k}`" for k in kept) + ".")


# ----- sections -----
def _rss_rows(size: str):
    """(result key, model, engine, its load seconds) of every engine's peak-RSS run of one size, in table order."""
    for fmt in FORMATS:
        yield f"{size}/{fmt}/rss", f"{size} {fmt}", "Decider", lambda r: r["load_s"]
        for engine in ("sdpa", "pa"):
            yield f"{size}/{fmt}/rss-genai-{engine}", f"{size} {fmt}", f"GenAI {engine.upper()}", lambda r, e=engine: r["load_s"].get(e, 0)
    yield f"{size}/torch/rss", f"{size} fp32", "transformers", lambda r: r["torch_load_s"]
    for kind in ("f16", "q8_0"):
        yield f"{size}/llama-{kind}/rss", f"{size} {kind}", "llama.cpp", lambda r: r["load_s"]


def render(results: dict[str, dict], command: str = "python -m bench all --out BENCHMARKS.md") -> str:
    sizes = [s_ for s_ in GEOMETRIES if any(k.startswith(s_ + "/") for k in results)]
    limits = get(results, "machine/limits") or {}
    lines: list[str] = []
    add = lines.append
    add("# Decider benchmarks\n")
    add("Random-weight Qwen3.5 models at the real 0.8B and 2B geometry (vocabulary 248,320, the real "
        "248,077-id tokenizer), exported by optimum-intel, measured on this machine with Decider and with the "
        "engines a user would pick instead. **Ratios are the claim** (both sides measured in the same process, "
        "interleaved, pair by pair); absolute times are context — they come from a small shared VM. Each cell is "
        "the median with the (min–max) over the repeats. Random weights cost exactly what trained weights cost: "
        "the same shapes, the same kernels.\n")
    add("## Regenerate\n")
    add("```bash\npython -m bench all --out BENCHMARKS.md      # first run: venv + models ~20 min, then ~1 h of measurements\n"
        "python -m bench run --only '0.8b/int8/*' && python -m bench report --out BENCHMARKS.md   # a subset\n```\n")
    add(f"This file was written by `{command}`. Models and raw results live in `~/.cache/decider-bench/` "
        f"(override with `DECIDER_BENCH_HOME`); the merged raw results are copied to `docs/benchmarks/results.json`. "
        "Decider parts run in the interpreter that runs the bench; transformers, optimum-intel, OpenVINO GenAI and "
        "llama-cpp-python parts in `$DECIDER_BENCH_PYTHON`, by default the venv that `python -m bench setup` (run by "
        "`all`) makes from `bench/requirements-tools.txt`. Pass `--device GPU|NPU` to measure another device.\n")
    add("## Machine\n")
    lines.extend(machine())
    add(versions())
    busy = [r["_meta"].get("other_busy_cores") for r in results.values() if isinstance(r, dict) and r.get("_meta", {}).get("other_busy_cores") is not None]
    if busy:
        busy_sorted = sorted(busy)
        add(f"- Other processes during the measurements (cores busy outside the bench, per measurement): median "
            f"{busy_sorted[len(busy_sorted) // 2]:.2f}, max {busy_sorted[-1]:.2f} of {os.cpu_count()}.")
    add(runs(results))
    add("")

    # models
    add("## Models\n")
    add(table_head("| model | parameters | format | weights on disk | built with |"))
    for size in GEOMETRIES:
        g = GEOMETRIES[size]
        if not is_built(hf_dir(size)):
            continue
        info = json.loads((hf_dir(size) / ".complete").read_text() or "{}")
        add(f"| {size} | {info.get('parameters', g.total_params()) / 1e9:.3f} B (hidden {g.hidden}, {g.layers} layers, "
            f"{g.full_layers} full-attention, intermediate {g.intermediate}) | HF fp32 (fp16-exact values) | "
            f"{sum(f.stat().st_size for f in hf_dir(size).glob('*.safetensors')) / 2**30:.2f} GiB | transformers 5.2 `Qwen3_5ForCausalLM` |")
        for fmt in FORMATS:
            d = ir_dir(size, fmt)
            if is_built(d):
                meta = json.loads((d / ".complete").read_text() or "{}")
                cmd = meta.get("command", "").replace(str(model_dir(size)), "…")
                add(f"| {size} | | OpenVINO IR {fmt} | {meta.get('bin_bytes', 0) / 2**30:.2f} GiB | `{cmd}` |")
        for kind in ("f16", "q8_0"):
            p = gguf_path(size, kind)
            if p.exists():
                add(f"| {size} | | GGUF {kind} | {p.stat().st_size / 2**30:.2f} GiB | llama.cpp `convert_hf_to_gguf.py --outtype {kind} --no-mtp` |")
    add("")

    targets: list[tuple[str, str, str, str]] = []

    # 1. latency + overhead
    add("## 1. One-forward decision latency, and Decider's overhead over a bare `infer()`\n")
    add("`decide()` (tokenizer, template, one forward on the last-position graph, state snapshot, constrained "
        "greedy draw, float64 logsumexp over the full vocabulary, top-10 alternatives) against a bare "
        "`InferRequest.infer()` of the same ids on the same compiled model. State reset before each; exact mode "
        "(f32 inference, f32 KV cache). *Paired*: the median of decide/infer over interleaved pairs — on this VM "
        "two identical forwards a second apart differ by up to ~10 %, which this ratio carries. *Direct*: each "
        "decision's own time over the time of the infer() calls inside it — exactly what Decider adds around "
        "the forward (tokenizer, template, snapshot, sampler, logprobs, Python), without the drift; the "
        "target is judged on it.\n")
    add(table_head("| model | prompt | `decide()` | bare `infer()` | overhead | decide / infer (paired) | **decide / its infer() (direct)** |"))
    worst = None
    for size in sizes:
        for fmt in FORMATS:
            r = get(results, f"{size}/{fmt}/latency")
            if not r:
                continue
            for length in LENGTHS:
                e = r["lengths"].get(str(length))
                if not e:
                    continue
                direct = e.get("direct_ratio")
                add(f"| {size} {fmt} | {length} | {s(e['decide_s'])} | {s(e['infer_s'])} | {s(e['overhead_ms'], 'ms')} | "
                    f"{ratio(e['ratio'])} | {ratio(direct)} |")
                basis = direct or e["ratio"]
                if worst is None or basis["median"] > worst[0]:
                    worst = (basis["median"], f"{size} {fmt}, {length} tokens", e["ratio"]["median"])
    add("")
    if worst:
        targets.append(("decide() vs bare infer() ≤ 1.03×",
                        f"worst median {worst[0]:.3f}× direct ({worst[1]}; paired {worst[2]:.3f}×)", ok(worst[0], 1.03), "§1"))
    parts = [(k, get(results, k)) for k in results if k.endswith("/latency") and get(results, k)]
    if parts:
        add("Where the decision's time goes (median seconds per phase, from `DecisionResult.timings`):\n")
        add(table_head("| model | prompt | tokenize | prefill (forward + snapshot) | sample + logprobs |"))
        for key, r in parts:
            for length, e in r["lengths"].items():
                p = e["parts"]
                add(f"| {key.rsplit('/', 1)[0].replace('/', ' ')} | {length} | {p.get('tokenize_s', 0) * 1e3:.1f} ms | "
                    f"{p.get('prefill_s', 0):.3f} s | {p.get('sample_s', 0) * 1e3:.1f} ms |")
        add("")

    # exact vs fast
    fast_rows = [(k, get(results, k)) for k in results if k.endswith("/fast") and get(results, k)]
    if fast_rows:
        add("Exact (f32) vs fast (`--fast`, the plugin's default precision) decisions, 256 tokens:\n")
        add(table_head("| model | exact | fast | fast / exact | precisions | max Δ option logprob | same choice |"))
        for k, r in fast_rows:
            add(f"| {k.rsplit('/', 1)[0].replace('/', ' ')} | {s(r['exact_s'])} | {s(r['fast_s'])} | {ratio(r['ratio'])} | "
                f"{r['exact_precision']} / {r['fast_precision']} | {r['max_logprob_drift']:.4f} nats | {r['same_choice']} |")
        add("")

    # 2. logprobs
    add("## 2. Logprobs on vs off\n")
    add("`generate()` on a 64-token prompt, greedy with Qwen3.5's default penalties, `top_logprobs=None` vs `5` "
        "(the chosen token's logprob plus 5 alternatives per token, exact over the full vocabulary). Many short "
        "generations, alternating off/on (this VM drifts by several % over seconds, more than the 1 % in question); "
        "identical tokens are asserted. *Pooled*: the median of every decode step with logprobs over the median of "
        "every step without. *Host work*: the logprob computation timed on its own; the engine runs it while the "
        "device computes the next token, so it can only show in the step where host and device share the cores "
        "(CPU).\n")
    add("| model | generations × tokens | on/off (whole generation) | median step off → on | on/off (per pair) | "
        "**on/off (pooled steps)** | host work per token |")
    add("|---|---|---|---|---|---|---|")
    for k in results:
        r = get(results, k)
        if k.endswith("/logprobs") and r:
            if "pooled_step_ratio" not in r:  # an older run's shape
                continue
            pooled = r["pooled_step_ratio"]
            add(f"| {k.rsplit('/', 1)[0].replace('/', ' ')} | {r['generations']} × {r['generated_tokens']} | "
                f"{pct(r['ratio'])} | {r['step_off_ms']['median']:.1f} → {r['step_on_ms']['median']:.1f} ms | "
                f"{pct(r['step_ratio'])} | **{(pooled - 1) * 100:+.2f} %** | {s(r.get('direct_cost_ms'), 'ms')} |")
            measured = (f"{(pooled - 1) * 100:+.2f} % per decode step (pooled), "
                        f"{(r['ratio']['median'] - 1) * 100:+.2f} % whole generation")
            targets.append((f"logprobs on vs off ≤ 1 % ({k.split('/')[0]})", measured, ok(pooled, 1.01), "§2"))
    add("")

    # 3. head
    add("## 3. Last-position head vs all-position logits (1,024-token prompt)\n")
    add("Decider's load-time graph edit (`engine/graphs/logits.py`) against the unmodified optimum export, same compile "
        "properties. Time: both compiled in one process, interleaved. Memory: each graph alone in a fresh process, "
        "one 1,024-token forward (peak RSS = VmHWM, includes the compiled model).\n")
    add(table_head("| model | last-position | all positions | last / all | peak RSS last | peak RSS all | logits output | max \\|Δ\\| last row |"))
    for size in sizes:
        for fmt in FORMATS:
            r = get(results, f"{size}/{fmt}/head")
            if not r:
                continue
            ml, ma = get(results, f"{size}/{fmt}/headmem-last") or {}, get(results, f"{size}/{fmt}/headmem-all") or {}
            add(f"| {size} {fmt} | {s(r['last_s'])} | {s(r['all_s'])} | {ratio(r['ratio'])} | {mib(ml.get('peak_rss_mib'))} | "
                f"{mib(ma.get('peak_rss_mib'))} | {r['all_output_mib']:,.0f} MiB vs 1 MiB | {r['max_abs_diff']:.1e} |")
    add("")

    # 4. warm vs cold
    add("## 4. Warm decision with a shared 1,000-token context vs cold\n")
    add("Cold: state and snapshots cleared, the whole prompt (context + question) computed. Warm: the next "
        "decision with the same context and a different question restores the snapshot taken after the context "
        "and computes only the question.\n")
    add(table_head("| model | cold | warm | warm / cold | tokens cold → warm (reused) |"))
    for k in results:
        r = get(results, k)
        if k.endswith("/warm") and r:
            add(f"| {k.rsplit('/', 1)[0].replace('/', ' ')} | {s(r['cold_s'])} | {s(r['warm_s'])} | {ratio(r['ratio'])} | "
                f"{r['cold_tokens']} → {r['warm_computed_tokens']} ({r['warm_reused_tokens']}) |")
            targets.append((f"warm / cold ≤ 0.2× ({k.split('/')[0]})", f"{r['ratio']['median']:.3f}×", ok(r['ratio']['median'], 0.2), "§4"))
    add("")

    # 5. GenAI
    add("## 5. OpenVINO GenAI `LLMPipeline` vs Decider (same IR, same device, 256-token prompt)\n")
    add("GenAI generates one token from the same ids (an `ov.Tensor`, no tokenizer time; prefix caching off); "
        "Decider runs a whole `decide()` and also returns full-vocabulary logprobs. *exact*: every engine compiled "
        "with Decider's exact properties (f32 inference and KV cache, no dynamic quantisation) — the same arithmetic; "
        "*fast*: Decider `--fast` vs GenAI's defaults.\n")
    add(table_head("| model | mode | Decider | GenAI SDPA | GenAI PagedAttention | Decider / SDPA | Decider / PA | bare `infer()` / SDPA |"))
    best_genai = None
    for size in sizes:
        for fmt in FORMATS:
            for mode in ("exact", "fast"):
                r = get(results, f"{size}/{fmt}/genai-{mode}")
                if not r:
                    continue
                sec, rat = r.get("seconds", {}), r.get("ratio", {})
                add(f"| {size} {fmt} | {mode} | {s(sec.get('decider'))} | {s(sec.get('sdpa'))} | {s(sec.get('pa'))} | "
                    f"{ratio(rat.get('sdpa'))} | {ratio(rat.get('pa'))} | {ratio(r.get('infer_ratio', {}).get('sdpa'))} |")
                for name, err in r.get("errors", {}).items():
                    add(f"| | | {name} failed: {err} | | | | | |")
                for name in ("sdpa", "pa"):
                    if name in rat:
                        v = rat[name]["median"]
                        if best_genai is None or v > best_genai[0]:
                            best_genai = (v, f"{size} {fmt} {mode} vs {name.upper()}")
    add("")
    if best_genai:
        targets.append(("Decider / GenAI ≤ 1.0×", f"worst median {best_genai[0]:.3f}× ({best_genai[1]})", ok(best_genai[0], 1.0), "§5"))

    # 6. transformers
    add("## 6. transformers (torch CPU, fp32) on the same weights\n")
    add("The checkpoint's weights are float16-exact, so the fp16 IR (computed in f32 by Decider) and torch fp32 hold "
        "identical weights. A transformers decision: the same ids, one forward with `logits_to_keep=1`, float64 "
        "log-softmax, the option letters. Both in one process, interleaved.\n")
    add(table_head("| model | prompt | transformers | Decider (fp16 IR, exact) | Decider / transformers | same choice | max Δ probability | max Δ option logprob |"))
    for size in sizes:
        r = get(results, f"{size}/torch/decision")
        if not r:
            continue
        for length, e in r["lengths"].items():
            add(f"| {size} | {length} | {s(e['torch_s'])} | {s(e.get('decider_s'))} | {ratio(e.get('ratio'))} | "
                f"{e.get('same_choice', '—')} | {e.get('max_probability_diff', float('nan')):.2e} | {e.get('max_logprob_diff', float('nan')):.2e} |")
    add("")

    # 7. llama.cpp
    add("## 7. llama.cpp (llama-cpp-python) on a GGUF of the same weights\n")
    add(table_head("| model | GGUF | prompt | llama.cpp | Decider (IR of the same weights, exact) | Decider / llama.cpp | same choice | max Δ probability |"))
    why_lines = []
    for size in sizes:
        for kind, ref in (("f16", "fp16"), ("q8_0", "int8")):
            r = get(results, f"{size}/llama-{kind}/decision")
            if r:
                for length, e in r["lengths"].items():
                    add(f"| {size} | {kind} (vs IR {ref}) | {length} | {s(e['llama_s'])} | {s(e.get('decider_s'))} | "
                        f"{ratio(e.get('ratio'))} | {e.get('same_choice', '—')} | {e.get('max_probability_diff', float('nan')):.2e} |")
            err = error_line(results, f"{size}/llama-{kind}/decision")
            if err:
                why_lines.append(err)
        w = get(results, f"{size}/llama/why")
        if w and not w.get("runs"):
            why_lines.append(f"{size}: {w.get('reason')}")
    add("")
    for line in why_lines:
        add(f"- llama.cpp could not run: {line}")
    if why_lines:
        add("")

    # 8. decode and memory
    add("## 8. Decode speed (128-token think generation) and peak memory per engine\n")
    add(table_head("| model | Decider decode | per step | bare one-token `infer()` | Python per step |"))
    for size in sizes:
        for fmt in FORMATS:
            r = get(results, f"{size}/{fmt}/decode")
            if r:
                add(f"| {size} {fmt} | {s(r['tokens_per_s'], 'x').replace(' (', ' tok/s (')} | {s(r['step_ms'], 'ms')} | "
                    f"{s(r['bare_step_ms'], 'ms')} | {r['step_overhead_ms']:.1f} ms |")
    add("")
    from .report_paired import section as paired_section
    from .report_paired import targets as paired_targets

    # llama.cpp's decode is compared only paired (same process, same sampling, interleaved): its own
    # unpaired timing (llama-*/rss "decode") ran at another time with plain argmax, so it is not shown.
    lines.extend(paired_section(results, sizes, limits.get("bandwidth_gbps") if limits else None))
    targets.extend(paired_targets(results, sizes))
    add("Peak RSS (VmHWM) of each engine in its own process: load, then one 256-token decision.\n")
    add(table_head("| model | engine | peak RSS | load |"))
    for size in sizes:
        for key, model, engine, load in _rss_rows(size):
            r = get(results, key)
            if r:
                add(f"| {model} | {engine} | {mib(r['peak_rss_mib'])} | {load(r):.1f} s |")
    add("")

    # 9. physical limits
    add("## 9. Against the machine's physical limits\n")
    if limits:
        peak, bw = limits["matmul_peak_gflops"], limits["bandwidth_gbps"]
        add(f"Measured: f32 matmul peak **{peak:.0f} GFLOP/s** (numpy 2048³ {limits['numpy_matmul_gflops']:.0f}; OpenVINO "
            + ", ".join(f"{k} {v:.0f}" for k, v in limits["openvino_matmul_gflops"].items())
            + f"; OpenVINO bf16 {limits['openvino_matmul_bf16_gflops']:.0f} for reference), memory bandwidth "
            f"**{bw:.1f} GB/s** (1 GiB: numpy copy {limits['numpy_copy_gbps']:.1f}, OpenVINO stream {limits['openvino_stream_gbps']:.1f}, "
            f"numpy read {limits.get('numpy_read_gbps', float('nan')):.1f}, OpenVINO ReduceSum read {limits.get('openvino_read_gbps', float('nan')):.1f}).\n")
        add("Prefill FLOPs = 2 × layer weights × tokens + the head for one position + causal attention + the "
            "DeltaNet state updates. Decode bytes = the IR's weight file (every weight is read once per token, "
            "the tied embedding as the head).\n")
        add(table_head("| model | prompt | FLOPs | bare forward | achieved | of f32 peak |"))
        for size in sizes:
            g = GEOMETRIES[size]
            for fmt in FORMATS:
                r = get(results, f"{size}/{fmt}/latency")
                if not r:
                    continue
                for length, e in r["lengths"].items():
                    flops = g.prefill_flops(int(length))
                    t = e["infer_s"]["median"]
                    add(f"| {size} {fmt} | {length} | {flops / 1e9:,.0f} G | {t:.3f} s | {flops / t / 1e9:.0f} GFLOP/s | **{flops / t / 1e9 / peak * 100:.0f} %** |")
        add("")
        add(table_head("| model | weight bytes | bare decode step | bytes / step time | of bandwidth |"))
        for size in sizes:
            for fmt in FORMATS:
                r = get(results, f"{size}/{fmt}/decode")
                d = ir_dir(size, fmt)
                if not r or not is_built(d):
                    continue
                nbytes = json.loads((d / ".complete").read_text()).get("bin_bytes", 0)
                step = r["bare_step_ms"]["median"] / 1e3
                add(f"| {size} {fmt} | {nbytes / 2**30:.2f} GiB | {step * 1e3:.1f} ms | {nbytes / step / 1e9:.1f} GB/s | **{nbytes / step / 1e9 / bw * 100:.0f} %** |")
        add("")
    else:
        add("(not measured)\n")

    from .soak import section as soak_section
    from .report_static import section as static_section
    from .report_structured import section as structured_section
    from .report_vision import section as vision_section
    from .report_capture import section as capture_section
    from .report_budgets import section as budgets_section

    lines.extend(static_section(results))
    lines.extend(soak_section(results))
    lines.extend(structured_section(results))
    lines.extend(vision_section(results))
    lines.extend(capture_section(results))
    lines.extend(budgets_section(results))

    # targets
    add("## Targets\n")
    add(table_head("| target | measured (median) | status | where |"))
    for t in targets:
        add(f"| {t[0]} | {t[1]} | {t[2]} | {t[3]} |")
    add("")
    failures = [error_line(results, k) for k in results]
    failures = [f for f in failures if f and "llama" not in f]
    if failures:
        add("Measurements that failed in this run:\n")
        for f in failures:
            add(f"- {f}")
        add("")
    if ANALYSIS.exists():
        add(ANALYSIS.read_text().strip() + "\n")
    return "\n".join(lines)


def save_raw(results: dict[str, dict]) -> None:
    """Commit-able copy of every result the report was made from (the next partial rerun builds on it)."""
    from .soak import figures

    RAW.parent.mkdir(parents=True, exist_ok=True)
    RAW.write_text(json.dumps(results, indent=1, default=str))
    for name, text in figures(results).items():
        (RAW.parent / name).write_text(text)
