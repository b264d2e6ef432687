"""Oracle: torchtitan 0.3.0's own ConfigManager parses the generated command line (the config
module imported through its --module, from the generated folder), its ParallelDims accepts the
degrees at the plan's world size, and what it parsed is the plan: degrees, batch and the
accumulation it derives, sequence length, steps, schedule, activation checkpointing, the model
flavor's shape. torchrun's own parser reads launch.sbatch's line as `-m torchtitan.train`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from generator.artifacts import render_all
from generator.plan.plan import Plan

from .conftest import ROOT, require_oracle
from .helpers import plan_of
from .test_launchers import launched_argv, parsed

pytestmark = pytest.mark.oracle
SAMPLE = ROOT / "samples" / "llama3-8b-torchtitan.yaml"
WORKER = Path(__file__).parent / "oracle" / "torchtitan_parse.py"


def _spec(nodes: int, parallelism: dict, batch: dict, **more) -> dict:
    return {"name": "titan", "framework": "torchtitan",
            "cluster": more.pop("cluster", {"nodes": nodes, "gpus_per_node": 8, "gpu": "h100-80gb"}),
            "model": more.pop("model", {"preset": "llama3-8b"}), "parallelism": parallelism, "batch": batch,
            "training": {"train_iters": 300, "lr": 2.0e-4, "min_lr": 2.0e-5, "warmup": {"iters": 30},
                         **more.pop("training", {})},
            "launch": {"launcher": "torchrun"}, **more}


VARIANTS = {
    # HSDP 2 × 2, cp 2, tp 4, pp 2 interleaved (vpp 2): 64 GPUs; 8 pipeline micro-batches of 1
    "hsdp-cp-tp-pp": _spec(8, {"dp_replicate": 2, "dp_shard": 2, "cp": 2, "tp": 4, "pp": 2, "vpp": 2},
                           {"micro_batch_size": 1, "gradient_accumulation_steps": 8},
                           training={"recompute": "full", "decay": "linear"}),
    # experts over the shard group, compiled, WSD (the last 20% decays), checkpoints every 100 steps
    "moe-ep": _spec(1, {"dp_shard": 8, "ep": 8}, {"micro_batch_size": 2, "global_batch_size": 64},
                    model={"preset": "qwen3-30b-a3b", "seq_length": 4096},
                    training={"decay": "wsd", "wsd_decay": 0.2, "recompute": "none"},
                    torchtitan={"compile": True}, checkpoint={"dir": "/ckpt/moe", "interval": 100}),
    # deepseek_v3_16b compiles the loss: the spec's compile false is written --compile.no_enable
    "deepseek-no-compile": _spec(1, {"dp_shard": 8, "ep": 8}, {"micro_batch_size": 1, "global_batch_size": 16},
                                 model={"preset": "deepseek-v2-lite", "seq_length": 4096}),
    # FP8 rowwise: the converter is built when the function runs (needs torchao and a GPU)
    "fp8": _spec(2, {"tp": 2}, {"micro_batch_size": 1, "global_batch_size": 64},
                 training={"precision": "fp8", "fp8_recipe": "rowwise"}, torchtitan={"compile": True}),
    # an MoE flavor in FP8: the grouped experts' converter beside the linear one (the router's gate and
    # the output head left in bf16), rowwise on Hopper and MXFP8 on Blackwell
    "moe-fp8": _spec(2, {"dp_shard": 16, "ep": 8}, {"micro_batch_size": 1, "global_batch_size": 64},
                     model={"preset": "qwen3-30b-a3b", "seq_length": 4096},
                     training={"precision": "fp8", "fp8_recipe": "rowwise"}, torchtitan={"compile": True}),
    "moe-mxfp8": _spec(2, {"dp_shard": 16, "ep": 8}, {"micro_batch_size": 1, "global_batch_size": 64},
                       model={"preset": "qwen3-30b-a3b", "seq_length": 4096},
                       cluster={"nodes": 2, "gpus_per_node": 8, "gpu": "b200"},
                       training={"precision": "fp8", "fp8_recipe": "mxfp8"}, torchtitan={"compile": True}),
}
PARSED = [name for name in ("sample", *VARIANTS) if "fp8" not in name]


def _argv(folder: Path) -> list[str]:
    """TORCHTITAN_ARGS as bash builds it from torchtitan_args.sh."""
    out = subprocess.run(["bash", "-c", 'source "$1/torchtitan_args.sh"; printf "%s\\0" "${TORCHTITAN_ARGS[@]}"',
                          "argv", str(folder)], capture_output=True, text=True, check=True)
    return out.stdout.split("\0")[:-1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Plan, dict, dict[str, str]]]:
    """{variant: (plan, what torchtitan parsed, the files)}, one worker for all of them."""
    require_oracle("torchtitan")
    cases, plans = [], {}
    base = tmp_path_factory.mktemp("titan")
    for name, data in {"sample": None, **VARIANTS}.items():
        folder = base / name
        folder.mkdir()
        if data is None:
            from generator.calculator.resolve import resolve
            from generator.run import load_spec

            plan = resolve(load_spec(SAMPLE))
        else:
            plan = plan_of(folder, data)
        files = render_all(plan)
        for file, text in files.items():
            (folder / file).write_text(text, encoding="utf-8")
        plans[name] = (plan, files)
        cases.append({"folder": str(folder), "argv": _argv(folder), "world_size": plan.world_size})
    out = subprocess.run([sys.executable, str(WORKER)], input=json.dumps(cases), capture_output=True,
                         text=True, timeout=900, cwd=base)
    assert out.returncode == 0, out.stderr[-3000:]
    results = [json.loads(line) for line in out.stdout.splitlines()]
    return {name: (plans[name][0], result, plans[name][1]) for name, result in zip(plans, results, strict=True)}


@pytest.mark.parametrize("name", PARSED)
def test_torchtitan_parses_the_plan(runs, name: str) -> None:
    plan, got, _ = runs[name]
    assert "error" not in got, got
    assert got["dims"] == {"dp_replicate": plan.dp_replicate, "dp_shard": plan.dp_shard, "cp": plan.cp,
                           "tp": plan.tp, "pp": plan.pp, "ep": plan.ep}
    dp = got["dims"]["dp_replicate"] * got["dims"]["dp_shard"]
    # torchtitan's accumulation (global / (local × dp)) times its pipeline micro-batches per local batch
    accumulation = got["global_batch_size"] // (got["local_batch_size"] * dp)
    assert got["global_batch_size"] == accumulation * got["local_batch_size"] * dp == plan.global_batch_size
    pipeline = got["local_batch_size"] // got["pp_microbatch_size"] if plan.pp > 1 else 1
    micro = got["pp_microbatch_size"] if plan.pp > 1 else got["local_batch_size"]
    assert (micro, accumulation * pipeline) == (plan.micro_batch_size, plan.gradient_accumulation_steps)
    assert (got["seq_len"], got["steps"]) == (plan.model.seq_length, plan.schedule.train_iters)
    if plan.tp > 1:  # torchtitan's default is on; the spec's sequence_parallel is written either way
        assert got["sequence_parallel"] == plan.spec.parallelism.sequence_parallel
    assert got["lr"] == plan.lr and got["lr_scheduler"]["warmup_steps"] == plan.schedule.warmup_iters
    assert got["compile"] is plan.spec.torchtitan.compile
    assert got["activation_checkpoint"] == {"none": "NoneType", "selective": "SelectiveAC.Config",
                                            "full": "FullAC.Config"}[plan.spec.training.recompute]
    m = plan.model
    assert got["model"] == {"layers": m.num_layers, "dim": m.hidden_size, "vocab_size": m.vocab_size}


def test_pipelining_turns_cuda_graphs_off_and_interleaves(runs) -> None:
    plan, got, _ = runs["hsdp-cp-tp-pp"]
    assert got["disable_cuda_graphs"] is True and got["pp_schedule"] == "Interleaved1F1B"
    assert got["pp_stages"] == plan.pp * plan.vpp  # as torchtitan's pipeline builder counts them


def test_the_schedule_compile_and_checkpoints(runs) -> None:
    plan, got, _ = runs["moe-ep"]
    assert got["lr_scheduler"]["decay_ratio"] == pytest.approx(0.2)
    assert got["lr_scheduler"]["min_lr_factor"] == pytest.approx(0.1)
    assert got["compile"] is True and got["compile_components"] == ["model", "loss"]
    assert got["checkpoint"] == {"enable": True, "folder": "/ckpt/moe", "interval": 100}
    sample, parsed_sample, _ = runs["sample"]
    assert parsed_sample["lr_scheduler"]["decay_type"] == "cosine"
    assert parsed_sample["checkpoint"]["folder"] == str(sample.spec.checkpoint.dir)


def test_the_fp8_converter_is_torchtitans_own(runs) -> None:
    """torchtitan imported the config module, ran its function and built the converter's Config
    with the generated keywords (a keyword it lacks is a TypeError first); the converter itself
    then wants torchao and an SM89+ GPU, which this CPU machine has not."""
    _, got, _ = runs["fp8"]
    error = got.get("error", "")
    assert "TypeError" not in error and ("torchao is not installed" in error or "SM89" in error), got


@pytest.mark.parametrize("name", ["moe-fp8", "moe-mxfp8"])
def test_torchtitan_builds_the_moe_fp8_configs(runs, name: str) -> None:
    """torchtitan's ConfigManager imported the module and ran its function up to building the
    converters (then torchao, absent here, is wanted: not a TypeError of a keyword)."""
    _, got, _ = runs[name]
    error = got.get("error", "")
    assert "TypeError" not in error and "torchao is not installed" in error, got


CONVERTERS_CHECK = r"""
import dataclasses, importlib, json, sys
sys.path.insert(0, sys.argv[1])
import torchtitan_config as run
from torchtitan.components.quantization.utils import module_filter_fn
from torchtitan.models.common.linear import Linear
from torchtitan.models.common.moe import GroupedExperts
registry = importlib.import_module(f"torchtitan.models.{sys.argv[2]}").model_registry
out = {"converters": []}
for config in run.converters():
    owner = type(config)._owner
    out["converters"].append([owner.__name__, {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}])
    model = registry(sys.argv[3]).model
    if "GroupedExperts" in owner.__name__:
        # the converter's own convert() over the flavor; its constructor (which wants torchao and an
        # SM89+ / SM100 GPU, neither here) only checks the machine, convert() rewrites the configs
        converter = owner.__new__(owner)
        converter.config = config
        converted = converter.convert(model)
        out["experts"] = sorted({(type(c)._owner.__name__, getattr(c, "recipe_name", None))
                                 for _, c, *_ in converted.traverse(GroupedExperts.Config)})
        out["expert_groups"] = len(list(converted.traverse(GroupedExperts.Config)))
    elif "filter_fqns" in out["converters"][-1][1]:  # Float8's skip list, through its own filter
        out["bf16_linears"] = sorted({fqn.split(".")[-1] for fqn, c, *_ in model.traverse(Linear.Config)
                                      if not module_filter_fn(c, fqn, config.filter_fqns)})
print(json.dumps(out, default=list))
"""


@pytest.mark.parametrize(("name", "linear", "experts"), [
    ("moe-fp8", ["Float8LinearConverter", {"recipe_name": "rowwise", "filter_fqns": ["lm_head", "router.gate"],
                                           "emulate": False, "model_compile_enabled": True}],
     ["Float8GroupedExpertsConverter", {"model_compile_enabled": True}]),
    ("moe-mxfp8", ["MXFP8LinearConverter", {"fqns": ["attention", "shared_experts", "feed_forward"],
                                            "model_compile_enabled": True}],
     ["MXFP8GroupedExpertsConverter", {"recipe_name": "mxfp8_rceil", "pad_multiple": 128,
                                       "model_compile_enabled": True}]),
])
def test_the_grouped_experts_converter_converts_the_flavors_experts(runs, tmp_path: Path, name: str,
                                                                   linear: list, experts: list) -> None:
    """The generated module's converters are torchtitan 0.3.0's Configs with the table's keywords;
    the grouped experts' converter turns every expert group of the flavor (48 layers of
    Qwen3-30B-A3B) into its quantized class, and Float8's filter leaves the router's gate and
    the output head in bf16."""
    plan, _, files = runs[name]
    (tmp_path / "torchtitan_config.py").write_text(files["torchtitan_config.py"], encoding="utf-8")
    from generator.plan.torchtitan import registry_model

    model = registry_model(plan.spec)
    proc = subprocess.run([sys.executable, "-c", CONVERTERS_CHECK, str(tmp_path), model.module, model.flavor],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [[n, dict(sorted(f.items()))] for n, f in got["converters"]] == \
        [[n, dict(sorted(f.items()))] for n, f in (linear, experts)]
    quantized = experts[0].replace("Converter", "")
    assert got["experts"] == [[quantized, experts[1].get("recipe_name")]]
    assert got["expert_groups"] == plan.model.num_layers == 48
    if name == "moe-fp8":
        assert got["bf16_linears"] == ["gate", "lm_head"]


def test_torchrun_runs_the_module(runs) -> None:
    plan, _, files = runs["sample"]
    env = {"NODES": "8", "PROCS_PER_NODE": "8", "SLURM_JOB_ID": "7", "MASTER_ADDR": "node1",
           "MASTER_PORT": "29500"}
    args = parsed("torchrun", launched_argv(files["launch.sbatch"], env)[1:])
    assert args.module is True and args.training_script == "torchtitan.train"
    assert (int(args.nnodes), int(args.nproc_per_node)) == (8, 8) == (plan.spec.cluster.nodes, plan.procs_per_node)


COMPILING_CHECK = r"""
import importlib, json, sys
out = []
for module, function in json.loads(sys.argv[1]):
    registry = importlib.import_module(f"torchtitan.models.{module}.config_registry")
    if registry.__dict__[function]().compile.enable:
        out.append(function)
print(json.dumps(out))
"""


def test_the_config_functions_that_compile_are_the_tables() -> None:
    """The table's `compiling` (the models' config functions with compile on, for which a run
    that does not compile is written --compile.no_enable) is what torchtitan 0.3.0's functions
    say."""
    require_oracle("torchtitan")
    from generator.dialects import table

    titan = table("torchtitan")
    functions = sorted({(module, function) for module, function, _ in titan["models"].values()})
    proc = subprocess.run([sys.executable, "-c", COMPILING_CHECK, json.dumps(functions)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(json.loads(proc.stdout.strip().splitlines()[-1])) == sorted(titan["compiling"]) != []


FUNCTIONS_CHECK = r"""
import importlib, json, sys
out = {}
for module, function in json.loads(sys.argv[1]):
    registry = importlib.import_module(f"torchtitan.models.{module}.config_registry")
    try:
        out[function] = registry.__dict__[function]().model_spec.flavor
    except ImportError as exc:  # a converter's torchao, absent on the CPU
        out[function] = f"ImportError: {exc}"
print(json.dumps(out))
"""


def test_the_config_functions_build_the_flavors_the_table_says() -> None:
    """The table's `functions` (torchtitan's own config functions, which lint and import read a
    short `--module llama3 --config llama3_8b` by) are the flavors torchtitan 0.3.0's functions
    build; those that need torchao (FP8 converters) cannot be built on the CPU, and say so."""
    require_oracle("torchtitan")
    from generator.dialects import table

    titan = table("torchtitan")
    module_of = {function: next(m for m, _, _ in titan["models"].values() if function.startswith(m))
                 for function in titan["functions"]}
    proc = subprocess.run([sys.executable, "-c", FUNCTIONS_CHECK, json.dumps([[m, f] for f, m in module_of.items()])],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = json.loads(proc.stdout.strip().splitlines()[-1])
    checked = {f: flavor for f, flavor in built.items() if not flavor.startswith("ImportError")}
    assert len(checked) >= 9, built
    assert checked == {f: titan["functions"][f] for f in checked}
