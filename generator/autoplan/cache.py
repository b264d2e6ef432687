"""Auto-plan's choice, kept by spec: `generate`, `generate --check` and `explain` of a spec
whose layout was searched before read the choice instead of searching again (the 405B search
takes seconds). The key is the spec's searched content and the code that searches (every source
file of the package), so another spec, release or checkout searches anew. Files are JSON under
$GEN_LAUNCH_CACHE/autoplan (generator.resources.cache_dir); one that
cannot be read or written is ignored: the cache only ever saves time."""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from generator.resources import cache_dir

VERSION = 1  # of the file's layout


@cache
def _code_digest() -> str:
    """The package's sources (.py, .yaml, .json), which decide what a search finds."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".yaml", ".json") and p.is_file()):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def key(data: dict[str, Any]) -> str:
    """A spec document's key: its data (as JSON) and the code."""
    text = json.dumps(data, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(f"{VERSION}\0{_code_digest()}\0{text}".encode()).hexdigest()


def load(name: str) -> dict[str, Any] | None:
    try:
        return json.loads((cache_dir("autoplan") / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def store(name: str, entry: dict[str, Any]) -> None:
    path = cache_dir("autoplan") / f"{name}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(entry), encoding="utf-8")
        temporary.replace(path)  # whole or not at all, for concurrent runs
    except OSError:
        pass
