"""Reading an input file (a spec, a launch script, a file a script names) without ever blocking
or reading without end: regular files only, never under /dev, /proc or /sys (a FIFO, a terminal,
/dev/zero or /proc/kmsg would block or never end, and their size says 0), at most ``limit``
bytes counted as they are read."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from generator.errors import Location, UserError

_SPECIAL = ("/dev", "/proc", "/sys")
MAX_PLAN_BYTES = 1 << 22  # a plan.json (resume-check, generate --check) is read up to 4 MiB


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


MAX_JSON_DEPTH = 64  # levels of nesting a JSON record the tool reads may have (plan.json needs 4)
MAX_DIGITS = 1000  # digits of one JSON number (Python refuses to convert past 4,300)
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")
_LONG_NUMBER = re.compile(rf"[0-9]{{{MAX_DIGITS + 1},}}")


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def read_json(path: Path, display: str, limit: int) -> object:
    """A strict JSON file as untrusted input: a regular file of at most ``limit`` bytes, UTF-8,
    nested at most MAX_JSON_DEPTH deep, no number longer than MAX_DIGITS digits; anything else
    is a UserError at the place (file:line:col)."""
    try:
        raw = read_capped(path, limit)
    except Refused as exc:
        raise UserError(str(exc), Location(display)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        head = raw[: exc.start].decode("utf-8", errors="replace")
        raise UserError(f"not valid UTF-8 (byte 0x{raw[exc.start]:02x}); it is not a file gen-launch wrote",
                        Location(display, *_position(head, len(head)))) from None
    blank = _STRINGS.sub(lambda m: '"' + " " * (len(m.group()) - 2) + '"', text)  # same offsets
    depth = 0
    for m in _BRACKETS.finditer(blank):
        depth += 1 if m.group() in "[{" else -1
        if depth > MAX_JSON_DEPTH:
            raise UserError(f"nested more than {MAX_JSON_DEPTH} levels deep; not a file gen-launch wrote",
                            Location(display, *_position(text, m.start())))
    long = _LONG_NUMBER.search(blank)
    if long:
        start = long.start()
        end = start + len(re.match(r"[0-9]*", blank[start:]).group())
        raise UserError(f"a number of {end - start:,} digits; at most {MAX_DIGITS:,} are read",
                        Location(display, *_position(text, start)))
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"not JSON: {exc.msg}", Location(display, exc.lineno, exc.colno)) from None
