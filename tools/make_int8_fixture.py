"""Export the text fixture's checkpoint in optimum-intel's int8 format: tests/fixtures/models/qwen35-text-int8.

    python -m tools.make_int8_fixture          # needs the convert extra (torch, transformers, optimum-intel)

The same command a user runs (`optimum-cli export openvino --weight-format int8`: u8 weights, a u8 zero point and an
f16 scale per output row), on tests/fixtures/checkpoints/qwen35-text: the fixture for our int8 kernel
(engine/kernels), whose fp32 siblings have no int8 projections to route.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINT = ROOT / "tests/fixtures/checkpoints/qwen35-text"
OUT = ROOT / "tests/fixtures/models/qwen35-text-int8"
KEEP = ("chat_template.jinja", "config.json", "generation_config.json", "openvino_model.bin", "openvino_model.xml",
        "tokenizer.json", "tokenizer_config.json")


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        cli = Path(sys.executable).with_name("optimum-cli")
        code = subprocess.run([str(cli), "export", "openvino", "--model", str(CHECKPOINT), "--task",
                               "text-generation-with-past", "--weight-format", "int8", tmp]).returncode
        if code:
            return code
        OUT.mkdir(parents=True, exist_ok=True)
        for name in KEEP:
            shutil.copy2(Path(tmp) / name, OUT / name)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
