"""May a run resume another run's checkpoint? ``gen-launch resume-check OLD NEW``.

Both runs are read as plan.json records (a spec is resolved to its plan first); every change
that matters to a checkpoint is classified by plan/resume.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from generator.errors import UserError
from generator.frameworks import FRAMEWORKS
from generator.plan.resume import SEVERITY, Change, changes, shown
from generator.plan.stages import stage_folder
from generator.run import load_spec, resolve_run
from generator.values import value

SUMMARY = {"safe": "resumes as it is",
           "flags": "resumes once checkpoint.schedule says whose schedule to follow",
           "convert": "resumes after a checkpoint conversion", "cannot": "cannot resume"}
@value
class Check:
    """Whether a run can resume from another run's checkpoints, value by value."""

    old: str
    new: str
    changes: tuple[Change, ...]

    @property
    def verdict(self) -> str:
        return max((c.verdict for c in self.changes), key=SEVERITY.index, default="safe")

    def to_json(self) -> dict[str, Any]:
        return {"old": self.old, "new": self.new, "verdict": self.verdict,
                "summary": SUMMARY[self.verdict], "changes": [c.to_json() for c in self.changes]}

    def text(self) -> str:
        lines = [f"{self.old} -> {self.new}: {SUMMARY[self.verdict]}"]
        fixes: set[str] = set()
        for c in sorted(self.changes, key=lambda c: -SEVERITY.index(c.verdict)):
            lines.append(f"  {c.verdict:8} {c.field}: {shown(c.old)} -> {shown(c.new)}: {c.why}")
            if c.fix:
                lines.append(f"  {'':8} fix: {c.fix if c.fix not in fixes else 'as above'}")
                fixes.add(c.fix)
        if not self.changes:
            lines.append("  nothing that a checkpoint depends on differs")
        counts = {v: sum(c.verdict == v for c in self.changes) for v in SEVERITY}
        lines.append(f"{len(self.changes)} change(s): "
                     + ", ".join(f"{n} {v}" for v, n in counts.items() if n) if self.changes else "0 changes")
        return "\n".join(lines) + "\n"


def run_record(path: Path, overrides: tuple[str, ...] = ()) -> dict[str, Any]:
    """A run as plan.json records it: a plan.json, a generated folder holding one, or a spec
    (with --set overrides)."""
    if path.is_dir():
        path = path / "plan.json"
    if path.suffix == ".json" and overrides:
        raise UserError(f"{path}: --set changes a spec, not a plan.json; give NEW as a spec")
    if path.suffix == ".json":
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UserError(f"{path}: cannot read: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
        if not (isinstance(record, dict) and str(record.get("generator", "")).startswith("gen-launch")):
            raise UserError(f"{path}: not a plan.json that gen-launch wrote (give a spec, a generated "
                            "folder or its plan.json)")
        if "checkpoint" not in record:
            raise UserError(f"{path}: written by {record['generator']}, which did not record the "
                            "checkpoint; regenerate it from its spec (gen-launch generate) or give the spec")
        if record.get("framework") not in FRAMEWORKS:
            raise UserError(f"{path}: framework {record.get('framework')!r} is not one gen-launch writes "
                            f"({', '.join(FRAMEWORKS)}); regenerate it from its spec")
        return record
    spec = load_spec(path, str(path), overrides)
    plans = resolve_run(spec)
    if len(plans) > 1:
        folders = ", ".join(f"launch/{spec.name}/{stage_folder(k, p)}" for k, p in enumerate(plans, 1))
        raise UserError(f"{path}: a run in {len(plans)} stages (its stages resume each other by "
                        f"construction); compare one stage: give its folder ({folders})")
    return plans[0].to_json()


def check(old_path: Path, new_path: Path, overrides: tuple[str, ...] = ()) -> Check:
    """OLD and NEW compared; ``overrides`` (--set) change NEW's spec."""
    old, new = run_record(old_path), run_record(new_path, overrides)
    given = str(new_path) + "".join(f" --set {o}" for o in overrides)
    return Check(str(old_path), given, tuple(changes(old, new)))
