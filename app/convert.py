"""`decider convert HF_DIR OUT_DIR`: a Qwen3.5 checkpoint to an OpenVINO export, then a test decision.

The export is optimum-intel's own (`optimum-cli export openvino`), run in a child process with the
running interpreter: its model patching never touches this process, its progress bars reach the
terminal, and a crash in it cannot take Decider down. optimum-intel is the optional extra
`decider[convert]` (it needs torch and transformers 5.2).

    python -m decider.app.convert --worker -- <optimum-cli export openvino arguments>

is the child's entry point: optimum's CLI, after hiding a torchvision wheel that cannot load beside
the CPU build of torch (nothing in a text export needs it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from decider.engine.core.errors import DeciderError, ModelError, SettingsError
from decider.engine.model.folder import TEXT_MODEL_TYPES, VL_MODEL_TYPES

from .models import ModelEntry, checkpoint_info, describe, human_size
from .mtp_export import export_mtp

INSTALL_HINT = 'pip install "decider[convert]"  (or: pip install "optimum-intel[openvino]==2.2.0" "transformers>=5.2,<5.3")'

TASKS = {
    "qwen3_5_text": "text-generation-with-past",
    "qwen3_5_moe_text": "text-generation-with-past",
    "qwen3_5": "image-text-to-text",
    "qwen3_5_moe": "image-text-to-text",
}

# --weights → optimum-cli's arguments.
WEIGHTS = {
    "fp16": ["--weight-format", "fp16"],
    "int8": ["--weight-format", "int8"],
    # Symmetric per-channel int8 (no zero points): the CPU's exact decode step decompresses it with one operation
    # less per weight; measured 0.88-0.92x the asymmetric export's step at 0.8B, 1 thread (BENCHMARKS.md §7).
    "int8-sym": ["--weight-format", "int8", "--sym"],
    # The NPU's preferred format: int4 symmetric, channel-wise (no groups), every layer that can be int4.
    "int4-npu": ["--weight-format", "int4", "--sym", "--ratio", "1.0", "--group-size", "-1"],
}

# Files Decider reads that an export must carry; copied from the checkpoint when the exporter did not.
CARRY_OVER = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
              "generation_config.json")


class ConvertError(DeciderError):
    """The exporter is missing, refused the checkpoint, or produced something Decider cannot run."""


@dataclass
class ConvertResult:
    out_dir: Path
    task: str
    weights: str
    export_seconds: float
    entry: ModelEntry
    decision: str | None = None  # "chose A (61%) of 2 options" from the test decision
    validate_seconds: float = 0.0


@dataclass(frozen=True)
class ConvertReport:
    """A conversion's outcome as data: `decider convert --report FILE` writes it, so a parent process
    (the app's convert dialog) reads a typed result instead of parsing the printed summary."""

    out_dir: str
    kind: str  # the folder's ModelEntry kind afterwards: "export" when Decider can run it; "" after an error
    summary: str  # the lines `decider convert` prints
    error: str | None = None  # why it failed (then kind is whatever is left of the folder)

    @property
    def usable(self) -> bool:
        return self.error is None and self.kind == "export"

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), ensure_ascii=False), encoding="utf-8")

    @classmethod
    def read(cls, path: str | Path) -> "ConvertReport | None":
        """The report in `path`; None when the child wrote none (it died first, or it was not `decider convert`)."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(**data)
        except (OSError, ValueError, TypeError):
            return None


def report(result: ConvertResult) -> ConvertReport:
    return ConvertReport(str(result.out_dir), result.entry.kind, summary(result))


def optimum_available() -> bool:
    try:
        return importlib.util.find_spec("optimum.intel") is not None and importlib.util.find_spec("nncf") is not None
    except (ImportError, ValueError):
        return False


def check_checkpoint(hf_dir: Path) -> dict:
    """The checkpoint's config.json; one-line errors for anything the exporter would choke on."""
    if not hf_dir.is_dir():
        if "/" in str(hf_dir) and not hf_dir.exists() and str(hf_dir).count("/") == 1:
            raise SettingsError(f"{hf_dir}: not a folder; to use a hub repository, `decider pull {hf_dir}` first")
        raise SettingsError(f"{hf_dir}: not a folder")
    config_path = hf_dir / "config.json"
    if not config_path.is_file():
        raise ModelError(f"{config_path}: missing file (a Hugging Face checkpoint has config.json)")
    if any(hf_dir.glob("openvino_*.xml")):
        raise SettingsError(f"{hf_dir} is already an OpenVINO export: use it directly (decider doctor {hf_dir})")
    config = checkpoint_info(hf_dir)
    if config is None:
        try:
            model_type = json.loads(config_path.read_text(encoding="utf-8")).get("model_type")
        except (OSError, ValueError, AttributeError):
            raise ModelError(f"{config_path}: not valid JSON") from None
        if model_type not in TASKS:
            supported = ", ".join(TEXT_MODEL_TYPES + VL_MODEL_TYPES)
            raise ModelError(f"{config_path}: model_type {model_type!r} is not Qwen3.5 ({supported})")
        raise ModelError(f"{hf_dir}: no weights (*.safetensors) next to config.json")
    if not (hf_dir / "tokenizer.json").is_file():
        raise ModelError(f"{hf_dir / 'tokenizer.json'}: missing file (Decider needs the Hugging Face tokenizer.json)")
    return config


def optimum_command(hf_dir: Path, out_dir: Path, task: str, weights: str) -> list[str]:
    return [
        sys.executable, "-m", "decider.app.convert", "--worker", "--",
        "export", "openvino", "--model", str(hf_dir), "--task", task, *WEIGHTS[weights],
        "--disable-convert-tokenizer",  # Decider reads tokenizer.json; no openvino_tokenizer.xml needed
        str(out_dir),
    ]


def _run_exporter(command: list[str], log: Callable[[str], None] | None) -> None:
    """Run the child; its output goes to the terminal (progress bars) or, line by line, to `log`."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false")
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    tail: deque[str] = deque(maxlen=30)
    if log is None and sys.stderr.isatty():
        code = subprocess.call(command, env=env, stdout=sys.stderr)
    else:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", bufsize=1)
        assert proc.stdout is not None
        for line in proc.stdout:
            # A progress bar redraws itself with \r: keep its last state only.
            text = line.rstrip("\n").split("\r")[-1].rstrip() or line.replace("\r", " ").strip()
            if not text.strip():
                continue
            tail.append(text)
            if log is not None:
                log(text)
            else:
                print(text, file=sys.stderr, flush=True)
        code = proc.wait()
    if code != 0:
        reason = next((line for line in reversed(tail) if "Error" in line or "error" in line), None)
        detail = f": {reason.strip()}" if reason else " (see the output above)"
        raise ConvertError(f"optimum-intel export failed (exit {code}){detail}")


def _carry_over(hf_dir: Path, out_dir: Path) -> list[str]:
    copied = []
    for name in CARRY_OVER:
        source, target = hf_dir / name, out_dir / name
        if source.is_file() and not target.is_file():
            shutil.copyfile(source, target)
            copied.append(name)
    return copied


def validate(out_dir: Path) -> str:
    """Load the export on CPU and run one decision; returns a one-line description of it."""
    from decider.engine.decisions.decide import DecisionRequest, decide
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.runners.runner import ModelRunner
    from decider.engine.core.settings import SamplingSettings

    runner = ModelRunner(str(out_dir), DeviceOptions(device="CPU"))
    request = DecisionRequest(
        question="Which number is larger?", options=("7", "3"),
        sampling=SamplingSettings().with_changes(temperature=0.0, frequency_penalty=0.0, presence_penalty=0.0),
    )
    result = decide(runner, request)
    chosen = result.options[result.choice_index]
    bars = ", ".join(f"{o.label} {o.probability:.0%}" for o in result.options)
    return f"chose {chosen.label} ({chosen.text!r}) — {bars}; letters cover {result.coverage:.0%} of the probability"


def _keep_mtp(hf_dir: Path, out_dir: Path, say: Callable[[str], None]) -> None:
    """The checkpoint's MTP head as a second small IR (`--draft mtp`); a head the builder cannot use is reported and
    left out: the export itself is complete without it."""
    try:
        kept = export_mtp(hf_dir, out_dir)
    except ModelError as exc:
        say(f"MTP head not kept: {exc}")
        return
    if kept is not None:
        say(f"kept the checkpoint's MTP head: {kept.name} (drafts for --draft mtp)")


def convert(
    hf_dir: str | Path,
    out_dir: str | Path,
    weights: str = "int4-npu",
    log: Callable[[str], None] | None = None,
    run_decision: bool = True,
) -> ConvertResult:
    hf_dir, out_dir = Path(hf_dir).expanduser(), Path(out_dir).expanduser()
    if weights not in WEIGHTS:
        raise SettingsError(f"--weights must be one of {', '.join(WEIGHTS)} (got {weights!r})")
    config = check_checkpoint(hf_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise SettingsError(f"{out_dir} exists and is not empty; choose a new folder")
    if not optimum_available():
        raise ConvertError(f"converting needs optimum-intel, which is not installed: {INSTALL_HINT}")
    model_type = config["model_type"]
    task = TASKS[model_type]
    say = log or (lambda line: print(line, file=sys.stderr))
    say(f"converting {hf_dir} ({model_type}) → {out_dir}: optimum-intel, task {task}, weights {weights}")
    start = time.monotonic()
    try:
        _run_exporter(optimum_command(hf_dir, out_dir, task, weights), log)
    except BaseException:
        shutil.rmtree(out_dir, ignore_errors=True)  # it was empty or absent before: nothing of the user's is lost
        raise
    export_seconds = time.monotonic() - start
    copied = _carry_over(hf_dir, out_dir)
    if copied:
        say(f"copied from the checkpoint: {', '.join(copied)}")
    _keep_mtp(hf_dir, out_dir, say)
    entry = describe(out_dir)
    if entry.kind != "export":
        raise ConvertError(f"the export in {out_dir} is not usable: {entry.error}")
    result = ConvertResult(out_dir, task, weights, export_seconds, entry)
    if run_decision:
        say("validating: loading on CPU and running one decision …")
        start = time.monotonic()
        result.decision = validate(out_dir)
        result.validate_seconds = time.monotonic() - start
    return result


def summary(result: ConvertResult) -> str:
    entry = result.entry
    weights = entry.precision.label if entry.precision else "unknown weights"
    lines = [
        f"✓ exported in {result.export_seconds:.0f} s → {result.out_dir} ({human_size(entry.size_bytes)})",
        f"  {entry.layout} ({entry.model_type}) · weights {weights} · NPU {entry.devices.get('NPU')}",
    ]
    if result.decision:
        lines.append(f"  test decision on CPU ({result.validate_seconds:.1f} s): {result.decision}")
    lines.append(f"  next: decider doctor {result.out_dir}")
    return "\n".join(lines)


def _worker(argv: list[str]) -> int:
    try:
        import torchvision  # noqa: F401
    except Exception:  # noqa: BLE001 - a torchvision wheel built for another torch fails with RuntimeError
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        sys.modules["torchvision"] = None  # type: ignore[assignment]  # None marks it absent: transformers skips it
    from optimum.commands.optimum_cli import main as optimum_main

    sys.argv = ["optimum-cli", *argv]
    optimum_main()
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--worker"]:
        rest = args[1:]
        sys.exit(_worker(rest[1:] if rest[:1] == ["--"] else rest))
    print("usage: decider convert HF_DIR OUT_DIR [--weights fp16|int8|int4-npu]", file=sys.stderr)
    sys.exit(2)
