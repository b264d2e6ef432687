"""A spec file's plans: the spec loaded (its auto fields chosen by auto-plan), split into its
stages, and each resolved by the calculator.

Auto-plan's search resolves its candidates with the calculator, and a spec is loaded with its
auto fields chosen wherever one is read (generate, lint, a sweep point, a stage, resume-check):
so loading sits here, above autoplan/ and below everything that reads a spec.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from generator.autoplan import choose
from generator.autoplan.space import searched
from generator.calculator.resolve import PlanError, resolve
from generator.plan.plan import Plan
from generator.plan.resume import changes
from generator.plan.stages import one_schedule
from generator.rules import RULES, Fact
from generator.spec import model
from generator.spec.load import Document
from generator.spec.model import Spec, load_document, stage_documents


def load_spec(path: Path, display: str | None = None, overrides: tuple[str, ...] = ()) -> Spec:
    """Read (with its `extends` chain and `--set` overrides), schema-check and type a spec file.
    Raises UserError with a location."""
    return build_spec(load_document(path, display, overrides))


def build_spec(doc: Document) -> Spec:
    """The typed spec; fields left to auto-plan (``auto`` or a list) are chosen first."""
    auto = None
    if searched(doc.data) and not doc.data.get("sweep"):
        doc, auto = choose(doc)
    return model.build_spec(doc, auto)


def stage_specs(spec: Spec) -> list[Spec]:
    """One spec per stage (spec.model.stage_documents), named <name>-<stage>."""
    return [replace(build_spec(doc), stage=name) for name, doc in stage_documents(spec)]


def resolve_run(spec: Spec) -> list[Plan]:
    """The plans of a spec: one, or one per stage (errors name their stage)."""
    if not spec.stage_names:
        return [resolve(spec)]
    plans, findings = [], []
    for stage_spec in stage_specs(spec):
        try:
            plans.append(resolve(stage_spec))
        except PlanError as exc:
            findings += [replace(f, message=f"[stage {stage_spec.stage}] {f.message}")
                         for f in exc.findings]
    if findings:
        raise PlanError(findings)
    plans = one_schedule(plans) if plans[0].dialect is not None else plans
    refused = stage_resume_findings(plans)
    if refused:
        raise PlanError(refused)
    return plans


def stage_resume_findings(plans: list[Plan]) -> list:
    """GL313: each stage against the checkpoint of the stage before it, as resume-check
    classifies two runs (a change it needs converted or cannot load is refused)."""
    records = [p.to_json() for p in plans]
    out = []
    for k in range(1, len(plans)):
        plan = plans[k]
        for change in changes(records[k - 1], records[k]):
            if change.verdict not in ("convert", "cannot"):
                continue
            fact = Fact((plan.spec.stage, plans[k - 1].spec.stage, change.field, change.old, change.new,
                         change.why, change.fix), _stage_where(plan.spec, k, change.field))
            found = RULES["GL313"].run({"stage_resume": fact})
            if found is not None:
                out.append(found)
    return out


def _stage_where(spec: Spec, index: int, field: str) -> str:
    """Where a stage sets a field: the deepest part of it its entry of stages: has."""
    return str(spec.doc.locate(["stages", index, *field.split(".")]))
