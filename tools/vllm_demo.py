#!/usr/bin/env python
"""A copy of the bundled demo model that vLLM's CPU build can serve, and vLLM's server started on it
(tests/test_remote_vllm.py, tools/remote_parity.py --only vllm, docs/models.md).

    python tools/vllm_demo.py [--out DIR]     # prints the folder's path

vLLM's CPU kernels take neither f32 (the Gated DeltaNet kernel asserts bf16) nor the demo's DeltaNet head
dims of 32 (it wants 128). So the demo's transformers checkpoint (tools/demo_gguf.py reads it back out of
the OpenVINO IR) is rewritten as the same function with DeltaNet key and value heads zero-padded to 128:

  * q and k are l2-normalised, so zero rows change nothing there; but the kernel scales q by
    1/sqrt(head_k_dim), which halves the core output o, and the gated RMSNorm over the value head dim
    then averages o² over 4x as many (zero) entries: its input's mean square drops 16x.
  * An RMSNorm is scale-free except for its eps, and eps is one config value for every norm. So eps is
    divided by 16 and every other norm's input is divided by 4 (its mean square by 16): the embeddings
    and every projection that writes the residual stream (out_proj, o_proj, down_proj) are scaled by 1/4,
    and so are the full-attention q (not its gate) and k projections, which feed q_norm and k_norm.
    Then x/4 / sqrt(ms/16 + eps/16) = x / sqrt(ms + eps) exactly; the gated norm's output is 2x the
    original's, which its weight halved undoes.
  * Every factor is a power of two: exact in f32 and in the bf16 vLLM computes in.

The copy is checked with transformers in float64: its logits must equal the original's within 1e-5 on
decision prompts. Cached under the bench's cache (a second run is instant). Needs torch and transformers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (str(ROOT), str(ROOT / "tools")):
    if path not in sys.path:
        sys.path.insert(0, path)

import demo_gguf  # noqa: E402 (after the path set-up above)
from local_server import wait_until_answering  # noqa: E402

SHIM = ROOT / "tools" / "vllm_shim"  # Qwen3.5 without torchvision (its docstring)
HEAD = 128  # the head dim vLLM's CPU Gated DeltaNet kernel takes
CACHE = demo_gguf.CACHE.parent / "demo-vllm"
TOLERANCE = 1e-5  # max |logit delta| in float64 between the padded copy and the original
PROMPTS = [
    ("Which of these is an animal?", ["Owl", "Hammer", "Bread"]),
    ("Scouts report that Trade is the safe choice. What should we do?", ["Attack", "Retreat", "Trade", "Hide"]),
    ("Which one is a colour?", ["Seven", "Green", "Spoon", "Lake", "Run"]),
]


def _pad_heads(weight, heads: int, dim: int, axis: int = 0):
    """weight with its `axis` split into heads of `dim`, each zero-padded to HEAD."""
    import torch

    moved = weight.movedim(axis, 0)
    split = moved.reshape(heads, dim, *moved.shape[1:])
    padded = torch.cat([split, split.new_zeros(heads, HEAD - dim, *moved.shape[1:])], dim=1)
    return padded.reshape(heads * HEAD, *moved.shape[1:]).movedim(0, axis)


def padded_state(state: dict, config: dict) -> dict:
    """The rewritten parameters (see the module docstring); `config` is the original's."""
    import torch

    nk, nv = config["linear_num_key_heads"], config["linear_num_value_heads"]
    dk, dv = config["linear_key_head_dim"], config["linear_value_head_dim"]
    heads, head_dim = config["num_attention_heads"], config["head_dim"]
    if dk > HEAD or dv > HEAD or dk != dv or HEAD % dk:
        raise SystemExit(f"DeltaNet head dims {dk}/{dv}: this tool pads equal dims dividing {HEAD}")
    quarter = 1.0 / (HEAD // dk)  # each norm's input x/ratio: its mean square drops by ratio², as eps does
    out = {}
    for name, value in state.items():
        value = value.clone()
        if name.endswith("embed_tokens.weight") or name.endswith(("out_proj.weight", "o_proj.weight", "down_proj.weight", "k_proj.weight")):
            value = value * quarter
        if name.endswith("self_attn.q_proj.weight"):  # per head [query, gate]: only the query feeds q_norm
            per_head = value.reshape(heads, 2, head_dim, -1)
            per_head[:, 0] *= quarter
            value = per_head.reshape(value.shape)
        if ".linear_attn." in name:
            if name.endswith("in_proj_qkv.weight") or name.endswith("conv1d.weight"):
                q, k, v = value.split([nk * dk, nk * dk, nv * dv], dim=0)
                value = torch.cat([_pad_heads(q, nk, dk), _pad_heads(k, nk, dk), _pad_heads(v, nv, dv)], dim=0)
            elif name.endswith("in_proj_z.weight"):
                value = _pad_heads(value, nv, dv)
            elif name.endswith("linear_attn.norm.weight"):  # its output is sqrt(ratio) x the original's
                value = torch.cat([value, value.new_ones(HEAD - dv)]) * (HEAD // dv) ** -0.5
            elif name.endswith("out_proj.weight"):
                value = _pad_heads(value, nv, dv, axis=1)
        out[name] = value.contiguous()
    return out


def padded_config(config: dict) -> dict:
    ratio = HEAD // config["linear_key_head_dim"]
    return dict(config, linear_key_head_dim=HEAD, linear_value_head_dim=HEAD,
                rms_norm_eps=config["rms_norm_eps"] / ratio ** 2, dtype="bfloat16")


def _check(original: Path, padded: Path) -> float:
    """The largest |logit delta| between the two folders on PROMPTS, both run by transformers in float64."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    from decider.engine.decisions.prompt import build_decision_prompt
    from decider.engine.model.tokenizer import ChatTokenizer

    transformers.utils.logging.disable_progress_bar()
    tokenizer = ChatTokenizer(demo_gguf.DEMO / "tokenizer.json")
    models = [AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64).eval() for folder in (original, padded)]
    worst = 0.0
    for question, options in PROMPTS:
        ids = torch.tensor([list(build_decision_prompt(tokenizer, question, options).ids)])
        with torch.no_grad():
            a, b = (m(ids).logits[0] for m in models)
        worst = max(worst, float((a - b).abs().max()))
    return worst


def vllm_demo(out: Path | None = None) -> Path:
    out = out or CACHE / "demo-model-padded"
    if (out / "model.safetensors").exists():
        return out
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    transformers.utils.logging.disable_progress_bar()
    original = demo_gguf.checkpoint(demo_gguf.DEMO, demo_gguf.CACHE / "checkpoint")
    config = json.loads((original / "config.json").read_text())
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "config.json").write_text(json.dumps(padded_config(config), indent=2))
    source = AutoModelForCausalLM.from_pretrained(original, dtype=torch.float32)
    padded = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(tmp), dtype=torch.float32)
    padded.load_state_dict(padded_state(source.state_dict(), config))
    padded.save_pretrained(tmp)  # f32 weights; the config names bf16, the dtype vLLM's CPU kernels run
    (tmp / "config.json").write_text(json.dumps(padded_config(config), indent=2))
    for extra in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
        if (original / extra).exists():
            shutil.copy(original / extra, tmp / extra)
    worst = _check(original, tmp)
    if worst > TOLERANCE:
        raise SystemExit(f"the padded copy is not the same function (max logit delta {worst:.2e} > {TOLERANCE:g})")
    print(f"padded copy checked: max |logit delta| {worst:.2e} over {len(PROMPTS)} decision prompts (float64)", file=sys.stderr)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def vllm_python(explicit: str | None = None) -> str | None:
    """An interpreter with vLLM's OpenAI server: explicit, $DECIDER_VLLM_PYTHON or this one; else None."""
    for candidate in (explicit, os.environ.get("DECIDER_VLLM_PYTHON"), sys.executable):
        if candidate and subprocess.run([candidate, "-c", "import vllm.entrypoints.openai.api_server"],
                                        capture_output=True).returncode == 0:
            return candidate
    return None


def server_env(python: str) -> dict[str, str]:
    """The server's environment: a small KV cache, and the shim on its path when vLLM's Qwen3.5 module needs it."""
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"))
    plain = subprocess.run([python, "-c", "import vllm.model_executor.models.qwen3_5"], capture_output=True, env=env)
    if plain.returncode != 0:
        broken = subprocess.run([python, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('torchvision') "
                                 "is None)"], capture_output=True).returncode == 0
        if broken:  # installed, yet the module failed: PyPI's torchvision beside torch's +cpu build (docs/models.md)
            raise RuntimeError(f"{python}: torchvision is installed but vLLM's Qwen3.5 module does not import (PyPI's "
                               "torchvision, torchaudio and torchcodec link torch's CUDA build): pip uninstall -y "
                               "torchvision torchaudio torchcodec, and tools/vllm_shim stands in for torchvision")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SHIM), env.get("PYTHONPATH")]))
    return env


def start_server(python: str, model: str | Path, port: int, timeout: float = 900.0) -> tuple[subprocess.Popen, str]:
    """vLLM's OpenAI server on 127.0.0.1:port serving `model` as "demo" in bf16; (process, base URL). Its CPU
    start (compiling the graph) takes minutes on a loaded machine. RuntimeError with its log's tail if it
    does not come up; the caller stops it."""
    log = Path(tempfile.mkdtemp(prefix="decider-vllm-")) / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
             "--port", str(port), "--served-model-name", "demo", "--dtype", "bfloat16", "--max-logprobs", "20",
             "--max-model-len", "4096"],
            stdout=sink, stderr=subprocess.STDOUT, env=server_env(python),
        )
    url = f"http://127.0.0.1:{port}/v1"
    why = wait_until_answering(process, url, timeout, interval=2)
    if why is not None:
        raise RuntimeError(f"vLLM's server {why}:\n" + log.read_text(errors="replace")[-2000:])
    return process, url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/vllm_demo.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="where to write the folder (default: the bench cache)")
    args = parser.parse_args(argv)
    print(vllm_demo(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
