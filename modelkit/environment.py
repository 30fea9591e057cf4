"""The environment a model builder sets before importing tokenizers/transformers/huggingface_hub: offline (every
input is local; nothing is fetched), quiet (no progress bars, errors only) and without tokenizers' fork warning."""

from __future__ import annotations

import os

QUIET_OFFLINE = {
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
}


def quiet_offline() -> None:
    """Set QUIET_OFFLINE where the caller's environment does not say otherwise."""
    for name, value in QUIET_OFFLINE.items():
        os.environ.setdefault(name, value)
