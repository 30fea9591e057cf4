"""Build the vision-language benchmark model: `python -m bench.build_vl` (tools interpreter: torch,
transformers 5.2, optimum-intel 2.2.0).

Under ~/.cache/decider-bench/models/qwen35-0.8b-vl/ (each step cached by a `.complete` marker):
  hf/        random-weight Qwen3_5ForConditionalGeneration (model_type qwen3_5) at the real Qwen3.5-0.8B
             geometry: the text model of bench.build's 0.8b and the real 0.8B vision tower (12 blocks of
             768, 12 heads, MLP 3072, a 48×48 position table, merger to 1024), the real
             preprocessor_config.json (pixel budget 256² – 4096²), the real Qwen3.5 tokenizer. Every
             weight rounded to a float16-representable value and saved as float32, as bench.build does,
             so transformers in float32 and the exports compute with the same weights.
  ov-int8/   `optimum-cli export openvino --task image-text-to-text --weight-format int8 …` — the layout
             real Qwen3.5 OpenVINO exports have (openvino_language_model.xml, text embeddings, the three
             vision IRs), tokenizer IRs included for OpenVINO GenAI's VLMPipeline.

The export runs in a child process (bench.build's), so its memory goes back before anything else runs.
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

from .build import EMBED_STD, TOKENIZER_FILES, _block_broken_torchvision, _special, build_tokenizer, dir_size
from .common import GEOMETRIES, MODELS, ROOT, SEED, TOKENIZER_DIR, is_built, log, mark_built

SIZE = "0.8b"
# Qwen/Qwen3.5-0.8B's vision_config (config.json of the released checkpoint).
VISION_0_8B = dict(
    depth=12,
    hidden_size=768,
    hidden_act="gelu_pytorch_tanh",
    intermediate_size=3072,
    num_heads=12,
    in_channels=3,
    patch_size=16,
    spatial_merge_size=2,
    temporal_patch_size=2,
    out_hidden_size=1024,
    num_position_embeddings=2304,
    initializer_range=0.02,
)
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
EXPORT_ARGS = ["--weight-format", "int8"]


def vl_dir() -> Path:
    return MODELS / f"qwen35-{SIZE}-vl"


def vl_hf_dir() -> Path:
    return vl_dir() / "hf"


def vl_ir_dir() -> Path:
    return vl_dir() / "ov-int8"


def build_checkpoint() -> Path:
    out = vl_hf_dir()
    if is_built(out):
        return out
    _block_broken_torchvision()
    import torch
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    geometry = GEOMETRIES[SIZE]
    log(f"{SIZE}-vl: creating random Qwen3_5ForConditionalGeneration (text {geometry.hidden}×{geometry.layers}, "
        f"vision {VISION_0_8B['hidden_size']}×{VISION_0_8B['depth']}) ...")
    started = time.time()
    torch.manual_seed(SEED)
    im_end, eot = _special("<|im_end|>"), _special("<|endoftext|>")
    text = dict(geometry.config_kwargs(), eos_token_id=im_end, pad_token_id=eot, bos_token_id=None, initializer_range=0.02)
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
    generator = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        embed = model.model.language_model.embed_tokens.weight
        embed.copy_(torch.randn(embed.shape, generator=generator) * EMBED_STD)
        for p in model.parameters():  # float16-representable weights (see bench.build)
            p.copy_(p.half().float())
    model.generation_config.eos_token_id = [im_end, eot]
    model.generation_config.pad_token_id = eot
    model.generation_config.bos_token_id = None
    params = sum(p.numel() for p in model.parameters())
    vision = sum(p.numel() for p in model.model.visual.parameters())
    log(f"{SIZE}-vl: {params / 1e9:.3f} B parameters ({vision / 1e6:.1f} M in the vision tower); saving ...")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    del model
    for name in TOKENIZER_FILES:
        shutil.copyfile(TOKENIZER_DIR / name, tmp / name)
    (tmp / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    mark_built(out, {"parameters": params, "vision_parameters": vision, "seconds": time.time() - started})
    log(f"{SIZE}-vl: checkpoint -> {out} ({dir_size(out) / 2**30:.2f} GiB, {time.time() - started:.0f} s)")
    return out


def export_command(out: Path) -> list[str]:
    return ["optimum-cli", "export", "openvino", "--model", str(vl_hf_dir()), "--task", "image-text-to-text",
            *EXPORT_ARGS, str(out)]


def build_export() -> Path:
    out = vl_ir_dir()
    if is_built(out):
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    argv = export_command(tmp)
    log(f"{SIZE}-vl/int8: {' '.join(argv[:3])} --task image-text-to-text {' '.join(EXPORT_ARGS)} (child process) ...")
    started = time.time()
    logfile = out.with_name(out.name + ".export.log")
    with open(logfile, "w") as fh:
        proc = subprocess.run([sys.executable, "-m", "bench.build", "--export-child", json.dumps(argv)],
                              cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONHASHSEED="0"))
    if proc.returncode != 0 or not (tmp / "openvino_language_model.xml").exists():
        raise RuntimeError(f"{SIZE}-vl/int8: export failed (exit {proc.returncode}); see {logfile}")
    for name in (*TOKENIZER_FILES, "preprocessor_config.json"):
        if not (tmp / name).exists():
            shutil.copyfile(vl_hf_dir() / name, tmp / name)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    info = {"command": " ".join(export_command(out)), "seconds": time.time() - started,
            "bin_bytes": sum(f.stat().st_size for f in out.glob("*.bin"))}
    mark_built(out, info)
    log(f"{SIZE}-vl/int8: exported in {info['seconds']:.0f} s -> {out} ({info['bin_bytes'] / 2**30:.2f} GiB of IR weights)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.build_vl", description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.checkpoint_child:
        build_checkpoint()
        return 0
    build_tokenizer()
    vl_dir().mkdir(parents=True, exist_ok=True)
    if not is_built(vl_hf_dir()):  # in a child: torch's memory goes back to the OS before the export
        subprocess.run([sys.executable, "-m", "bench.build_vl", "--checkpoint-child"], cwd=ROOT, check=True)
    build_export()
    log("build_vl: done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
