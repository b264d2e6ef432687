"""FP8 (Transformer Engine flags, refused without FP8 tensor cores or outside Megatron-LM, in the
memory and time estimates) and sequence packing (Megatron's reset flags, the data per step with
and without padding)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from generator.artifacts import render_all
from generator.cli import app
from generator.estimate.memory import Layout, estimate_memory, state_bytes_per_param
from generator.estimate.params import Shape
from generator.estimate.performance import Hardware, estimate_performance, fp8_cast_bytes, fp8_gemm_speedup
from generator.lint.engine import lint_texts

from .helpers import plan_of, spec_dict

runner = CliRunner()


def _flags(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("--")]


@pytest.mark.parametrize("dist_opt", [True, False])
def test_fp8_flags(tmp_path: Path, dist_opt: bool) -> None:
    data = spec_dict(parallelism={"distributed_optimizer": dist_opt}, training={"precision": "fp8"})
    args = _flags(render_all(plan_of(tmp_path, data))["megatron_args.sh"])
    assert {"--bf16", "--fp8-format hybrid", "--fp8-amax-history-len 1024",
            "--fp8-amax-compute-algo max"} <= set(args)
    assert ("--fp8-param-gather" in args) == dist_opt  # Megatron: needs the distributed optimizer


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize(("changes", "message"), [
    ({"cluster": {"gpu": "a100-80gb"}}, "precision fp8 needs FP8 tensor cores, which a100-80gb does not have"),
    ({"cluster": {"gpu": "ascend-910b"}}, "which ascend-910b does not have"),
    ({"framework": "megatron-deepspeed"}, "is a Megatron-LM feature, not Megatron-DeepSpeed (microsoft)'s"),
])
def test_fp8_refused(tmp_path: Path, changes: dict, message: str) -> None:
    data = spec_dict(training={"precision": "fp8"}, **changes)
    result = runner.invoke(app, ["generate", str(_write(tmp_path, data)), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "GL215" in result.stderr and message in result.stderr
    line = next(i for i, text in enumerate(_write(tmp_path, data).read_text().splitlines(), 1)
                if "precision: fp8" in text)
    assert f"spec.yaml:{line}:" in result.stderr  # located at the precision
    assert not (tmp_path / "o").exists()


def test_fp8_in_the_estimates(tmp_path: Path) -> None:
    base = spec_dict(cluster={"nodes": 2, "gpus_per_node": 8, "gpu": "h100-80gb"},
                     parallelism={"distributed_optimizer": True, "tp": 2, "pp": 1})
    bf16 = plan_of(tmp_path, base).estimate()
    fp8 = plan_of(tmp_path, spec_dict(**{**base, "training": {**base["training"], "precision": "fp8"}}),
                  "fp8.yaml").estimate()
    speedup = bf16.performance.compute_s / fp8.performance.compute_s
    from generator import presets
    from generator.estimate.plan import hardware_of

    hw = hardware_of(presets.gpus()["h100-80gb"], "fp8", 8)
    assert 1.0 < speedup < fp8_gemm_speedup(hw)  # the attention core and the logits stay in bf16
    assert fp8.performance.mfu > bf16.performance.mfu  # against the same BF16 peak
    assert fp8.memory.weights == pytest.approx(bf16.memory.weights / 2)  # FP8 parameter gather
    assert fp8.memory.activations < bf16.memory.activations
    assert state_bytes_per_param("fp8", "none", 8) == (3.0, 4.0, 12.0)  # bf16 + its FP8 copy
    shape = Shape(24, 2048, 16, 16, 8192, 32000, 4096)
    layouts = [Layout(precision=p, tp=2, sequence_parallel=True) for p in ("bf16", "fp8")]
    act = [estimate_memory(shape, layout, 80).activations for layout in layouts]
    # (34 - (2 + 1 + 4)) / 34 of the bf16 activations per layer: the four GEMM inputs in one byte
    assert act[1] / act[0] == pytest.approx(27 / 34, rel=0.02)


LLAMA3_70B = Shape(80, 8192, 64, 8, 28672, 128512, 8192, gated=True, rmsnorm=True, bias=False,
                   learned_positions=False, tie_embeddings=False)
H100 = Hardware(989, 0.59, 3.35, 450, 50, 8, 1979)


def _step(shape: Shape, hw: Hardware = H100, **settings) -> object:
    layout = Layout(**{"tp": 4, "pp": 8, "dp": 2, "micro_batch_size": 1, "num_microbatches": 64,
                       "sequence_parallel": True, "recompute": "selective",
                       "sharding": "distributed_optimizer", **settings})
    return estimate_performance(shape, layout, hw, 128)


def test_fp8_casts_by_recipe() -> None:
    """Quantizing the FP8 GEMMs' operands costs memory traffic by recipe. Llama-3-70B at t 4
    with sequence parallelism quantizes, per token and layer on one GPU, 13,312 elements forward
    (QKV and fc1 inputs 8192 each over 4 sequence shards; projection and fc2 inputs 8192 and
    28672 over 4) and 20,992 backward (projection and fc2 output gradients 8192 each over 4; QKV
    10240 and SwiGLU fc1 57344 over 4): 4 bytes each with delayed scaling, 6 with current
    (tensorwise) scaling's extra amax read, 4 for the block scalings."""
    layout = Layout(tp=4, sequence_parallel=True)
    assert fp8_cast_bytes(LLAMA3_70B, layout) == 4 * (13312 + 20992)
    assert fp8_cast_bytes(LLAMA3_70B, Layout(tp=4, sequence_parallel=True, fp8_recipe="tensorwise")) == \
        6 * (13312 + 20992)
    delayed, tensorwise, blockwise = (_step(LLAMA3_70B, precision="fp8", fp8_recipe=r)
                                      for r in ("delayed", "tensorwise", "blockwise"))
    assert delayed.memory_s < tensorwise.memory_s and blockwise.memory_s == delayed.memory_s
    assert delayed.compute_s == tensorwise.compute_s  # the same GEMMs
    bf16 = _step(LLAMA3_70B, precision="bf16")
    assert bf16.memory_s < delayed.memory_s  # bf16 casts nothing


def test_fp8_gains_grow_with_the_gemms() -> None:
    """The casts scale with the tokens and the layer's widths, the GEMM gain with the FLOPs: a
    1B-parameter model at t 1 gains less from FP8 than Llama-3-70B (as the NeMo FP8 blog post and
    every small-model report find); where the FP8 peak is no higher than bf16's (Gaudi 3's data
    sheet), FP8 only adds the casts; without FP8 tensor cores nothing changes."""
    small = Shape(16, 2048, 16, 16, 8192, 32000, 2048, gated=True, rmsnorm=True, bias=False)
    gain = {}
    for name, shape, tp in (("small", small, 1), ("70b", LLAMA3_70B, 4)):
        bf16, fp8 = (_step(shape, tp=tp, sequence_parallel=tp > 1, precision=p) for p in ("bf16", "fp8"))
        gain[name] = bf16.step_time_s / fp8.step_time_s
    assert 1.0 < gain["small"] < gain["70b"] < fp8_gemm_speedup(H100)
    same_peak = Hardware(989, 0.59, 3.35, 450, 50, 8, 989)
    assert fp8_gemm_speedup(same_peak) == 1.0  # never slower than bf16
    assert _step(LLAMA3_70B, same_peak, precision="fp8").compute_s == _step(LLAMA3_70B, same_peak).compute_s
    assert _step(LLAMA3_70B, same_peak, precision="fp8").step_time_s > \
        _step(LLAMA3_70B, same_peak, precision="bf16").step_time_s  # the casts
    no_fp8 = Hardware(989, 0.59, 3.35, 450, 50, 8, None)
    assert _step(LLAMA3_70B, no_fp8, precision="fp8").compute_s == _step(LLAMA3_70B, no_fp8).compute_s


def test_fp8_parameter_gather_moves_one_byte() -> None:
    """With the distributed optimizer an FP8 run gathers its FP8 parameters (--fp8-param-gather,
    rendered with it): exposed, a reduce-scatter of fp32 gradients (4 bytes) and a 1-byte
    all-gather against bf16's 4 + 2."""
    bf16, fp8 = (_step(LLAMA3_70B, precision=p, overlap_grad_reduce=False, dp=8) for p in ("bf16", "fp8"))
    assert fp8.dp_comm_s / bf16.dp_comm_s == pytest.approx(5 / 6)


def test_the_spec_fp8_recipe_reaches_the_estimate(tmp_path: Path) -> None:
    base = spec_dict(cluster={"nodes": 2, "gpus_per_node": 8, "gpu": "h100-80gb"},
                     parallelism={"distributed_optimizer": True, "tp": 2, "pp": 1})
    casts = {}
    for recipe in ("delayed", "tensorwise"):
        data = spec_dict(**{**base, "training": {**base["training"], "precision": "fp8", "fp8_recipe": recipe}})
        plan = plan_of(tmp_path, data, f"{recipe}.yaml")
        performance = plan.estimate().to_json()["performance"]
        casts[recipe] = performance["step_breakdown_s"]["of_memory_bound_fp8_casts"]
        assert performance["fp8_gemm_speedup"] == pytest.approx(1.76, abs=0.01)
        result = runner.invoke(app, ["explain", str(tmp_path / f"{recipe}.yaml")])
        assert f"FP8 ({recipe} scaling): linear GEMMs 1.76× their bf16 speed; casting their operands" in result.output
    assert 0 < casts["delayed"] < casts["tensorwise"]
    bf16 = plan_of(tmp_path, base, "bf16.yaml").estimate().to_json()["performance"]
    assert bf16["fp8_gemm_speedup"] is None and bf16["step_breakdown_s"]["of_memory_bound_fp8_casts"] == 0


def test_packing_flags_and_data_per_step(tmp_path: Path) -> None:
    data = spec_dict(data={"packing": True, "average_sequence_length": 500})
    plan = plan_of(tmp_path, data)
    args = _flags(render_all(plan)["megatron_args.sh"])
    assert {"--reset-position-ids", "--reset-attention-mask", "--eod-mask-loss"} <= set(args)
    d = json.loads(render_all(plan)["plan.json"])["data"]
    assert d["data_tokens_per_step_packed"] == plan.global_batch_size * 2048
    assert d["data_tokens_per_step_padded"] == plan.global_batch_size * 500
    explained = runner.invoke(app, ["explain", str(_write(tmp_path, data))]).stdout
    assert f"{plan.global_batch_size * 2048:,} packed vs {plan.global_batch_size * 500:,} padded" in explained
    unpacked = _flags(render_all(plan_of(tmp_path, spec_dict(), "plain.yaml"))["megatron_args.sh"])
    assert "--reset-attention-mask" not in unpacked


def test_packing_with_plain_deepspeed_warns(tmp_path: Path) -> None:
    data = spec_dict(framework="deepspeed", parallelism={"tp": 1, "pp": 1}, data={"packing": True})
    plan = plan_of(tmp_path, data)
    assert [w.code for w in plan.warnings] == ["GL216"]


def test_lint_reads_fp8_and_packing() -> None:
    script = ("torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py --num-layers 4 "
              "--micro-batch-size 1 --global-batch-size 8 --bf16 --fp8-format hybrid "
              "--reset-position-ids --reset-attention-mask --eod-mask-loss\n")
    run = lint_texts({"train.sh": script}).runs[0]
    assert run.facts["precision"].value == "fp8"
    assert run.facts["reset_attention_mask"].value is True
    assert not lint_texts({"train.sh": script}).findings


def test_a_recipe_without_fp8_is_noted_and_not_written(tmp_path: Path) -> None:
    """training.fp8_recipe on a bf16 run: a note says it has no effect; no --fp8-recipe is
    written (Megatron would ignore it without --fp8-format); an FP8 run gets no such note."""
    from generator.artifacts import render_all

    bf16 = plan_of(tmp_path, spec_dict(training={"precision": "bf16", "fp8_recipe": "tensorwise"}), "b.yaml")
    assert any("training.fp8_recipe tensorwise has no effect: training.precision is bf16" in n
               for n in bf16.notes), bf16.notes
    assert "--fp8-recipe" not in render_all(bf16)["megatron_args.sh"]
    fp8 = plan_of(tmp_path, spec_dict(training={"precision": "fp8", "fp8_recipe": "tensorwise"}), "f.yaml")
    assert not any("fp8_recipe" in n for n in fp8.notes)
    assert "--fp8-recipe tensorwise" in render_all(fp8)["megatron_args.sh"]
