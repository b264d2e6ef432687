"""The published FSDP runs issue 37 found gen-launch could not say (torchtitan FSDP × TP × PP for
Llama 3.1 405B, FSDP × TP for 70B, CP at long context, float8 on H100 and H200, Megatron-FSDP with
EP for Qwen3-235B), each written as a spec: it generates (`gen-launch generate` exits 0) and the
framework's own parser accepts what it wrote with the plan's degrees and batch (torchtitan 0.3.0's
ConfigManager and ParallelDims; Megatron-LM core_v0.16.1's parse_args and validate_args).

torchtitan's layouts are the tables of "TorchTitan: One-stop PyTorch native solution for production
ready LLM pre-training" (Liang et al., arXiv 2410.06511, §3.3, Tables 1-6; Llama 3.1 at sequence
length 8192 unless a table says otherwise, H100 GPUs). The paper's Float8 is torchao's; torchtitan
0.3.0's converters have the rowwise recipe (its tensorwise one is gone), so the specs say rowwise.
Only layouts are taken from the paper (degrees, batch, sequence, activation checkpointing), not its
throughput or memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from generator.calculator.resolve import resolve
from generator.cli import app
from generator.plan.plan import Plan
from generator.run import load_spec

from .conftest import require_oracle
from .test_framework_parsers import cases_of, run_parsers
from .test_torchtitan_oracle import WORKER, _argv

runner = CliRunner()


def _titan(nodes: int, parallelism: dict, batch: dict, preset: str, seq: int, recompute: str,
           gpu: str = "h100-80gb", **more) -> dict:
    """A torchtitan run as the paper ran it: torch.compile and Float8 (rowwise: 0.3.0's recipe)."""
    return {"name": "published", "framework": "torchtitan",
            "cluster": {"nodes": nodes, "gpus_per_node": 8, "gpu": gpu},
            "model": {"preset": preset, "seq_length": seq}, "parallelism": parallelism, "batch": batch,
            "training": {"train_iters": 1000, "lr": 3.0e-4, "warmup": {"iters": 200}, "recompute": recompute,
                         "precision": "fp8", "fp8_recipe": "rowwise"},
            "torchtitan": {"compile": True}, "launch": {"launcher": "torchrun"}, **more}


# torchtitan's async TP (--compile.enable_async_tensor_parallel) with sequence parallelism, as the paper ran TP
ASYNC_TP = {"sequence_parallel": True, "tp_comm_overlap": True}
RUNS = {
    # Table 1: 1D (FSDP) + torch.compile + Float8, Llama 3.1 8B, 8 H100; local batch 2, global 16;
    # selective activation checkpointing
    "8b-fsdp-float8-h100": _titan(1, {"dp_shard": 8}, {"micro_batch_size": 2, "global_batch_size": 16},
                                  "llama3.1-8b", 8192, "selective"),
    # Table 3: the same on 128 H100: local batch 2, global 256
    "8b-fsdp-float8-128-h100": _titan(16, {"dp_shard": 128}, {"micro_batch_size": 2, "global_batch_size": 256},
                                      "llama3.1-8b", 8192, "selective"),
    # Table 1's layout on 8 H200 (the paper ran H100; an H200 run of it is the same words)
    "8b-fsdp-float8-h200": _titan(1, {"dp_shard": 8}, {"micro_batch_size": 2, "global_batch_size": 16},
                                  "llama3.1-8b", 8192, "selective", gpu="h200-141gb"),
    # Table 2: FSDP + CP + torch.compile + Float8, Llama 3.1 8B, 8 H100, local batch 1, full AC:
    # FSDP 4 × CP 2 at sequence length 65,536 (global 1 × dp 4)
    "8b-fsdp-cp-64k": _titan(1, {"dp_shard": 4, "cp": 2}, {"micro_batch_size": 1, "global_batch_size": 4},
                             "llama3.1-8b", 65536, "full"),
    # Table 4: 2D (FSDP 32 × TP 8) + torch.compile + Float8 (its second row: + AsyncTP), Llama 3.1 70B,
    # 256 H100; local batch 16, global 512; full AC; sequence parallel (torchtitan's default with TP)
    "70b-fsdp-tp": _titan(32, {"dp_shard": 32, "tp": 8, **ASYNC_TP},
                          {"micro_batch_size": 16, "global_batch_size": 512},
                          "llama3.1-70b", 8192, "full"),
    # Table 5: 3D (FSDP 8 × TP 8 × PP 8) + torch.compile + Float8 + AsyncTP, Llama 3.1 405B, 512 H100;
    # local batch 32, global 256; full AC; Interleaved 1F1B (vpp 2: 126 layers + 2 in 16 stages of 8).
    # gen-launch's pipeline micro-batch is 1 (torchtitan's default): 32 pipeline micro-batches per step
    "405b-fsdp-tp-pp": _titan(64, {"dp_shard": 8, "tp": 8, "pp": 8, "vpp": 2, **ASYNC_TP},
                              {"micro_batch_size": 1, "global_batch_size": 256}, "llama3.1-405b", 8192, "full"),
    # Table 6: 4D (FSDP 4 × CP 2 × TP 8 × PP 8) + torch.compile + Float8 + AsyncTP + 1F1B, Llama 3.1
    # 405B, 512 H100, local batch 8, full AC, sequence length 65,536 (global 8 × dp 4 = 32)
    "405b-4d-cp-64k": _titan(64, {"dp_shard": 4, "cp": 2, "tp": 8, "pp": 8, **ASYNC_TP},
                             {"micro_batch_size": 1, "global_batch_size": 32}, "llama3.1-405b", 65536, "full"),
    # Megatron-FSDP with EP for Qwen3-235B-A22B. Megatron-LM's own documentation gives the words
    # (docs.nvidia.com/megatron-core, Parallelism Strategies Guide: --use-megatron-fsdp
    # --data-parallel-sharding-strategy optim_grads_params --ckpt-format fsdp_dtensor; the MoE README:
    # "FSDP with EP for MoE models", Qwen3-235B-A22B among its models) but no layout for this model
    # that we could use here: 32 nodes × 8 H100, EP 32 (128 experts, 4 per rank), TP 1, PP 1, full
    # recompute, micro 1, global 1024 at 4096 tokens are our choice, not a published figure
    "qwen3-235b-megatron-fsdp-ep": {
        "name": "published", "framework": "megatron-lm", "megatron": {"version": "core_v0.16"},
        "cluster": {"nodes": 32, "gpus_per_node": 8, "gpu": "h100-80gb"},
        "model": {"preset": "qwen3-235b-a22b", "seq_length": 4096},
        "parallelism": {"tp": 1, "pp": 1, "ep": 32, "megatron_fsdp": True, "zero_stage": 3},
        "batch": {"micro_batch_size": 1, "global_batch_size": 1024},
        "training": {"train_iters": 1000, "lr": 1.0e-4, "warmup": {"iters": 100}, "precision": "bf16",
                     "recompute": "full"}},
}
TITAN = [name for name, data in RUNS.items() if data["framework"] == "torchtitan"]


def _generate(folder: Path, data: dict) -> Plan:
    """`gen-launch generate` of the spec into folder/out (exit 0 asserted), and its plan."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "spec.yaml"
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    result = runner.invoke(app, ["generate", str(spec), "-o", str(folder / "out")])
    assert result.exit_code == 0, result.output
    return resolve(load_spec(spec))


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, tuple[Plan, Path]]:
    base = tmp_path_factory.mktemp("published")
    return {name: (_generate(base / name, data), base / name / "out") for name, data in RUNS.items()}


@pytest.mark.parametrize("name", list(RUNS))
def test_each_published_run_generates_with_its_layout(generated, name: str) -> None:
    plan, out = generated[name]
    p = RUNS[name]["parallelism"]
    assert (plan.tp, plan.pp, plan.cp, plan.ep) == (p.get("tp", 1), p.get("pp", 1), p.get("cp", 1), p.get("ep", 1))
    assert plan.global_batch_size == RUNS[name]["batch"]["global_batch_size"]
    assert plan.dp_shard * plan.dp_replicate * plan.tp * plan.pp * plan.cp == plan.world_size
    if "dp_shard" in p:
        assert (plan.dp_shard, plan.dp_replicate) == (p["dp_shard"], 1)
    assert (out / "launch.sbatch").is_file()


def test_the_262k_context_of_table_2_is_refused_as_torchtitan_0_3_refuses_it(tmp_path: Path) -> None:
    """Table 2's last row (FSDP 1 × CP 8 at 262,144 tokens) ran on torchtitan of December 2024;
    0.3.0's Llama 3.1 flavors keep RoPE at 131,072 positions and Decoder.Config.update_from_config
    raises "Training sequence length 262144 exceeds attention RoPE maximum supported sequence length
    131072": gen-launch refuses it where the spec says the length (GL205)."""
    data = _titan(1, {"dp_shard": 1, "cp": 8}, {"micro_batch_size": 1, "global_batch_size": 1},
                  "llama3.1-8b", 262144, "full")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    result = runner.invoke(app, ["generate", str(tmp_path / "spec.yaml"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "GL205 max_position_embeddings 131072 is less than seq_length 262144" in result.output
    assert "spec.yaml:" in result.output and not (tmp_path / "out").exists()


def _bf16_twin(name: str, tmp: Path) -> Path:
    """The config module of the same run in bf16: torchtitan_config.py without the FP8 converters,
    which need torchao and an SM89+ GPU to be built (the CPU has neither)."""
    data = {**RUNS[name], "training": {**RUNS[name]["training"], "precision": "bf16"}}
    del data["training"]["fp8_recipe"]
    _generate(tmp, data)
    return tmp / "out"


@pytest.mark.oracle
def test_torchtitan_parses_each_published_run_with_the_plans_degrees(generated, tmp_path: Path) -> None:
    """torchtitan 0.3.0's ConfigManager parses each run's command line (torchtitan_args.sh, as
    bash builds it) and its ParallelDims accepts the degrees at the plan's world size. The FP8
    config function is run as generated and stops only where the converters want torchao and the
    GPU; the command line is then parsed with the config module of the same run in bf16."""
    require_oracle("torchtitan")
    cases = []
    for name in TITAN:
        plan, out = generated[name]
        twin = _bf16_twin(name, tmp_path / name)
        cases += [{"folder": str(out), "argv": _argv(out), "world_size": plan.world_size},
                  {"folder": str(twin), "argv": _argv(out), "world_size": plan.world_size}]
    proc = subprocess.run([sys.executable, str(WORKER)], input=json.dumps(cases), capture_output=True, text=True,
                          timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    for i, name in enumerate(TITAN):
        plan, _ = generated[name]
        as_generated, got = results[2 * i], results[2 * i + 1]
        error = as_generated.get("error", "")
        assert "TypeError" not in error and "torchao is not installed" in error, (name, as_generated)
        assert "error" not in got, (name, got)
        assert got["dims"] == {"dp_replicate": plan.dp_replicate, "dp_shard": plan.dp_shard, "cp": plan.cp,
                               "tp": plan.tp, "pp": plan.pp, "ep": plan.ep}, name
        dp = plan.dp_replicate * plan.dp_shard
        assert got["global_batch_size"] == plan.global_batch_size, name
        assert got["global_batch_size"] % (got["local_batch_size"] * dp) == 0, name
        assert got["seq_len"] == plan.model.seq_length == RUNS[name]["model"]["seq_length"], name
        assert got["model"]["layers"] == plan.model.num_layers, name
        assert got["compile"] is True, name
        assert got["async_tp"] is RUNS[name]["parallelism"].get("tp_comm_overlap", False), name
        if plan.tp > 1:
            assert got["sequence_parallel"] is True, name
        if plan.pp > 1:  # the pipeline micro-batches of a local batch, and the schedule's stages
            assert got["local_batch_size"] // got["pp_microbatch_size"] == plan.gradient_accumulation_steps, name
            assert got["pp_stages"] == plan.pp * plan.vpp, name
    (table5,) = [results[2 * TITAN.index("405b-fsdp-tp-pp") + 1]]
    assert (table5["local_batch_size"], table5["pp_schedule"], table5["pp_stages"]) == (32, "Interleaved1F1B", 16)
    table4 = results[2 * TITAN.index("70b-fsdp-tp") + 1]
    assert (table4["local_batch_size"], table4["dims"]["dp_shard"], table4["dims"]["tp"]) == (16, 32, 8)


@pytest.mark.oracle
def test_megatron_parses_the_megatron_fsdp_moe_run(generated, trees) -> None:
    """Megatron-LM core_v0.16.1's parse_args and validate_args accept the Qwen3-235B Megatron-FSDP
    run with EP 32 (no CUDA_DEVICE_MAX_CONNECTIONS=1, as launch.sbatch exports none for it)."""
    plan, out = generated["qwen3-235b-megatron-fsdp-ep"]
    files = {path.name: path.read_text(encoding="utf-8") for path in out.iterdir() if path.is_file()}
    (case,) = cases_of(files, "qwen3-235b")
    case["env"] = {}
    case["show"] = ["use_megatron_fsdp", "data_parallel_sharding_strategy", "expert_model_parallel_size",
                    "num_experts", "ckpt_format"]
    (result,) = run_parsers(trees, [case])
    assert result["ok"], result
    assert result["shown"] == {"use_megatron_fsdp": True, "data_parallel_sharding_strategy": "optim_grads_params",
                               "expert_model_parallel_size": 32, "num_experts": 128, "ckpt_format": "fsdp_dtensor"}
    assert (result["dp"], result["global"]) == (plan.dp, plan.global_batch_size) == (256, 1024)
