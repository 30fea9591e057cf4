"""Run lm-evaluation-harness, unmodified, against `decider serve` and check its numbers against Decider's own.

lm-eval is heavy (torch, datasets, …): install it in a venv of its own, not in Decider's environment:

    python -m venv --system-site-packages /path/venv-eval && /path/venv-eval/bin/pip install "lm_eval[api]==0.4.13"
    python tools/lm_eval_check.py --lm-eval /path/venv-eval/bin/lm_eval [--model DIR] [--hf CHECKPOINT]

(`pip install -e ".[eval]"` installs the same lm-eval into the current environment instead.)

What it does: writes two local-file tasks — a multiple-choice task in the demo model's own format (the
decision prompt, the answer letter as the continuation) and a perplexity task (loglikelihood_rolling over
a few texts) — starts `decider serve` on a free port, runs `lm_eval --model local-completions` with its
default (auto-detected, i.e. the server's remote) tokenizer, then reads lm-eval's logged samples and
compares every per-choice and per-document loglikelihood with Decider's own prompt scorer on the same
token ids, and the multiple-choice probabilities with `decider ask`'s bars (engine decide). Exit 0 when
every difference is within --tolerance (1e-4).

With --hf (a transformers checkpoint of the same weights; `--hf demo` writes the demo's from its IR with
tools/demo_gguf.py) it also runs lm-eval's own `hf` backend on the same tasks and compares every
per-sample loglikelihood with local-completions'. transformers normalises over the padded head, so the
server is then started with `--logprob-normalization padded_head` (docs/api.md, Normalisation). A third
task's continuations end on `<|im_end|>` (the answer and the end of the turn), which the server scores
as a prompt token and the hf backend as a continuation token; in another ("C.") the token the server
generates after the prompt is `<|im_end|>`, which lm-eval's `token_logprobs[ctxlen:-1]` must drop and
nothing else.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "resources" / "demo-model"

ANIMALS = ["dog", "cat", "horse", "wolf", "bear", "fox", "owl", "frog"]
FOODS = ["bread", "cheese", "apple", "rice", "soup", "honey", "carrot", "cake"]
TOOLS = ["hammer", "saw", "drill", "wrench", "shovel", "axe", "ladder", "rake"]
ACTIONS = ["Attack", "Defend", "Retreat", "Trade", "Hide", "Wait", "Build", "Scout", "Negotiate", "Flee"]
TEXTS = [
    "Scouts report that Hide is the safe choice. What should we do?",
    "Which of these is a tool? A hammer is a tool, honey is a food and a wolf is an animal.",
    "Once upon a time the party camped by the river and waited for the scouts to return.",
]

MC_TASK = """task: decider_demo_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
output_type: multiple_choice
test_split: test
doc_to_text: "{{{{prompt}}}}"
doc_to_choice: "{{{{letters}}}}"
doc_to_target: label
target_delimiter: ""
metric_list:
  - metric: acc
metadata:
  version: 1.0
"""

PPL_TASK = """task: decider_demo_ppl
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
output_type: loglikelihood_rolling
test_split: test
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
metadata:
  version: 1.0
"""


def decision_items(count: int, seed: int) -> list[dict]:
    """Demo-task decisions (retrieval and category), with the answer's index."""
    rng = random.Random(seed)
    items = []
    for i in range(count):
        n = rng.choice([2, 3, 4])
        if i % 2 == 0:
            options = rng.sample(ACTIONS, n)
            answer = rng.randrange(n)
            question = f"Scouts report that {options[answer]} is the safe choice. What should we do?"
        else:
            kinds = {"an animal": ANIMALS, "a food": FOODS, "a tool": TOOLS}
            asked = rng.choice(list(kinds))
            others = [w for k, words in kinds.items() if k != asked for w in words]
            options = rng.sample(others, n - 1)
            answer = rng.randrange(n)
            options.insert(answer, rng.choice(kinds[asked]))
            question = f"Which of these is {asked}?"
        items.append({"question": question, "options": options, "label": answer})
    return items


def chat_prompt(question: str, options: list[str]) -> str:
    """The decision prompt as text, in Decider's wording (special tokens written out: /tokenize honours them)."""
    from decider.engine.decisions.prompt import load_templates, render_user_text

    user = render_user_text(question, options, False, load_templates())
    return f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


END_TASK = MC_TASK.replace("decider_demo_mc", "decider_demo_end").replace("{{{{letters}}}}", "{{{{ended}}}}")
# "C." is where the demo ends its turn: the one token generated after lm-eval's request is <|im_end|>
DOT_TASK = MC_TASK.replace("decider_demo_mc", "decider_demo_dot").replace("{{{{letters}}}}", "{{{{dotted}}}}")
TASKS = ("decider_demo_mc", "decider_demo_dot", "decider_demo_end", "decider_demo_ppl")


def write_tasks(folder: Path, items: list[dict]) -> None:
    from decider.engine.decisions.prompt import LABELS

    mc = folder / "mc.jsonl"
    with mc.open("w", encoding="utf-8") as out:
        for item in items:
            letters = list(LABELS[: len(item["options"])])
            doc = {"prompt": chat_prompt(item["question"], item["options"]), "letters": letters,
                   "dotted": [f"{letter}." for letter in letters],
                   "ended": [f"{letter}.<|im_end|>" for letter in letters], "label": item["label"]}
            out.write(json.dumps(doc) + "\n")
    (folder / "decider_demo_end.yaml").write_text(END_TASK.format(data=mc), encoding="utf-8")
    (folder / "decider_demo_dot.yaml").write_text(DOT_TASK.format(data=mc), encoding="utf-8")
    ppl = folder / "ppl.jsonl"
    ppl.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS), encoding="utf-8")
    (folder / "decider_demo_mc.yaml").write_text(MC_TASK.format(data=mc), encoding="utf-8")
    (folder / "decider_demo_ppl.yaml").write_text(PPL_TASK.format(data=ppl), encoding="utf-8")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: Path, port: int, log: Path, normalization: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    command = [sys.executable, "-m", "decider.app.cli", "serve", "--model", str(model), "--port", str(port), "--device", "CPU",
               "--logprob-normalization", normalization]
    server = subprocess.Popen(command, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"decider serve exited with {server.returncode}; see {log}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
            return server
        except OSError:
            time.sleep(0.5)
    server.terminate()
    raise SystemExit(f"decider serve did not answer within 120 s; see {log}")


def run_lm_eval(lm_eval: str, port: int | None, tasks: Path, out: Path, batch_size: int, hf: Path | None = None) -> None:
    """local-completions against the server on `port`, or (hf) lm-eval's transformers backend in float32."""
    if hf is None:
        backend = ["--model", "local-completions", "--model_args",
                   f"base_url=http://127.0.0.1:{port}/v1/completions,model=decider,num_concurrent=1,max_retries=1"]
    else:
        backend = ["--model", "hf", "--model_args", f"pretrained={hf},dtype=float32", "--device", "cpu"]
    command = [
        lm_eval, *backend, "--tasks", ",".join(TASKS), "--include_path", str(tasks),
        "--batch_size", str(batch_size), "--log_samples", "--output_path", str(out),
    ]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def read_samples(out: Path, task: str) -> list[dict]:
    files = sorted(out.rglob(f"samples_{task}_*.jsonl"))
    if not files:
        raise SystemExit(f"lm-eval wrote no samples for {task} under {out}")
    return [json.loads(line) for line in files[-1].read_text(encoding="utf-8").splitlines() if line.strip()]


def encode_pair(tokenizer, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """lm-eval's TemplateAPI._encode_pair (causal): trailing context whitespace moves to the continuation."""
    spaces = len(context) - len(context.rstrip())
    if spaces:
        continuation, context = context[-spaces:] + continuation, context[:-spaces]
    whole = tokenizer.encode_raw(context + continuation)
    context_ids = tokenizer.encode_raw(context)
    return context_ids, whole[len(context_ids) :]


def _loglikelihood(response: list) -> float:
    """A logged response: [[ll, greedy]] for a choice, [ll] for a rolling document (logged as strings)."""
    first = response[0]
    return float(first if isinstance(first, (str, int, float)) else first[0])


def against_hf(out: Path, hf_out: Path) -> dict:
    """Every per-sample loglikelihood of local-completions against the hf backend's, task by task."""
    report = {}
    for task in TASKS:
        theirs = {s["doc_id"]: s for s in read_samples(hf_out, task)}
        worst, count, flips = 0.0, 0, 0
        for sample in read_samples(out, task):
            ours = [_loglikelihood(r) for r in sample["resps"]]
            hf = [_loglikelihood(r) for r in theirs[sample["doc_id"]]["resps"]]
            if sample["arguments"] != theirs[sample["doc_id"]]["arguments"]:
                raise SystemExit(f"{task} doc {sample['doc_id']}: the two backends were sent different requests")
            worst = max(worst, *(abs(a - b) for a, b in zip(ours, hf)))
            count += len(ours)
            flips += len(ours) > 1 and max(range(len(ours)), key=ours.__getitem__) != max(range(len(hf)), key=hf.__getitem__)
        report[task] = {"loglikelihoods": count, "max_abs_delta": worst, "argmax_differs": flips}
    return report


def check(service, items: list[dict], out: Path, normalization: str = "vocabulary") -> dict:
    from decider.engine.decisions.decide import DecisionRequest
    from decider.engine.core.settings import SamplingSettings

    tokenizer = service.runner.tokenizer
    report = {"choices": 0, "choice_delta": 0.0, "probability_delta": 0.0, "docs": 0, "doc_delta": 0.0, "accuracy": 0.0}
    greedy = SamplingSettings(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0, repetition_penalty=1.0)
    correct = 0
    for sample in read_samples(out, "decider_demo_mc"):
        item = items[sample["doc_id"]]
        theirs = [float(r[0][0]) for r in sample["resps"]]
        ours = []
        for argument in sample["arguments"].values():  # {"gen_args_0": {"arg_0": context, "arg_1": continuation}, …}
            context, continuation = argument["arg_0"], argument["arg_1"]
            context_ids, continuation_ids = encode_pair(tokenizer, context, continuation)
            entries = service.score(context_ids + continuation_ids, 0, normalization).entries
            ours.append(sum(e.logprob for e in entries[len(context_ids) - 1 :]))
        report["choices"] += len(ours)
        report["choice_delta"] = max(report["choice_delta"], *(abs(a - b) for a, b in zip(theirs, ours)))
        # decider ask's bars: the letters renormalised over the options (lm-eval's shared "\n\n" cancels)
        decision = service.decide(DecisionRequest(item["question"], tuple(item["options"]), sampling=greedy))
        peak = max(theirs)
        total = sum(math.exp(t - peak) for t in theirs)
        for option, t in zip(decision.options, theirs):
            report["probability_delta"] = max(report["probability_delta"], abs(option.probability - math.exp(t - peak) / total))
        correct += decision.choice_index == item["label"]
    report["accuracy"] = correct / len(items)
    prefix = tokenizer.encode_raw(tokenizer.token_text(tokenizer.im_end))  # lm-eval's prefix token: the eos
    for sample in read_samples(out, "decider_demo_ppl"):
        theirs = float(sample["resps"][0][0])  # [[loglikelihood]], logged as strings
        text = TEXTS[sample["doc_id"]]
        ours = sum(e.logprob for e in service.score(prefix + tokenizer.encode_raw(text), 0, normalization).entries)
        report["docs"] += 1
        report["doc_delta"] = max(report["doc_delta"], abs(theirs - ours))
    return report


def this_checkout() -> None:
    """Import (and serve) this checkout as `decider` whatever an editable install points at: the repository
    root is the package, so a link named `decider` goes first on sys.path and on the server's PYTHONPATH."""
    folder = Path(tempfile.mkdtemp(prefix="lm-eval-check-pkg-"))
    (folder / "decider").symlink_to(ROOT, target_is_directory=True)
    sys.path.insert(0, str(folder))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))


def hf_checkpoint(name: str) -> Path:
    """--hf: a folder, or `demo` for the demo's weights read back from its IR (cached; tools/demo_gguf.py)."""
    if name != "demo":
        return Path(name)
    sys.path.insert(0, str(ROOT / "tools"))
    from demo_gguf import CACHE, checkpoint

    return checkpoint(DEMO, CACHE / "hf")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lm-eval", default="lm_eval", help="the lm_eval executable (default: on PATH)")
    parser.add_argument("--model", type=Path, default=DEMO, help="model folder (default: the demo model)")
    parser.add_argument("--hf", help="also compare with lm-eval's hf backend on this transformers checkpoint of the "
                                     "same weights ('demo': the demo's, written from its IR); serves padded_head")
    parser.add_argument("--items", type=int, default=24, help="multiple-choice items")
    parser.add_argument("--batch-size", type=int, default=4, help="lm-eval's batch size (prompts per request)")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--keep", type=Path, help="keep the tasks and lm-eval's output in this folder")
    parser.add_argument("--reuse", action="store_true", help="with --keep: reuse lm-eval's samples already there")
    args = parser.parse_args(argv)
    this_checkout()
    from decider.app.service import EngineService
    from decider.engine.compile.devices import DeviceOptions

    hf = hf_checkpoint(args.hf) if args.hf else None
    normalization = "padded_head" if hf is not None else "vocabulary"
    items = decision_items(args.items, seed=0)
    work = args.keep or Path(tempfile.mkdtemp(prefix="lm-eval-check-"))
    work.mkdir(parents=True, exist_ok=True)
    write_tasks(work, items)
    if not args.reuse or not list((work / "out").rglob("samples_*.jsonl")):
        port = free_port()
        server = start_server(args.model, port, work / "serve.log", normalization)
        try:
            run_lm_eval(args.lm_eval, port, work, work / "out", args.batch_size)
        finally:
            server.terminate()
            server.wait(timeout=30)
    report = check(EngineService(args.model, DeviceOptions(device="CPU")), items, work / "out", normalization)
    worst = max(report["choice_delta"], report["probability_delta"], report["doc_delta"])
    ok = report["choices"] > 0 and report["docs"] > 0
    if hf is not None:
        if not args.reuse or not list((work / "out-hf").rglob("samples_*.jsonl")):
            run_lm_eval(args.lm_eval, None, work, work / "out-hf", 1, hf)
        report["hf"] = against_hf(work / "out", work / "out-hf")
        worst = max(worst, *(t["max_abs_delta"] for t in report["hf"].values()))
    report["normalization"] = normalization
    print(json.dumps(report, indent=1))
    ok = ok and worst <= args.tolerance
    print(f"{'OK' if ok else 'FAIL'}: {report['choices']} choices, {report['docs']} documents"
          f"{', and the hf backend' if hf is not None else ''}: largest difference {worst:.2e} "
          f"(tolerance {args.tolerance:.0e}); work folder {work}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
