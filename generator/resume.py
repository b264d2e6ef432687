"""May a run resume another run's checkpoint? ``gen-launch resume-check OLD NEW``.

Both runs are read as plan.json records (a spec is resolved to its plan first); every change
that matters to a checkpoint is classified by plan/resume.py.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from generator.dialects import dialect
from generator.errors import UserError
from generator.frameworks import FRAMEWORKS
from generator.plan.resume import SEVERITY, Change, changes, shown
from generator.plan.stages import stage_folder
from generator.readfile import MAX_PLAN_BYTES, read_json
from generator.run import build_spec, resolve_run
from generator.spec.model import load_document
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


_INT, _COUNT, _BOOL, _TEXT = "a whole number", "a whole number of at least 1", "true or false", "a string"
_OPT_INT, _OPT_TEXT, _ANY = "a whole number or null", "a string or null", "any value"
# what the comparison (plan/resume.py) reads of a plan.json, and of what type: a hand-edited
# record is checked against it before it is compared
PLAN_SHAPE: dict[str, dict[str, str]] = {
    "model": {"position_embedding": _TEXT, "max_position_embeddings": _COUNT, "seq_length": _COUNT,
              "padded_vocab_size": _COUNT, "num_experts": _OPT_INT},
    "tokenizer": {"type": _OPT_TEXT, "model": _ANY, "vocab_file": _ANY, "merge_file": _ANY},
    "parallelism": {"tp": _COUNT, "pp": _COUNT, "cp": _COUNT, "dp": _COUNT, "zero_stage": _OPT_INT,
                    "distributed_optimizer": _BOOL},
    "batch": {"micro_batch_size": _COUNT, "global_batch_size": _COUNT, "tokens_per_step": _COUNT},
    "checkpoint": {"dir": _ANY, "format": _OPT_TEXT},
    "schedule": {"megatron_counts_in": _TEXT},
    "training": {"precision": _TEXT},
    "scheduler": {}, "launch": {},
}


def _fits(value: Any, kind: str) -> bool:
    whole = isinstance(value, int) and not isinstance(value, bool)
    return {_INT: whole, _COUNT: whole and value >= 1, _BOOL: isinstance(value, bool),
            _TEXT: isinstance(value, str), _OPT_INT: value is None or whole,
            _OPT_TEXT: value is None or isinstance(value, str), _ANY: True}[kind]


def _shown(value: Any) -> str:
    return json.dumps(value)[:60]


def check_record(record: Any, display: str) -> dict[str, Any]:
    """A plan.json record as resume-check reads it, its shape checked (it may be hand-edited):
    a missing or mistyped key is a UserError naming the key and the file."""
    if not (isinstance(record, dict) and str(record.get("generator", "")).startswith("gen-launch")):
        raise UserError(f"{display}: not a plan.json that gen-launch wrote (give a spec, a generated "
                        "folder or its plan.json)")
    regenerate = "; regenerate it from its spec (gen-launch generate) or give the spec"
    if "checkpoint" not in record:
        raise UserError(f"{display}: written by {record['generator']}, which did not record the "
                        "checkpoint" + regenerate)
    if not isinstance(record.get("framework"), str) or record["framework"] not in FRAMEWORKS:
        raise UserError(f"{display}: framework {record.get('framework')!r} is not one gen-launch writes "
                        f"({', '.join(FRAMEWORKS)})" + regenerate)
    for section, keys in PLAN_SHAPE.items():
        if section not in record:
            raise UserError(f"{display}: $.{section}: missing" + regenerate)
        if not isinstance(record[section], dict):
            raise UserError(f"{display}: $.{section}: expected an object, got {_shown(record[section])}"
                            + regenerate)
        for key, kind in keys.items():
            if key not in record[section]:
                raise UserError(f"{display}: $.{section}.{key}: missing" + regenerate)
            if not _fits(record[section][key], kind):
                raise UserError(f"{display}: $.{section}.{key}: expected {kind}, got "
                                f"{_shown(record[section][key])}" + regenerate)
    _check_dialect(record, display, regenerate)
    return record


def _check_dialect(record: dict[str, Any], display: str, regenerate: str) -> None:
    found = record.get("dialect")
    if found is None:
        return
    if not isinstance(found, dict):
        raise UserError(f"{display}: $.dialect: expected an object, got {_shown(found)}" + regenerate)
    name, release = found.get("name"), found.get("release")
    for key, given in (("name", name), ("release", release)):
        if not _fits(given, _OPT_TEXT):
            raise UserError(f"{display}: $.dialect.{key}: expected {_OPT_TEXT}, got {_shown(given)}"
                            + regenerate)
    if name is not None:
        try:
            dialect(name, release)
        except (KeyError, ValueError):
            raise UserError(f"{display}: $.dialect.name: {name!r} is not a dialect (at release "
                            f"{release!r}) gen-launch knows" + regenerate) from None


def run_record(path: Path, overrides: tuple[str, ...] = ()) -> dict[str, Any]:
    """A run as plan.json records it: a plan.json, a generated folder holding one, or a spec
    (with --set overrides). A plan.json is untrusted input: read as the spec reader reads a spec
    (a regular file, bounded in size and depth) and its shape checked."""
    if path.is_dir():
        path = path / "plan.json"
    if path.suffix == ".json" and overrides:
        raise UserError(f"{path}: --set changes a spec, not a plan.json; give NEW as a spec")
    if path.suffix == ".json":
        display = os.fsdecode(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return check_record(read_json(path, display, MAX_PLAN_BYTES), display)
    doc = load_document(path, str(path), overrides)
    sweep = doc.data.get("sweep") if isinstance(doc.data, dict) else None
    if sweep:
        count = len(sweep.get("points", ())) or math.prod(len(v) for v in sweep.get("grid", {}).values())
        raise UserError(f"a sweep of {count:,} points; resume-check compares one run: give one point's "
                        f"folder (launch/{doc.data.get('name')}/<point>) or its plan.json",
                        doc.locate(["sweep"]))
    spec = build_spec(doc)
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
