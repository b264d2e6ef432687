"""An sbatch script -> facts: #SBATCH allocation lines and the plan variables it defines."""

from __future__ import annotations

import re
import shlex

from generator.rules import Fact

_SBATCH = re.compile(r"^#SBATCH\s+(--[a-z-]+|-[A-Za-z])(?:[= ](\S+))?")
_ASSIGN = re.compile(r"^(NODES|PROCS_PER_NODE|WORLD_SIZE)=(\S+)\s*$")
_OPTION_FACTS = {"--nodes": "nodes", "-N": "nodes", "--ntasks-per-node": "tasks_per_node",
                 "--gpus-per-node": "gpus_per_node"}
_VARIABLE_FACTS = {"NODES": "launcher_nodes", "PROCS_PER_NODE": "procs_per_node",
                   "WORLD_SIZE": "world_size"}


def read_sbatch(text: str, file: str) -> dict[str, Fact]:
    facts: dict[str, Fact] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        source = f"{file}:{number}"
        option = _SBATCH.match(line)
        if option and option.group(1) in _OPTION_FACTS and option.group(2):
            value = option.group(2)
            if option.group(1) == "--gpus-per-node":
                value = value.rsplit(":", 1)[-1]
            facts[_OPTION_FACTS[option.group(1)]] = Fact(int(value), source)
        assign = _ASSIGN.match(line)
        if assign:
            words = shlex.split(assign.group(2))
            if len(words) == 1 and words[0].isdigit():
                facts[_VARIABLE_FACTS[assign.group(1)]] = Fact(int(words[0]), source)
    return facts
