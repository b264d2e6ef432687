"""gen-launch resume-check: each change between two runs classified, and held to the frameworks'
own code: Megatron's check_checkpoint_args (every tree of shared/oracles, with the resuming run's
arguments as the global ones and the saving run's as the checkpoint's), and megatron-core's
OptimizerParamScheduler loading the saved scheduler's state into the resuming run's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from generator.artifacts import spec_files
from generator.cli import entrypoint
from generator.resume import check
from generator.run import load_spec

from .conftest import require_oracle
from .helpers import overlay, spec_dict
from .oracle.megatron_scheduler import lr, megatron_flags, scheduler
from .oracle.workers import ask
from .test_framework_parsers import cases_of

CKPT = "/ckpt/run"
RUN = {"model": {"position_embedding": "rope"}, "checkpoint": {"dir": CKPT, "interval": 100},
       "tokenizer": {"type": "HuggingFaceTokenizer", "model": "gpt2"},
       "batch": {"micro_batch_size": 2, "gradient_accumulation_steps": None, "global_batch_size": 32}}
DIST = {"parallelism": {"distributed_optimizer": True}}
MICROSOFT = {"framework": "megatron-deepspeed", "megatron": {"fork": "microsoft"},
             "parallelism": {"zero_stage": 1}}
BLOOM = {"framework": "megatron-deepspeed", "megatron": {"fork": "bigscience"},
         "parallelism": {"zero_stage": 1}, "model": {"position_embedding": "alibi"}}
GPT2_FILES = {"tokenizer": {"type": "GPT2BPETokenizer", "model": None, "vocab_file": "/tok/vocab.json",
                            "merge_file": "/tok/merges.txt"}}


def _merged(*parts: dict) -> dict:
    data = spec_dict(**RUN)
    for part in parts:
        overlay(data, part)
    return data


def _write(folder: Path, name: str, data: dict) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**data, "name": name}, sort_keys=False), encoding="utf-8")
    return path


# (label, what both runs have, what NEW changes, {field: verdict} expected, Megatron's
# check_checkpoint_args refuses NEW's arguments for OLD's checkpoint)
CASES = [
    ("tp, torch_dist, plain optimizer", {}, {"parallelism": {"tp": 4}},
     {"parallelism.tp": "safe", "parallelism.dp": "safe"}, False),
    ("tp, torch_dist, distributed optimizer", DIST, {"parallelism": {"tp": 4}},
     {"parallelism.tp": "convert", "parallelism.dp": "safe"}, False),
    ("pp, torch_dist, distributed optimizer saved reshardable",
     {"parallelism": {"distributed_optimizer": True}, "checkpoint": {"reshardable": True}},
     {"parallelism": {"pp": 1}}, {"parallelism.pp": "safe", "parallelism.dp": "safe"}, False),
    ("tp, torch format", {"checkpoint": {"format": "torch"}}, {"parallelism": {"tp": 4}},
     {"parallelism.tp": "convert", "parallelism.dp": "safe"}, True),
    ("tp, torch format, core_v0.16", {"checkpoint": {"format": "torch"}, "megatron": {"version": "core_v0.16"}},
     {"parallelism": {"tp": 4}}, {"parallelism.tp": "convert", "parallelism.dp": "safe"}, True),
    ("hidden size, core_v0.16", {"megatron": {"version": "core_v0.16"}}, {"model": {"hidden_size": 2048}},
     {"model.hidden_size": "cannot", "model.ffn_hidden_size": "cannot", "model.kv_channels": "cannot"}, True),
    ("pp, torch format", {"checkpoint": {"format": "torch"}}, {"parallelism": {"pp": 1}},
     {"parallelism.pp": "convert", "parallelism.dp": "safe"}, True),
    ("dp (more nodes), distributed optimizer", DIST, {"cluster": {"nodes": 4}},
     {"parallelism.dp": "safe"}, False),
    ("micro batch", DIST, {"batch": {"micro_batch_size": 1}}, {"batch.micro_batch_size": "safe"}, False),
    ("global batch, schedule in iterations", {}, {"batch": {"global_batch_size": 64}},
     {"batch.global_batch_size": "safe", "scheduler.warmup_steps": "flags", "scheduler.decay_steps": "flags",
      "scheduler.weight_decay_steps": "flags"}, False),
    ("global batch, NEW follows its own schedule", {}, {"batch": {"global_batch_size": 64},
                                                        "checkpoint": {"schedule": "spec"}},
     {"batch.global_batch_size": "safe", "scheduler.warmup_steps": "safe", "scheduler.decay_steps": "safe",
      "scheduler.weight_decay_steps": "safe"}, False),
    ("a longer run", {}, {"training": {"train_iters": 2000}},
     {"scheduler.decay_steps": "flags", "scheduler.weight_decay_steps": "flags"}, False),
    ("a longer run that keeps OLD's schedule", {}, {"training": {"train_iters": 2000},
                                                    "checkpoint": {"schedule": "checkpoint"}},
     {"scheduler.decay_steps": "safe", "scheduler.weight_decay_steps": "safe"}, False),
    ("global batch, schedule in samples", {"training": {"train_iters": None, "train_samples": 32000,
                                                         "warmup": {"samples": 320}}},
     {"batch": {"global_batch_size": 64}}, {"batch.global_batch_size": "safe"}, False),
    ("sequence length, rotary positions", {}, {"model": {"seq_length": 4096}},
     {"model.seq_length": "safe", "model.max_position_embeddings": "safe"}, False),
    ("sequence length, a tokenizer with a vocab file", GPT2_FILES, {"model": {"seq_length": 4096}},
     {"model.seq_length": "safe", "model.max_position_embeddings": "cannot"}, True),
    ("hidden size", {}, {"model": {"hidden_size": 2048}},  # the FFN and head size follow it
     {"model.hidden_size": "cannot", "model.ffn_hidden_size": "cannot", "model.kv_channels": "cannot"}, True),
    ("learned positions", {"model": {"position_embedding": "learned_absolute"}}, {"model": {"seq_length": 4096}},
     {"model.seq_length": "safe", "model.max_position_embeddings": "cannot"}, False),
    ("depth", {}, {"model": {"num_layers": 16}}, {"model.num_layers": "cannot"}, True),
    ("GQA groups", {}, {"model": {"num_query_groups": 4}}, {"model.num_query_groups": "cannot"}, False),
    ("weights only at another layout", DIST, {"parallelism": {"tp": 4},
                                              "checkpoint": {"dir": "/ckpt/sft", "finetune_from": CKPT}},
     {"checkpoint.finetune_from": "safe", "parallelism.tp": "safe", "parallelism.dp": "safe"}, False),
    ("microsoft fork, dp under ZeRO-1", MICROSOFT, {"cluster": {"nodes": 4}}, {"parallelism.dp": "convert"}, False),
    ("microsoft fork, tp", MICROSOFT, {"parallelism": {"tp": 4}},
     {"parallelism.tp": "convert", "parallelism.dp": "convert"}, True),
    ("microsoft fork, tp from a universal checkpoint", MICROSOFT,
     {"parallelism": {"tp": 4}, "checkpoint": {"universal": True}},
     {"parallelism.tp": "safe", "parallelism.dp": "safe"}, False),
    ("BLOOM's fork, pp", BLOOM, {"parallelism": {"pp": 1}},
     {"parallelism.pp": "convert", "parallelism.dp": "convert"}, True),
    ("BLOOM's fork, sequence length with alibi", BLOOM, {"model": {"seq_length": 4096}},
     {"model.seq_length": "safe", "model.max_position_embeddings": "safe"}, False),
]


@pytest.fixture(scope="module")
def classified(tmp_path_factory) -> list[tuple[tuple, dict, Path, Path]]:
    folder = tmp_path_factory.mktemp("resume")
    out = []
    for k, case in enumerate(CASES):
        _, both, change, _, _ = case
        old = _write(folder, f"old{k}", _merged(both))
        new = _write(folder, f"new{k}", _merged(both, change))
        got = {c.field: c.verdict for c in check(old, new).changes}
        out.append((case, got, old, new))
    return out


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[0] for c in CASES])
def test_each_change_is_classified(classified, index: int) -> None:
    (label, _, _, want, _), got, _, _ = classified[index]
    assert got == want, label


@pytest.mark.oracle
def test_megatrons_own_argument_check_agrees(classified, trees) -> None:
    """Where resume-check says the arguments as written make Megatron refuse the checkpoint (a
    torch-format re-layout, another model, a fork without a universal checkpoint), the tree's
    check_checkpoint_args refuses them; where it says they load, the check passes."""
    batches: dict[str, list] = {}
    for case, _, old, new in classified:
        pair = []
        for path in (old, new):
            files = spec_files(load_spec(path))[0]
            (parse,) = cases_of(files, case[0])
            parse["padded_vocab_size"] = json.loads(files["plan.json"])["model"]["padded_vocab_size"]
            pair.append(parse)
        assert pair[0]["tree"] == pair[1]["tree"], case[0]
        batches.setdefault(pair[0]["tree"], []).append((case, {"old": pair[0], "new": pair[1]}))
    assert len(batches) == 4  # Megatron-LM's release and main, both forks
    failures = []
    for tree, items in batches.items():
        results = ask(trees[tree], "resume", [payload for _, payload in items])
        for (case, _), result in zip(items, results, strict=True):
            assert "parse" not in result, (case[0], result)
            if result["ok"] == case[4]:
                failures.append(f"{case[0]} ({tree}): expected {'a refusal' if case[4] else 'a pass'}, "
                                f"got {result}")
    assert not failures, "\n".join(failures)


def _arguments(path: Path) -> dict[str, str]:
    return megatron_flags(spec_files(load_spec(path))[0]["megatron_args.sh"])


@pytest.mark.oracle
@pytest.mark.parametrize("index", [k for k, c in enumerate(CASES) if any(f.startswith("scheduler.") for f in c[3])]
                         + [k for k, c in enumerate(CASES) if c[0] == "global batch, schedule in samples"],
                         ids=lambda k: CASES[k][0])
def test_the_saved_scheduler_loads_where_resume_check_says(classified, index: int) -> None:
    """megatron-core's OptimizerParamScheduler, stepped by OLD's arguments and saved, loads into
    NEW's exactly when resume-check finds no schedule flag missing; with checkpoint.schedule: spec
    the learning rate follows NEW's schedule from the resumed sample on."""
    require_oracle("torch")
    require_oracle("megatron.core")
    case, got, old_path, new_path = classified[index]
    old_args, new_args = _arguments(old_path), _arguments(new_path)
    saved = scheduler(old_args)
    for _ in range(40):
        saved.step(increment=int(old_args["global-batch-size"]))
    resumed = scheduler(new_args)
    if "flags" in got.values():
        with pytest.raises(AssertionError, match="do not match"):
            resumed.load_state_dict(saved.state_dict())
        return
    resumed.load_state_dict(saved.state_dict())
    assert resumed.num_steps == saved.num_steps
    if "override-opt_param-scheduler" in new_args:  # NEW's own schedule at the step it resumes
        fresh = scheduler(new_args)
        fresh.num_steps = saved.num_steps
        fresh.step(increment=0)
        assert lr(resumed) == pytest.approx(lr(fresh))
        assert lr(resumed) != pytest.approx(lr(saved))
    else:
        assert lr(resumed) == pytest.approx(lr(saved))


def test_the_command_reads_specs_folders_and_plan_json(tmp_path, capsys) -> None:
    old = _write(tmp_path, "old", _merged(DIST))
    new = _write(tmp_path, "new", _merged(DIST, {"parallelism": {"tp": 4}}))
    with pytest.raises(SystemExit) as exit_:
        entrypoint(["generate", str(old), "--out", str(tmp_path / "launch")])
    assert exit_.value.code in (0, None)
    capsys.readouterr()
    for given in (tmp_path / "launch", tmp_path / "launch" / "plan.json", old):
        with pytest.raises(SystemExit) as exit_:
            entrypoint(["resume-check", str(given), str(new)])
        out = capsys.readouterr().out
        assert exit_.value.code == 1, out
        assert "parallelism.tp: 2 -> 4" in out and "convert" in out and "--dist-ckpt-optim-fully-reshardable" in out
    with pytest.raises(SystemExit) as exit_:
        entrypoint(["resume-check", str(old), str(old), "--format", "json"])
    assert exit_.value.code in (0, None)
    assert json.loads(capsys.readouterr().out) == {"old": str(old), "new": str(old), "verdict": "safe",
                                                   "summary": "resumes as it is", "changes": []}


def test_a_run_that_saves_nothing_or_elsewhere_cannot_be_resumed(tmp_path) -> None:
    old = _write(tmp_path, "old", _merged({"checkpoint": None}))
    new = _write(tmp_path, "new", _merged())
    assert check(old, new).verdict == "cannot"
    other = _write(tmp_path, "other", _merged({"checkpoint": {"dir": "/ckpt/elsewhere"}}))
    (change,) = [c for c in check(new, other).changes if c.field == "checkpoint.dir"]
    assert change.verdict == "cannot" and CKPT in change.fix


def test_another_framework_cannot_resume(tmp_path) -> None:
    old = _write(tmp_path, "old", _merged())
    new = _write(tmp_path, "new", _merged(MICROSOFT))
    result = check(old, new)
    assert result.verdict == "cannot" and [c.field for c in result.changes] == ["framework"]


def test_fsdp_reshards_over_data_parallel_ranks(tmp_path) -> None:
    fsdp = {"framework": "fsdp", "parallelism": {"tp": 1, "pp": 1, "zero_stage": 3},
            "checkpoint": None, "tokenizer": None}
    old = _write(tmp_path, "old", _merged(fsdp))
    new = _write(tmp_path, "new", _merged(fsdp, {"cluster": {"nodes": 1}}))
    changes = {c.field: c.verdict for c in check(old, new).changes}
    assert changes == {"checkpoint.dir": "safe", "parallelism.dp": "safe"}  # the Trainer's output_dir


@pytest.mark.parametrize(("content", "message"), [
    ("{}", "not a plan.json that gen-launch wrote"),
    ('{"generator": "gen-launch 0.1.0", "parallelism": {}}', "did not record the checkpoint"),
    ('{"generator": ', "1:15: not JSON"),
])
def test_a_bad_plan_json_is_a_located_error(tmp_path, capsys, content: str, message: str) -> None:
    bad = tmp_path / "plan.json"
    bad.write_text(content, encoding="utf-8")
    new = _write(tmp_path, "new", _merged())
    with pytest.raises(SystemExit) as exit_:
        entrypoint(["resume-check", str(bad), str(new)])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_a_spec_in_stages_names_its_stage_folders(tmp_path, capsys) -> None:
    from .conftest import ROOT

    new = _write(tmp_path, "new", _merged())
    with pytest.raises(SystemExit) as exit_:
        entrypoint(["resume-check", str(ROOT / "samples" / "llama3-8b-progressive.yaml"), str(new)])
    assert exit_.value.code == 2
    assert "launch/llama3-8b-progressive/stage-1-" in capsys.readouterr().err


@pytest.mark.parametrize(("fork", "flag"), [(MICROSOFT, "--override-opt_param-scheduler"),
                                            (BLOOM, "--override-lr-scheduler")])
def test_the_schedule_flags_named_are_the_forks_own(tmp_path, fork: dict, flag: str) -> None:
    old = _write(tmp_path, "old", _merged(fork))
    new = _write(tmp_path, "new", _merged(fork, {"training": {"train_iters": 2000}}))
    fixes = {c.fix for c in check(old, new).changes if c.verdict == "flags"}
    assert fixes and all(flag in fix for fix in fixes), fixes
