"""The model's architecture fields: what each dialect writes, what it refuses (located, the
dialects that can named), the one-line description, and the overlap the estimate may count only
where the files turn it on. (Whether Megatron builds the model the fields name is
test_model_oracle.py's.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from generator.calculator.resolve import PlanError
from generator.cli import app
from generator.estimate.params import Shape, count_params
from generator.render import render
from generator.spec.architecture import architecture_line
from generator.spec.model import model_from

from .helpers import plan_of, spec_dict

runner = CliRunner()


def _args(plan) -> str:
    return render(plan, "megatron")


def test_a_spec_without_a_preset_gets_megatrons_architecture(tmp_path: Path) -> None:
    """Nothing written beyond what Megatron defaults to; the estimate counts the biases it builds."""
    plan = plan_of(tmp_path, spec_dict())
    m = plan.model
    assert (m.linear_bias, m.qkv_bias, m.attention_dropout, m.hidden_dropout, m.rotary_base) == \
        (True, True, 0.1, 0.1, 10000)
    text = _args(plan)
    assert "--disable-bias-linear" not in text and "--attention-dropout 0.1" in text
    biased = count_params(Shape.of(m)).total
    unbiased = count_params(Shape.of(model_from({**plan.spec.doc.data["model"], "linear_bias": False}))).total
    assert biased - unbiased == m.num_layers * (3 * m.hidden_size + m.hidden_size + 4 * m.hidden_size + m.hidden_size)


@pytest.mark.parametrize(("model", "flags"), [
    ({"preset": "qwen2.5-7b"}, ["--disable-bias-linear", "--add-qkv-bias", "--rotary-base 1000000",
                                "--norm-epsilon 1e-06"]),
    ({"preset": "llama3.1-8b"}, ["--use-rope-scaling", "--rope-scaling-factor 8.0", "--rotary-base 500000"]),
    ({"preset": "llama3.2-1b"}, ["--rope-scaling-factor 32.0"]),
    ({"preset": "mixtral-8x7b"}, ["--moe-aux-loss-coeff 0.02", "--moe-router-load-balancing-type aux_loss",
                                  "--moe-token-dispatcher-type alltoall"]),
    ({"preset": "llama3-8b", "qk_layernorm": True, "kv_channels": 64, "make_vocab_size_divisible_by": 64},
     ["--qk-layernorm", "--kv-channels 64", "--make-vocab-size-divisible-by 64"]),
    ({"preset": "mixtral-8x7b", "moe_dense_layers": 1, "moe_capacity_factor": 1.5, "moe_grouped_gemm": True},
     ["--moe-layer-freq '([0]*1+[1]*31)'", "--moe-expert-capacity-factor 1.5", "--moe-token-drop-policy probs",
      "--moe-grouped-gemm"]),
])
def test_megatron_lm_writes_each_field(model, flags, tmp_path: Path) -> None:
    fields = {k: None for k in ("num_layers", "hidden_size", "num_attention_heads", "vocab_size", "seq_length")}
    experts = "num_experts" in str(model) or "mixtral" in model["preset"]
    plan = plan_of(tmp_path, spec_dict(model={**fields, **model}, cluster={"allow_oversize": True},
                                       parallelism={"tp": 2, "pp": 1, **({"ep": 2} if experts else {})}))
    text = _args(plan)
    for flag in flags:
        assert f"  {flag}\n" in text, (flag, text)


@pytest.mark.parametrize(("framework", "fork", "model", "field", "names"), [
    ("megatron-lm", None, {"linear_bias": True, "qkv_bias": False}, "model.qkv_bias", "no Megatron dialect can"),
    ("megatron-lm", None, {"position_embedding": "rope",
                           "rope_scaling": {"factor": 8.0, "low_freq_factor": 2.0}}, "model.rope_scaling",
     "no Megatron dialect can"),
    ("megatron-deepspeed", "bigscience", {"linear_bias": False}, "model.linear_bias", "Megatron-LM latest"),
    ("megatron-deepspeed", "bigscience", {"position_embedding": "rope", "rotary_base": 500000},
     "model.rotary_base", "Megatron-DeepSpeed (microsoft)"),
    ("megatron-deepspeed", "microsoft", {"qk_layernorm": True}, "model.qk_layernorm", "Megatron-LM latest"),
    ("megatron-lm", None, {"embedding_layernorm": True}, "model.embedding_layernorm",
     "Megatron-DeepSpeed (bigscience"),
    ("megatron-deepspeed", "microsoft", {"num_experts": 8, "moe_top_k": 2, "moe_z_loss_coeff": 0.001},
     "model.moe_z_loss_coeff", "Megatron-LM latest"),
])
def test_what_a_dialect_cannot_build_is_refused_where_it_is_written(framework, fork, model, field, names,
                                                                    tmp_path: Path) -> None:
    data = spec_dict(framework=framework, model=model,
                     parallelism={"tp": 2, "pp": 1, **({"zero_stage": 1} if fork else {})},
                     megatron={"fork": fork} if fork else {})
    with pytest.raises(PlanError) as err:
        plan_of(tmp_path, data)
    text = str(err.value)
    key = field.split(".")[1]
    assert f"GL218 {field}" in text and names in text, text
    line = next(k for k, row in enumerate((tmp_path / "spec.yaml").read_text().splitlines(), 1)
                if row.strip().startswith(f"{key}:"))
    assert f"spec.yaml:{line}:" in text or f"spec.yaml:{line + 1}:" in text, text  # the key or its block


def test_a_preset_field_is_located_at_the_preset(tmp_path: Path) -> None:
    data = spec_dict(framework="megatron-deepspeed", megatron={"fork": "microsoft"},
                     model={"preset": "qwen2.5-7b", **{k: None for k in ("num_layers", "hidden_size",
                            "num_attention_heads", "vocab_size", "seq_length")}},
                     parallelism={"tp": 2, "pp": 1, "zero_stage": 1})
    with pytest.raises(PlanError) as err:
        plan_of(tmp_path, data)
    assert "preset qwen2.5-7b: GL218 model.qkv_bias True cannot be expressed in Megatron-DeepSpeed " \
           "(microsoft)" in str(err.value)


def test_the_architecture_line_names_biases_positions_groups_and_routing() -> None:
    line = architecture_line(model_from({"preset": "mixtral-8x7b"}), ep=8)
    assert "32 heads in 8 GQA groups (4 per group)" in line and "no biases" in line
    assert "RoPE θ 1000000" in line and "MoE 8 experts, top-2" in line and "aux_loss 0.02" in line
    assert "dropless" in line and "alltoall dispatcher" in line
    assert "QKV bias only" in architecture_line(model_from({"preset": "qwen2.5-72b"}))
    neox = architecture_line(model_from({"preset": "gpt-neox-20b"}))
    assert "RoPE θ 10000 on 25% of each head" in neox and "parallel attention and MLP" in neox
    custom = architecture_line(model_from({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                                           "vocab_size": 100, "seq_length": 16, "num_experts": 4}))
    assert "no load balancing" in custom and "allgather dispatcher" in custom  # Megatron's coefficient 0


def test_explain_and_plan_json_report_the_padding_apart(tmp_path: Path) -> None:
    data = spec_dict(model={"preset": "llama3-8b", **{k: None for k in ("num_layers", "hidden_size",
                            "num_attention_heads", "vocab_size", "seq_length")}},
                     parallelism={"tp": 8, "pp": 1}, cluster={"nodes": 1, "gpus_per_node": 8, "gpu": "h100-80gb"})
    plan_of(tmp_path, data)
    result = runner.invoke(app, ["explain", str(tmp_path / "spec.yaml")])
    assert result.exit_code == 0, result.output
    assert "8,030,261,248 parameters + 6,291,456 of vocabulary padding (128,256 → 129,024 rows, a multiple " \
           "of 128 × tp 8) = 8,036,552,704 built; llama3-8b as released (meta-llama/Meta-Llama-3-8B)" in result.output
    result = runner.invoke(app, ["explain", str(tmp_path / "spec.yaml"), "--format", "json"])
    plan = json.loads(result.output)
    assert plan["parameters"] == 8_036_552_704 and plan["parameters_vocab_padding"] == 6_291_456
    assert plan["model"]["padded_vocab_size"] == 129024 and plan["model"]["num_experts"] is None
    assert not any(k.startswith("moe_") for k in plan["model"])  # a dense model has no routing


@pytest.mark.parametrize(("framework", "parallelism", "overlapped"), [
    ("megatron-lm", {"tp": 2, "pp": 2, "distributed_optimizer": True}, True),
    ("megatron-deepspeed", {"tp": 2, "pp": 1, "zero_stage": 1}, True),
    ("megatron-deepspeed", {"tp": 2, "pp": 2, "zero_stage": 1}, False),  # DeepSpeed's pipeline engine
    ("megatron-deepspeed", {"tp": 2, "pp": 1, "zero_stage": 0}, False),
])
def test_the_estimate_counts_overlap_only_where_the_files_turn_it_on(framework, parallelism, overlapped,
                                                                     tmp_path: Path) -> None:
    plan = plan_of(tmp_path, spec_dict(framework=framework, parallelism=parallelism))
    assert plan.overlap_grad_reduce is overlapped
    files = {target: render(plan, target) for target in ("megatron", "deepspeed") if
             target == "megatron" or plan.uses_deepspeed}
    if framework == "megatron-lm":
        assert "--overlap-grad-reduce" in files["megatron"] and "--overlap-param-gather" in files["megatron"]
    else:
        assert ('"overlap_comm": true' in files["deepspeed"]) is overlapped
        assert "--overlap-grad-reduce" not in files["megatron"]
    p = plan.estimate().performance
    from dataclasses import replace

    from generator.estimate.performance import estimate_performance
    from generator.estimate.plan import hardware_of, layout_of, shape_of

    layout = layout_of(plan)
    exposed = estimate_performance(shape_of(plan), replace(layout, overlap_grad_reduce=False),
                                   hardware_of(plan.gpu, "bf16", 8), plan.global_batch_size)
    assert (p.dp_comm_s < exposed.dp_comm_s) is overlapped and (p.dp_comm_s == exposed.dp_comm_s) is not overlapped
