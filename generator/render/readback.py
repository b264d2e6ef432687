"""Read rendered artifacts back with the static readers and compare them with the plan.

A mismatch here is a bug in a template (or a site's replacement template): it is caught at
generation time, before any file is written.
"""

from __future__ import annotations

from generator.plan.plan import Plan
from generator.readers.deepspeed_json import read_deepspeed_json
from generator.readers.megatron_args import read_megatron_args
from generator.readers.sbatch import read_sbatch
from generator.rules import Fact, run_rules

READERS = {
    "ds_config.json": read_deepspeed_json,
    "megatron_args.sh": read_megatron_args,
    "launch.sbatch": read_sbatch,
}
# Facts each artifact must state (the values the three files share).
REQUIRED = {
    "ds_config.json": ("global_batch_size", "micro_batch_size", "gradient_accumulation_steps",
                       "zero_stage"),
    "megatron_args.sh": ("tp", "pp", "micro_batch_size", "global_batch_size", "seq_length",
                         "num_layers", "train_iters", "warmup_iters"),
    "launch.sbatch": ("nodes", "tasks_per_node", "procs_per_node", "world_size"),
}


class RenderMismatch(RuntimeError):
    """A rendered file disagrees with the plan it was rendered from."""


def read_artifacts(files: dict[str, str]) -> dict[str, dict[str, Fact]]:
    return {name: READERS[name](text, name) for name, text in files.items() if name in READERS}


def check_rendered(plan: Plan, files: dict[str, str]) -> None:
    expected = plan.facts()
    problems: list[str] = []
    merged: dict[str, Fact] = {"framework": expected["framework"], "gpu": expected["gpu"]}
    try:
        artifacts = read_artifacts(files)
    except ValueError as exc:
        raise RenderMismatch(f"a rendered file does not parse: {exc}") from exc
    for name, facts in artifacts.items():
        problems += [f"{name}: {key} missing" for key in REQUIRED[name] if key not in facts]
        for key, fact in facts.items():
            if key in expected and fact.value != expected[key].value:
                problems.append(f"{fact.source}: {key} = {fact.value!r}, plan has "
                                f"{expected[key].value!r}")
        merged.update(facts)
    problems += [str(f) for f in run_rules(merged) if f.severity == "error"]
    if problems:
        raise RenderMismatch("rendered files disagree with the plan:\n" + "\n".join(problems))
