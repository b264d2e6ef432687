"""The run's data, tokenizer, checkpoints, logging and evaluation: spec sections rendered as each
Megatron dialect spells them (the real parsers take them: test_framework_parsers.py), refused
where a dialect or framework cannot write them, and read back by import."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from generator.artifacts import spec_files
from generator.calculator.resolve import PlanError, resolve
from generator.errors import UserError
from generator.run import load_spec

from .conftest import MINIMAL
from .helpers import spec_dict

IO = """\
data:
  paths: [{path: /data/web_text_document, weight: 0.7}, {path: "/data/code text", weight: 0.3}]
  split: "990,9,1"
tokenizer: {type: HuggingFaceTokenizer, model: meta-llama/Meta-Llama-3-8B}
checkpoint: {dir: {shell: "${CKPT}/run"}, interval: 500}
logging: {wandb_project: llama3, tensorboard_dir: /tb/run}
eval: {interval: 1000, iters: 20}
"""


def _arguments(path) -> list[str]:
    """MEGATRON_ARGS as bash expands it (CKPT=/ck in the environment)."""
    files = spec_files(load_spec(path))[0]
    script = path.parent / "megatron_args.sh"
    script.write_text(files["megatron_args.sh"])
    out = subprocess.run(["bash", "-c", f'source {script}; printf "%s\\n" "${{MEGATRON_ARGS[@]}}"'],
                         capture_output=True, text=True, check=True, env={"CKPT": "/ck", "PATH": "/usr/bin:/bin"})
    return out.stdout.splitlines()


def _after(words: list[str], flag: str, count: int = 1) -> list[str]:
    at = words.index(flag)
    return words[at + 1:at + 1 + count]


def test_megatron_lm_gets_every_section_as_its_flags(write_spec) -> None:
    words = _arguments(write_spec(MINIMAL + IO))
    assert _after(words, "--data-path", 4) == ["0.7", "/data/web_text_document", "0.3", "/data/code text"]
    assert _after(words, "--split") == ["990,9,1"]
    assert _after(words, "--tokenizer-type") == ["HuggingFaceTokenizer"]
    assert _after(words, "--tokenizer-model") == ["meta-llama/Meta-Llama-3-8B"]
    # saved to and resumed from one folder, a run-time path expanded by the job's shell
    assert _after(words, "--save") == ["/ck/run"] and _after(words, "--load") == ["/ck/run"]
    assert _after(words, "--save-interval") == ["500"]
    assert _after(words, "--wandb-project") == ["llama3"] and _after(words, "--wandb-exp-name") == ["t"]
    assert _after(words, "--eval-interval") == ["1000"] and _after(words, "--eval-iters") == ["20"]
    assert "--finetune" not in words and "--async-save" not in words


def test_fine_tuning_loads_weights_without_optimizer_state(write_spec) -> None:
    words = _arguments(write_spec(MINIMAL + "checkpoint: {dir: /ckpt/sft, finetune_from: /ckpt/base}\n"))
    assert _after(words, "--save") == ["/ckpt/sft"] and _after(words, "--load") == ["/ckpt/base"]
    assert {"--finetune", "--no-load-optim", "--no-load-rng"} <= set(words)


def test_async_save_turns_on_the_persistent_worker(write_spec) -> None:
    """core_v0.16's validate_args switches --async-save off without --use-persistent-ckpt-worker
    (found by the parser oracle)."""
    words = _arguments(write_spec(MINIMAL + "checkpoint: {dir: /c, format: torch_dist, async_save: true}\n"))
    assert {"--async-save", "--use-persistent-ckpt-worker"} <= set(words)
    assert _after(words, "--ckpt-format") == ["torch_dist"]


@pytest.mark.parametrize(("fork", "spelled"), [("microsoft", "HFTokenizer"), ("bigscience", "PretrainedFromHF")])
def test_each_fork_spells_the_hugging_face_tokenizer_its_way(write_spec, fork: str, spelled: str) -> None:
    spec = MINIMAL.replace("framework: megatron-lm", f"framework: megatron-deepspeed\nmegatron: {{fork: {fork}}}")
    words = _arguments(write_spec(spec + "tokenizer: {type: HuggingFaceTokenizer, model: org/tok}\n"))
    assert _after(words, "--tokenizer-type") == [spelled]
    model_flag = "--tokenizer-model" if fork == "microsoft" else "--tokenizer-name-or-path"
    assert _after(words, model_flag) == ["org/tok"]


@pytest.mark.parametrize(("fork", "section", "field"), [
    ("microsoft", "checkpoint: {dir: /c, format: torch_dist}", "checkpoint.format"),
    ("microsoft", "logging: {throughput: true}", "logging.throughput"),
    ("bigscience", "logging: {wandb_project: p}", "logging.wandb_project"),
    ("bigscience", "tokenizer: {type: TikTokenizer}", "tokenizer.type"),
])
def test_what_a_fork_cannot_write_is_refused_at_the_field(write_spec, fork, section, field) -> None:
    spec = MINIMAL.replace("framework: megatron-lm", f"framework: megatron-deepspeed\nmegatron: {{fork: {fork}}}")
    path = write_spec(spec + section + "\n")
    with pytest.raises(PlanError) as err:
        resolve(load_spec(path))
    message = str(err.value)
    assert f"GL218 {field}" in message and f"{path}:9:" in message, message


def test_a_framework_without_megatron_arguments_refuses_the_sections(write_spec) -> None:
    """The Trainer (FSDP2) carries checkpoint.dir but not the data; a plain DeepSpeed entry point
    carries neither: each refused at its field."""
    spec = MINIMAL.replace("framework: megatron-lm", "framework: fsdp").replace(
        "parallelism: {tp: 2, pp: 2}", "parallelism: {zero_stage: 3}")
    path = write_spec(spec + "checkpoint: {dir: /c}\ndata: {paths: [/d]}\n")
    with pytest.raises(PlanError) as err:
        resolve(load_spec(path))
    message = str(err.value)
    assert "GL223 data.paths is not written for framework fsdp" in message and f"{path}:9:" in message
    assert "checkpoint.dir" not in message
    plain = write_spec(spec.replace("framework: fsdp", "framework: deepspeed") + "checkpoint: {dir: /c}\n", "ds.yaml")
    with pytest.raises(PlanError, match="GL223 checkpoint.dir is not written for framework deepspeed"):
        resolve(load_spec(plain))


def test_a_blend_gives_every_dataset_a_weight(write_spec) -> None:
    path = write_spec(MINIMAL + "data: {paths: [{path: /a, weight: 1}, /b]}\n")
    with pytest.raises(UserError) as err:
        load_spec(path)
    assert str(err.value).startswith(f"{path}:8:") and "$.data.paths[1]: a blend of 2 datasets" in str(err.value)


def test_async_save_needs_the_distributed_format(write_spec) -> None:
    path = write_spec(MINIMAL + "checkpoint: {dir: /c, format: torch, async_save: true}\n")
    with pytest.raises(UserError, match=r"checkpoint.async_save: .*torch_dist"):
        load_spec(path)


def test_extra_args_that_repeat_a_section_are_refused(write_spec) -> None:
    path = write_spec(MINIMAL + "data: {paths: [/d]}\nlaunch: {extra_args: [--data-path, /other]}\n")
    with pytest.raises(PlanError, match=r"GL220 .*--data-path repeats --data-path"):
        resolve(load_spec(path))


def test_import_reads_the_sections_back(tmp_path, write_spec) -> None:
    from generator.importer import import_paths

    path = write_spec(MINIMAL + IO)
    out = tmp_path / "out"
    out.mkdir()
    for name, text in spec_files(load_spec(path))[0].items():
        (out / name).write_text(text)
    spec = yaml.safe_load(import_paths([out]).text)
    assert spec["data"]["paths"] == [{"path": "/data/web_text_document", "weight": 0.7},
                                     {"path": "/data/code text", "weight": 0.3}]
    assert spec["checkpoint"] == {"dir": {"shell": "${CKPT}/run"}, "interval": 500}
    assert spec["tokenizer"] == {"type": "HuggingFaceTokenizer", "model": "meta-llama/Meta-Llama-3-8B"}
    assert spec["eval"] == {"interval": 1000, "iters": 20} and spec["logging"]["wandb_project"] == "llama3"
    assert not spec.get("launch", {}).get("extra_args")  # nothing left over


@pytest.mark.parametrize(("version", "written"), [("core_v0.16", True), ("latest", True), ("core_v0.14", False)])
def test_a_reshardable_optimizer_state_needs_a_release_that_saves_one(write_spec, version, written) -> None:
    """checkpoint.reshardable is --dist-ckpt-optim-fully-reshardable, which Megatron-LM has since
    core_v0.16; an earlier release cannot write it, and the spec says so at the field."""
    path = write_spec(yaml.safe_dump(spec_dict(
        megatron={"version": version}, parallelism={"distributed_optimizer": True},
        checkpoint={"dir": "/ckpt/run", "reshardable": True})))
    if written:
        assert "--dist-ckpt-optim-fully-reshardable" in _arguments(path)
        return
    with pytest.raises(PlanError, match="checkpoint.reshardable") as refused:
        spec_files(load_spec(path))
    assert f"{path}:" in str(refused.value)


def test_a_universal_checkpoint_is_a_forks_flag_and_not_megatron_lms(write_spec) -> None:
    fork = write_spec(yaml.safe_dump(spec_dict(framework="megatron-deepspeed", megatron={"fork": "microsoft"},
                                               checkpoint={"dir": "/ckpt/run", "universal": True})))
    assert "--universal-checkpoint" in _arguments(fork)
    lm = write_spec(yaml.safe_dump(spec_dict(checkpoint={"dir": "/ckpt/run", "universal": True})), "lm.yaml")
    with pytest.raises(PlanError, match="checkpoint.universal"):
        spec_files(load_spec(lm))


@pytest.mark.parametrize(("schedule", "flag"), [("checkpoint", "--use-checkpoint-opt_param-scheduler"),
                                                ("spec", "--override-opt_param-scheduler")])
def test_the_schedule_a_resumed_run_follows_is_one_flag(write_spec, schedule, flag) -> None:
    path = write_spec(yaml.safe_dump(spec_dict(checkpoint={"dir": "/ckpt/run", "schedule": schedule})))
    words = _arguments(path)
    assert flag in words
    assert {"--use-checkpoint-opt_param-scheduler", "--override-opt_param-scheduler"} & set(words) == {flag}


def test_import_reads_the_trainers_sections_back(tmp_path, write_spec) -> None:
    """FSDP2 through the Trainer: checkpoint folder and interval, evaluation, wandb project and
    run name come back from trainer_args.sh (the project from its WANDB_PROJECT export)."""
    from generator.importer import import_paths

    sections = {"checkpoint": {"dir": "/ckpt/sft", "interval": 200, "keep_last": 3}, "eval": {"interval": 400},
                "logging": {"wandb_project": "sft-runs", "wandb_run_name": "sft-1"}}
    path = write_spec(yaml.safe_dump(spec_dict(framework="fsdp", parallelism={"tp": 1, "pp": 1, "zero_stage": 3},
                                               **sections)))
    files = spec_files(load_spec(path))[0]
    out = tmp_path / "out"
    out.mkdir()
    for name, text in files.items():
        (out / name).write_text(text)
    spec = yaml.safe_load(import_paths([out]).text)
    for section, values in sections.items():
        assert {k: spec[section][k] for k in values} == values, spec.get(section)


def test_megatron_keeps_every_checkpoint_so_keep_last_is_refused(write_spec) -> None:
    path = write_spec(yaml.safe_dump(spec_dict(checkpoint={"dir": "/ckpt/run", "keep_last": 3})))
    with pytest.raises(PlanError, match="GL218 checkpoint.keep_last 3 cannot be expressed"):
        resolve(load_spec(path))


PLAIN_DEEPSPEED = """\
name: plain
framework: deepspeed
cluster: {nodes: 2, gpus_per_node: 8, gpu: h100-80gb}
model: {preset: llama2-7b}
parallelism: {zero_stage: 3}
batch: {micro_batch_size: 1, global_batch_size: 64}
training: {train_iters: 100, lr: 1.0e-4, warmup: {iters: 5}}
data: {paths: ["/data/sft set"]}
checkpoint: {dir: {shell: "${CKPT}/plain"}, interval: 50}
launch:
  entrypoint: train.py
  arguments: {checkpoint.dir: --save_dir, checkpoint.interval: --save_interval, data.paths: --data_path}
"""


def _train_args(path) -> list[str]:
    """TRAIN_ARGS of launch.sbatch as bash expands it (CKPT=/ck)."""
    text = spec_files(load_spec(path))[0]["launch.sbatch"]
    start = text.index("TRAIN_ARGS=(")
    block = text[start:text.index("\n", text.index(")", start + len("TRAIN_ARGS=("))) + 1]
    out = subprocess.run(["bash", "-c", f'GEN_LAUNCH_DIR=/g; {block}printf "%s\\n" "${{TRAIN_ARGS[@]}}"'],
                         capture_output=True, text=True, check=True, env={"CKPT": "/ck", "PATH": "/usr/bin:/bin"})
    return out.stdout.splitlines()


def test_a_plain_deepspeed_entry_point_takes_the_fields_under_its_own_options(write_spec) -> None:
    """launch.arguments names the entry point's options: the values follow them (a run-time word
    expanded by the job's shell, a path with a space one word), and nothing else is written."""
    words = _train_args(write_spec(PLAIN_DEEPSPEED))
    assert words == ["--deepspeed_config", "/g/ds_config.json", "--save_dir", "/ck/plain", "--save_interval", "50",
                     "--data_path", "/data/sft set"]


@pytest.mark.parametrize(("change", "message"), [
    (("data.paths: --data_path}", "}\ntokenizer: {model: gpt2}"), "GL223 data.paths is not written"),
    (("framework: deepspeed", "framework: fsdp"), "launch.arguments is for a plain DeepSpeed entry point"),
    (("--save_interval", "--save_dir"), "--save_dir is given for two fields"),
])
def test_launch_arguments_are_refused_where_they_cannot_apply(write_spec, change, message) -> None:
    path = write_spec(PLAIN_DEEPSPEED.replace(*change))
    with pytest.raises(UserError, match=message) as error:
        resolve(load_spec(path))
    assert f"{path}:" in str(error.value)


def test_bf16_optimizer_state_is_megatrons_precision_aware_optimizer(write_spec) -> None:
    path = write_spec(yaml.safe_dump(spec_dict(parallelism={"distributed_optimizer": True},
                                               training={"optimizer_states": "bf16", "main_grads": "bf16"})))
    words = _arguments(path)
    assert "--use-precision-aware-optimizer" in words
    assert _after(words, "--exp-avg-dtype") == _after(words, "--exp-avg-sq-dtype") == _after(words, "--main-grads-dtype") \
        == ["bf16"]
    refused = write_spec(yaml.safe_dump(spec_dict(training={"optimizer_states": "bf16"})), "plain.yaml")
    with pytest.raises(PlanError, match="GL224 training.optimizer_states bf16 need the distributed optimizer"):
        resolve(load_spec(refused))
