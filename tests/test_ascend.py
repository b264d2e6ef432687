"""Ascend 910B: the launch script sets up CANN and HCCL instead of CUDA and NCCL, Megatron gets
MindSpeed-LLM's NPU switches, explain gives the source article's advice, NCCL settings warn."""

from __future__ import annotations

import subprocess
from pathlib import Path

from typer.testing import CliRunner

from generator.artifacts import render_all
from generator.calculator.resolve import resolve
from generator.cli import app
from generator.lint.engine import lint_texts
from generator.run import load_spec

from .conftest import ROOT

runner = CliRunner()
SAMPLE = ROOT / "samples" / "llama2-7b-ascend.yaml"


def test_launch_script_sets_up_ascend(tmp_path: Path) -> None:
    """Run the generated script with bash (srun and scontrol stubbed, a stand-in CANN set_env.sh
    that reads an unset variable, as the real one does): the task sees the NPUs and HCCL settings
    and the toolkit's environment."""
    files = render_all(resolve(load_spec(SAMPLE)))
    work, stubs = tmp_path / "run", tmp_path / "bin"
    work.mkdir()
    stubs.mkdir()
    for name, text in files.items():
        (work / name).write_text(text)
    (tmp_path / "set_env.sh").write_text('export ASCEND_HOME_PATH=/opt/cann${UNSET_BY_CANN}\n')
    (stubs / "srun").write_text('#!/bin/bash\nenv > srun.env\nprintf "%s\\0" "$@" > srun.args\n')
    (stubs / "scontrol").write_text("#!/bin/bash\necho node1\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "SLURM_JOB_ID": "7", "SLURM_NNODES": "4",
           "SLURM_JOB_NODELIST": "node[1-4]", "SLURM_CPUS_ON_NODE": "192", "GEN_LAUNCH_DIR": str(work),
           "ASCEND_TOOLKIT_ENV": str(tmp_path / "set_env.sh")}
    subprocess.run(["bash", "launch.sbatch"], cwd=work, env=env, check=True)
    seen = dict(line.split("=", 1) for line in (work / "srun.env").read_text().splitlines() if "=" in line)
    assert seen["ASCEND_RT_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert seen["HCCL_CONNECT_TIMEOUT"] == "1200" and seen["HCCL_EXEC_TIMEOUT"] == "1800"
    assert seen["ASCEND_HOME_PATH"] == "/opt/cann"  # sourced despite set -u
    assert not any(name.startswith("NCCL_") for name in seen)
    args = (work / "srun.args").read_text().split("\0")
    assert "--use-fused-rmsnorm" in args and "--use-flash-attn" in args


def test_megatron_args_and_advice() -> None:
    plan = resolve(load_spec(SAMPLE))
    args = render_all(plan)["megatron_args.sh"]
    for flag in ("--use-flash-attn", "--use-fused-rmsnorm", "--use-fused-swiglu",
                 "--use-fused-rotary-pos-emb", "--no-masked-softmax-fusion"):
        assert f"  {flag}\n" in args
    assert "#SBATCH --gpus-per-node" not in render_all(plan)["launch.sbatch"]  # NPUs: no GPU gres
    explained = runner.invoke(app, ["explain", str(SAMPLE)]).stdout
    assert "Ascend 910B (source article): a micro batch of 4-8 per card (this plan: 4)" in explained


def test_nvidia_plans_get_no_ascend_setup() -> None:
    files = render_all(resolve(load_spec(ROOT / "samples" / "llama3-8b-pretrain.yaml")))
    assert "ASCEND_RT_VISIBLE_DEVICES" not in files["launch.sbatch"]
    assert "--use-fused-rmsnorm" not in files["megatron_args.sh"]


def test_lint_knows_mindspeed_flags_and_nccl_on_ascend() -> None:
    script = ("export HCCL_CONNECT_TIMEOUT=1200\nexport NCCL_DEBUG=INFO\n"
              "torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py --num-layers 4 "
              "--micro-batch-size 1 --global-batch-size 8 --use-flash-attn\n")
    codes = [f.code for f in lint_texts({"train.sh": script}).findings]
    assert codes == ["GL306"]  # --use-flash-attn is MindSpeed's on NPUs, not a removed flag
    nvidia = script.replace("export HCCL_CONNECT_TIMEOUT=1200\n", "")
    # on GPUs current Megatron-LM accepts and ignores it: a note
    assert [(f.code, f.severity) for f in lint_texts({"train.sh": nvidia}).findings] == [("GL222", "note")]
