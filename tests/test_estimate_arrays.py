"""The estimate formulas take a number or an array of numbers (auto-plan's candidates): over
random layouts — every precision, sharding, offload, recompute, dispatcher, uneven pipelines,
dense and MoE models — an array estimate is, element by element and bit for bit, the estimate of
each layout alone."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.estimate.memory import Layout, Memory, estimate_memory
from generator.estimate.params import Shape
from generator.estimate.performance import Hardware, Performance, estimate_performance

DENSE = Shape(12, 2048, 16, 4, 5632, 32000, 4096, gated=True, rmsnorm=True, bias=False)
MOE = replace(DENSE, num_experts=8, top_k=2, moe_ffn_hidden_size=1408, shared_expert_size=1408, moe_dense_layers=1)
H100 = Hardware(989, 0.6, 3.35, 450, 50, 8)
N = 6  # layouts per example
NUMBERS = {"pp": [1, 2, 3, 4], "cp": [1, 2, 4], "ep": [1, 2, 4, 8], "vpp": [1, 2, 3], "dp": [1, 2, 4, 16],
           "micro_batch_size": [1, 2, 4], "num_microbatches": [1, 3, 16]}


@st.composite
def layouts(draw) -> tuple[Shape, Layout, list[Layout], numpy.ndarray]:
    """(shape, one Layout of arrays, the same layouts one by one, the global batches)."""
    shape = draw(st.sampled_from([DENSE, MOE]))
    sharding = draw(st.sampled_from(["none", "distributed_optimizer", "zero1", "zero2", "zero3"]))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    common = {
        "tp": tp, "etp": draw(st.sampled_from([1, tp])), "sharding": sharding,
        "precision": draw(st.sampled_from(["bf16", "fp8", "fp16", "fp32"])),
        "offload": draw(st.sampled_from(["none", "optimizer", "optimizer_and_params"]))
        if sharding.startswith("zero") else "none",
        "flash_attention": draw(st.booleans()), "sequence_parallel": draw(st.booleans()) and tp > 1,
        "tp_comm_overlap": draw(st.booleans()), "overlap_grad_reduce": draw(st.booleans()),
        "optimizer_states": draw(st.sampled_from(["fp32", "bf16"])),
        "main_grads": draw(st.sampled_from(["fp32", "bf16"])),
        "moe_dispatcher": draw(st.sampled_from(["alltoall", "allgather", "flex"])),
        "ep_comm_overlap": draw(st.booleans()),
        "shard_dp": draw(st.sampled_from([None, 8])),
    }
    uneven = draw(st.booleans())
    singles = []
    for _ in range(N):
        sizes = {name: draw(st.sampled_from(values)) for name, values in NUMBERS.items()}
        if uneven:
            sizes["pp"] = draw(st.sampled_from([2, 3, 4]))
            sizes["first_stage_layers"] = sizes["last_stage_layers"] = draw(st.sampled_from([1, 2, 3]))
        singles.append(Layout(**common, **sizes, recompute=draw(st.sampled_from(["none", "selective", "full"]))))
    arrays = {name: numpy.array([getattr(x, name) for x in singles])
              for name in (*NUMBERS, "recompute", *(("first_stage_layers", "last_stage_layers") if uneven else ()))}
    batches = numpy.array([float(draw(st.sampled_from([64, 512, 1536]))) for _ in range(N)])
    return shape, replace(singles[0], **arrays), singles, batches


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts())
def test_an_array_of_layouts_is_estimated_as_each_alone(case) -> None:
    shape, together, singles, batches = case
    memory = estimate_memory(shape, together, 79.6)
    performance = estimate_performance(shape, together, H100, batches)
    for i, single in enumerate(singles):
        alone = estimate_memory(shape, single, 79.6)
        for f in fields(Memory):
            assert numpy.asarray(getattr(memory, f.name)).reshape(-1)[i if f.name != "capacity" else 0] == \
                getattr(alone, f.name), (f.name, single)
        step = estimate_performance(shape, single, H100, int(batches[i]))
        for f in fields(Performance):
            value = numpy.asarray(getattr(performance, f.name))
            assert (value if value.ndim == 0 else value[i]) == getattr(step, f.name), (f.name, single)
