"""Build engine/kernels/native/libdecider_kernels.so against the installed openvino wheel, and write its stamp.

    python tools/build_native_kernels.py [--check]

Needs cmake and a C++17 compiler (a developer's machine, not a user's: the library is committed built, with a stamp
naming the OpenVINO version it links, the platform and its sources' hash; engine/kernels/native_op.py refuses a
library whose stamp does not match). --check only says whether the committed library matches its sources and this
OpenVINO (exit 1 if not). Rebuild after changing int8_projection.cpp or CMakeLists.txt, or moving OpenVINO's pin.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import openvino as ov

from decider.engine.kernels import native_op


def build() -> None:
    cmake_dir = Path(ov.__file__).parent / "cmake"
    with tempfile.TemporaryDirectory() as work:
        subprocess.run(["cmake", "-S", str(native_op.FOLDER), "-B", work, "-DCMAKE_BUILD_TYPE=Release",
                        f"-DOpenVINO_DIR={cmake_dir}"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", work, "--parallel", "2"], check=True)
        # A new file renamed over the old: a process that has the library loaded keeps its own copy's pages (written
        # in place, its code changed under it and it crashed: a bench running beside a rebuild).
        fresh = native_op.LIBRARY.with_name(native_op.LIBRARY.name + ".new")
        shutil.copyfile(Path(work) / native_op.LIBRARY.name, fresh)
    subprocess.run(["strip", "--strip-unneeded", str(fresh)], check=False)
    os.replace(fresh, native_op.LIBRARY)
    native_op.STAMP.write_text(json.dumps({
        "openvino": ov.get_version(), "platform": native_op.platform_tag(), "source_sha256": native_op.source_hash(),
        "compiler": subprocess.run(["c++", "--version"], capture_output=True, text=True).stdout.splitlines()[0],
    }, indent=1) + "\n", encoding="utf-8")
    print(f"built {native_op.LIBRARY} for OpenVINO {ov.get_version()}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only check the committed library against its sources")
    args = ap.parse_args(argv)
    if args.check:
        why = native_op.unavailable()
        print(why or "the native kernel matches its sources and this OpenVINO")
        return 1 if why else 0
    build()
    native_op.unavailable.cache_clear()
    why = native_op.unavailable()
    print(why or "loads in this process")
    return 1 if why else 0


if __name__ == "__main__":
    raise SystemExit(main())
