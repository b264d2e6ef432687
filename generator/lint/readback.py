"""Read rendered artifacts back with the linter and compare them with the plan.

A mismatch, or an error the linter would report, is a bug in a template (or in a site's own
template): it is caught at generation time, before any file is written (artifacts.py runs it on
every file set it renders).
"""

from __future__ import annotations

from typing import Any

from generator.lint.engine import lint_texts, views
from generator.plan.plan import Plan
from generator.rules import Fact
from generator.spec.model import MODEL_FACTS

# plan fact -> the fact names the readers give it (script, Megatron arguments, DeepSpeed JSON)
COMPARED = {
    "nodes": ("sbatch_nodes", "launcher_nodes", "accelerate_num_machines", "pods"),
    "tasks_per_node": ("sbatch_ntasks_per_node",),
    "gpus_per_node": ("sbatch_gpus_per_node", "gpus_per_pod"),
    "procs_per_node": ("procs_per_node", "pod_procs"),
    "world_size": ("world_size", "accelerate_num_processes"),
    "dp": ("dp",),
    "tp": ("tp",), "pp": ("pp", "ds_pipeline_stages"), "cp": ("cp", "ds_sequence_parallel_size"),
    "vpp": ("vpp",),
    "micro_batch_size": ("micro_batch_size", "ds_micro_batch_size"),
    "global_batch_size": ("global_batch_size", "ds_train_batch_size"),
    "gradient_accumulation_steps": ("gradient_accumulation_steps", "ds_gradient_accumulation_steps"),
    "zero_stage": ("zero_stage", "ds_zero_stage"),
    "seq_length": ("seq_length",), "num_layers": ("num_layers",),
    "num_attention_heads": ("num_attention_heads",),
    "train_iters": ("train_iters", "ds_total_num_steps"),
    "warmup_iters": ("warmup_iters", "ds_warmup_num_steps"),
    "train_samples": ("train_samples",), "warmup_samples": ("lr_warmup_samples",),
    "precision": ("precision",),
}
# what each artifact must let the linter see
REQUIRED = {
    "launch.sbatch": ("sbatch_nodes", "sbatch_ntasks_per_node", "world_size"),
    "launch.sh": ("launcher_nodes", "procs_per_node"),
    "megatron_args.sh": ("tp", "pp", "micro_batch_size", "global_batch_size", "seq_length",
                         "num_layers", "train_iters", "warmup_iters"),
    "ds_config.json": ("ds_train_batch_size", "ds_micro_batch_size",
                       "ds_gradient_accumulation_steps", "ds_zero_stage"),
    "trainer_args.sh": ("micro_batch_size", "gradient_accumulation_steps", "train_iters",
                        "warmup_iters"),
    "accelerate_config.yaml": ("accelerate_num_processes", "accelerate_num_machines"),
}


class RenderMismatch(RuntimeError):
    """A rendered file disagrees with the plan it was rendered from."""


def check_rendered(plan: Plan, files: dict[str, str], script: str = "launch.sbatch") -> None:
    """``script``: the file that launches the run (launch.sbatch; a pod's launch.sh)."""
    result = lint_texts(files)
    problems = [f"{where}: {what}" for where, what in result.problems]
    # with launch.check_extra_args false the user vouches for the extra words (an entry point's
    # own options), which the linter would judge by the dialect (GL201)
    unchecked = set() if plan.spec.launch.check_extra_args else {"GL201"}
    problems += [str(f) for f in result.findings if f.severity == "error" and f.code not in unchecked]
    scripts = [run for run in result.runs if run.name == script]
    if len(scripts) != 1:
        raise RenderMismatch(f"{script} was not read back as one run")
    facts = views(scripts[0])[0]
    expected = plan_facts(plan)
    if plan.run is not None:  # a stage writes the whole run's schedule (plan/stages.py)
        expected = {k: v for k, v in expected.items() if k not in ("train_iters", "warmup_iters")}
        expected["train_samples"] = Fact(plan.run.end_samples, "plan")
        expected["warmup_samples"] = Fact(plan.run.warmup_samples, "plan")
    for name, keys in REQUIRED.items():
        if name in files or script.endswith("/" + name):
            problems += [f"{name}: the linter does not see {key}" for key in keys if key not in facts]
    for plan_key, names in COMPARED.items():
        want = expected.get(plan_key)
        for fact_name in names:
            got = facts.get(fact_name)
            if want is not None and got is not None and got.value != want.value:
                problems.append(f"{got.source}: {fact_name} = {got.value!r}, plan has {want.value!r}")
    if problems:
        raise RenderMismatch("rendered files disagree with the plan:\n" + "\n".join(problems))


def plan_facts(plan: Plan) -> dict[str, Fact]:
    """Every plan value under the fact names the readers use (source: the plan)."""
    s, m, p = plan.spec, plan.model, plan.spec.parallelism
    values: dict[str, Any] = {
        "framework": s.framework, "gpu": s.cluster.gpu, "nodes": s.cluster.nodes,
        "launcher_nodes": s.cluster.nodes, "world_size": plan.world_size,
        "procs_per_node": plan.procs_per_node, "tasks_per_node": plan.tasks_per_node,
        "tp": plan.tp, "pp": plan.pp, "cp": plan.cp, "ep": plan.ep, "etp": plan.etp,
        "vpp": plan.vpp, "dp": plan.dp,
        "micro_batch_size": plan.micro_batch_size,
        "gradient_accumulation_steps": plan.gradient_accumulation_steps,
        "global_batch_size": plan.global_batch_size,
        "sequence_parallel": p.sequence_parallel,
        "distributed_optimizer": p.distributed_optimizer,
        "zero_stage": plan.zero_stage, "precision": s.training.precision,
        "train_samples": plan.train_samples, "warmup_samples": plan.warmup_samples,
    }
    if plan.batch_ramp is None:  # with a changing batch, the samples are what is exact
        values.update(train_iters=plan.schedule.train_iters,
                      warmup_iters=plan.schedule.warmup_iters)
    if plan.gpu["gres"]:
        values["gpus_per_node"] = s.cluster.gpus_per_node
    for key in ("first_stage_layers", "last_stage_layers"):
        if getattr(p, key) is not None:
            values[key] = getattr(p, key)
    if s.data.packing and plan.uses_megatron:
        values.update(reset_position_ids=True, reset_attention_mask=True, eod_mask_loss=True)
    for key in MODEL_FACTS:
        values[key] = getattr(m, key)
    return {k: Fact(v, "plan") for k, v in values.items()}
