"""Real bash is the oracle of the static reader: each script runs under bash with its launchers
stubbed (they only record their argv), and the reader must find the same commands, word for
word. Values only known at run time are unknown to the reader and match anything."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from generator.readers.bash import read_script
from generator.readers.bash.evaluate import UNKNOWN

from .conftest import ROOT

STUBS = ("srun", "torchrun", "deepspeed", "python", "python3", "sbatch", "accelerate", "llamafactory-cli")  # record their argv
QUIET = {"scontrol": "node1", "hostname": "node1"}  # used inside $(...): answer, record nothing
# not run by the oracle:
# sourced by another; needs its positional arguments; launches through eval (nested, not counted);
# grows an array past the reader's bounds (the reading stops: GL902)
_NOT_RUN = {"config_13b.sh", "bloom-1b3-positional.sh", "ds_pretrain_gpt_125M_MoE64.sh", "sft_blend_upsampled.sh"}
SCRIPTS = [
    *sorted((ROOT / "tests" / "lint_corpus" / "clean").glob("*.s*")),
    *(ROOT / "tests" / "lint_corpus" / "bad" / n for n in
      ("ds_micro_mismatch.sh", "old_flags.sh", "gbs_not_divisible.sbatch", "rampup.slurm", "hostile.sh")),
    *sorted((ROOT / "tests" / "golden").glob("*/launch.sbatch")),
    # the real-style corpus; branches decided by values the scripts set must be the ones bash takes
    *sorted(p for p in (ROOT / "tests" / "lint_corpus" / "real").rglob("*")
            if p.suffix in (".sh", ".slurm", ".sbatch") and p.name not in _NOT_RUN),
]
ENV = {"SLURM_JOB_ID": "42", "SLURM_NNODES": "4", "SLURM_JOB_NODELIST": "node[1-4]",
       "SLURM_JOBID": "42", "SLURM_PROCID": "0", "SLURM_NODEID": "0", "SLURM_CPUS_ON_NODE": "64",
       "GEN_LAUNCH_DIR": "."}


def run_with_stubs(script: Path, tmp_path: Path, job: bool = True) -> list[list[str]]:
    """The stubbed commands bash runs, as the job (SLURM_JOB_ID set) or as the user who submits
    the script (``job`` false)."""
    tmp_path.mkdir(exist_ok=True)
    stubs, log = tmp_path / "bin", tmp_path / "calls"
    stubs.mkdir()
    for name in STUBS:
        (stubs / name).write_text(f'#!/bin/bash\nprintf "%s\\\\0" "{name}" "$@" >> "{log}"\n'
                                  f'printf "\\\\n\\\\0" >> "{log}"\n')
    for name, answer in QUIET.items():
        (stubs / name).write_text(f"#!/bin/bash\necho {answer}\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    for sibling in script.parent.iterdir():
        if sibling.is_file():
            (work / sibling.name).write_bytes(sibling.read_bytes())
    nodes = re.search(r"^#SBATCH --nodes=(\d+)", script.read_text(), re.M)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(tmp_path), **ENV,
           "SLURM_NNODES": nodes.group(1) if nodes else ENV["SLURM_NNODES"]}
    if not job:
        env.pop("SLURM_JOB_ID")
    subprocess.run(["bash", script.name], cwd=work, env=env, capture_output=True, timeout=60, check=False)
    calls = log.read_text().split("\n\0") if log.exists() else []
    return [c.split("\0")[:-1] for c in calls if c]


def static_calls(script: Path, submitting: bool = False) -> list[list[str]]:
    """The stubbed commands the static reader finds: those the job runs, or (``submitting``) the
    sbatch calls a self-submitting script makes when run with bash (``exec sbatch`` peeled)."""
    def beside(path: str) -> tuple[str, str] | None:
        candidate = script.parent / path.rsplit(UNKNOWN, 1)[-1].lstrip("/")
        return (str(candidate), candidate.read_text()) if candidate.is_file() else None

    parsed = read_script(script.read_text(), str(script), beside)
    calls = [[f.text for f in c.argv] for c in parsed.commands if c.depth == 0 and c.argv]
    calls = [argv[1:] if argv[0] == "exec" else argv for argv in calls]
    if submitting:
        return [argv for argv in calls if argv and argv[0] == "sbatch"]
    # a generated script submits itself only when run outside a job: the in-job run never does
    self_submitting = 'if [[ -z "${SLURM_JOB_ID:-}" ]]' in script.read_text()
    return [argv for argv in calls if argv and argv[0] in STUBS and not (self_submitting and argv[0] == "sbatch")]


def same(static: str, real: str) -> bool:
    if UNKNOWN not in static:
        return static == real
    pieces = static.split(UNKNOWN)
    return real.startswith(pieces[0]) and real.endswith(pieces[-1])


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reader_matches_bash(script: Path, tmp_path: Path) -> None:
    real = run_with_stubs(script, tmp_path)
    static = static_calls(script)
    assert real, "bash ran none of the stubbed commands"
    assert len(static) == len(real), (static, real)
    for s_argv, r_argv in zip(static, real, strict=True):
        if s_argv and UNKNOWN in s_argv[-1] and len(r_argv) > len(s_argv):
            r_argv = r_argv[: len(s_argv)]  # an unknown "$@" may stand for several words
        if s_argv and s_argv[-1] == UNKNOWN and len(r_argv) == len(s_argv) - 1:
            s_argv = s_argv[:-1]  # ... or for none
        assert len(s_argv) == len(r_argv), (s_argv, r_argv)
        for s_word, r_word in zip(s_argv, r_argv, strict=True):
            assert same(s_word, r_word), (s_word, r_word, s_argv, r_argv)


GENERATED = sorted((ROOT / "tests" / "golden").glob("*/launch.sbatch"))


@pytest.mark.parametrize("script", GENERATED, ids=lambda p: p.parent.name)
def test_the_submission_path_matches_bash(script: Path, tmp_path: Path) -> None:
    """Run with bash outside a job, a generated script submits itself once (exec sbatch, its
    options also the job's arguments where the run chains); the reader reads that submission,
    and in a chaining script the one each job makes of its successor (--dependency=afterany on
    itself), which bash does only inside a job."""
    real = run_with_stubs(script, tmp_path, job=False)
    static = static_calls(script, submitting=True)
    first = [argv for argv in static if not any(w.startswith("--dependency=afterany") for w in argv)]
    successors = [argv for argv in static if argv not in first]
    chains = "--dependency=singleton" in script.read_text()
    assert len(real) == 1 and len(first) == 1 and len(successors) == (1 if chains else 0), (static, real)
    # "$@" (no options given here) around "$0": bash drops them, the reader keeps them unknown
    words = [w for k, w in enumerate(first[0]) if not (w == "\x00" and k != len(first[0]) - (2 if chains else 1))]
    assert len(words) == len(real[0]) and all(same(s, r) for s, r in zip(words, real[0], strict=True)), \
        (first[0], real[0])



@pytest.mark.parametrize("script", GENERATED, ids=lambda p: p.parent.name)
def test_the_training_step_ends_on_a_failed_task_and_gets_the_nodes_cpus(script: Path, tmp_path: Path) -> None:
    """As bash runs it in a job (64 CPUs on the node): the training step's srun ends every task
    when one fails, gives each task its share of the node's CPUs (or slurm.cpus_per_task), and a
    container gets the image in enroot's form and the launch folder mounted."""
    plan = json.loads((script.parent / "plan.json").read_text())
    spec = yaml.safe_load((ROOT / "samples" / f"{script.parent.name}.yaml").read_text())
    step = [argv for argv in run_with_stubs(script, tmp_path) if argv[0] == "srun"][-1]
    assert "--kill-on-bad-exit=1" in step
    cpus = (spec.get("slurm") or {}).get("cpus_per_task") or 64 // plan["launch"]["tasks_per_node"]
    assert f"--cpus-per-task={cpus}" in step
    image = (spec.get("slurm") or {}).get("container_image")
    if image:
        (given,) = [w for w in step if w.startswith("--container-image=")]
        assert "#" in given and given.replace("#", "/") == f"--container-image={image}"
        (mounts,) = [w for w in step if w.startswith("--container-mounts=")]
        assert mounts.split("=", 1)[1].split(",")[0] == ".:."  # GEN_LAUNCH_DIR, here "."
