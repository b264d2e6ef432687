"""Compare rendered files with a folder on disk: what `generate --check` reports (a changed file,
a missing one, an extra one) and what the golden-file tests assert. Nothing is written."""

from __future__ import annotations

import difflib
from dataclasses import field
from pathlib import Path

from generator.errors import UserError
from generator.lint.discover import looks_like_spec, read_text
from generator.readfile import MAX_PLAN_BYTES, read_json
from generator.values import record


@record
class Drift:
    """How the files on disk differ from what the spec generates (generate --check)."""

    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    diff: str = ""

    @property
    def clean(self) -> bool:
        return not (self.changed or self.missing or self.extra)

    def summary(self) -> str:
        lines = [f"changed: {p}" for p in self.changed] + [f"missing: {p}" for p in self.missing]
        lines += [f"extra: {p}" for p in self.extra]
        return "\n".join(lines)


def compare(expected: dict[str, str], folder: Path, extras: bool = True) -> Drift:
    """``expected`` maps paths relative to ``folder`` to their text; ``extras=False`` ignores the
    other files in ``folder`` (a check of one --target)."""
    drift = Drift()
    present = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} \
        if folder.is_dir() else set()
    chunks = []
    for name in sorted(expected):
        if name not in present:
            drift.missing.append(name)
            continue
        actual = (folder / name).read_text(encoding="utf-8", errors="replace")
        if actual != expected[name]:
            drift.changed.append(name)
            chunks.append("".join(difflib.unified_diff(
                actual.splitlines(True), expected[name].splitlines(True),
                f"{folder / name} (on disk)", f"{folder / name} (from the spec)")))
    drift.extra = sorted(present - set(expected)) if extras else []
    drift.diff = "".join(chunks)
    return drift


def specs_of(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """The specs to check for files a commit touches (pre-commit passes specs and generated files
    alike): a spec is itself; a generated file is the spec its folder's plan.json names (the
    nearest plan.json at or above it). ([specs, in order, once each], [notes on files skipped])."""
    specs: list[Path] = []
    notes: list[str] = []
    for path in paths:
        text = read_text(path)[0] if path.suffix in (".yaml", ".yml") else None
        if text is not None and looks_like_spec(text):
            spec: Path | None = path
        else:
            plan = next((d / "plan.json" for d in (path.parent, *path.parent.parents)
                         if (d / "plan.json").is_file()), None)
            spec, why = _spec_named_by(plan) if plan else (None, "")
            if spec is None:
                notes.append(f"{path}: no plan.json beside it names a spec{why}; not checked")
                continue
        if spec not in specs:
            specs.append(spec)
    return specs, notes


def _spec_named_by(plan: Path) -> tuple[Path | None, str]:
    """The spec a plan.json names, read as untrusted input (a regular file, bounded in size,
    depth and digits: generator.readfile), and else None with why (" (file:line:col: ...)")."""
    try:
        data = read_json(plan, str(plan), MAX_PLAN_BYTES)
    except UserError as exc:
        return None, f" ({exc})"
    spec = data.get("spec") if isinstance(data, dict) else None
    if not isinstance(spec, str) or not spec:
        return None, f" ({plan}: no \"spec\" names one)"
    return Path(spec), ""
