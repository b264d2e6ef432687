"""Oracle: megatron-core 0.16.1's own microbatch calculator and TransformerConfig agree with the
plan and with the rules (reference/ci-oracles.md §6, reference/megatron.md §13)."""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from generator.plan.plan import Plan, resolve
from generator.rules import RULES, Fact, run_rules
from generator.spec.model import load_spec

from .conftest import SAMPLES, require_oracle
from .helpers import plan_of
from .test_property import valid_specs

pytestmark = pytest.mark.oracle
MEGATRON_SAMPLES = [s for s in SAMPLES if load_spec(s).framework != "deepspeed"]


@pytest.fixture(scope="module")
def calculator():
    """The calculator module loaded on its own: pure Python, no torch, 0.02 s."""
    require_oracle("megatron.core")
    spec = importlib.util.find_spec("megatron.core")
    path = Path(spec.submodule_search_locations[0]) / "num_microbatches_calculator.py"
    module_spec = importlib.util.spec_from_file_location("mcore_num_microbatches", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def microbatches(calc, global_batch: int, micro: int, dp: int) -> int:
    calc.unset_num_microbatches_calculator()
    calc.init_num_microbatches_calculator(0, None, global_batch, micro, dp, False)
    calc.update_num_microbatches(0, consistency_check=True)
    return calc.get_num_microbatches()


def check_plan(calc, plan: Plan) -> None:
    assert microbatches(calc, plan.global_batch_size, plan.micro_batch_size, plan.dp) == \
        plan.gradient_accumulation_steps


@pytest.mark.parametrize("sample", MEGATRON_SAMPLES, ids=[s.stem for s in MEGATRON_SAMPLES])
def test_samples_agree_with_the_calculator(calculator, sample: Path) -> None:
    check_plan(calculator, resolve(load_spec(sample)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(valid_specs())
def test_random_plans_agree_with_the_calculator(calculator, data: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check_plan(calculator, plan_of(Path(tmp), data))


@pytest.mark.parametrize(("global_batch", "micro", "dp"),
                         [(1000, 16, 32), (2048, 2, 12), (30, 8, 2), (1536, 1, 8), (2048, 2, 8), (16, 8, 2)])
def test_gl003_matches_the_calculator(calculator, global_batch: int, micro: int, dp: int) -> None:
    facts = {"global_batch_size": Fact(global_batch, "a"), "micro_batch_size": Fact(micro, "b"),
             "dp": Fact(dp, "c")}
    ours = RULES["GL002"].run(facts)
    try:
        microbatches(calculator, global_batch, micro, dp)
        theirs = None
    except AssertionError as exc:
        theirs = str(exc)
    assert (ours is None) == (theirs is None), (ours, theirs)
    if theirs:
        assert f"global batch size ({global_batch}) is not divisible by micro batch size ({micro}) " \
               f"times data parallel size ({dp})" in theirs


@pytest.fixture(scope="module")
def transformer_config():
    require_oracle("torch")
    require_oracle("megatron.core")
    from megatron.core.transformer.transformer_config import TransformerConfig

    return TransformerConfig


def build_config(TransformerConfig, heads: int, groups: int, tp: int, sp: bool = False):
    import torch

    return TransformerConfig(num_layers=4, hidden_size=heads * 64, num_attention_heads=heads,
                             num_query_groups=groups, tensor_model_parallel_size=tp,
                             sequence_parallel=sp, pipeline_dtype=torch.bfloat16)


@pytest.mark.parametrize(("heads", "groups", "tp", "sp"), [
    (100, 100, 8, False), (96, 96, 8, False), (32, 3, 8, False), (32, 8, 8, False),
    (32, 2, 8, False), (32, 16, 4, False), (16, 16, 1, True), (16, 16, 2, True),
])
def test_shape_rules_match_transformer_config(transformer_config, heads, groups, tp, sp) -> None:
    facts = {"num_attention_heads": Fact(heads, "a"), "num_query_groups": Fact(groups, "b"),
             "tp": Fact(tp, "c"), "sequence_parallel": Fact(sp, "d")}
    ours = [f.code for f in run_rules(facts, ["GL008", "GL010"])]
    try:
        build_config(transformer_config, heads, groups, tp, sp)
        theirs = None
    except ValueError as exc:
        theirs = str(exc)
    assert bool(ours) == (theirs is not None), (ours, theirs)


@pytest.mark.parametrize("sample", MEGATRON_SAMPLES, ids=[s.stem for s in MEGATRON_SAMPLES])
def test_samples_build_a_transformer_config(transformer_config, sample: Path) -> None:
    plan = resolve(load_spec(sample))
    m = plan.model
    import torch

    config = transformer_config(
        num_layers=m.num_layers, hidden_size=m.hidden_size, num_attention_heads=m.num_attention_heads,
        num_query_groups=m.num_query_groups, ffn_hidden_size=m.ffn_hidden_size,
        tensor_model_parallel_size=plan.tp, pipeline_model_parallel_size=plan.pp,
        context_parallel_size=plan.cp, sequence_parallel=plan.spec.parallelism.sequence_parallel,
        pipeline_dtype=torch.bfloat16, bf16=plan.spec.training.precision == "bf16")
    assert config.kv_channels == m.hidden_size // m.num_attention_heads
