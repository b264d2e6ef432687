"""Lint judges a script by the parser it really runs (issue 35): a repository's own Megatron
parser read statically, the tree a script cds into, puts on PYTHONPATH or checks out as a
submodule, the entry point's added options; else the catalogues, as a guess (a warning). Each
repository here is a small layout written for the test, with a parser file of its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from generator.lint import lint_paths

PARSER = '''\
import argparse

import deepspeed


def parse_args(extra_args_provider=None):
    parser = argparse.ArgumentParser(description="fork", allow_abbrev=False)
    parser = _network(parser)
    parser = deepspeed.add_config_arguments(parser)
    if extra_args_provider is not None:
        parser = extra_args_provider(parser)
    return parser.parse_args()


def _network(parser):
    group = parser.add_argument_group(title="network")
    for flag in ("--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length",
                 "--max-position-embeddings", "--micro-batch-size", "--global-batch-size"):
        group.add_argument(flag, type=int)
    group.add_argument("--tensor-model-parallel-size", type=int, default=1)
    group.add_argument("--pipeline-model-parallel-size", type=int, default=1)
    group.add_argument("--my-fork-flag", action="store_true")
    group.add_argument("--pos-type", choices=["a", "b"], default="a")
    group.add_argument("--use-flash-attn", action="store_true")
    group.add_argument("--use-mcore-models", action="store_true")
    return parser
'''

ENTRY = '''\
from megatron.arguments import parse_args

if __name__ == "__main__":
    args = parse_args()
    kernel = "flash" if args.use_flash_attn else "core"
'''

SCRIPT = '''\
#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nproc_per_node 8 {entry} \\
  --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \\
  --seq-length 2048 --max-position-embeddings 2048 \\
  --micro-batch-size 2 --global-batch-size 64 --tensor-model-parallel-size 2 \\
  {flags}
'''


def repo(root: Path, flags: str, entry: str = "pretrain_gpt.py", tree: str = ".",
         script: str = "examples/train.sh", marker: str = "gen-launch.toml") -> Path:
    """A repository: ``tree``/megatron/arguments.py and ``tree``/pretrain_gpt.py, and a script."""
    (root / tree / "megatron").mkdir(parents=True, exist_ok=True)
    (root / tree / "megatron" / "arguments.py").write_text(PARSER)
    (root / tree / "pretrain_gpt.py").write_text(ENTRY)
    (root / marker).write_text("") if marker.endswith(".toml") else (root / marker).mkdir()
    path = root / script
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SCRIPT.format(entry=entry, flags=flags))
    return path


def findings(*paths: Path, **kwargs) -> list[tuple[str, str, str]]:
    return [(i.finding.code, i.level, i.finding.message) for i in lint_paths(list(paths), **kwargs).items]


def test_a_flag_the_repository_defines_is_fine(tmp_path: Path) -> None:
    script = repo(tmp_path, "--my-fork-flag --pos-type b")
    assert findings(tmp_path) == []
    assert findings(script) == []  # the file alone: the repository is found from it


def test_a_flag_the_repository_does_not_define_is_an_error_naming_its_parser(tmp_path: Path) -> None:
    repo(tmp_path, "--my-fork-flag --not-a-flag")
    [(code, level, message)] = findings(tmp_path)
    assert (code, level) == ("GL201", "error")
    assert "--not-a-flag is not an option of megatron/arguments.py of the repository" in message


def test_a_value_outside_the_repository_parsers_choices_is_an_error(tmp_path: Path) -> None:
    repo(tmp_path, "--pos-type c")
    [(code, level, message)] = findings(tmp_path)
    assert (code, level) == ("GL227", "error")
    assert "--pos-type c: invalid choice 'c'; choose from a, b (megatron/arguments.py" in message


def test_the_same_script_outside_the_repository_is_a_warning(tmp_path: Path) -> None:
    inside = repo(tmp_path / "repo", "--my-fork-flag --not-a-flag --pos-type c")
    outside = tmp_path / "elsewhere" / "train.sh"
    outside.parent.mkdir()
    outside.write_text(inside.read_text())
    got = findings(outside)
    assert [(c, level) for c, level, _ in got] == [("GL201", "warning")]
    message = got[0][2]
    assert "--my-fork-flag, --not-a-flag, --pos-type: not an option of any known Megatron parser" in message
    assert "judged by Megatron-LM latest" in message and "--dialect" in message


def test_the_verdict_does_not_depend_on_the_folder_lint_runs_in(tmp_path: Path, monkeypatch) -> None:
    script = repo(tmp_path, "--not-a-flag --deepspeed_config configs/ds.json", script="scripts/run/train.sh")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2, "train_batch_size": 64}')
    seen = []
    for folder in (tmp_path, tmp_path / "scripts", tmp_path / "scripts" / "run", tmp_path.parent):
        monkeypatch.chdir(folder)
        seen.append(sorted((c, level) for c, level, _ in findings(Path(os.path.relpath(script)))))
    assert seen[0] == [("GL201", "error")]  # the config is found from the root: no GL901 / GL903
    assert all(s == seen[0] for s in seen), seen


def test_a_config_named_that_exists_nowhere_is_a_warning_distinct_from_unresolved(tmp_path: Path) -> None:
    repo(tmp_path, "--deepspeed --deepspeed_config configs/ds_z2.json")
    assert [(c, level) for c, level, _ in findings(tmp_path)] == [("GL903", "warning")]
    repo(tmp_path, "--deepspeed --deepspeed_config ${CONFIG_DIR}/ds_z2.json")  # a run-time folder
    assert [(c, level) for c, level, _ in findings(tmp_path)] == [("GL901", "note")]
    repo(tmp_path, "--deepspeed --deepspeed_config /shared/configs/ds_z2.json")  # the cluster's file system
    assert [(c, level) for c, level, _ in findings(tmp_path)] == [("GL901", "note")]


def megatron_lm_snapshot(root: Path) -> None:
    """A vendored Megatron-LM: a parser defining every option of the latest release's catalogue
    (generated here from the catalogue's facts), so that its nearest dialect is Megatron-LM."""
    from generator.dialects import dialect

    lines = ["def add(parser):"]
    for flag, option in sorted(dialect("megatron-lm").catalogue.defined.items()):
        action = ", action='store_true'" if option[1] == 0 else ""
        lines.append(f"    parser.add_argument({flag!r}{action})")
    (root / "megatron" / "arguments.py").write_text("\n".join(lines) + "\n")


def test_no_op_note_only_where_the_repository_code_does_not_read_the_flag(tmp_path: Path) -> None:
    repo(tmp_path, "--use-flash-attn --use-mcore-models")
    megatron_lm_snapshot(tmp_path)
    got = findings(tmp_path)
    # args.use_flash_attn is read by the entry point: removing the flag would change the run
    assert [(c, level) for c, level, _ in got] == [("GL222", "note")]
    assert "--use-mcore-models" in got[0][2] and "--use-flash-attn" not in got[0][2]


def test_a_submodule_tree_found_through_a_run_time_path(tmp_path: Path) -> None:
    script = repo(tmp_path, "--my-fork-flag --not-a-flag", entry="${MEGATRON_PATH}/pretrain_gpt.py",
                  tree="third_party/Megatron-LM", marker=".git")
    (tmp_path / ".gitmodules").write_text('[submodule "megatron"]\n\tpath = third_party/Megatron-LM\n'
                                          "\turl = https://example.org/megatron.git\n")
    [(code, level, message)] = findings(script)
    assert (code, level) == ("GL201", "error")
    assert "third_party/Megatron-LM/megatron/arguments.py of the repository" in message


def test_the_tree_a_script_cds_into_or_puts_on_pythonpath(tmp_path: Path) -> None:
    script = repo(tmp_path, "--my-fork-flag --not-a-flag", tree="Megatron-LM")
    text = script.read_text()
    script.write_text(text.replace("export CUDA", "cd Megatron-LM\nexport CUDA"))
    assert [(c, level) for c, level, _ in findings(script)] == [("GL201", "error")]
    script.write_text(text.replace("pretrain_gpt.py", "${ROOT}/Megatron-LM/pretrain_gpt.py").replace(
        "export CUDA", 'export PYTHONPATH="${ROOT}/Megatron-LM:${PYTHONPATH}"\nexport CUDA'))
    assert [(c, level) for c, level, _ in findings(script)] == [("GL201", "error")]


def test_the_entry_points_own_options_and_a_patch_layer(tmp_path: Path) -> None:
    script = repo(tmp_path, "--my-fork-flag --task-weight 3 --patch-option x --not-a-flag")
    (tmp_path / "pretrain_gpt.py").write_text(
        "from megatron.arguments import parse_args\nfrom patch_layer.arguments import add_patch_args\n\n\n"
        "def task_args(parser):\n    parser.add_argument('--task-weight', type=int)\n    return parser\n")
    (tmp_path / "patch_layer").mkdir()
    (tmp_path / "patch_layer" / "arguments.py").write_text(
        "def add_patch_args(parser):\n    parser.add_argument('--patch-option', choices=['x', 'y'])\n"
        "    return parser\n")
    got = findings(script)
    assert [(c, level) for c, level, _ in got] == [("GL201", "error")]
    assert got[0][2].startswith("--not-a-flag is not an option")


def test_a_parser_read_in_part_leaves_the_rest_unchecked_with_a_note(tmp_path: Path) -> None:
    """Options built from config classes (Megatron-LM ≥ core 0.16) cannot be read statically: a
    flag outside what was read, and in no catalogue, is not checked, and a note says why."""
    repo(tmp_path, "--not-a-flag")
    parser = tmp_path / "megatron" / "arguments.py"
    parser.write_text(PARSER.replace("    return parser\n",
                                     "    TransformerConfig.add_arguments(parser)\n    return parser\n", 1))
    [(code, level, message)] = findings(tmp_path)
    assert (code, level) == ("GL901", "note")
    assert message.startswith("not checked: --not-a-flag: not in what could be read of megatron/arguments.py")
    assert "read only in part" in message and "TransformerConfig" in message


def test_an_entry_point_missing_from_its_megatron_tree(tmp_path: Path) -> None:
    """Run from the root of a repository that is the Megatron tree, a relative entry point that
    is not there fails at start-up (GL903); one behind a run-time folder is only a note."""
    repo(tmp_path, "--my-fork-flag", entry="tools/moved_away.py")
    [(code, level, message)] = findings(tmp_path)
    assert (code, level) == ("GL903", "warning")
    assert "entry point tools/moved_away.py exists nowhere in the repository" in message
    repo(tmp_path, "--my-fork-flag", entry="${WORK}/tools/moved_away.py")
    assert [(c, level) for c, level, _ in findings(tmp_path)] == [("GL901", "note")]


def test_a_fork_pipeline_split_is_not_an_error(tmp_path: Path) -> None:
    """22 layers over 4 stages split 5,5,6,6 by the fork's own method: GL009's premise (equal
    stages) is upstream's, so it is a warning naming the fork's flags."""
    repo(tmp_path, "--pipeline-model-parallel-size 4 --pipeline-model-parallel-method block "
                   "--pipeline-model-parallel-blocks 5,5,6,6")
    (tmp_path / "megatron" / "arguments.py").write_text(PARSER.replace(
        '    group.add_argument("--my-fork-flag"',
        '    group.add_argument("--pipeline-model-parallel-method", choices=["uniform", "block"])\n'
        '    group.add_argument("--pipeline-model-parallel-blocks", type=str)\n'
        '    group.add_argument("--my-fork-flag"'))
    script = tmp_path / "examples" / "train.sh"
    script.write_text(script.read_text().replace("--num-layers 24", "--num-layers 22"))
    got = findings(tmp_path)
    assert [(c, level) for c, level, _ in got] == [("GL009", "warning")]
    assert "--pipeline-model-parallel-method, --pipeline-model-parallel-blocks" in got[0][2]


@pytest.mark.parametrize("name", ["ds.json", "ds_config.conf"])
def test_a_trainer_config_linted_alone_is_judged_as_the_trainers(tmp_path: Path, name: str) -> None:
    """"auto" values are what a config for the HF Trainer is written with; those the Trainer does
    not fill (zero_optimization.stage) stay findings, whatever the file's extension."""
    config = tmp_path / name
    config.write_text('{"train_micro_batch_size_per_gpu": "auto", "gradient_clipping": "auto",\n'
                      ' "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"}}\n')
    assert findings(config) == []
    config.write_text('{"train_micro_batch_size_per_gpu": "auto",\n "zero_optimization": {"stage": "auto"}}\n')
    assert [(c, level) for c, level, _ in findings(config)] == [("GL101", "error")]


def test_an_entry_point_without_readable_sizes_gets_a_note(tmp_path: Path) -> None:
    script = tmp_path / "launch.sh"
    script.write_text('#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_gpt.py "$@"\n')
    [(code, level, message)] = findings(script)
    assert (code, level) == ("GL901", "note")
    assert "pretrain_gpt.py is started with only arguments lint cannot read" in message


def test_the_summary_counts_what_was_skipped_and_why(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from generator.cli import app

    (tmp_path / "notes.yaml").write_text("owner: me\n")
    (tmp_path / "package.json").write_text('{"name": "x"}\n')
    (tmp_path / "setup.sh").write_text("#!/bin/bash\nexport HF_HOME=/cache\npip install -r requirements.txt\n")
    (tmp_path / "run_gemini.sh").write_text("#!/bin/bash\nexport OMP_NUM_THREADS=8\n"
                                            "colossalai run --nproc_per_node 8 train.py --plugin gemini\n")
    result = CliRunner().invoke(app, ["lint", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert ("0 file(s) checked, 4 skipped (1 YAML that is not a launch config, 1 colossalai (a launcher lint "
            "does not read), 1 no launch recognised, 1 JSON that is not a DeepSpeed config)") in result.stderr


def test_a_config_is_found_from_the_folder_the_script_cds_into(tmp_path: Path) -> None:
    script = repo(tmp_path, "--deepspeed --deepspeed_config ds/zero2.json")
    (tmp_path / "training" / "ds").mkdir(parents=True)
    (tmp_path / "training" / "ds" / "zero2.json").write_text('{"train_micro_batch_size_per_gpu": 4}')
    assert [(c, level) for c, level, _ in findings(script)] == [("GL903", "warning")]
    script.write_text(script.read_text().replace("export CUDA", 'cd "${REPO_ROOT}/training"\nexport CUDA'))
    got = findings(script)  # micro 4 in the JSON, --micro-batch-size 2: the JSON was read
    assert [(c, level) for c, level, _ in got] == [("GL004", "error")]


def test_every_finding_of_a_script_names_its_parser_in_json_and_sarif(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from generator.cli import app

    repo(tmp_path / "repo", "--not-a-flag --micro-batch-size 3")  # and global 64 over dp 4: GL002
    elsewhere = tmp_path / "elsewhere.sh"
    elsewhere.write_text(SCRIPT.format(entry="pretrain_gpt.py", flags="--micro-batch-size 3"))
    out = CliRunner().invoke(app, ["lint", "-f", "json", str(tmp_path / "repo"), str(elsewhere)]).stdout
    named = {(Path(i["path"]).name, i["code"]): i.get("parser") for i in json.loads(out)}
    assert named[("train.sh", "GL201")] == named[("train.sh", "GL002")] == \
        "megatron/arguments.py of the repository (nearest Megatron-DeepSpeed (microsoft))"
    assert named[("elsewhere.sh", "GL002")] == "Megatron-LM latest, guessed from the flags (nothing declared)"
    sarif = CliRunner().invoke(app, ["lint", "-f", "sarif", str(elsewhere)]).stdout
    [result] = json.loads(sarif)["runs"][0]["results"]
    assert result["properties"]["parser"].startswith("Megatron-LM latest, guessed")


def test_a_pinned_megatron_submodule_not_checked_out_makes_the_catalogue_a_guess(tmp_path: Path) -> None:
    """CI's default checkout leaves submodules out: the script runs the pinned snapshot's parser,
    which no catalogue is sure to be, so what the catalogue refuses is a warning naming it."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitmodules").write_text('[submodule "Megatron-LM"]\n\tpath = third_party/Megatron-LM\n'
                                          "\turl = https://github.com/NVIDIA/Megatron-LM.git\n")
    (tmp_path / "third_party" / "Megatron-LM").mkdir(parents=True)  # what a plain clone leaves
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT.format(entry="${MEGATRON}/pretrain_gpt.py", flags="--checkpoint-activations --use-mcore-models"))
    [(code, level, message)] = [f for f in findings(script) if f[0] == "GL201"]
    assert (code, level) == ("GL201", "warning")
    assert "the repository pins the Megatron submodule third_party/Megatron-LM" in message
    assert "not checked out" in message
    (tmp_path / ".gitmodules").unlink()  # no submodule: the catalogue's verdict stands
    assert [(c, level) for c, level, _ in findings(script) if c == "GL201"] == [("GL201", "error")]


def test_a_parallel_size_given_at_run_time_is_unknown_not_the_default(tmp_path: Path) -> None:
    """`--tensor-model-parallel-size $TP`: tp is whatever $TP is, not Megatron's default 1, so
    --sequence-parallel is not "without effect at tp 1" (GL010)."""
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT.format(entry="pretrain_gpt.py", flags="--sequence-parallel").replace(
        "--tensor-model-parallel-size 2", "--tensor-model-parallel-size $TP"))
    assert findings(script) == []
    script.write_text(script.read_text().replace("--tensor-model-parallel-size $TP", ""))
    assert [(c, level) for c, level, _ in findings(script)] == [("GL010", "warning")]


def test_an_error_resting_on_a_slurm_variables_default_is_a_warning(tmp_path: Path) -> None:
    """NNODES=${SLURM_NNODES:-1}: one node only outside Slurm; under it the allocation decides."""
    script = tmp_path / "train.sh"
    body = SCRIPT.format(entry="pretrain_gpt.py", flags="--pipeline-model-parallel-size 16")
    script.write_text(body.replace("torchrun --nproc_per_node 8", 'NNODES=${SLURM_NNODES:-1}\n'
                                   'torchrun --nnodes "$NNODES" --nproc_per_node 8'))
    got = [(c, level, m) for c, level, m in findings(script) if c == "GL003"]
    assert [(c, level) for c, level, _ in got] == [("GL003", "warning")]
    assert "with $SLURM_NNODES's default; under Slurm the allocation decides" in got[0][2]
    script.write_text(body.replace("torchrun --nproc_per_node 8", 'NNODES=${NODES:-1}\n'
                                   'torchrun --nnodes "$NNODES" --nproc_per_node 8'))
    assert [(c, level) for c, level, _ in findings(script) if c == "GL003"] == [("GL003", "error")]


def test_a_fork_whose_validation_still_asserts_the_connections_setting(tmp_path: Path) -> None:
    """The repository's parser raises without CUDA_DEVICE_MAX_CONNECTIONS=1 while its async
    all-reduce is on (its default): GL203 at tp 1 too, naming that parser, unless the script
    turns the all-reduce off."""
    script = repo(tmp_path, "--tensor-model-parallel-size 1")
    script.write_text(script.read_text().replace("export CUDA_DEVICE_MAX_CONNECTIONS=1\n", "")
                      .replace("--tensor-model-parallel-size 2 ", ""))
    parser = tmp_path / "megatron" / "arguments.py"
    parser.write_text(PARSER.replace("    return parser.parse_args()\n", (
        "    args = parser.parse_args()\n"
        "    if os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS') != '1':\n"
        "        if args.async_tensor_model_parallel_allreduce:\n"
        "            raise RuntimeError('set CUDA_DEVICE_MAX_CONNECTIONS to 1')\n    return args\n")).replace(
        '    group.add_argument("--my-fork-flag"',
        '    group.add_argument("--no-async-tensor-model-parallel-allreduce", action="store_false",\n'
        '                       dest="async_tensor_model_parallel_allreduce")\n'
        '    group.add_argument("--my-fork-flag"'))
    got = findings(tmp_path)
    assert [(c, level) for c, level, _ in got] == [("GL203", "warning")]
    assert "megatron/arguments.py of the repository requires export CUDA_DEVICE_MAX_CONNECTIONS=1" in got[0][2]
    script.write_text(script.read_text().replace("--micro-batch-size 2", "--no-async-tensor-model-parallel-allreduce "
                                                 "--micro-batch-size 2"))
    assert findings(tmp_path) == []


def test_a_job_file_submitted_by_sbatch_is_read_with_the_exported_environment(tmp_path: Path) -> None:
    """`. CONFIG.sh; sbatch --export=PARAMS job.sh`: the job runs `python pretrain_gpt.py $PARAMS`
    in a new shell that has PARAMS; the submitting script's flags are checked through it."""
    repo(tmp_path, "")
    (tmp_path / "examples" / "train.sh").unlink()
    folder = tmp_path / "examples" / "paper"
    folder.mkdir()
    (folder / "CONFIG.sh").write_text(
        "PARAMS=\"--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 "
        "--max-position-embeddings 2048 --micro-batch-size 2 --global-batch-size 64 --not-a-flag\"\n")
    (folder / "job.sh").write_text("#!/bin/bash\n#SBATCH --ntasks-per-node=8\n"
                                   "srun python -u ${CODE}/pretrain_gpt.py ${PARAMS}\n")
    (folder / "run.sh").write_text("#!/bin/bash\n. `pwd`/CONFIG.sh\nsbatch --nodes=1 --export=PARAMS job.sh\n")
    got = [(c, level, m) for c, level, m in findings(tmp_path) if c == "GL201"]
    assert [(c, level) for c, level, _ in got] == [("GL201", "error")]
    assert "--not-a-flag is not an option of megatron/arguments.py of the repository" in got[0][2]


def test_a_capability_error_of_a_guessed_dialect_is_a_warning(tmp_path: Path) -> None:
    """Flags that make lint guess microsoft's fork (--DDP-impl) next to one it does not define:
    "vpp is not supported by microsoft's fork" rests on the guess, so it is a warning."""
    script = tmp_path / "train.sh"
    body = SCRIPT.format(entry="pretrain_gpt.py", flags="--DDP-impl local --pipeline-model-parallel-size 2 "
                                                        "--num-layers-per-virtual-pipeline-stage 3")
    script.write_text(body)
    assert [(c, level) for c, level, _ in findings(script) if c == "GL210"] == [("GL210", "error")]
    script.write_text(body.replace("--DDP-impl local", "--DDP-impl local --activations-checkpoint-method uniform"))
    got = [(c, level, m) for c, level, m in findings(script) if c == "GL210"]
    assert [(c, level) for c, level, _ in got] == [("GL210", "warning")]
    assert "guessed from its flags: it also passes --activations-checkpoint-method" in got[0][2]
