"""Decision history in SQLite (stdlib sqlite3, WAL): every decision, its outcome label, exports.

Each operation opens its own short connection, so GUI, API and CLI threads can write at once;
WAL keeps readers off writers' backs and a committed row survives the process being killed.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from decider.engine.decisions.types import LABELS, DecisionRequest, DecisionResult
from decider.engine.core.errors import DeciderError, SettingsError
from decider.engine.core.settings import DECISION_SETTINGS

from .history_repair import recover


log = logging.getLogger("decider.history")

SCHEMA_VERSION = 2

# Each entry takes the database from version i to i+1. Never edit a shipped step: add one.
MIGRATIONS: list[list[str]] = [
    [  # 0 → 1: the first schema
        """CREATE TABLE decisions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at TEXT NOT NULL,
            model TEXT NOT NULL,
            device TEXT NOT NULL,
            question TEXT NOT NULL,
            options_json TEXT NOT NULL,
            settings_json TEXT NOT NULL,
            result_json TEXT NOT NULL,
            choice_index INTEGER NOT NULL,
            coverage REAL NOT NULL,
            right_index INTEGER
        )""",
    ],
    [  # 1 → 2: think mode and outcome time as columns (calibration is per think mode), source of the request
        "ALTER TABLE decisions ADD COLUMN think INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE decisions ADD COLUMN labelled_at TEXT",
        "ALTER TABLE decisions ADD COLUMN source TEXT NOT NULL DEFAULT 'unknown'",
        "UPDATE decisions SET think = COALESCE(json_extract(settings_json, '$.think'), 0)",
        "CREATE INDEX decisions_model_think ON decisions (model, think)",
    ],
]


@dataclass(frozen=True)
class HistoryRow:
    id: int
    created_at: str
    model: str
    device: str
    question: str
    options: list[str]
    settings: dict
    result: dict
    choice_index: int
    coverage: float
    right_index: int | None
    think: bool
    labelled_at: str | None
    source: str

    @property
    def option_logprobs(self) -> list[float]:
        return [o["logprob"] for o in self.result["options"]]

    @property
    def shown_probabilities(self) -> list[float]:
        """The bars the user saw for this decision: debiased where permute ran, else renormalised."""
        return [o["debiased_probability"] if o.get("debiased_probability") is not None else o["probability"]
                for o in self.result["options"]]

    @property
    def shown_logprobs(self) -> list[float]:
        """log of the shown bars: calibration's input, so it measures the numbers the user saw (for a
        single-order decision a softmax of these equals the softmax of the option logprobs at any T)."""
        return [math.log(p) if p > 0 else -math.inf for p in self.shown_probabilities]

    @property
    def drawn(self) -> bool:
        return (self.result.get("choice") or {}).get("mode") == "sampled"

    @property
    def precision(self) -> str:
        """The arithmetic that computed the bars: a local compile's precision ("f32", "bf16 inference, …"), or a
        server and how its bars were read; "unknown" for rows older than the label. Calibration never pools two."""
        engine = self.result.get("engine") or {}
        if engine.get("kind") == "remote":
            return f"{engine.get('server') or 'a server'}: {engine.get('logprobs') or 'unknown'}"
        return str(engine.get("precision") or engine.get("logprobs") or "unknown")

    @property
    def images_seen(self) -> int:
        """How many pictures the decision looked at (0: text only)."""
        images = self.settings.get("images")
        return len(images) if isinstance(images, list) else 0

    @property
    def uncertain(self) -> bool:
        return bool((self.result.get("choice") or {}).get("uncertain"))

    @property
    def shown_field(self) -> str:
        return "debiased_probability" if any(o.get("debiased_probability") is not None for o in self.result["options"]) \
            else "probability"

    def to_dict(self) -> dict:
        return {
            "id": self.id, "created_at": self.created_at, "model": self.model, "device": self.device,
            "question": self.question, "options": self.options, "settings": self.settings, "result": self.result,
            "choice_index": self.choice_index, "coverage": self.coverage, "right_index": self.right_index,
            "think": self.think, "labelled_at": self.labelled_at, "source": self.source,
            "precision": self.precision, "images_seen": self.images_seen,
        }


_COLUMNS = "id, created_at, model, device, question, options_json, settings_json, result_json, choice_index, coverage, right_index, think, labelled_at, source"


def _row(values: tuple) -> HistoryRow:
    (id_, created, model, device, question, options, settings, result, choice, coverage, right, think, labelled, source) = values
    return HistoryRow(id_, created, model, device, question, json.loads(options), json.loads(settings), json.loads(result),
                      choice, coverage, right, bool(think), labelled, source)


def _settings_record(request: DecisionRequest) -> dict:
    """What a row keeps of the request's settings: every sampling setting, every declared decision setting
    the request carries (engine.settings; max_tokens is not one), the system prompt and the context."""
    decision = {s.name: getattr(request, s.name) for s in DECISION_SETTINGS}
    return {**request.sampling.to_dict(), **decision, "system": request.system, "context": request.context}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class HistoryStore:
    def __init__(self, path: str | Path, image_hashes: bool | Callable[[], bool] = True,
                 announce: Callable[[str], None] | None = None):
        self.path = Path(path)
        # What a decision about a screenshot keeps of it: its size and the sha256 of its pixels (never the
        # pixels, never a thumbnail); image_hashes=False keeps only the size. A callable is asked at each
        # decision (the app's setting, which the user may change while a model is loaded).
        self.image_hashes = image_hashes
        self.path.parent.mkdir(parents=True, exist_ok=True)
        check_writable(self.path)  # before recover(): a read-only history is not a damaged one
        self._migrate_lock = threading.Lock()
        self.notice = recover(self.path, announce)  # a damaged file is moved aside: the history starts afresh
        self.migrate()

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            yield conn
        finally:
            conn.close()

    def schema_version(self) -> int:
        with self._connect() as conn:
            return conn.execute("PRAGMA user_version").fetchone()[0]

    def migrate(self) -> None:
        with self._migrate_lock, self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version > SCHEMA_VERSION:
                    raise SettingsError(f"{self.path}: history schema {version} is newer than this Decider ({SCHEMA_VERSION})")
                for step in range(version, SCHEMA_VERSION):
                    for statement in MIGRATIONS[step]:
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def add(self, request: DecisionRequest, result: DecisionResult, *, model: str, device: str, source: str) -> int:
        settings = _settings_record(request)
        if request.images:
            settings["images"] = [self._image_record(pixels) for pixels in request.images]
        with self._connect() as conn:
            cursor = conn.execute(
                "INSERT INTO decisions (created_at, model, device, question, options_json, settings_json, result_json,"
                " choice_index, coverage, think, source) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (_now(), model, device, request.question, json.dumps(list(request.options)), json.dumps(settings),
                 json.dumps(result.to_dict()), result.choice_index, result.coverage, int(request.think), source),
            )
            assert cursor.lastrowid is not None  # an INSERT sets it
            return cursor.lastrowid

    def _image_record(self, pixels) -> dict:
        from .images import image_digest

        record: dict[str, int | str] = {"width": int(pixels.shape[1]), "height": int(pixels.shape[0])}
        if self.image_hashes() if callable(self.image_hashes) else self.image_hashes:
            record["sha256"] = image_digest(pixels)
        return record

    def get(self, decision_id: int) -> HistoryRow:
        with self._connect() as conn:
            values = conn.execute(f"SELECT {_COLUMNS} FROM decisions WHERE id = ?", (decision_id,)).fetchone()
        if values is None:
            raise SettingsError(f"no decision with id {decision_id}")
        return _row(values)

    def label(self, decision_id: int, right: int | str | None) -> HistoryRow:
        """Mark the right option (index or label); None clears the label."""
        row = self.get(decision_id)
        if isinstance(right, str):
            label = right.strip().upper()
            if len(label) != 1 or label not in LABELS[: len(row.options)]:
                raise SettingsError(f"label must be one of {', '.join(LABELS[: len(row.options)])} (got {right!r})")
            right = LABELS.index(label)
        if right is not None and not 0 <= right < len(row.options):
            raise SettingsError(f"option index must be in 0..{len(row.options) - 1} (got {right})")
        with self._connect() as conn:
            conn.execute("UPDATE decisions SET right_index = ?, labelled_at = ? WHERE id = ?",
                         (right, None if right is None else _now(), decision_id))
        return self.get(decision_id)

    def rows(self, *, model: str | None = None, think: bool | None = None, labelled: bool | None = None,
             limit: int | None = None, newest_first: bool = False) -> list[HistoryRow]:
        where: list[str] = []
        args: list[object] = []
        if model is not None:
            where.append("model = ?")
            args.append(model)
        if think is not None:
            where.append("think = ?")
            args.append(int(think))
        if labelled is not None:
            where.append("right_index IS NOT NULL" if labelled else "right_index IS NULL")
        sql = f"SELECT {_COLUMNS} FROM decisions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC" if newest_first else " ORDER BY id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._connect() as conn:
            return [_row(v) for v in conn.execute(sql, args).fetchall()]

    def models(self) -> list[str]:
        with self._connect() as conn:
            return [r[0] for r in conn.execute("SELECT DISTINCT model FROM decisions ORDER BY model")]

    # ----- export -----
    def export_jsonl(self) -> str:
        return "".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in self.rows())

    def export_csv(self) -> str:
        """CSV for spreadsheets: text cells that a spreadsheet would run as a formula are neutralised (OWASP)."""
        out = io.StringIO()
        writer = csv.writer(out)
        width = max((len(r.options) for r in self.rows()), default=0)
        # probability_X is the single-order value, debiased_X the permuted average (empty without permute) and
        # shown_X the one the bars showed; choice_mode says whether the choice was drawn or the bars' argmax.
        header = ["id", "created_at", "model", "device", "source", "think", "question", "choice", "right", "coverage",
                  "total_ms", "choice_mode", "most_likely", "shown", "precision", "images_seen", "uncertain"]
        for i in range(width):
            header += [f"option_{LABELS[i]}", f"logprob_{LABELS[i]}", f"probability_{LABELS[i]}",
                       f"debiased_{LABELS[i]}", f"shown_{LABELS[i]}"]
        writer.writerow(header)
        for r in self.rows():
            shown = r.shown_probabilities
            line = [r.id, r.created_at, _cell(r.model), _cell(r.device), _cell(r.source), int(r.think), _cell(r.question),
                    LABELS[r.choice_index],
                    "" if r.right_index is None else LABELS[r.right_index], f"{r.coverage:.6g}",
                    f"{r.result.get('timings', {}).get('total_s', 0) * 1000:.1f}",
                    "sampled" if r.drawn else "argmax", LABELS[max(range(len(shown)), key=shown.__getitem__)], r.shown_field,
                    _cell(r.precision), r.images_seen, int(r.uncertain)]
            for option, value in zip(r.result["options"], shown):
                debiased = option.get("debiased_probability")
                line += [_cell(option["text"]), repr(option["logprob"]), repr(option["probability"]),
                         "" if debiased is None else repr(debiased), repr(value)]
            writer.writerow(line)
        return out.getvalue()


# A cell starting with one of these is a formula to Excel, LibreOffice and Google Sheets (OWASP "CSV injection").
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(text: str) -> str:
    """User text as a CSV cell a spreadsheet shows as text: a leading quote stops formula evaluation."""
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


class HistoryUnavailable(DeciderError):
    """The history cannot be written here (a read-only file or folder): not damage, nothing to move aside."""


def check_writable(path: Path) -> None:
    """SQLite writes the file and, beside it, its -wal and -shm files: both must be writable."""
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise HistoryUnavailable(f"the folder {path.parent} is read-only")
    if path.is_file() and not os.access(path, os.W_OK):
        raise HistoryUnavailable(f"{path} is read-only")


def default_store(announce: Callable[[str], None] | None = None) -> HistoryStore:
    """The user's history; `announce` is told, in one line, when a damaged file was moved aside."""
    from .config import data_dir

    return HistoryStore(data_dir() / "history.sqlite3", announce=announce)


def open_history(announce: Callable[[str], None] | None = None) -> HistoryStore | None:
    """The user's history for a front end that decides (`ask`, `serve`): None, with one line to `announce`
    (else a logged warning) saying why, when it cannot be opened for writing. Decisions go on without it."""
    try:
        return default_store(announce)
    except (HistoryUnavailable, sqlite3.Error, OSError) as exc:
        reason = str(exc) if isinstance(exc, HistoryUnavailable) else f"{type(exc).__name__}: {exc}"
        (announce or log.warning)(f"history off: {' '.join(reason.split())[:200]}; decisions are not recorded")
        return None

