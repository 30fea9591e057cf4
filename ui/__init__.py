"""Decider's widgets (PySide6). Nothing here imports openvino or `app`: the widgets get what they need
from the application through the typed interface in ui/ports.py, built by app/gui.py."""
