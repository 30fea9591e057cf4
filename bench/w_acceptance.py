"""Drafted decoding at a set acceptance, measured end to end at any geometry: what the loop costs, not a formula.

    python -m bench.w_acceptance --model IR_DIR --out result.json [--threads 1] [--tokens 128] [--rounds 3]
                                 [--acceptance 0.5,0.65,0.8] [--drafts 2,3] [--commits lazy,snapshot]

Random weights accept nothing a real drafter proposes, so the drafts here come from an oracle: the greedy plain
continuation, each draft right with probability `a` (seeded; a wrong one is the right token + 1). The drafted loop
(engine/generation/speculative.py) then runs as it does for a user — verifies at its fixed width, rollbacks, the state
moving between compiles — and its tokens are checked equal to plain decoding's. Per setting: tokens per second
relative to plain decoding in the same round (rounds interleave every setting), forwards, measured acceptance.

An MTP head's drafts cost a head step each. Where `--checkpoint` is given the runners carry a head (random weights, in
the arithmetic and over the vocabulary the runner drafts with; made from the checkpoint as bench/mtp_costs does) and
every setting also runs as `mtp`: the runner's head takes its real steps inside the loop — over the window of the
exact model's hidden states, chained as it drafts for a user — and the oracle then decides which of its drafts are
right. Measured, not composed: a head step costs more inside the loop than back to back (right after a verify its
weights and code are out of the caches: 0.8B, 1 thread, 32,768 ids, ~9.5 ms against ~5.5 back to back), so the
ninth pass's `with_mtp` (drafts × a back-to-back head step added to the loop's time) was optimistic. The
back-to-back step is still reported (`mtp_head_step`).
`--commits` compares the verify compile's lazy commits with snapshots and restores (DECIDER_VERIFY_GRAPH=snapshot).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from .common import finish, log, stamp, summary, random_prompt
from .w_paired import decider_runner


def _oracle(reference: list[int], prompt_length: int, acceptance: float, drafts: int, seed: int):
    from decider.engine.generation.drafts import PromptLookup

    class Oracle(PromptLookup):
        """The reference continuation, each draft right with probability `acceptance`."""

        def __init__(self) -> None:
            super().__init__(max_draft=drafts)
            self.rng = np.random.default_rng(seed)
            self.proposed = 0

        def propose(self, limit: int) -> list[int]:
            done = len(self.tokens) - prompt_length
            out = [t if self.rng.random() < acceptance else t + 1 for t in reference[done : done + min(limit, drafts)]]
            self.proposed += len(out)
            return out

    return Oracle()


def _oracle_head(runner, reference: list[int], prompt_length: int, acceptance: float, drafts: int, seed: int):
    """The runner's MTP head drafting for real (its steps, their cost), its tokens replaced by the oracle's."""
    from decider.engine.generation.mtp_drafts import MtpDrafts

    oracle = _oracle(reference, prompt_length, acceptance, drafts, seed)

    class OracleHead(MtpDrafts):
        def __init__(self) -> None:
            super().__init__(runner.mtp, max_draft=drafts)
            self.proposed = 0

        def propose(self, limit: int) -> list[int]:
            ran = super().propose(limit)  # the head's steps, as for a user
            if not ran:
                return []
            oracle.tokens = self.tokens
            out = oracle.propose(len(ran))
            self._q = [None] * len(out)  # greedy: the verifier takes point masses
            self.proposed += len(out)
            return out

    return OracleHead()


def _runner(model: str, threads: int, commits: str):
    """An exact CPU runner whose verifies commit lazily (the plan's default) or roll back from snapshots."""
    return decider_runner(model, "CPU", True, threads, verify_graph="snapshot" if commits == "snapshot" else "")


def _generate(runner, prompt: list[int], tokens: int, drafter=None) -> tuple[list[int], float, int]:
    from decider.engine.core.settings import SamplingSettings
    from decider.engine.generation.generate import generate_step, make_rng

    greedy = SamplingSettings(temperature=0.0, top_k=0, top_p=1.0, seed=0)
    runner.reset()
    runner.clear_snapshots()
    forwards = runner.stats.forwards
    out, first = [], None
    for step in generate_step(runner, prompt, greedy, make_rng(0), max_tokens=tokens, drafter=drafter):
        out.append(step.token_id)
        if first is None:
            first = time.perf_counter()
    return out, time.perf_counter() - first, runner.stats.forwards - forwards


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w_acceptance", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--acceptance", default="0.5,0.65,0.8")
    parser.add_argument("--drafts", default="2,3")
    parser.add_argument("--commits", default="lazy,snapshot")
    parser.add_argument("--checkpoint", type=Path, help="the HF checkpoint: also draft with the runner's MTP head")
    args = parser.parse_args(argv)
    result = stamp(model=args.model, threads=args.threads, tokens=args.tokens, rounds=args.rounds)
    rates = [float(a) for a in args.acceptance.split(",")]
    widths = [int(k) for k in args.drafts.split(",")]
    model = args.model
    if args.checkpoint:
        from .mtp_costs import head_folder

        model = str(head_folder(Path(args.model).expanduser(), args.checkpoint.expanduser()))
    runners = {commits: _runner(model, args.threads, commits) for commits in args.commits.split(",")}
    plain_runner = next(iter(runners.values()))
    head_step = _head_step(plain_runner) if args.checkpoint else None
    prompt = random_prompt(plain_runner.vocab_size, 64)
    reference, _, _ = _generate(plain_runner, prompt, args.tokens)
    drafters = ("oracle", "mtp") if args.checkpoint else ("oracle",)
    settings = [(c, d, k, a) for c in runners for d in drafters for k in widths for a in rates]
    times: dict[str, list[float]] = {}
    facts: dict[str, dict] = {}
    for rnd in range(args.rounds + 1):  # the first round compiles the verify widths and is dropped
        order = settings if rnd % 2 == 0 else settings[::-1]
        _, plain, _ = _generate(plain_runner, prompt, args.tokens)
        for commits, kind, k, a in order:
            runner = runners[commits]
            drafter = (_oracle(reference, len(prompt), a, k, seed=rnd) if kind == "oracle"
                       else _oracle_head(runner, reference, len(prompt), a, k, seed=rnd))
            out, seconds, forwards = _generate(runner, prompt, args.tokens, drafter)
            name = f"{commits} k={k} a={a}" + (" mtp" if kind == "mtp" else "")
            if rnd:
                times.setdefault(name, []).append(plain / seconds)
                facts.setdefault(name, {"identical": True, "forwards": [], "kept": [], "proposed": []})
                entry = facts[name]
                entry["identical"] &= out == reference
                entry["forwards"].append(forwards)
                entry["kept"].append(drafter.kept / max(drafter.drafted, 1))
                entry["proposed"].append(drafter.proposed)
        if rnd:
            log(f"round {rnd}: plain {plain * 1e3 / (args.tokens - 1):.1f} ms/token; "
                + ", ".join(f"{n} ×{v[-1]:.2f}" for n, v in times.items()))
    result.update({"ratio_to_plain": {n: summary(v) for n, v in times.items()},
                   "facts": {n: {"identical": f["identical"], "forwards": summary(f["forwards"]),
                                 "measured_acceptance": summary(f["kept"]), "proposed": summary(f["proposed"])}
                             for n, f in facts.items()},
                   "mtp_head_step": head_step,
                   "plans": {c: r.plan.verify_graph.value for c, r in runners.items()}})
    finish(args.out, result)
    return 0


def _head_step(runner) -> dict:
    """The runner's MTP head: one step's median time back to back (steps inside the loop cost more: the module doc),
    its arithmetic and vocabulary (engine/runners/mtp_head.py)."""
    from .mtp_costs import WINDOW

    runner.prefill(random_prompt(runner.vocab_size, 64))
    hidden = runner.hidden_rows(1)[0]
    window = (np.arange(300, 300 + WINDOW), np.repeat(hidden[None], WINDOW, 0), np.arange(50, 50 + WINDOW))
    times = []
    for _ in range(20):
        begin = time.perf_counter()
        runner.mtp.step(*window)
        times.append(time.perf_counter() - begin)
    head = runner.mtp
    return {"back_to_back_seconds": float(np.median(times[5:])), "arithmetic": head.inference,
            "ids": len(head.vocabulary) if head.vocabulary is not None else head.vocab_size}


if __name__ == "__main__":
    raise SystemExit(main())
