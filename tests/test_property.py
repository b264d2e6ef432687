"""Property: for many random valid specs the three artifacts agree and every invariant holds."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.artifacts import render_all
from generator.readers.bash import read_script
from generator.readers.bash.evaluate import join

from .helpers import plan_of


@st.composite
def valid_specs(draw) -> dict:
    framework = draw(st.sampled_from(["megatron-lm", "megatron-deepspeed", "deepspeed"]))
    tp = 1 if framework == "deepspeed" else draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4]))
    cp = draw(st.sampled_from([1, 2])) if framework != "megatron-deepspeed" else 1
    vpp = draw(st.sampled_from([1, 2])) if framework == "megatron-lm" and pp > 1 else 1
    dp = draw(st.integers(1, 16))
    gpus_per_node = draw(st.sampled_from([1, 2, 4, 8]))
    world = tp * pp * cp * dp
    # pick nodes so that nodes × gpus_per_node is a multiple of the model-parallel size
    nodes = world // gpus_per_node if world % gpus_per_node == 0 else world
    gpus_per_node = gpus_per_node if world % gpus_per_node == 0 else 1
    heads = tp * cp * draw(st.sampled_from([1, 2, 4]))
    micro = draw(st.integers(1, 8))
    accumulation = pp * draw(st.integers(1, 4)) if vpp > 1 else draw(st.integers(1, 16))
    zero = draw(st.sampled_from([0, 1] if pp > 1 else [0, 1, 2, 3]))
    train_iters = draw(st.integers(10, 100_000))
    batch_form = draw(st.sampled_from(["micro+acc", "global+micro", "global+acc", "tokens+micro"]))
    seq = draw(st.sampled_from([128, 512, 2048, 4096]))
    global_batch = micro * accumulation * dp
    batch = {
        "micro+acc": {"micro_batch_size": micro, "gradient_accumulation_steps": accumulation},
        "global+micro": {"global_batch_size": global_batch, "micro_batch_size": micro},
        "global+acc": {"global_batch_size": global_batch, "gradient_accumulation_steps": accumulation},
        "tokens+micro": {"tokens_per_step": global_batch * seq, "micro_batch_size": micro},
    }[batch_form]
    parallelism: dict = {"tp": tp, "pp": pp, "cp": cp, "vpp": vpp,
                         "sequence_parallel": tp > 1 and draw(st.booleans())}
    if framework == "megatron-lm":
        parallelism["distributed_optimizer"] = draw(st.booleans())
    else:
        parallelism["zero_stage"] = zero
    return {
        "name": "prop",
        "framework": framework,
        "cluster": {"nodes": nodes, "gpus_per_node": gpus_per_node,
                    "gpu": draw(st.sampled_from(["a100-80gb", "h100-80gb", "b200", "mi300x"]))},
        "model": {"num_layers": pp * vpp * draw(st.integers(1, 4)), "hidden_size": heads * 64,
                  "num_attention_heads": heads, "vocab_size": 32000, "seq_length": seq},
        "parallelism": parallelism,
        "batch": batch,
        "training": {"train_iters": train_iters, "lr": 1e-4, "min_lr": 1e-5,
                     "warmup": {"iters": draw(st.integers(2, 9))},
                     "precision": draw(st.sampled_from(["bf16", "fp16", "fp32"])),
                     "decay": draw(st.sampled_from(["cosine", "linear", "constant"])),
                     "recompute": draw(st.sampled_from(["none", "selective", "full"]))},
        "launch": {"launcher": draw(st.sampled_from(["torchrun", "deepspeed", "srun"]))},
    }


def sbatch_values(text: str) -> dict[str, int]:
    found = dict(re.findall(r"^#SBATCH --(nodes|ntasks-per-node)=(\d+)$", text, re.M))
    found.update(re.findall(r"^(NODES|PROCS_PER_NODE|WORLD_SIZE)=(\d+)$", text, re.M))
    return {k: int(v) for k, v in found.items()}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_specs())
def test_artifacts_agree(data: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        plan = plan_of(Path(tmp), data)
    # the plan's invariants
    assert plan.world_size == data["cluster"]["nodes"] * data["cluster"]["gpus_per_node"]
    assert plan.dp * plan.tp * plan.pp * plan.cp == plan.world_size
    assert plan.global_batch_size == plan.micro_batch_size * plan.gradient_accumulation_steps * plan.dp
    assert plan.tokens_per_step == plan.global_batch_size * data["model"]["seq_length"]
    assert 0 <= plan.schedule.warmup_iters < plan.schedule.train_iters

    files = render_all(plan)  # also read back and checked inside
    sbatch = sbatch_values(files["launch.sbatch"])
    assert sbatch["nodes"] == sbatch["NODES"] == data["cluster"]["nodes"]
    assert sbatch["NODES"] * sbatch["PROCS_PER_NODE"] == sbatch["WORLD_SIZE"] == plan.world_size
    assert sbatch["ntasks-per-node"] == (plan.procs_per_node if data["launch"]["launcher"] == "srun" else 1)
    if "ds_config.json" in files:
        ds = json.loads(files["ds_config.json"])
        assert ds["train_batch_size"] == ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] * plan.dp
        assert (ds["train_batch_size"], ds["train_micro_batch_size_per_gpu"]) == (
            plan.global_batch_size, plan.micro_batch_size)
        assert ds["zero_optimization"]["stage"] == plan.zero_stage
        assert "auto" not in files["ds_config.json"]
    if "megatron_args.sh" in files:
        values = read_script(files["megatron_args.sh"]).variables["MEGATRON_ARGS"].values
        words = [join(value).text for value in values]
        flag = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}
        assert int(flag["--micro-batch-size"]) == plan.micro_batch_size
        assert int(flag["--global-batch-size"]) == plan.global_batch_size
        assert int(flag["--tensor-model-parallel-size"]) * int(flag["--pipeline-model-parallel-size"]) == plan.tp * plan.pp
        if "ds_config.json" in files:
            assert int(flag["--zero-stage"]) == json.loads(files["ds_config.json"])["zero_optimization"]["stage"]
