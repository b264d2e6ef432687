"""Every rule code and the module of generator/rules/ that defines it: the one map from a code to
its check (as ruff's codes.rs). The registry imports a module when one of its codes is first asked
for, so `gen-launch rules GL004` loads launch.py alone; a test holds this table and the ``@rule``
definitions to each other (no code missing, none registered from another module).

Codes are a contract: a code is never renumbered or reused. A new rule takes the next free code of
its range (GL0xx batch and parallel arithmetic, GL1xx DeepSpeed, GL2xx Megatron, GL3xx Slurm, GL9xx
reading) and one line here; the order is the order `gen-launch rules` and docs/checks.md list them.
"""

from __future__ import annotations

CODES: dict[str, str] = {
    # generator/rules/batch.py
    "GL001": "batch",
    "GL002": "batch",
    "GL003": "batch",
    "GL011": "batch",
    "GL012": "batch",
    "GL013": "batch",
    "GL014": "batch",
    "GL015": "batch",
    "GL016": "batch",
    "GL017": "batch",
    "GL018": "batch",
    "GL019": "batch",
    "GL020": "batch",
    "GL024": "batch",
    "GL025": "batch",
    "GL021": "batch",
    "GL026": "batch",
    # generator/rules/deepspeed.py
    "GL104": "deepspeed",
    "GL106": "deepspeed",
    "GL107": "deepspeed",
    "GL108": "deepspeed",
    "GL109": "deepspeed",
    "GL110": "deepspeed",
    "GL111": "deepspeed",
    "GL115": "deepspeed",
    "GL116": "deepspeed",
    # generator/rules/dialect.py
    "GL218": "dialect",
    "GL219": "dialect",
    "GL220": "dialect",
    "GL221": "dialect",
    "GL223": "dialect",
    # generator/rules/flags.py
    "GL201": "flags",
    "GL222": "flags",
    "GL227": "flags",
    "GL228": "flags",
    # generator/rules/fsdp.py
    "GL112": "fsdp",
    "GL113": "fsdp",
    "GL114": "fsdp",
    "GL117": "fsdp",
    "GL240": "fsdp",
    "GL241": "fsdp",
    # generator/rules/launch.py
    "GL004": "launch",
    "GL005": "launch",
    "GL006": "launch",
    "GL007": "launch",
    "GL022": "launch",
    "GL023": "launch",
    "GL101": "launch",
    "GL102": "launch",
    "GL103": "launch",
    "GL105": "launch",
    "GL202": "launch",
    "GL203": "launch",
    "GL301": "launch",
    "GL302": "launch",
    "GL303": "launch",
    "GL306": "launch",
    # generator/rules/megatron.py
    "GL008": "megatron",
    "GL009": "megatron",
    "GL214": "megatron",
    "GL010": "megatron",
    "GL205": "megatron",
    "GL206": "megatron",
    "GL207": "megatron",
    "GL208": "megatron",
    "GL209": "megatron",
    "GL210": "megatron",
    "GL211": "megatron",
    "GL212": "megatron",
    "GL213": "megatron",
    "GL215": "megatron",
    "GL216": "megatron",
    "GL217": "megatron",
    "GL204": "megatron",
    "GL224": "megatron",
    "GL225": "megatron",
    "GL226": "megatron",
    "GL229": "megatron",
    "GL230": "megatron",
    "GL231": "megatron",
    "GL232": "megatron",
    "GL233": "megatron",
    "GL234": "megatron",
    "GL235": "megatron",
    "GL236": "megatron",
    "GL237": "megatron",
    "GL238": "megatron",
    # generator/rules/executors.py
    "GL320": "executors",
    "GL321": "executors",
    # generator/rules/reading.py
    "GL900": "reading",
    "GL901": "reading",
    "GL902": "reading",
    "GL903": "reading",
    # generator/rules/resume.py
    "GL313": "resume",
    # generator/rules/slurm.py
    "GL304": "slurm",
    "GL305": "slurm",
    "GL307": "slurm",
    "GL308": "slurm",
    "GL309": "slurm",
    "GL310": "slurm",
    "GL311": "slurm",
    "GL314": "slurm",
    "GL315": "slurm",
}
