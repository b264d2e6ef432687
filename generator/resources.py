"""Where the data folders live: inside the wheel (``generator/templates``) or beside the package
in a source checkout or editable install (``templates/``), where hatchling does not map them;
and the cache folder, where a run keeps what the next one can reuse (auto-plan's choices, the
compiled templates, the parsed data files). A cache only ever saves time: one that cannot be
read or written is ignored."""

from __future__ import annotations

import hashlib
import marshal
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """The folder ``name`` (``templates`` or ``schemas``); FileNotFoundError if neither exists."""
    for candidate in (_PACKAGE_DIR / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"gen-launch data folder {name!r} not found beside {_PACKAGE_DIR}")


def cache_dir(part: str) -> Path:
    """``$GEN_LAUNCH_CACHE/part`` (default: $XDG_CACHE_HOME/gen-launch, else ~/.cache/gen-launch)."""
    given = os.environ.get("GEN_LAUNCH_CACHE")
    if given:
        return Path(given) / part
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gen-launch" / part


def private_dir(path: Path) -> bool:
    """Whether ``path`` is a folder only this user can write (made so when missing): what the
    cache keeps is used as it is (the compiled templates are run), so a folder other users can
    write to is not used at all."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        status = path.stat()
    except OSError:
        return False
    owner = getattr(os, "getuid", lambda: status.st_uid)()
    return status.st_uid == owner and not status.st_mode & 0o022


@cache
def read_yaml(path: Path):
    """A data file shipped in the package (presets, rule tables), read once, with libyaml's safe
    loader where PyYAML has it (the same documents, ten times faster than the pure-Python one)."""
    return read_kept(path, "yaml", _parse_yaml)


def _parse_yaml(text: str):
    import yaml  # deferred: yaml only when a data file is not in the cache (read_kept)

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def read_kept(path: Path, kind: str, parse: Callable[[str], Any]):
    """``parse(text)`` of a data file shipped in the package, kept in the cache keyed by the
    file's text and ``kind`` (name a new kind when ``parse`` changes what it makes): the next run
    reads it back with marshal, ~20× faster than parsing the YAML or JSON again. ``parse`` must
    return what marshal writes (dicts, lists, tuples, strings, numbers, None)."""
    text = path.read_text(encoding="utf-8")
    folder = cache_dir("data")
    kept = folder / f"{path.stem}-{kind}-{hashlib.sha1(text.encode()).hexdigest()}.marshal"
    private = private_dir(folder)
    if private:
        try:
            return marshal.loads(kept.read_bytes())
        except (OSError, EOFError, ValueError, TypeError):
            pass
    data = parse(text)
    if private:
        _keep(kept, data)
    return data


def _keep(path: Path, data) -> None:
    """Write ``data`` to the cache file ``path``, whole or not at all (concurrent runs)."""
    try:
        blob = marshal.dumps(data)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        temporary.write_bytes(blob)
        temporary.replace(path)
    except (OSError, ValueError):  # ValueError: a value marshal cannot write (a YAML date)
        pass
