"""Reading an input file (a spec, a launch script, a file a script names) without ever blocking
or reading without end: regular files only, never under /dev, /proc or /sys (a FIFO, a terminal,
/dev/zero or /proc/kmsg would block or never end, and their size says 0), at most ``limit``
bytes counted as they are read."""

from __future__ import annotations

import os
import stat
from pathlib import Path

_SPECIAL = ("/dev", "/proc", "/sys")


class Refused(Exception):
    """The file is not read: why (for a finding or a located error)."""


def read_capped(path: Path, limit: int) -> bytes:
    real = os.path.realpath(path)
    if any(real == root or real.startswith(root + "/") for root in _SPECIAL):
        raise Refused(f"a special file ({real}); only regular files are read")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise Refused("file not found") from None
    except IsADirectoryError:
        raise Refused("is a directory") from None
    except OSError as exc:
        raise Refused(f"cannot read: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise Refused("is a directory")
        if not stat.S_ISREG(mode):
            raise Refused("not a regular file (a FIFO, device or socket); not read")
        chunks, total = [], 0
        while chunk := os.read(fd, 1 << 16):
            total += len(chunk)
            if total > limit:
                raise Refused(f"more than {limit:,} bytes; read up to {limit:,}")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise Refused(f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
