"""Small JSON files the user may have edited or broken (settings, saved temperatures): read bounded, as
UTF-8, and every way they can be wrong is one JsonFileError with a one-line reason — never a
traceback, a RecursionError or a UnicodeDecodeError from deep inside the reader."""

from __future__ import annotations

import json
from pathlib import Path

from decider.engine.core.files import NotARegularFile, read_regular

MAX_BYTES = 4 * 2**20  # settings files are a few KB


class JsonFileError(ValueError):
    """The file exists but is not usable JSON; str() is the reason, one line."""


def read_json_file(path: Path, limit: int = MAX_BYTES) -> object:
    """The parsed file. FileNotFoundError when there is none; JsonFileError for anything else wrong."""
    try:
        data = read_regular(path, limit)  # a FIFO is refused at once, not waited on
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise JsonFileError("a folder, not a file") from None
    except NotARegularFile:
        raise JsonFileError("not a regular file") from None
    except OSError as exc:
        raise JsonFileError(f"cannot read it ({exc.strerror})") from None
    if len(data) > limit:
        raise JsonFileError(f"larger than {limit // 2**20} MiB")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise JsonFileError("UTF-16 text; save it as UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise JsonFileError(f"not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise JsonFileError("nested too deeply") from None
    except ValueError as exc:
        raise JsonFileError(f"not valid JSON ({exc})") from None
