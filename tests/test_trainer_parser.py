"""Oracle: the Hugging Face Trainer's own argument parser (transformers' HfArgumentParser over
TrainingArguments) accepts every generated trainer_args.sh with the plan's batch and schedule;
TRL's SFTConfig fields (--packing, --padding_free) and the entry point's own arguments (the
model's name, its length) are the only words it leaves over."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from generator.calculator.resolve import resolve
from generator.render import render
from generator.run import load_spec

from .conftest import SAMPLES, require_oracle
from .helpers import plan_of, spec_dict

pytestmark = pytest.mark.oracle
TRAINER_SAMPLES = [s for s in SAMPLES if resolve(load_spec(s)).uses_trainer]


_OWN = "# the entry point's own arguments"


def _own(text: str) -> list[str]:
    """The words under trainer_args.sh's group of the entry point's own arguments."""
    return shlex.split(text.split(_OWN, 1)[1].split("\n", 1)[1].rsplit(")", 1)[0], comments=True) \
        if _OWN in text else []


def _words(text: str) -> list[str]:
    return shlex.split(text.split("TRAINER_ARGS=(", 1)[1].rsplit(")", 1)[0], comments=True)


def _parse(words: list[str], tmp_path: Path, monkeypatch):
    require_oracle("transformers")
    import transformers.training_args as training_args
    from transformers import HfArgumentParser, TrainingArguments

    monkeypatch.setattr(training_args, "is_torch_bf16_gpu_available", lambda: True)  # a GPU machine's answer
    args, rest = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(
        args=[*words, "--output_dir", str(tmp_path / "out")], return_remaining_strings=True)
    return args, rest


def _check(plan, tmp_path: Path, monkeypatch) -> None:
    import os

    monkeypatch.delenv("FSDP_CPU_RAM_EFFICIENT_LOADING", raising=False)
    text = render(plan, "trainer")
    args, rest = _parse(_words(text), tmp_path, monkeypatch)
    # the entry point's own arguments (TRL's --max_length, the model's name) are its parser's
    own = _own(text)
    assert rest == (["--packing", "--padding_free"] if plan.spec.data.packing else []) + own, rest
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps * plan.world_size \
        == plan.global_batch_size
    assert (args.per_device_train_batch_size, args.max_steps, args.warmup_steps) == \
        (plan.micro_batch_size, plan.schedule.train_iters, plan.schedule.warmup_iters)
    assert str(args.lr_scheduler_type.value) == plan.hf_scheduler
    assert args.bf16 == (plan.spec.training.precision == "bf16")
    if plan.framework == "fsdp" and plan.spec.launch.launcher != "accelerate":
        # the Trainer keeps the config without its fsdp_ prefixes
        assert (args.fsdp_config["version"], args.fsdp_config["reshard_after_forward"]) == \
            (2, plan.fsdp_reshard_after_forward)
        # each node's local rank 0 alone loads the weights: what from_pretrained reads
        assert os.environ.get("FSDP_CPU_RAM_EFFICIENT_LOADING") == "true"


@pytest.mark.parametrize("sample", TRAINER_SAMPLES, ids=[s.stem for s in TRAINER_SAMPLES])
def test_samples_accepted_by_the_trainer(sample: Path, tmp_path: Path, monkeypatch) -> None:
    _check(resolve(load_spec(sample)), tmp_path, monkeypatch)


@pytest.mark.parametrize("overrides", [
    {"framework": "fsdp", "launch": {"launcher": "torchrun"}, "parallelism": {"tp": 1, "pp": 1, "zero_stage": 2}},
    {"framework": "fsdp", "launch": {"launcher": "torchrun"}, "parallelism": {"tp": 1, "pp": 1},
     "training": {"train_iters": 100, "lr": 1e-4, "warmup": 0, "decay": "wsd", "precision": "fp16"},
     "data": {"packing": True}},
    {"framework": "deepspeed", "launch": {"launcher": "accelerate"}, "parallelism": {"tp": 1, "pp": 1, "zero_stage": 3},
     "training": {"train_iters": 100, "lr": 1e-4, "warmup": {"iters": 5}, "decay": "constant", "recompute": "full"}},
])
def test_variants_accepted_by_the_trainer(overrides: dict, tmp_path: Path, monkeypatch) -> None:
    _check(plan_of(tmp_path, spec_dict(**overrides)), tmp_path, monkeypatch)


def test_the_trainer_parser_refuses_a_typo(tmp_path: Path, monkeypatch) -> None:
    text = render(resolve(load_spec(TRAINER_SAMPLES[0])), "trainer")
    _, rest = _parse([*_words(text), "--per_device_train_batchsize", "2"], tmp_path, monkeypatch)
    assert rest == [*_own(text), "--per_device_train_batchsize", "2"]


def test_trainer_fills_exactly_the_keys_gl101_allows(tmp_path: Path) -> None:
    """deepspeed.yaml's trainer_fills, each written "auto", are all filled by transformers' own
    HfTrainerDeepSpeedConfig (process and finalize, as Trainer.train does); a key outside the
    list (steps_per_print) is left "auto", which GL101 reports."""
    require_oracle("transformers")
    import types

    from transformers import TrainingArguments
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    from generator.dialects.keyed import keyed_dialect

    fills = keyed_dialect("deepspeed").table["trainer_fills"]
    config: dict = {"optimizer": {"type": "AdamW"}, "scheduler": {"type": "WarmupDecayLR"}}
    for path in [*fills, "steps_per_print"]:
        node = config
        *head, last = path.split(".")
        for key in head:
            node = node.setdefault(key, {})
        node[last] = "auto"
    config["zero_optimization"]["stage"] = 3  # the stage-3 buckets are filled only at stage 3
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=2,
                             gradient_accumulation_steps=4, use_cpu=True, report_to=[])
    hf = HfTrainerDeepSpeedConfig(config)
    hf.trainer_config_process(args)
    model = types.SimpleNamespace(config=types.SimpleNamespace(hidden_size=64, hidden_sizes=None,
                                                               text_config=None))
    hf.trainer_config_finalize(args, model, 100)

    def autos(node: dict, prefix: str = ""):
        for key, value in node.items():
            if isinstance(value, dict):
                yield from autos(value, f"{prefix}{key}.")
            elif value == "auto":
                yield f"{prefix}{key}"

    assert list(autos(hf.config)) == ["steps_per_print"]
    assert hf.config["train_batch_size"] == 2 * 4 * args.world_size


def test_the_trainer_takes_the_checkpoint_eval_and_wandb_sections(tmp_path: Path, monkeypatch) -> None:
    """checkpoint.dir / interval, eval.interval and wandb reach TrainingArguments as the
    Trainer's own parser reads them; the project goes to the environment wandb reads."""
    require_oracle("transformers")
    import transformers.training_args as training_args
    from transformers import HfArgumentParser, TrainingArguments

    monkeypatch.setattr(training_args, "is_torch_bf16_gpu_available", lambda: True)
    data = spec_dict(framework="fsdp", launch={"launcher": "torchrun"},
                     parallelism={"tp": 1, "pp": 1, "zero_stage": 3},
                     checkpoint={"dir": str(tmp_path / "ckpt"), "interval": 200, "keep_last": 2},
                     eval={"interval": 500},
                     logging={"wandb_project": "sft-runs", "wandb_run_name": "sft-1"})
    text = render(plan_of(tmp_path, data), "trainer")
    args, rest = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(
        args=_words(text), return_remaining_strings=True)
    assert rest == []
    assert (args.output_dir, str(args.save_strategy.value), args.save_steps) == (str(tmp_path / "ckpt"), "steps", 200)
    assert (str(args.eval_strategy.value), args.eval_steps, args.save_total_limit) == ("steps", 500, 2)
    assert (args.report_to, args.run_name) == (["wandb"], "sft-1")
    assert "\nexport WANDB_PROJECT=sft-runs\n" in text + "\n"


@pytest.mark.parametrize(("entrypoint", "extra", "want"), [
    ("trl/scripts/sft.py", [], ["--model_name_or_path", "meta-llama/Meta-Llama-3-8B", "--max_length", "4096"]),
    ("trl sft", ["--model_name_or_path", "/models/mine"], ["--max_length", "4096"]),
    ("run_clm.py", [], ["--model_name_or_path", "meta-llama/Meta-Llama-3-8B", "--block_size", "4096"]),
    ("llamafactory-cli train", ["--cutoff_len", "2048"], ["--model_name_or_path", "meta-llama/Meta-Llama-3-8B"]),
    ("my_train.py", [], []),
])
def test_a_known_entry_point_gets_the_model_and_its_length(entrypoint: str, extra: list, want: list,
                                                            tmp_path: Path, monkeypatch) -> None:
    """A Trainer entry point gen-launch knows gets the preset's Hugging Face repo and
    model.seq_length in its own spelling (not twice where launch.extra_args gives one); the
    Trainer's parser leaves exactly those over; any other entry point gets a note instead."""
    plan = plan_of(tmp_path, spec_dict(framework="fsdp", model={"preset": "llama3-8b", "seq_length": 4096},
                                       launch={"launcher": "torchrun", "entrypoint": entrypoint, "extra_args": extra},
                                       parallelism={"tp": 1, "pp": 1, "zero_stage": 3}))
    text = render(plan, "trainer")
    own = _own(text)
    assert own == want
    assert ("do not reach" in text) == (entrypoint == "my_train.py")
    if entrypoint == "my_train.py":
        assert "launch.extra_args" in text and "--model_name_or_path" not in _words(text)
    _check(plan, tmp_path, monkeypatch)
