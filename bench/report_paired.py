"""The paired rows (bench/w_paired.py, w_genai.py --engines decider,sdpa, w_profile.py): decode and
think-mode decisions against llama.cpp q8_0, the one-forward decision against GenAI SDPA, and where a
decode step's time goes. Every ratio is a median of per-round ratios from one process."""

from __future__ import annotations

from .common import table_head
from .step_profile import kind_of


QUIET_CORES = 0.5  # other processes' load above which a row's absolute times are not the machine's


def _m(x, unit: str = "ms", scale: float = 1.0, digits: int = 1) -> str:
    if not x:
        return "—"
    return f"{x['median'] * scale:.{digits}f} {unit} ({x['min'] * scale:.{digits}f}–{x['max'] * scale:.{digits}f})"


def _r(x) -> str:
    return f"**{x['median']:.2f}×** ({x['min']:.2f}–{x['max']:.2f})" if x else "—"


def _date(r: dict) -> str:
    return r.get("_meta", {}).get("finished", "?")[:16]


def _busy(r: dict) -> str:
    busy = r.get("_meta", {}).get("other_busy_cores")
    return f"{busy:.2f}" if busy is not None else "?"


def _threads(r: dict) -> str:
    threads = r.get("threads")
    if threads == 1:
        return "one thread each (a loaded machine stalls every join of two threads, see bench/w_paired.py)"
    return f"{threads} threads each" if threads else "every core"


def section(results: dict, sizes: list[str], bandwidth_gbps: float | None) -> list[str]:
    lines: list[str] = []
    add = lines.append
    for size in sizes:
        decode = results.get(f"{size}/paired/decode")
        think = results.get(f"{size}/paired/think")
        forward = results.get(f"{size}/paired/forward")
        profile = results.get(f"{size}/paired/profile")
        if not any(r and "error" not in r for r in (decode, think, forward, profile)):
            continue
        add(f"### Paired against llama.cpp q8_0 and GenAI SDPA ({size}, int8 IR / q8_0 GGUF of the same weights)\n")
        add("`python -m bench run --sizes " + size + " --only machine/limits '" + size + "/paired/*' --max-busy 0` — "
            "each row one process, the engines interleaved round by round (order alternating), ratios per round. "
            "Other processes' load is given per row (cores busy outside the bench, of "
            "2): absolute times on a loaded machine are long; the ratios are what a row says.\n")
        if decode and "error" not in decode:
            samp = decode["sampling"]
            add(f"**Decode** ({decode['tokens']}-token generation after the {decode['prompt_tokens']}-token think prompt, same "
                f"sampling for both engines — temperature {samp['temperature']}, top-k {samp['top_k']}, top-p {samp['top_p']}, "
                f"presence {samp['presence_penalty']}, frequency {samp['frequency_penalty']}, window 64 — each with its own "
                f"sampler; {_threads(decode)}; measured {_date(decode)}, other load {_busy(decode)} cores):\n")
            add(table_head("| engine | per step | tokens/s | step vs llama.cpp q8_0 | step share of the memory bound |"))
            busy = decode.get("_meta", {}).get("other_busy_cores")
            if busy is not None and busy > QUIET_CORES:
                # the bandwidth (§9) was measured on a quiet machine: a step slowed by others' load is no share of it
                bandwidth_gbps = None
            bound_ms = decode["weight_bytes"] / (bandwidth_gbps * 1e9) * 1e3 if bandwidth_gbps else None
            for name, label in (("exact", "Decider exact (f32)"), ("fast", "Decider `--fast`"), ("llama", "llama.cpp q8_0")):
                step = decode["step_ms"][name]
                ratio = _r(decode["ratio_vs_llama"].get(name)) if name != "llama" else "1"
                share = f"{bound_ms / step['median'] * 100:.0f} %" if bound_ms and name != "llama" else (
                    f"{decode['gguf_bytes'] / (bandwidth_gbps * 1e9) * 1e3 / step['median'] * 100:.0f} %" if bandwidth_gbps else "—")
                add(f"| {label} | {_m(step)} | {_m(decode['tokens_per_s'][name], 'tok/s', digits=2)} | {ratio} | {share} |")
            if busy is not None and busy > QUIET_CORES:
                add(f"\nNo share of the memory bound: other processes kept {busy:.1f} cores busy during this row, so its "
                    "steps are not the machine's (§9's bandwidth is a quiet machine's).")
            if bound_ms:
                add(f"\nThe memory bound: the weights read once per step ({decode['weight_bytes'] / 2**30:.2f} GiB IR, "
                    f"{decode['gguf_bytes'] / 2**30:.2f} GiB GGUF) at the measured {bandwidth_gbps:.1f} GB/s: "
                    f"{bound_ms:.1f} ms for the IR.")
            add("")
        if think and "error" not in think:
            add(f"**Think-mode decision** (reasoning budget spent, the block closed by force, the answer position read; "
                f"{think['prompt_tokens']}-token prompt; {_threads(think)}; measured {_date(think)}, other load {_busy(think)} cores; "
                f"Decider fast-reasoning/exact-answer: {think['fast_reasoning']}):\n")
            add(table_head("| reasoning tokens | Decider exact | llama.cpp q8_0 | Decider exact vs llama.cpp | fast reasoning, exact answer | vs llama.cpp |"))
            for budget in sorted((k for k in think if k.isdigit()), key=int):
                row = think[budget]
                sec, ratio = row["seconds"], row["ratio_vs_llama"]
                add(f"| {budget} | {_m(sec['exact'], 's', digits=2)} | {_m(sec['llama'], 's', digits=2)} | {_r(ratio.get('exact'))} | "
                    f"{_m(sec.get('fast'), 's', digits=2)} | {_r(ratio.get('fast'))} |")
            add("")
        if forward and "error" not in forward:
            sec = forward["seconds"]
            ratio = forward.get("ratio", {}).get("sdpa")
            bare = forward.get("infer_ratio", {}).get("sdpa")
            add(f"**One-forward decision** ({forward['length']}-token prompt, exact properties for both; measured "
                f"{_date(forward)}, other load {_busy(forward)} cores): Decider `decide()` {_m(sec.get('decider'), 's', digits=3)}, "
                f"bare `infer()` on Decider's compiled model {_m(sec.get('infer'), 's', digits=3)}, GenAI SDPA one-token "
                f"generation {_m(sec.get('sdpa'), 's', digits=3)}: decide vs SDPA {_r(ratio)}, bare infer vs SDPA {_r(bare)}.\n")
        if profile and "error" not in profile:
            add(f"**Where a decode step goes** (`bench/w_profile.py`: OpenVINO per-node counters, PERF_COUNT=YES, "
                f"{profile['steps']} steps after {profile['prompt_tokens']} tokens, medians; the counters' sum exceeds the wall "
                f"time when threads wait on a loaded machine, so read the shares; measured {_date(profile)}, other load "
                f"{_busy(profile)} cores):\n")
            add("| compilation | step wall | " + " | ".join(("matmul (weights)", "deltanet", "conversion", "attention", "state read/assign", "other")) + " |")
            add("|---|---|---|---|---|---|---|---|")
            for mode in ("exact", "fast"):
                p = profile.get(mode)
                if not p:
                    continue
                kinds: dict[str, float] = {}
                for node_type, ms in p["by_type_ms"].items():  # regrouped here: the grouping may have changed
                    kinds[kind_of(node_type)] = kinds.get(kind_of(node_type), 0.0) + ms
                total = sum(kinds.values()) or 1.0
                cells = [f"{kinds.get(k, 0.0) / total * 100:.0f} %" for k in
                         ("matmul (weights)", "deltanet", "conversion", "attention", "state read/assign", "other")]
                add(f"| {mode} ({p['runtime'].get('KV_CACHE_PRECISION', '?')} KV, dynamic quantisation group "
                    f"{p['runtime'].get('DYNAMIC_QUANTIZATION_GROUP_SIZE', '?')}) | {_m(p['step_wall_ms'])} | " + " | ".join(cells) + " |")
            variants = profile.get("variants", {})
            if variants:
                add("\nCompile variants of the same IR, one decode step each in turn (interleaved), against the exact "
                    "compilation the runner uses; `kernels` is the projections' runtime precision / kernel:\n")
                add(table_head("| variant | step | step / exact | kernels |"))
                for name, v in variants.items():
                    add(f"| {name} | {_m(v['step_ms'])} | {_r(v['ratio'])} | {', '.join(v['fc_kernels'])} |")
            host = profile.get("host_ms", {})
            if host:
                add("\nHost work per step on the 248k-wide logits (each piece timed alone): "
                    + ", ".join(f"{k} {v['median']:.2f} ms" for k, v in host.items()) + ".")
            add("")
    return lines



def targets(results: dict, sizes: list[str]) -> list[tuple[str, str, str, str]]:
    """The issue's paired targets: (target, measured, status, where)."""
    rows = []

    def status(value: float, limit: float) -> str:
        return "met" if value <= limit else "**missed**"

    for size in sizes:
        decode = results.get(f"{size}/paired/decode")
        if decode and "error" not in decode:
            fast = decode["ratio_vs_llama"]["fast"]["median"]
            rows.append((f"fast decode step ≤ 0.85× llama.cpp q8_0 ({size})", f"{fast:.2f}×", status(fast, 0.85), "§8"))
        think = results.get(f"{size}/paired/think")
        if think and "error" not in think and "512" in think:
            ratio = think["512"]["ratio_vs_llama"]
            name = "fast" if "fast" in ratio else "exact"
            value = ratio[name]["median"]
            what = "fast reasoning, exact answer" if name == "fast" else "Decider exact (fast reasoning not measured)"
            rows.append((f"think decision, 512 reasoning tokens ≤ 0.85× llama.cpp q8_0 ({size})", f"{value:.2f}× ({what})",
                         status(value, 0.85), "§8"))
        forward = results.get(f"{size}/paired/forward")
        if forward and "error" not in forward and "sdpa" in forward.get("ratio", {}):
            value = forward["ratio"]["sdpa"]["median"]
            rows.append((f"one-forward decision ≤ 1.00× GenAI SDPA, paired ({size})", f"{value:.3f}×", status(value, 1.0), "§8"))
    return rows
