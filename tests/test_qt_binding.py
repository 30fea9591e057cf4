"""The installed Qt binding keeps Python's reference counts: emitting a signal from Python must not
release a reference it never took (PySide6 6.12.0 does, once per emit, until the process aborts)."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QObject, Signal  # noqa: E402


class _Probe(QObject):
    number = Signal(int)
    flag = Signal(bool)


def test_emitting_from_python_keeps_the_bool_reference_counts():
    probe = _Probe()
    seen: list[object] = []
    probe.number.connect(seen.append)
    probe.flag.connect(seen.append)
    before = sys.getrefcount(True), sys.getrefcount(False)
    for i in range(200):
        probe.number.emit(i)
        probe.flag.emit(i % 2 == 0)
    del seen[:]
    assert (sys.getrefcount(True), sys.getrefcount(False)) == before
