"""Opening a file that may not be one: a path a user named, or a state file anyone could have replaced.

`open()` on a FIFO waits for a writer that may never come (a `--context` FIFO or a prompt-cache entry symlinked
to one hung forever), and on a device such as /dev/zero reads without end. Here the path is opened without
blocking and its type checked on the open descriptor (no window between a check and the open), so anything
but a regular file is refused at once.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO


class NotARegularFile(OSError):
    """The path is a FIFO, a device, a socket (or, with follow_symlinks=False, a symlink): nothing to read."""


def open_regular(path: str | Path, *, follow_symlinks: bool = True) -> BinaryIO:
    """The file opened for reading in binary. FileNotFoundError, IsADirectoryError, NotARegularFile or another
    OSError when it cannot be read as a regular file; never blocks."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise NotARegularFile(errno.ELOOP, "a symbolic link", str(path)) from None
        raise
    try:
        mode = os.fstat(descriptor).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "a folder", str(path))
        if not stat.S_ISREG(mode):
            raise NotARegularFile(errno.EINVAL, "not a regular file", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)  # a regular file's reads never wait; plain reads from here on
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_regular(path: str | Path, limit: int, *, follow_symlinks: bool = True) -> bytes:
    """At most limit + 1 bytes of a regular file (one more than the limit tells the caller it is over)."""
    with open_regular(path, follow_symlinks=follow_symlinks) as handle:
        return handle.read(limit + 1)
