"""The soak section (bench/w_soak.py's results): a table and an SVG of RSS over requests, one line per variant."""

from __future__ import annotations

COLORS = {"one-pass": "#c0392b", "capped": "#e67e22", "dynamic": "#2471a3", "static": "#1e8449"}
TARGET_MIB = 150  # RSS after all requests ≤ RSS after the first 100 + this


def svg(series: dict[str, list[tuple[int, float]]], title: str, width: int = 640, height: int = 320) -> str:
    """A line chart without a plotting library: the curves are all this file needs."""
    left, right, top, bottom = 60, 110, 30, 40
    xs = [x for points in series.values() for x, _ in points] or [0, 1]
    ys = [y for points in series.values() for _, y in points] or [0, 1]
    x_max, y_min, y_max = max(xs) or 1, 0.0, max(ys) * 1.1 or 1
    sx = lambda x: left + (width - left - right) * x / x_max  # noqa: E731
    sy = lambda y: height - bottom - (height - top - bottom) * (y - y_min) / (y_max - y_min)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="13">{title}</text>',
           f'<line x1="{left}" y1="{sy(0)}" x2="{width - right}" y2="{sy(0)}" stroke="#888"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{sy(0)}" stroke="#888"/>']
    for i in range(5):
        y = y_max * i / 4
        out.append(f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.0f}</text>')
        x = x_max * i / 4
        out.append(f'<text x="{sx(x):.1f}" y="{height - bottom + 16}" text-anchor="middle">{x:.0f}</text>')
    out.append(f'<text x="{(left + width - right) / 2}" y="{height - 6}" text-anchor="middle">requests</text>')
    out.append(f'<text x="14" y="{(top + height - bottom) / 2}" transform="rotate(-90 14 {(top + height - bottom) / 2})" text-anchor="middle">RSS (MiB)</text>')
    for i, (name, points) in enumerate(series.items()):
        color = COLORS.get(name.split()[-1], "#555")
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        out.append(f'<text x="{width - right + 8}" y="{top + 16 * i + 10}" fill="{color}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out)


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


def section(results: dict) -> list[str]:
    lines: list[str] = []
    add = lines.append
    add("## 11. Soak: memory over an evening of varied requests\n")
    by_model = _by_model(results)
    if not by_model:
        add("(not measured)\n")
        return lines
    add("One process per variant runs the same sequence of requests (decisions 50 %, completions 30 %, chats 20 %; "
        "prompt lengths uniform over 1..N words) through the engine service; VmRSS every 10 requests; every 100 "
        "requests a fixed decision runs cold and is timed. Target: RSS after all requests ≤ RSS after the first "
        f"100 + {TARGET_MIB} MiB. Variants: *dynamic* (as shipped: prefill chunked into power-of-two lengths), "
        "*one-pass* (each prompt in one infer, as before: a new prompt length is a new shape for the CPU plugin), "
        "*capped* (one-pass with `CPU_RUNTIME_CACHE_CAPACITY=0`), *static* (the static-shape runner). A soak cut "
        "short shows how far it got in *requests*. *probe / one-pass*: the cold probe decision's median against "
        "the one-pass variant's.\n")
    add("| model | variant | requests | RSS after 100 | RSS at the end | growth | target | probe decision (median, min–max) | probe / one-pass |")
    add("|---|---|---|---|---|---|---|---|---|")
    for model, variants in by_model.items():
        base = (variants.get("one-pass") or {}).get("probe_summary")
        for variant, r in variants.items():
            p = r.get("probe_summary")
            ratio = f"{p['median'] / base['median']:.2f}×" if p and base else "—"
            ok = "✅" if r["growth_after_100_mib"] <= TARGET_MIB else "❌"
            add(f"| {model} | {variant} | {r['requests']} | {r['rss_after_100_mib']:.0f} MiB | {r['rss_final_mib']:.0f} MiB | "
                f"{r['growth_after_100_mib']:+.0f} MiB | {ok} | "
                + (f"{p['median'] * 1e3:.0f} ms ({p['min'] * 1e3:.0f}–{p['max'] * 1e3:.0f})" if p else "—") + f" | {ratio} |")
    add("")
    for model in by_model:
        add(f"![RSS over requests, {model}](docs/benchmarks/{figure_name(model)})\n")
    return lines
