"""Shared pieces of the benchmark: paths, model geometries, interpreters, timing statistics, memory.

Nothing here imports OpenVINO, torch or the engine at import time: the orchestrator stays importable by any
Python (a worker's `stamp()` reads the CPU flags through the engine's /proc/cpuinfo reader, which needs neither).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Iterable
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from modelkit.qwen35_config import text_config_kwargs

ROOT = Path(__file__).resolve().parents[1]  # the repository (engine/ lives here)
HOME = Path(os.environ.get("DECIDER_BENCH_HOME", Path.home() / ".cache" / "decider-bench")).expanduser()
MODELS = HOME / "models"
RESULTS = HOME / "results"
LOGS = HOME / "logs"
TOKENIZER_DIR = HOME / "tokenizer"
SRC = HOME / "src"
VENV = HOME / "venv"  # the comparison engines' interpreter (python -m bench setup)
REQUIREMENTS = ROOT / "bench" / "requirements-tools.txt"

SEED = 20260516
LENGTHS = (64, 256, 1024)
OPTIONS = ("Attack", "Retreat", "Trade")
CONTEXT_TOKENS = 1000
THINK_TOKENS = 128


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


# ----- interpreters -----
def decider_python() -> str:
    """The interpreter for Decider-only measurements: the one running the bench (the project runtime)."""
    return os.environ.get("DECIDER_BENCH_DECIDER_PYTHON", sys.executable)


def tools_python() -> str:
    """The interpreter with torch/transformers/optimum-intel/openvino-genai/llama-cpp-python/gguf."""
    env = os.environ.get("DECIDER_BENCH_PYTHON")
    if env:
        return env
    return str(venv_python()) if venv_python().exists() else sys.executable


def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def task_parser(prog: str, tasks: Iterable[str], lengths: str) -> argparse.ArgumentParser:
    """The arguments a worker with several measurement tasks takes: --model, --task, --out, --repeats, --device,
    --lengths (prompt lengths, comma-separated); the caller adds its own."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--model", required=True)
    parser.add_argument("--task", required=True, choices=sorted(tasks))
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--lengths", default=lengths)
    return parser


def table_head(header: str) -> str:
    """A markdown table's header row and its rule (one `---` per column; `\\|` inside a cell is not a column)."""
    return header + "\n|" + "---|" * (len(re.findall(r"(?<!\\)\|", header)) - 1)


# ----- geometries -----
@dataclass(frozen=True)
class Geometry:
    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    linear_k_heads: int
    linear_v_heads: int
    linear_dim: int
    tied: bool = True
    vocab: int = 248_320
    conv_kernel: int = 4

    @property
    def full_layers(self) -> int:
        return sum(1 for i in range(self.layers) if (i + 1) % 4 == 0)

    @property
    def linear_layers(self) -> int:
        return self.layers - self.full_layers

    def layer_params(self) -> dict[str, int]:
        h = self.hidden
        mlp = 3 * h * self.intermediate
        # full attention: q_proj carries q and the output gate per head
        full = h * self.heads * self.head_dim * 2 + 2 * h * self.kv_heads * self.head_dim + self.heads * self.head_dim * h
        key = self.linear_k_heads * self.linear_dim
        value = self.linear_v_heads * self.linear_dim
        conv_dim = 2 * key + value
        linear = (
            h * (2 * key + 2 * value)  # in_proj_qkv + in_proj_z
            + h * 2 * self.linear_v_heads  # in_proj_b, in_proj_a
            + conv_dim * self.conv_kernel
            + value * h  # out_proj
        )
        return {"mlp": mlp, "full_attention": full, "linear_attention": linear}

    def matmul_params(self) -> int:
        """Weights every token multiplies through (all layers), without the embedding/lm_head."""
        p = self.layer_params()
        return self.layers * p["mlp"] + self.full_layers * p["full_attention"] + self.linear_layers * p["linear_attention"]

    def head_params(self) -> int:
        return self.vocab * self.hidden

    def total_params(self) -> int:
        return self.matmul_params() + self.head_params() * (1 if self.tied else 2)

    def prefill_flops(self, tokens: int, all_logits: bool = False) -> float:
        """Multiply-adds ×2: the layer matmuls for every token, the head for the last (or every) token,
        full-attention scores and values (causal: T²/2 pairs), the DeltaNet state update per token."""
        matmuls = 2.0 * self.matmul_params() * tokens
        head = 2.0 * self.head_params() * (tokens if all_logits else 1)
        pairs = tokens * (tokens + 1) / 2
        attention = self.full_layers * self.heads * 2 * 2.0 * self.head_dim * pairs
        # per token and head: kᵀS, k⊗delta, qᵀS over a Dk×Dv state (≈ 3 × 2·Dk·Dv)
        delta = self.linear_layers * self.linear_v_heads * tokens * 6.0 * self.linear_dim * self.linear_dim
        return matmuls + head + attention + delta

    def config_kwargs(self) -> dict:
        geometry = {k: v for k, v in dataclasses.asdict(self).items() if k != "name"}
        return text_config_kwargs(**geometry, max_positions=262_144, mrope_section=[11, 11, 10])


GEOMETRIES = {
    "0.8b": Geometry("0.8b", hidden=1024, layers=24, heads=8, kv_heads=2, head_dim=256, intermediate=3584,
                     linear_k_heads=16, linear_v_heads=16, linear_dim=128),
    "2b": Geometry("2b", hidden=2048, layers=24, heads=8, kv_heads=2, head_dim=256, intermediate=6144,
                   linear_k_heads=16, linear_v_heads=16, linear_dim=128),
}

FORMATS = ("fp16", "int8", "int4")


def model_dir(size: str) -> Path:
    return MODELS / f"qwen35-{size}"


def hf_dir(size: str) -> Path:
    return model_dir(size) / "hf"


def ir_dir(size: str, fmt: str) -> Path:
    return model_dir(size) / f"ov-{fmt}"


def gguf_path(size: str, kind: str) -> Path:
    return model_dir(size) / f"gguf-{kind}.gguf"


def is_built(path: Path) -> bool:
    return (path / ".complete").exists()


def mark_built(path: Path, info: dict | None = None) -> None:
    (path / ".complete").write_text(json.dumps(info or {}, indent=1))


# ----- statistics -----
def summary(values: list[float]) -> dict:
    values = [float(v) for v in values]
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
        "values": values,
    }


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


# ----- memory -----
def proc_mib(path: str | Path, field: str) -> float | None:
    """The `<field>: N kB` line of a /proc file, in MiB; None without that line or that file (not Linux, or the
    process is gone)."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return None


def peak_rss_mib() -> float:
    """This process's peak resident set size (VmHWM) in MiB."""
    peak = proc_mib("/proc/self/status", "VmHWM")
    if peak is not None:
        return peak
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def rss_mib(pid: int | str = "self") -> float:
    """A process's resident set size (VmRSS) in MiB, NaN where it cannot be read."""
    rss = proc_mib(f"/proc/{pid}/status", "VmRSS")
    return float("nan") if rss is None else rss


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux ≥ 4.0: write 5 to clear_refs); False where impossible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


# ----- CPU activity (how busy the machine was with other work) -----
def cpu_busy_jiffies() -> tuple[int, int] | None:
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    values = [int(v) for v in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values[:8]) - idle, sum(values[:8])


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def stamp(**about) -> dict:
    """What every worker's result starts with: the CPU flags that change OpenVINO's choices, the date and the load
    average before the run (and `about`: the worker's own settings). `finish` adds the rest and writes it."""
    from decider.engine.compile.precision import isa_summary

    return {"cpu_flags": isa_summary(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load_before": os.getloadavg()[0], **about}


def finish(path: Path, result: dict) -> None:
    """The load average after the run and the process's peak RSS, then the result written to `path`."""
    result["load_after"] = os.getloadavg()[0]
    result["peak_rss_mib"] = peak_rss_mib()
    write_json(path, result)


def read_json(path: Path):
    return json.loads(Path(path).read_text())


def random_prompt(vocab_size: int, length: int, seed: int = 3) -> list[int]:
    """`length` seeded ids the model has: in 100..4999, below its vocabulary (a fixture's is 1,856 ids; an id past the
    embedding table reads outside it, and the prompt's logits are then whatever memory held)."""
    import numpy as np

    return [int(t) for t in np.random.default_rng(seed).integers(100, min(5000, vocab_size), length)]


def block_broken_torchvision() -> None:
    """Hide a torchvision that cannot load (PyPI's beside the CPU build of torch: "operator torchvision::nms does not
    exist") so transformers does without it; one built for this torch loads and stays usable."""
    if "torchvision" in sys.modules:
        return
    try:
        import torchvision  # noqa: F401
    except Exception:  # noqa: BLE001 - any failure to load it
        sys.modules["torchvision"] = None
