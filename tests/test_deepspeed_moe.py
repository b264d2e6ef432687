"""DeepSpeed's MoE layer (microsoft's Megatron-DeepSpeed) under DeepSpeed's engine: ZeRO-1/2 need
the experts' own param groups (--create-moe-param-group, GL116), ZeRO-3 refuses the layer (GL115).

The oracle is DeepSpeed 0.19.8's real engine, 2 CPU processes (gloo) under torchrun, given the
ds_config.json gen-launch writes (tests/oracle/ds_moe_train.py): every case in one start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from generator.artifacts import render_all
from generator.calculator.resolve import PlanError
from generator.lint.engine import lint_texts
from generator.plan.plan import Plan

from .conftest import ROOT, require_oracle
from .helpers import plan_of, spec_dict
from .test_deepspeed_oracle import free_port

FLAG = "--create-moe-param-group"
NUM_EXPERTS, EP = 4, 2


def moe_spec(zero_stage: int, experts: bool = True) -> dict:
    """A tiny run of microsoft's fork on 2 CPU processes, its experts split over both (ep 2)."""
    model = {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 128, "seq_length": 16}
    if experts:
        model.update(num_experts=NUM_EXPERTS, moe_top_k=1)
    return spec_dict(name=f"moe-zero{zero_stage}", framework="megatron-deepspeed", megatron={"fork": "microsoft"},
                     cluster={"nodes": 1, "gpus_per_node": 2, "gpu": "cpu"}, model=model,
                     parallelism={"tp": 1, "pp": 1, "ep": EP if experts else 1, "zero_stage": zero_stage},
                     batch={"micro_batch_size": 2, "gradient_accumulation_steps": 1},
                     training={"precision": "bf16", "train_iters": 20, "warmup": {"iters": 2}})


def generated(tmp_path: Path, data: dict) -> tuple[Plan, dict[str, str]]:
    folder = tmp_path / data["name"]
    folder.mkdir()
    plan = plan_of(folder, data)
    return plan, render_all(plan)


@pytest.mark.parametrize("zero_stage", [0, 1, 2])
def test_the_flag_is_written_where_zero_meets_experts(tmp_path: Path, zero_stage: int) -> None:
    _, files = generated(tmp_path, moe_spec(zero_stage))
    assert (FLAG in files["megatron_args.sh"].split()) == (zero_stage >= 1)


def test_zero3_with_experts_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PlanError) as err:
        plan_of(tmp_path, moe_spec(3))
    (finding,) = [f for f in err.value.findings if f.code == "GL115"]
    assert "num_experts 4 with zero_stage 3" in finding.message


def test_megatron_lm_experts_have_no_such_flag_or_refusal(tmp_path: Path) -> None:
    """Megatron-LM's MoE is its own (no DeepSpeed, no ZeRO stages)."""
    data = spec_dict(model={"num_experts": 8, "moe_top_k": 2}, parallelism={"tp": 1, "pp": 1, "ep": 2})
    assert FLAG not in render_all(plan_of(tmp_path, data))["megatron_args.sh"]


def test_lint_reads_the_flag_and_misses_it_where_it_is_left_out(tmp_path: Path) -> None:
    """The generated files pass lint; the same with the flag taken out is GL116 (both ways)."""
    _, files = generated(tmp_path, moe_spec(2))
    assert [f.code for f in lint_texts(files).findings if f.severity == "error"] == []
    stripped = {**files, "megatron_args.sh": "\n".join(
        line for line in files["megatron_args.sh"].splitlines() if line.strip() != FLAG)}
    found = [f for f in lint_texts(stripped).findings if f.code == "GL116"]
    assert len(found) == 1 and f"add {FLAG}" in found[0].message
    assert found[0].sources[0].startswith("megatron_args.sh:")


def test_lint_flags_zero3_in_the_json_with_experts_in_the_arguments(tmp_path: Path) -> None:
    _, files = generated(tmp_path, moe_spec(2))
    zero3 = json.loads(files["ds_config.json"])
    zero3["zero_optimization"]["stage"] = 3
    files = {**files, "ds_config.json": json.dumps(zero3, indent=2),
             "megatron_args.sh": files["megatron_args.sh"].replace("--zero-stage 2", "--zero-stage 3")}
    assert "GL115" in [f.code for f in lint_texts(files).findings]


@pytest.fixture(scope="module")
def engine_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Every case in one 2-process run (~10 s): name -> what DeepSpeed's engine did."""
    require_oracle("deepspeed")
    tmp = tmp_path_factory.mktemp("ds-moe")
    configs = {}
    for stage in (0, 1, 2):
        plan, files = generated(tmp, moe_spec(stage))
        assert plan.ep == EP and plan.zero_stage == stage
        configs[stage] = tmp / f"zero{stage}.json"
        configs[stage].write_text(files["ds_config.json"])
    # gen-launch refuses ZeRO-3 with experts (GL115): the config of the same run without them
    _, files = generated(tmp, moe_spec(3, experts=False))
    configs[3] = tmp / "zero3.json"
    configs[3].write_text(files["ds_config.json"])
    cases = [("zero1", 1, "moe"), ("zero2", 2, "moe"), ("zero0-plain", 0, "plain"),
             ("zero1-plain", 1, "plain"), ("zero2-plain", 2, "plain"), ("zero3", 3, "moe")]
    result = tmp / "result.json"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc-per-node=2",
                "--master-addr=127.0.0.1", f"--master-port={free_port()}",
                str(ROOT / "tests" / "oracle" / "ds_moe_train.py"),
                *[w for name, stage, groups in cases for w in ("--case", name, str(configs[stage]), groups)],
                "--num-experts", str(NUM_EXPERTS), "--ep-size", str(EP), "--result", str(result)]
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(torchrun, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(result.read_text())


@pytest.mark.oracle
@pytest.mark.parametrize("case", ["zero1", "zero2"])
def test_zero_with_the_moe_param_groups_starts_and_steps(engine_runs: dict, case: str) -> None:
    """The generated config, with the param groups --create-moe-param-group makes: one step, the
    experts trained."""
    got = engine_runs[case]
    assert got == {"ok": True, "error": None, "zero_stage": int(case[-1]), "global_steps": 1,
                   "experts_moved": True}


@pytest.mark.oracle
@pytest.mark.parametrize("case", ["zero1-plain", "zero2-plain"])
def test_zero_without_the_moe_param_groups_stops_at_start_up(engine_runs: dict, case: str) -> None:
    """Without the flag (the fork's plain groups) DeepSpeed's ZeRO optimizer asserts: what GL116
    and the generated flag prevent."""
    got = engine_runs[case]
    assert not got["ok"]
    assert "The model has moe layers, but None of the param groups are marked as MoE" in got["error"]


@pytest.mark.oracle
def test_zero0_needs_no_moe_param_groups(engine_runs: dict) -> None:
    """The control: at ZeRO-0 the plain groups train (no flag is written there)."""
    assert engine_runs["zero0-plain"]["ok"] and engine_runs["zero0-plain"]["global_steps"] == 1


@pytest.mark.oracle
def test_zero3_refuses_deepspeed_moe(engine_runs: dict) -> None:
    """DeepSpeed's engine refuses its MoE layer at ZeRO-3, as GL115 says (and gen-launch refuses
    the spec: test_zero3_with_experts_is_refused)."""
    got = engine_runs["zero3"]
    assert not got["ok"]
    assert "Native DeepSpeed MoE is not supported with ZeRO Stage 3" in got["error"]
