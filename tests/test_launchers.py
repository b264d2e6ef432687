"""The launchers' dialect (generator/dialects/launchers.yaml) against the launchers' own parsers:
torch's torchrun, DeepSpeed's launcher runner and accelerate launch, as installed (the oracle
extra pins them). The words launch.sbatch runs are taken from the rendered script as bash would
expand them, and parsed by the real parser."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from generator.calculator.resolve import resolve
from generator.dialects.launchers import launcher, launchers
from generator.plan.plan import Plan
from generator.render import render
from generator.run import load_spec

from .conftest import ROOT, SAMPLES, require_oracle
from .helpers import plan_of, spec_dict

_MODULE = {"torchrun": "torch", "deepspeed": "deepspeed", "accelerate": "accelerate"}
_ENV = {"NODES": "4", "PROCS_PER_NODE": "8", "WORLD_SIZE": "32", "SLURM_JOB_ID": "4242",
        "MASTER_ADDR": "node001", "MASTER_PORT": "24242", "SLURM_NODEID": "1",
        "GEN_LAUNCH_DIR": "/jobs/run", "hostfile": "/tmp/hostfile.x", "CPUS_PER_TASK": "12"}


def launched_argv(sbatch: str, env: dict[str, str]) -> list[str]:
    """The launcher's command line as one node runs it: the training step's srun command (the
    script's last; a preflight runs before it), the
    per-node ``bash -c`` script's ``exec`` line with its "$@", variables expanded from env,
    up to the entry point's own arguments."""
    start = sbatch.rindex("\nsrun ") + 1
    end = sbatch.index('"${EXTRA_ARGS[@]}"', start) + len('"${EXTRA_ARGS[@]}"')
    words = shlex.split(sbatch[start:end].replace("\\\n", " "))
    k = 1
    while words[k].startswith("--"):  # srun's own options
        k += 1
    words = words[k:]
    if words[:2] == ["bash", "-c"]:
        exec_line = next(line for line in words[2].splitlines() if line.startswith("exec "))
        inner = shlex.split(exec_line)[1:]
        words = [w for part in inner for w in (words[4:] if part == "$@" else [part])]
    expand = {**env, "TRAIN_ARGS[@]": "", "EXTRA_ARGS[@]": ""}
    words = [re.sub(r"\$\{([A-Za-z_\[\]@]+)\}", lambda m: expand[m.group(1)], w) for w in words]
    return [w for w in words if w]


def parsed(name: str, argv: list[str]):
    """The launcher's own parser applied to its arguments (the command word(s) removed)."""
    require_oracle(_MODULE[name])
    if name == "torchrun":
        from torch.distributed.run import get_args_parser

        return get_args_parser().parse_args(argv)
    if name == "deepspeed":
        from deepspeed.launcher.runner import parse_args

        return parse_args(argv)
    from accelerate.commands.launch import launch_command_parser

    return launch_command_parser().parse_args(argv)


def _plans() -> list[tuple[str, Plan]]:
    plans = [(s.stem, resolve(load_spec(s))) for s in SAMPLES]
    return [(stem, p) for stem, p in plans if p.spec.launch.launcher in _MODULE]


def _counts(name: str, args) -> tuple[int, int]:
    """(nodes, processes per node) as the launcher read them."""
    if name == "torchrun":
        return int(args.nnodes), int(args.nproc_per_node)
    if name == "deepspeed":
        return args.num_nodes, args.num_gpus
    return args.num_machines, args.num_processes // args.num_machines


@pytest.mark.parametrize("stem,plan", _plans(), ids=[stem for stem, _ in _plans()])
def test_sbatch_launcher_words_are_the_launchers_own(stem: str, plan: Plan) -> None:
    """Every sample's launch.sbatch gives its launcher options that its parser accepts, with the
    plan's nodes and processes per node, and the entry point where the parser expects it."""
    name = plan.spec.launch.launcher
    env = {**_ENV, "NODES": str(plan.spec.cluster.nodes), "PROCS_PER_NODE": str(plan.procs_per_node),
           "WORLD_SIZE": str(plan.world_size)}
    argv = launched_argv(render(plan, "slurm"), env)
    command = launcher(name).commands[0].split()
    assert argv[:len(command)] == command
    args = parsed(name, argv[len(command):])
    assert _counts(name, args) == (plan.spec.cluster.nodes, plan.procs_per_node)
    script = args.user_script if name == "deepspeed" else args.training_script
    assert script == plan.entry_words[-1]  # the entry point, or the module of `-m` (torchtitan.train)
    if name == "accelerate":
        assert args.config_file == "/jobs/run/accelerate_config.yaml"
        assert args.machine_rank == 1 and args.main_process_ip == "node001"
        assert (args.deepspeed_config_file is not None) == (plan.framework == "deepspeed")
    elif name == "deepspeed":
        assert args.no_ssh and args.node_rank == 1 and args.hostfile == "/tmp/hostfile.x"
    else:
        assert (args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id) == ("c10d", "node001:24242", "4242")


def test_torchrun_with_megatron_deepspeed_and_fsdp(tmp_path: Path) -> None:
    """The torchrun words do not depend on the framework; checked for two more."""
    for framework, extra in (("megatron-deepspeed", {}), ("fsdp", {"parallelism": {"tp": 1, "pp": 1}})):
        plan = plan_of(tmp_path, spec_dict(framework=framework, **extra))
        args = parsed("torchrun", launched_argv(render(plan, "slurm"), {**_ENV, "NODES": "2"})[1:])
        assert (int(args.nnodes), int(args.nproc_per_node)) == (2, 8)


@pytest.mark.parametrize("name", [x.name for x in launchers()])
def test_table_options_are_in_the_parser(name: str) -> None:
    """Each option the table writes or reads is one of the parser's, taking a value exactly when
    the table gives one."""
    table = launcher(name)
    for option in table.per_node + table.options:
        defined = table.catalogue.get(option.option)
        assert defined is not None, f"{name} has no {option.option}"
        assert (defined.arity != 0) == (option.shell is not None), option.option


@pytest.mark.parametrize("name", sorted(_MODULE))
def test_catalogues_regenerate(name: str) -> None:
    """scripts/extract_flags.py --launcher, run against the installed launcher, gives the
    catalogue the project keeps (the pinned versions of the oracle extra)."""
    require_oracle(_MODULE[name])
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "extract_flags.py"), "--launcher", name],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    kept = ROOT / "generator" / "dialects" / "catalogues" / f"launcher-{name}.json"
    assert json.loads(proc.stdout) == json.loads(kept.read_text(encoding="utf-8"))


@pytest.mark.parametrize("line,facts", [
    ("torchrun --nnodes=2 --nproc_per_node=4 train.py", {"launcher_nodes": 2, "procs_per_node": 4}),
    ("torchrun --nnodes 1:4 --nproc-per-node 8 --max_restarts 3 train.py", {"launcher_nodes": None, "procs_per_node": 8}),
    ("python -m torch.distributed.run --nnodes 3 --nproc-per-node 2 -m pkg.train --x 1",
     {"launcher_nodes": 3, "procs_per_node": 2, "entrypoint": "pkg.train"}),
    # torchrun's own defaults: --nnodes 1:1, --nproc-per-node 1
    ("torchrun train.py --lr 1", {"launcher_nodes": 1, "procs_per_node": 1, "entrypoint": "train.py"}),
    ("torchrun $TORCHRUN_ARGS train.py", {"launcher_nodes": None, "procs_per_node": None}),
    ("deepspeed -H hosts --num_nodes 2 --num_gpus 8 --no_ssh --master_port 1 train.py",
     {"launcher_nodes": 2, "procs_per_node": 8, "entrypoint": "train.py"}),
    ("accelerate launch --multi-gpu --num-machines 2 --num_processes=16 train.py",
     {"accelerate_num_machines": 2, "accelerate_num_processes": 16, "entrypoint": "train.py"}),
    ("deepspeed train.py --deepspeed", {"launcher_nodes": None, "procs_per_node": None}),  # hostfile's
])
def test_reader_takes_any_spelling(line: str, facts: dict) -> None:
    """The linter's reader reads each launcher's options in every spelling its parser accepts
    (dashes or underscores, --opt=value or --opt value), skipping the options it does not use
    and their values; an elastic --nnodes MIN:MAX gives no node count."""
    from generator.readers.launch import read_launch

    read = read_launch(f"#!/bin/bash\n{line}\n", "run.sh")
    assert {k: read.facts[k].value if k in read.facts else None for k in facts} == facts


@pytest.mark.parametrize(("given", "written"), [
    ("nvcr.io/nvidia/pytorch:25.01-py3", "nvcr.io#nvidia/pytorch:25.01-py3"),
    ("registry.example.com:5000/team/train:1", "registry.example.com:5000#team/train:1"),
    ("localhost/train:dev", "localhost#train:dev"),
    ("nvcr.io#nvidia/pytorch:25.01-py3", "nvcr.io#nvidia/pytorch:25.01-py3"),  # already enroot's form
    ("nvidia/cuda:12.4.1-devel-ubuntu22.04", "nvidia/cuda:12.4.1-devel-ubuntu22.04"),  # Docker Hub
    ("ubuntu:24.04", "ubuntu:24.04"),
    ("/shared/images/pytorch.sqsh", "/shared/images/pytorch.sqsh"),  # a squashfs file
])
def test_container_images_are_written_as_pyxis_reads_them(given: str, written: str) -> None:
    from generator.dialects.slurm import enroot_image

    assert enroot_image(given) == written


def test_a_rewritten_image_is_a_note(tmp_path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_dict(slurm={"container_image": "nvcr.io/nvidia/pytorch:25.01-py3"})))
    notes = resolve(load_spec(path)).notes
    assert any("nvcr.io#nvidia/pytorch:25.01-py3" in n and "Docker Hub" in n for n in notes), notes


@pytest.mark.parametrize(("gpu", "backend", "device"), [("h100-80gb", "nccl", "cuda"), ("mi300x", "nccl", "cuda"),
                                                        ("ascend-910b", "hccl", "npu"), ("gaudi3", "hccl", "hpu"),
                                                        ("cpu", "gloo", None)])
def test_the_preflight_uses_the_accelerators_own_backend(tmp_path, gpu: str, backend: str, device) -> None:
    """slurm.preflight writes preflight.py (valid Python, the plan's world size, the vendor's
    device and collective backend) and launch.sbatch runs it before the training step."""
    from generator.artifacts import render_all

    cluster = {"gpu": gpu, "allow_oversize": True}
    data = spec_dict(slurm={"preflight": True}, cluster=cluster)
    if gpu == "ascend-910b":
        data["model"]["position_embedding"] = "rope"
    files = render_all(plan_of(tmp_path, data))
    script = files["preflight.py"]
    compile(script, "preflight.py", "exec")
    assert f'backend = "{backend}"' in script and "WORLD_SIZE = 16" in script
    assert (f"accelerator = torch.{device}\n" in script) if device else 'torch.device("cpu")' in script
    sbatch = files["launch.sbatch"]
    assert sbatch.index('"${GEN_LAUNCH_DIR}/preflight.py"') < sbatch.rindex("torchrun \\")
    assert "preflight.py" not in render_all(plan_of(tmp_path, spec_dict(), "plain.yaml"))


@pytest.mark.parametrize(("mounts", "warned"), [(None, True), (["/data:/data"], True), (["/lustre:/lustre"], False)])
def test_a_checkpoint_folder_outside_every_container_mount_is_a_warning(tmp_path, mounts, warned) -> None:
    slurm = {"container_image": "nvcr.io#nvidia/pytorch:25.01-py3", **({"container_mounts": mounts} if mounts else {})}
    plan = plan_of(tmp_path, spec_dict(slurm=slurm, checkpoint={"dir": "/lustre/ckpt/run"}))
    codes = [w.code for w in plan.warnings]
    assert ("GL315" in codes) == warned, plan.warnings
