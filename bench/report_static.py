"""The report section for the static-shape path and the NPU plugin path (bench/w_static.py's results)."""

from __future__ import annotations

from .common import table_head


def _cell(x: dict | None, unit: str = "s", scale: float = 1.0) -> str:
    if not x:
        return "—"
    return f"{x['median'] * scale:.3f} {unit} ({x['min'] * scale:.3f}–{x['max'] * scale:.3f})"


def _ratio(x: dict | None) -> str:
    return f"**{x['median']:.2f}×** ({x['min']:.2f}–{x['max']:.2f})" if x else "—"


def _keys(results: dict, suffix: str) -> list[str]:
    return sorted(k for k, v in results.items() if k.endswith(suffix) and isinstance(v, dict) and "error" not in v)


def _rows(label: str, chunks: str, compare: dict, add) -> None:
    for length, e in compare["prefill"].items():
        add(f"| {label} | {chunks} | prefill {length} | {_cell(e['static_s'])} | {_cell(e['dynamic_s'])} | {_ratio(e['ratio'])} |")
    d = compare["decode_step"]
    add(f"| {label} | {chunks} | decode step | {_cell(d['static_s'], 'ms', 1e3)} | {_cell(d['dynamic_s'], 'ms', 1e3)} | {_ratio(d['ratio'])} |")


def section(results: dict) -> list[str]:
    lines: list[str] = []
    add = lines.append
    add("## 10. Static shapes (the NPU path) against the dynamic export\n")
    add("The static runner (`engine/runners/static.py`) compiles the export made stateless in a few fixed shapes "
        "(chunks of N new tokens over a KV window of 1,152 slots, caches on the host) and cuts a prompt greedily "
        "into those sizes, a segment's last token always alone (only the one-token variant has a logits output: "
        "NPUW never writes a multi-token variant's logits). Over prompt lengths 1..1,152 that costs one more "
        "one-token infer per segment on average, but lengths that are multiples of 8 pay most (with 64,8,1: 64 "
        "tokens run as 15 infers, 256 as 18). *static / dynamic* is the median of interleaved pairs in one process; the decode step is "
        "the median of 16 steps after a 64-token prompt. `static-npu` runs the static runner through the NPU plugin "
        "(NPUW); on a machine without an NPU that is `DECIDER_NPUW_DEVICES=CPU` (NPUW's partitions on the CPU, "
        "f32), compared with the CPU's dynamic runner.\n")
    paths, npu = _keys(results, "/static-paths"), _keys(results, "/static-npu")
    if not paths and not npu and not _keys(results, "/prefill-chunks"):
        add("(not measured)\n")
        return lines
    add(table_head("| model | chunks | what | static | dynamic | static / dynamic |"))
    for key in paths:
        r = results[key]
        for chunks, c in r["chunks"].items():
            _rows(f"{key.rsplit('/', 1)[0]} {r['device']}", chunks, c, add)
    for key in npu:
        r = results[key]
        where = f"NPUW on {r['npuw_devices']}" if r.get("npuw_devices") else r["device"]
        _rows(f"{key.rsplit('/', 1)[0]} NPU plugin ({where})", r["chunks"], r["vs_cpu_dynamic"], add)
    add("")
    if paths:
        add(table_head("| model | compile: dynamic | compile: static (all variants) | max \\|Δ logprob\\| static vs dynamic |"))
        for key in paths:
            r = results[key]
            compiles = ", ".join(f"{k}: {c['compile_s']:.1f} s" for k, c in r["chunks"].items())
            worst = max(c["max_abs_dlogprob"] for c in r["chunks"].values())
            add(f"| {key.rsplit('/', 1)[0]} | {r['dynamic_compile_s']:.1f} s | {compiles} | {worst:.1e} |")
        add("")
    if npu:
        add(table_head("| model | device | compile, empty CACHE_DIR | compile, cached | first decision after load | load → first decision (cached) |"))
        for key in npu:
            r = results[key]
            cold, warm = r["load"]["cold"], r["load"]["cached"]
            add(f"| {key.rsplit('/', 1)[0]} | {r['device']} | {cold['compile_s']:.1f} s | {warm['compile_s']:.1f} s | "
                f"{cold['first_decision_s']:.3f} s | {warm['load_to_decision_s']:.1f} s |")
        add("")
    chunks = _keys(results, "/prefill-chunks")
    if chunks:
        add("The dynamic runner's chunked prefill (chunk lengths from a fixed set, as in each row; it bounds memory: section 11) "
            "against one infer per prompt, at lengths that need several chunks:\n")
        add(table_head("| model | prompt | chunks | chunked | one infer | chunked / one |"))
        for key in chunks:
            for length, e in results[key]["prefill"].items():
                chunks = "+".join(map(str, e.get("chunks", [])))
                add(f"| {key.rsplit('/', 1)[0]} | {length} | {chunks} | {_cell(e['bounded_s'])} | {_cell(e['one_s'])} | {_ratio(e['ratio'])} |")
        add("")
    add("On an NPU: `python -m bench run --sizes 0.8b --device NPU --only '*/static-npu' && python -m bench report`.\n")
    return lines
