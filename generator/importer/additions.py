"""What `generate` would add to an imported run that its script does not do: the gradient
reduce and parameter gather overlapped (--overlap-grad-reduce, --overlap-param-gather), the
exit before the time limit (--exit-duration-in-mins) and the chain of jobs. No spec field turns
these off, so the import names each one as a note (with what decides it) rather than leaving a
regenerated script to differ silently."""

from __future__ import annotations

import re

from generator.dialects import Dialect
from generator.errors import UserError
from generator.frameworks import framework_of
from generator.importer.draft import Draft, to_yaml
from generator.plan.plan import overlaps_grad_reduce

_OVERLAP = {
    "overlap_grad_reduce": "the step-time estimate counts the gradient reduce as hidden under the backward "
                           "pass, and the spec has no field that turns it off",
    "overlap_param_gather": "with parallelism.distributed_optimizer the parameter all-gather is overlapped "
                            "with the forward pass, and the spec has no field that turns it off",
}
_EXIT = "exit_duration_minutes"
# a line (outside a comment) that submits a job after another or requeues: the script chains itself
_SUBMITS = re.compile(r"^[^#\n]*(\bsbatch\b[^\n]*--dependency|\bscontrol\s+requeue\b)", re.MULTILINE)


def chains_itself(script: str) -> bool:
    return bool(_SUBMITS.search(script))


def note_additions(draft: Draft, given: set[str], d: Dialect | None, framework: str, chains: bool,
                   schema: dict) -> None:
    """Append a note for each flag or behaviour the imported spec's generated files would add.
    ``given``: the flags the script passes (the entry point's words)."""
    record = framework_of(framework)
    flags = {e.value: e.flag for e in d.entries if e.value in (*_OVERLAP, _EXIT)} if d else {}
    if record.megatron_core and d is not None:
        distributed = draft.get("parallelism.distributed_optimizer") is True
        overlaps = overlaps_grad_reduce(framework, draft.get("parallelism.zero_stage"),
                                        draft.get("parallelism.pp") or 1)
        for value, why in _OVERLAP.items():
            flag = flags.get(value)
            wanted = overlaps and (value == "overlap_grad_reduce" or distributed)
            if flag and wanted and flag not in given:
                draft.notes.append(f"generate adds {flag}, which the script does not pass: {why}")
    if draft.get("checkpoint.dir") is None:
        return  # without a checkpoint folder the plan neither exits early nor chains
    exit_flag = flags.get(_EXIT)
    exits = exit_flag is not None and exit_flag in given
    if exits and chains:
        return
    plan = _plan(draft, schema)
    time = draft.get("slurm.time") or schema["properties"]["slurm"]["properties"]["time"]["default"]
    if plan is None:
        adds = [f for f in ((exit_flag if exit_flag and not exits else None),
                            None if chains else "a chain of jobs") if f]
        draft.notes.append(f"generate adds {' and '.join(adds)} if its estimate of the run is longer than "
                           f"slurm.time ({time}) (the spec is not complete, so not estimated here); the "
                           "script does not: set slurm.time to the run's length to keep one job")
        return
    if plan.exit_duration_minutes is not None and exit_flag and not exits:
        draft.notes.append(f"generate adds {exit_flag} {plan.exit_duration_minutes}, which the script does "
                           f"not pass: the estimate of the run is longer than slurm.time ({time}), so each "
                           "job exits and saves before the limit; a longer slurm.time keeps one job")
    if plan.allocations and not chains:
        draft.notes.append(f"generate chains launch.sbatch over {plan.allocations} jobs, which the script "
                           f"does not: the estimate of the run is longer than slurm.time ({time}); a "
                           "longer slurm.time keeps one job")


def _plan(draft: Draft, schema: dict):
    """The plan of the drafted spec, or None where it is incomplete or does not resolve."""
    # deferred: the calculator (and auto-plan) only for an import that gets this far (start-up)
    from generator.calculator.resolve import resolve
    from generator.run import build_spec
    from generator.spec.load import load_yaml
    from generator.spec.schema import validate

    if any(draft.values.get(path) is None for path in draft.marks):
        return None
    try:
        doc = load_yaml(to_yaml(draft, schema, []), "<imported>")
        validate(doc)
        spec = build_spec(doc)
        return None if spec.stage_names else resolve(spec)
    except UserError:
        return None
