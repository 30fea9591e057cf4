#!/usr/bin/env python
"""A GGUF of the bundled demo model, for llama.cpp's servers (tools/remote_parity.py, tests/test_remote_llama.py).

    python tools/demo_gguf.py [--out FILE]     # prints the GGUF's path

The demo folder ships only the OpenVINO export, so its weights are read back out of the IR into a
transformers checkpoint (each constant found by the node it feeds; the norms' folded 1 + w undone, A_log
from its folded exp), checked against the IR (logits on decision prompts must agree to 1e-4), then written
by llama.cpp's own convert_hf_to_gguf.py (from the llama-cpp-python sdist the bench uses) as f32. The demo
tokenizer splits text with Qwen's regex but is not a vocabulary the converter knows by hash: its
pre-tokenizer is named `qwen35` for the converter. Needs torch and transformers (the `convert` extra).
Cached under the bench's cache: a second run is instant.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from modelkit.llama_cpp import llama_cpp_source  # noqa: E402

DEMO = ROOT / "resources" / "demo-model"
LLAMA_CPP_PYTHON = "0.3.36"  # the converter's llama.cpp must be the one the server was built from
CACHE = Path(os.environ.get("DECIDER_BENCH_HOME", Path.home() / ".cache" / "decider-bench")) / "demo-gguf"


def _constants(xml: Path) -> dict[str, np.ndarray]:
    """Every float constant of the IR, named by the node it feeds (the exporter names weights, not norms)."""
    import openvino as ov

    model = ov.Core().read_model(str(xml))
    out: dict[str, np.ndarray] = {}
    for op in model.get_ops():
        if op.get_type_name() != "Constant" or not op.get_output_element_type(0).is_real():
            continue
        name = op.get_friendly_name()
        value = op.get_data().astype(np.float32)
        if name.startswith("self.model."):
            out[name[len("self.model."):]] = value
            continue
        out.setdefault("#" + name, value)  # folded constants keep the name of the op they replaced
        for target in op.output(0).get_target_inputs():
            out.setdefault("@" + target.get_node().get_friendly_name(), value)
    return out


def ir_state_dict(folder: Path, names: list[str]) -> dict[str, np.ndarray]:
    """The transformers parameter `names` of Qwen3_5ForCausalLM, read back out of the IR."""
    constants = _constants(folder / "openvino_model.xml")

    def fed(module: str, op: str) -> np.ndarray:
        key = f"@__module.model.{module}/{op}"
        if key not in constants:
            raise SystemExit(f"the IR has no constant feeding {key[1:]}: not an export this tool knows")
        return constants[key]

    state = {}
    for name in names:
        if name in constants:  # Linear weights and embeddings keep their names
            state[name] = constants[name]
            continue
        module, _, leaf = name.rpartition(".")
        if leaf == "dt_bias":  # softplus(a + dt_bias): the Add's constant
            state[name] = fed(module, "aten::add/Add_2").reshape(-1)
        elif leaf == "A_log":  # g = -exp(A_log) * ...: folded to the constant exp(A_log), named after the Exp
            key = f"#__module.model.{module}/aten::exp/Exp"
            if key not in constants:
                raise SystemExit(f"the IR has no folded {key[1:]}: not an export this tool knows")
            state[name] = np.log(constants[key].reshape(-1))
        elif module.endswith("conv1d"):  # depthwise Conv1d [C, 1, K] exported as a GroupConvolution [C, 1, 1, K]
            state[name] = fed(module.rpartition(".")[0], "aten::_convolution/GroupConvolution").reshape(-1, 1, 4)
        elif module.endswith("linear_attn.norm"):  # the gated norm multiplies by w itself
            state[name] = fed(module, "aten::mul/Multiply_1").reshape(-1)
        else:  # every other RMSNorm multiplies by (1 + w), folded into one constant
            state[name] = fed(module, "aten::mul/Multiply_1").reshape(-1) - 1.0
    return state


def checkpoint(folder: Path, out: Path) -> Path:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if (out / "model.safetensors").exists():
        return out
    config = AutoConfig.from_pretrained(folder)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    names = list(model.state_dict())
    state = ir_state_dict(folder, names)
    model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)).reshape(model.state_dict()[k].shape) for k, v in state.items()})
    _check_against_ir(model, folder)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    for extra in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
        if (folder / extra).exists():
            shutil.copy(folder / extra, tmp / extra)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def _check_against_ir(model, folder: Path) -> None:
    import torch

    from decider.engine.decisions.prompt import build_decision_prompt
    from decider.engine.runners.runner import ModelRunner

    runner = ModelRunner(folder)
    worst = 0.0
    for question, options in [("Which of these is an animal?", ["Owl", "Hammer", "Bread"]),
                              ("Scouts report that Trade is the safe choice. What should we do?", ["Attack", "Retreat", "Trade", "Hide"])]:
        ids = build_decision_prompt(runner.tokenizer, question, options).ids
        runner.reset()
        ir = runner.prefill(ids).astype(np.float64)
        with torch.no_grad():
            hf = model(torch.tensor([ids])).logits[0, -1].double().numpy()
        worst = max(worst, float(np.abs(ir - hf[: len(ir)]).max()))  # the runner drops padding ids
    if worst > 1e-4:
        raise SystemExit(f"the checkpoint read back from the IR differs from it (max logit delta {worst:.2e})")


# The converter run with the demo tokenizer's pre-tokenizer named: it splits like Qwen3.5's.
_CONVERT = """
import runpy, sys
sys.path.insert(0, {source!r})
import conversion.base as base
for cls in vars(base).values():
    if isinstance(cls, type) and "get_vocab_base_pre" in vars(cls):
        cls.get_vocab_base_pre = lambda self, tokenizer: "qwen35"
sys.argv = ["convert_hf_to_gguf.py", *{args!r}]
runpy.run_path({script!r}, run_name="__main__")
"""


def gguf(out: Path | None = None) -> Path:
    out = out or CACHE / "demo-model-f32.gguf"
    if out.exists():
        return out
    hf = checkpoint(DEMO, CACHE / "checkpoint")
    # the bench keeps its sdist in the same place (DECIDER_BENCH_HOME/src): one download serves both
    source = llama_cpp_source(LLAMA_CPP_PYTHON, CACHE.parent / "src")
    tmp = out.with_suffix(".tmp.gguf")
    code = _CONVERT.format(source=str(source), script=str(source / "convert_hf_to_gguf.py"),
                           args=[str(hf), "--outfile", str(tmp), "--outtype", "f32", "--no-mtp"])
    env = dict(os.environ, PYTHONPATH=str(source / "gguf-py"), NO_LOCAL_GGUF="1")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not tmp.exists():
        raise SystemExit("convert_hf_to_gguf.py failed:\n" + "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:]))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/demo_gguf.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="where to write the GGUF (default: the bench cache)")
    args = parser.parse_args(argv)
    print(gguf(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
