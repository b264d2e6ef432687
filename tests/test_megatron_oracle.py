"""Oracle: megatron-core 0.16.1's own microbatch calculator and TransformerConfig agree with the
plan and with the rules."""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from generator.calculator.resolve import resolve
from generator.plan.plan import Plan
from generator.rules import RULES, Fact, run_rules
from generator.run import load_spec

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


# (layers, pp, vpp, first stage layers, last stage layers); TransformerConfig checks uneven
# splits (even ones are checked by validate_args and at model build)
PIPELINE_CASES = [
    (126, 16, 1, 7, 7), (126, 16, 2, 7, 7), (126, 16, 1, 6, 7), (126, 32, 1, 3, 3),
    (80, 8, 1, 6, None), (80, 8, 2, 10, 10), (80, 8, 1, 40, 45), (96, 2, 1, 48, 48),
    (96, 3, 1, 48, 48), (12, 4, 1, None, 3), (12, 4, 3, 3, 3), (12, 4, 1, 3, None),
    (64, 8, 2, 6, 6), (64, 8, 4, 4, 4), (10, 2, 1, 4, None), (10, 2, 1, 10, None),
]


@pytest.mark.parametrize(("layers", "pp", "vpp", "first", "last"), PIPELINE_CASES)
def test_pipeline_split_rule_matches_transformer_config(transformer_config, layers, pp, vpp,
                                                        first, last) -> None:
    """GL009 (even and uneven stages) refuses exactly what TransformerConfig refuses."""
    import torch

    facts = {"num_layers": Fact(layers, "a"), "pp": Fact(pp, "b"), "vpp": Fact(vpp, "c"),
             "framework": Fact("megatron-lm", "d"), "first_stage_layers": Fact(first, "e"),
             "last_stage_layers": Fact(last, "f")}
    ours = [f.message for f in run_rules(facts, ["GL009"])]
    try:
        transformer_config(num_layers=layers, hidden_size=64, num_attention_heads=4,
                           pipeline_model_parallel_size=pp, pipeline_dtype=torch.bfloat16,
                           virtual_pipeline_model_parallel_size=vpp if vpp > 1 else None,
                           num_layers_in_first_pipeline_stage=first,
                           num_layers_in_last_pipeline_stage=last)
        theirs = None
    except (ValueError, AssertionError) as exc:
        theirs = str(exc)
    assert bool(ours) == (theirs is not None), (ours, theirs)


def test_uneven_split_is_accepted_by_transformer_config(transformer_config) -> None:
    """The split auto-plan proposes for pp not dividing the layers builds a config."""
    import torch

    from generator.rules.megatron import uneven_split

    assert uneven_split(61, 8) is None  # 61 − 2k is odd: never a multiple of 6 middle stages
    for layers, pp in ((126, 16), (126, 32), (126, 64), (95, 15), (106, 10), (62, 8)):
        k = uneven_split(layers, pp)
        assert k is not None and k <= (layers - 2 * k) // (pp - 2), (layers, pp, k)
        transformer_config(num_layers=layers, hidden_size=64, num_attention_heads=4,
                           pipeline_model_parallel_size=pp, pipeline_dtype=torch.bfloat16,
                           num_layers_in_first_pipeline_stage=k, num_layers_in_last_pipeline_stage=k)


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
        num_layers_in_first_pipeline_stage=plan.spec.parallelism.first_stage_layers,
        num_layers_in_last_pipeline_stage=plan.spec.parallelism.last_stage_layers,
        pipeline_dtype=torch.bfloat16, bf16=plan.spec.training.precision == "bf16")
    assert config.kv_channels == m.hidden_size // m.num_attention_heads


PLACEMENTS = [  # tp, cp, dp, pp, ep, etp, GPUs per node
    (8, 1, 4, 2, 1, 8, 8), (2, 2, 2, 2, 1, 2, 8), (1, 1, 8, 2, 8, 1, 8), (4, 1, 2, 4, 2, 1, 8),
    (2, 1, 3, 2, 1, 2, 8), (1, 1, 6, 1, 3, 1, 8), (2, 2, 4, 1, 4, 1, 16), (1, 4, 2, 2, 1, 1, 4),
    (4, 2, 1, 8, 1, 4, 8), (1, 1, 16, 4, 4, 2, 8), (2, 1, 12, 1, 6, 2, 6),
]


@pytest.mark.parametrize("tp,cp,dp,pp,ep,etp,per_node", PLACEMENTS)
def test_each_collective_is_placed_as_megatron_core_groups_its_ranks(tp, cp, dp, pp, ep, etp, per_node) -> None:
    """Whether a group's collectives stay on NVLink is read from megatron-core's own rank groups
    (parallel_state.RankGenerator, the default order tp-cp-ep-dp-pp; experts on their own grid):
    a group is inside a node when all its ranks are. A pipeline's neighbours are tp·cp·dp ranks
    apart (the estimate counted tp·cp·pp), the expert-parallel group is etp·ep wide (not tp·ep)."""
    require_oracle("megatron.core")
    from megatron.core.parallel_state import RankGenerator

    from generator.estimate.memory import Layout
    from generator.estimate.performance import RANK_GROUPS, Hardware, in_node

    world = tp * cp * dp * pp
    layout = Layout(tp=tp, cp=cp, dp=dp, pp=pp, ep=ep, etp=etp)
    dense = RankGenerator(tp=tp, ep=1, dp=dp, pp=pp, cp=cp, order="tp-cp-ep-dp-pp")
    experts = RankGenerator(tp=etp, ep=ep, dp=world // (etp * ep * pp), pp=pp, cp=1, order="tp-cp-ep-dp-pp")
    tokens = {"tp": (dense, "tp"), "cp": (dense, "cp"), "dp_cp": (dense, "dp-cp"),
              "pp": (dense, "pp"), "ep": (experts, "ep"), "tp_ep": (experts, "tp-ep"),
              "expert_dp": (experts, "dp")}
    assert set(tokens) == set(RANK_GROUPS)
    for group, (generator, token) in tokens.items():
        ranks = generator.get_ranks(token)
        assert all(len(g) == RANK_GROUPS[group](layout)[1] for g in ranks)
        inside = all(len({r // per_node for r in g}) == 1 for g in ranks)
        assert in_node(layout, group, Hardware(989, 0.62, 3.35, 450, 50, per_node)) == inside, (group, ranks)
    # the first node's ranks that lead their dp × cp group read a distributed optimizer's file
    from generator.estimate.host import optimizer_rank_zeros

    leaders = {min(g) for g in dense.get_ranks("dp-cp")}
    assert optimizer_rank_zeros(layout, per_node) == sum(1 for r in range(per_node) if r in leaders)
