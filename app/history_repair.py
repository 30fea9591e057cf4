"""A damaged history file is moved aside, never a reason to stop answering.

The history is a record, not a dependency: a file that is not a database, fails SQLite's integrity
check, lost its table or holds a row that is not JSON is renamed `<name>.damaged-<UTC time>` (with its
-wal/-shm sidecars, which must never be replayed onto a fresh file), and a fresh history starts. The
old file stays where the one-line notice says, for the user or a recovery tool.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

log = logging.getLogger("decider.history")

_JSON_COLUMNS = ("options_json", "settings_json", "result_json")


def damage(path: Path) -> str | None:
    """What is wrong with the history file (None: nothing, or no file yet)."""
    if not os.path.lexists(path):
        return None
    if not path.is_file():
        return "not a file"
    try:
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
        try:
            checked = conn.execute("PRAGMA integrity_check(1)").fetchone()
            if checked is None or checked[0] != "ok":
                return "it fails SQLite's integrity check"
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if version >= 1 and "decisions" not in tables:
                return "its decisions table is missing"
            if "decisions" in tables:
                invalid = " OR ".join(f"NOT json_valid({c})" for c in _JSON_COLUMNS)
                bad = conn.execute(f"SELECT count(*) FROM decisions WHERE {invalid}").fetchone()[0]
                if bad:
                    return f"{bad} row{'s' if bad > 1 else ''} with damaged data"
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return " ".join(str(exc).split())[:80]
    return None


def move_aside(path: Path) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while os.path.lexists(aside):
        n += 1
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    os.replace(path, aside)
    for suffix in ("-wal", "-shm", "-journal"):
        sidecar = path.with_name(path.name + suffix)
        if os.path.lexists(sidecar):
            os.replace(sidecar, aside.with_name(aside.name + suffix))
    return aside


def recover(path: Path, announce=None) -> str | None:
    """Check the file; a damaged one is moved aside. The one-line notice (given to `announce`, by
    default logged as a warning), or None."""
    problem = damage(path)
    if problem is None:
        return None
    try:
        aside = move_aside(path)
    except OSError as exc:
        notice = f"the decision history {path} is damaged ({problem}) and could not be moved aside ({exc.strerror})"
    else:
        notice = f"the decision history {path} was damaged ({problem}); it was moved to {aside} and a new history started"
    (announce or log.warning)(notice)
    return notice
