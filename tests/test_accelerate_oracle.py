"""Oracle: accelerate 1.15's own launch-argument validation reads the generated
accelerate_config.yaml (with the per-node options launch.sbatch adds) as the plan says, the
FSDP plugin it configures from that environment is FSDP2 with the plan's sharding, and its
DeepSpeed plugin reads ds_config.json with the batch the Trainer arguments give."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
import yaml

from generator.artifacts import render_all
from generator.calculator.resolve import resolve
from generator.plan.plan import Plan
from generator.render import render

from .conftest import ROOT, require_oracle
from .helpers import plan_of, spec_dict
from .test_launchers import launched_argv

pytestmark = pytest.mark.oracle
SAMPLES = [ROOT / "samples" / f"{name}.yaml" for name in
           ("sft-llama3-8b-accelerate-zero3", "sft-llama3-8b-fsdp2")]


def _variants() -> list[dict]:
    fsdp = {"framework": "fsdp", "parallelism": {"tp": 1, "pp": 1},
            "launch": {"launcher": "accelerate", "entrypoint": "train.py"}}
    return [
        spec_dict(**fsdp),
        spec_dict(**{**fsdp, "parallelism": {"tp": 1, "pp": 1, "zero_stage": 2}}),
        spec_dict(**{**fsdp, "parallelism": {"tp": 1, "pp": 1, "hybrid_shard": True,
                                             "zero_offload": "optimizer_and_params"},
                     "training": {**spec_dict()["training"], "precision": "fp16"}}),
        spec_dict(framework="deepspeed", parallelism={"tp": 1, "pp": 1, "zero_stage": 2},
                  launch={"launcher": "accelerate", "entrypoint": "train.py"}),
        # FSDP2 with tensor and context parallelism (accelerate's parallelism_config): 16 processes
        spec_dict(**{**fsdp, "parallelism": {"tp": 2, "pp": 1, "cp": 2}}),
        spec_dict(**{**fsdp, "parallelism": {"tp": 2, "pp": 1, "dp_replicate": 2}}),
    ]


def _write(plan: Plan, folder: Path) -> dict[str, str]:
    files = render_all(plan)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return files


def _trainer_args(text: str) -> dict[str, str]:
    words = shlex.split(text.split("TRAINER_ARGS=(", 1)[1].rsplit(")", 1)[0], comments=True)
    return {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}


def _launch_argv(plan: Plan, folder: Path) -> list[str]:
    """The words launch.sbatch gives `accelerate launch` on node 1, files in ``folder``."""
    env = {"NODES": str(plan.spec.cluster.nodes), "WORLD_SIZE": str(plan.world_size),
           "MASTER_ADDR": "node1", "MASTER_PORT": "29500", "SLURM_NODEID": "1",
           "GEN_LAUNCH_DIR": str(folder)}
    argv = launched_argv(render(plan, "slurm"), env)
    assert argv[:2] == ["accelerate", "launch"]
    return argv[2:]


def _accelerate_args(plan: Plan, folder: Path):
    """What `accelerate launch` makes of the config and the options launch.sbatch passes."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    args, _, _ = _validate_launch_command(launch_command_parser().parse_args(_launch_argv(plan, folder)))
    return args


def _check(plan: Plan, folder: Path, monkeypatch) -> None:
    require_oracle("accelerate")
    files = _write(plan, folder)
    args = _accelerate_args(plan, folder)
    precision = {"bf16": "bf16", "fp16": "fp16"}.get(plan.spec.training.precision, "no")
    if plan.framework == "deepspeed":  # the precision is ds_config.json's (checked below)
        precision = "no"
    assert (args.num_processes, args.num_machines, args.mixed_precision) == \
        (plan.world_size, plan.spec.cluster.nodes, precision)
    trainer = _trainer_args(files["trainer_args.sh"])
    micro, accumulation = int(trainer["--per_device_train_batch_size"]), \
        int(trainer["--gradient_accumulation_steps"])
    # only the data-parallel ranks take other data: accelerate's dp_replicate × dp_shard where its
    # launch carries a parallelism_config, else every process
    data_parallel = args.parallelism_config_dp_replicate_size * args.parallelism_config_dp_shard_size \
        if args.use_parallelism_config else args.num_processes
    assert micro * accumulation * data_parallel == plan.global_batch_size
    assert int(trainer["--max_steps"]) == plan.schedule.train_iters
    if plan.framework == "fsdp":
        from accelerate.utils import FullyShardedDataParallelPlugin
        from accelerate.utils.launch import prepare_multi_gpu_env

        assert args.use_fsdp and not args.use_deepspeed
        for key, value in prepare_multi_gpu_env(args).items():
            monkeypatch.setenv(key, value)
        fsdp = FullyShardedDataParallelPlugin()
        assert fsdp.fsdp_version == 2
        assert fsdp.reshard_after_forward == (plan.zero_stage == 3)
        assert bool(fsdp.activation_checkpointing) == (plan.spec.training.recompute != "none")
        _parallelism(plan)
    else:
        from accelerate.utils import DeepSpeedPlugin

        assert args.use_deepspeed and not args.use_fsdp
        plugin = DeepSpeedPlugin(hf_ds_config=args.deepspeed_config_file)
        config = plugin.deepspeed_config
        assert (config["train_batch_size"], config["train_micro_batch_size_per_gpu"],
                config["gradient_accumulation_steps"], plugin.zero_stage) == \
            (plan.global_batch_size, micro, accumulation, plan.zero_stage)
        assert "auto" not in files["ds_config.json"]
        assert bool(config.get("bf16", {}).get("enabled")) == (plan.spec.training.precision == "bf16")
        _gpu_path(plan, folder, monkeypatch)


def _parallelism(plan: Plan) -> None:
    """accelerate's own ParallelismConfig from the environment its launch exports: the plan's
    sizes, and its checks against an accelerator of the plan's processes (FSDP2; the object
    stands in for an Accelerator, which needs the processes to exist)."""
    from types import SimpleNamespace

    from accelerate.parallelism_config import ParallelismConfig

    meshed = plan.dp_replicate > 1 or plan.tp > 1 or plan.cp > 1
    assert (os.environ.get("ACCELERATE_USE_PARALLELISM_CONFIG") == "true") == meshed
    if not meshed:
        return
    config = ParallelismConfig()
    assert (config.dp_replicate_size, config.dp_shard_size, config.tp_size, config.cp_size) == \
        (plan.dp_replicate, plan.dp_shard, plan.tp, plan.cp)
    assert config.total_size == plan.world_size
    assert config.dp_replicate_size * config.dp_shard_size == plan.dp  # the ranks that take other data
    config._validate_accelerator(SimpleNamespace(multi_device=True, num_processes=plan.world_size,
                                                 is_fsdp2=True, distributed_type=None, is_main_process=True))


def _gpu_path(plan: Plan, folder: Path, monkeypatch) -> None:
    """accelerate's own launch on a GPU machine (distributed type DEEPSPEED, not CPU): the
    launcher's environment, then the DeepSpeed plugin each rank builds from it, whose checks
    refuse accelerate settings beside deepspeed_config_file."""
    from accelerate.commands import launch as accelerate_launch
    from accelerate.utils import DeepSpeedPlugin
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    launched = []
    monkeypatch.setattr(accelerate_launch, "deepspeed_launcher", launched.append)
    argv = _launch_argv(plan, folder)
    accelerate_launch.launch_command(accelerate_launch.launch_command_parser().parse_args(argv))
    assert len(launched) == 1, "accelerate did not take the GPU (DeepSpeed launcher) path"
    _, env = prepare_deepspeed_cmd_env(launched[0])
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    plugin = DeepSpeedPlugin()  # as each rank does; raises on what accelerate refuses
    assert plugin.zero_stage == plan.zero_stage
    assert plugin.deepspeed_config["train_batch_size"] == plan.global_batch_size
    if plan.zero_stage == 3:  # save_model writes whole 16-bit weights, not empty shards
        assert plugin.deepspeed_config["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"]


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.stem for s in SAMPLES])
def test_samples_read_by_accelerate(sample: Path, tmp_path: Path, monkeypatch) -> None:
    from generator.run import load_spec

    _check(resolve(load_spec(sample)), tmp_path, monkeypatch)


@pytest.mark.parametrize("index", range(len(_variants())))
def test_variants_read_by_accelerate(index: int, tmp_path: Path, monkeypatch) -> None:
    _check(plan_of(tmp_path, _variants()[index]), tmp_path / "out", monkeypatch)


def test_the_oracle_reads_our_file(tmp_path: Path) -> None:
    """A config changed by hand changes what accelerate makes of it."""
    require_oracle("accelerate")
    from generator.run import load_spec

    plan = resolve(load_spec(SAMPLES[1]))
    _write(plan, tmp_path)
    config = yaml.safe_load((tmp_path / "accelerate_config.yaml").read_text())
    config["distributed_type"], config["mixed_precision"] = "MULTI_GPU", "fp16"
    (tmp_path / "accelerate_config.yaml").write_text(yaml.safe_dump(config))
    args = _accelerate_args(plan, tmp_path)
    assert not args.use_fsdp and args.mixed_precision == "fp16"


def test_the_gpu_path_refuses_mixed_precision_beside_the_deepspeed_file(tmp_path: Path, monkeypatch) -> None:
    """The oracle can fail: the config as it was written before (mixed_precision beside
    deepspeed_config_file) is refused by accelerate on a GPU machine."""
    require_oracle("accelerate")
    from generator.run import load_spec

    sample = next(s for s in SAMPLES if s.stem == "sft-llama3-8b-accelerate-zero3")
    plan = resolve(load_spec(sample))
    _write(plan, tmp_path)
    config = yaml.safe_load((tmp_path / "accelerate_config.yaml").read_text())
    config["mixed_precision"] = "bf16"
    (tmp_path / "accelerate_config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ValueError, match="will be ignored"):
        _gpu_path(plan, tmp_path, monkeypatch)


def test_accelerate_refuses_what_gl117_refuses() -> None:
    """GL117's two refusals are accelerate's own (the sizes of its lint corpus file and of
    test_fsdp_degrees), so the rule and the library cannot drift apart unseen."""
    require_oracle("accelerate")
    from types import SimpleNamespace

    from accelerate.parallelism_config import ParallelismConfig

    accelerator = SimpleNamespace(multi_device=True, num_processes=8, is_fsdp2=True, distributed_type=None,
                                  is_main_process=True)
    with pytest.raises(ValueError, match="no dimension for FSDP to shard across"):
        ParallelismConfig(dp_shard_size=1, tp_size=8)._validate_accelerator(accelerator)
    with pytest.raises(ValueError):
        ParallelismConfig(dp_replicate_size=4, dp_shard_size=1, tp_size=2)
    with pytest.raises(ValueError, match="does not match num_processes"):  # GL026's product
        ParallelismConfig(dp_replicate_size=2, dp_shard_size=4, tp_size=2)._validate_accelerator(accelerator)
