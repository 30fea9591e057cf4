"""llama.cpp's own GGUF converter, taken from the llama-cpp-python sdist of a given version (so its llama.cpp
is the one that server was built from): used by bench/build.py and tools/demo_gguf.py."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

# What the converter needs from the sdist: the script, its `conversion` package and gguf-py.
_PARTS = ("/gguf-py/", "/conversion/")


def llama_cpp_source(version: str, into: Path) -> Path:
    """The llama.cpp folder (holding convert_hf_to_gguf.py) of llama-cpp-python `version`, extracted under
    `into`; downloaded by pip once, then read from there."""
    root = into / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
    if (root / "convert_hf_to_gguf.py").exists():
        return root
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                    f"llama-cpp-python=={version}", "-d", str(into)], check=True, stdout=subprocess.DEVNULL)
    with tarfile.open(into / f"llama_cpp_python-{version}.tar.gz") as tar:
        members = [m for m in tar.getmembers() if "/vendor/llama.cpp/" in m.name and (
            any(part in m.name for part in _PARTS) or m.name.endswith("convert_hf_to_gguf.py"))]
        tar.extractall(into, members=members, filter="data")
    return root
