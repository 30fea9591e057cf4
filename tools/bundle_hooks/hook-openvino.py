"""PyInstaller hook for openvino (the library ships none): its device plugins and frontends are opened with
dlopen() by file name from the folder of libopenvino.so, so no import or link names them and PyInstaller's
dependency scan misses every one. Collect them into openvino/libs/ beside libopenvino.so, where OpenVINO
looks, and leave out the frontends for model formats Decider never reads (it reads OpenVINO IR only)."""

from pathlib import Path

from PyInstaller.utils.hooks import collect_data_files, get_package_paths

# ONNX, PaddlePaddle, PyTorch, TensorFlow (Lite), JAX and GGUF readers: ~20 MB that no bundled code path loads.
_UNREAD_FORMATS = ("onnx", "paddle", "pytorch", "tensorflow", "jax", "gguf")


def _read_by_decider(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]  # libopenvino_tensorflow_lite_frontend.so.2641, py_onnx_frontend.cpython-...so
    return not any(f"_{fmt}" in name and "_frontend" in name for fmt in _UNREAD_FORMATS)


_LIBS = Path(get_package_paths("openvino")[1]) / "libs"
# libs/*.so and the versioned libs/*.so.NNNN (the frontends, the IR reader among them): collect_dynamic_libs
# matches the first kind only, and without the IR frontend no model can be read.
binaries = [(str(lib), "openvino/libs") for lib in sorted(_LIBS.glob("*.so*")) if _read_by_decider(str(lib))]
# The GPU plugin's kernel tuning cache (libs/cache.json) is read from beside the plugin.
datas = collect_data_files("openvino", includes=["libs/cache.json"])
