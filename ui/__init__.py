"""Decider's widgets (PySide6). Nothing here imports openvino or the engine runner: widgets talk to
the engine only through the worker's signals (see app/worker.py)."""
