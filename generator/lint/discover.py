"""Which files to lint: the paths given, and launch files found under given folders. Files are
read as text with bounds (binary and oversized files are reported, not read)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from generator.readfile import Refused, read_capped

SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch", ".json", ".conf", ".yaml", ".yml")
SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".tox",
             ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages"}
MAX_BYTES = 2 << 20


def discover(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """(files named explicitly, files found in folders), in a stable order."""
    explicit, found = [], []
    for path in paths:
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
                found += [Path(root) / f for f in sorted(files) if f.endswith(SUFFIXES)]
        else:
            explicit.append(path)
    return explicit, found


def read_text(path: Path) -> tuple[str | None, str | None]:
    """(text, None) or (None, why it cannot be read)."""
    try:
        raw = read_capped(path, MAX_BYTES)
    except Refused as exc:
        return None, str(exc)
    if b"\0" in raw[:8192]:
        return None, "binary file"
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"


def looks_like_accelerate_config(text: str) -> bool:
    """An accelerate config file (read with the script that names it in --config_file)."""
    return "\ndistributed_type:" in f"\n{text}" and "\nnum_processes:" in f"\n{text}"


_EXECUTOR_KIND = re.compile(r"(?m)^kind:\s*[\"']?(TrainJob|PyTorchJob|JobSet)\b")


def looks_like_executor_file(text: str) -> bool:
    """A Kubernetes job (TrainJob, PyTorchJob, JobSet) or a SkyPilot task (num_nodes and run)."""
    return _EXECUTOR_KIND.search(text) is not None or \
        ("\nnum_nodes:" in f"\n{text}" and "\nrun:" in f"\n{text}")


def looks_like_spec(text: str) -> bool:
    """A gen-launch spec (YAML with framework and cluster sections)."""
    return "\nframework:" in f"\n{text}" and "\ncluster:" in f"\n{text}"
