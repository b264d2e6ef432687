"""Misses of `gen-launch lint` found on public repositories, each read now: an #SBATCH line's
options after a template's placeholder; a training command built inside a heredoc job and run by
`bash -c`; a model-size table chosen by an argument (every arm an alternative, and a note when
there are more of them than lint reads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.lint import lint_paths
from generator.readers.bash.evaluate import MAX_ARMS, MAX_COMBINATIONS, UNKNOWN, readings, shell_code
from generator.readers.launch import read_launch

from .conftest import ROOT

MISSES = ROOT / "tests" / "lint_corpus" / "real" / "misses"


def items(path: Path) -> list[tuple[str, int, str, str]]:
    """(code, line, level, message) of every finding in a file."""
    return [(i.finding.code, i.line, i.level, i.finding.message) for i in lint_paths([path]).items]


def codes(path: Path) -> list[tuple[str, int, str]]:
    return [(code, line, level) for code, line, level, _ in items(path)]


def facts(text: str, name: str = "job.sh") -> dict:
    return {k: f.value for k, f in read_launch(text, name).facts.items()}


# -- 1. options after a placeholder on an #SBATCH line -------------------------------------------

def test_options_after_a_template_placeholder_are_the_allocation() -> None:
    """`#SBATCH <SLURM OPTIONS> --nodes=512 ...`: sbatch refuses the line as it stands (GL308), and
    once the placeholder is filled in, the 512 nodes of 8 GPUs it asks for make dp 32, so micro
    2 x dp 32 = 64 exceeds the global batch of 32 (GL002)."""
    path = MISSES / "gpt3_175b_template.sbatch"
    assert codes(path) == [("GL308", 3, "error"), ("GL002", 26, "error")]
    read = facts(path.read_text(), str(path))
    assert (read["sbatch_nodes"], read["sbatch_gpus_per_node"], read["world_size"]) == (512, 8, 4096)
    assert "micro 2 × dp 32 = 64" in items(path)[1][3]


def test_options_around_a_placeholder_in_the_middle_of_a_line() -> None:
    read = facts("#!/bin/bash\n#SBATCH --nodes=2 <PARTITION> --gpus-per-node=4\n#SBATCH <ACCOUNT>\n"
                 "srun hostname\n")
    assert (read["sbatch_nodes"], read["sbatch_gpus_per_node"]) == (2, 4)
    assert [word for word, _ in read["sbatch_invalid_directives"]] == ["<ACCOUNT>"]


def test_the_sbatch_command_line_still_ends_at_the_job_script() -> None:
    """On a command line the first word that is not an option is the script; what follows is its
    own arguments, not sbatch's."""
    read = facts("#!/bin/bash\nsbatch -N 2 train.sbatch --nodes 4\n")
    assert read["sbatch_nodes"] == 2


# -- 2. a training command built inside a heredoc job ----------------------------------------

def test_sbatch_heredoc_training_cmd_run_by_bash_x_c() -> None:
    """TRAINING_CMD written in the job (`;`-separated, continued lines, `\\$` left for the job's
    shell) and run by `srun ... bash -x -c "\\${TRAINING_CMD}"`: the #SBATCH allocation (4 nodes x
    8 tasks) and the Megatron arguments meet, and 1022 is not a multiple of micro 1 x dp 4."""
    path = MISSES / "submit_gpt_13b_heredoc.sh"
    assert codes(path) == [("GL002", 36, "error")]
    read = facts(path.read_text(), str(path))
    assert (read["world_size"], read["tp"], read["pp"], read["launcher"]) == (32, 4, 2, "srun")
    # `\$REPO_DIR` is the job's own (srun --export sets it), not the submitting shell's: unknown
    argv = read["entry_argv"]
    assert argv[argv.index("--vocab-file") + 1] == f"{UNKNOWN}/gpt2-vocab.json"
    assert argv[argv.index("--data-path") + 1] == "/lustre/fsw/llm/data/pile_text_document"


def test_a_job_file_written_by_a_heredoc_and_submitted() -> None:
    """`cat > "$JOB" <<EOF ... EOF; sbatch "$JOB"` (JOB from mktemp: the same run-time value):
    the file's #SBATCH lines and its `bash -c "\\${TRAINING_CMD}"` are read as the job."""
    path = MISSES / "submit_llama_job_file.sh"
    assert codes(path) == [("GL003", 59, "error")]
    read = facts(path.read_text(), str(path))
    assert (read["sbatch_nodes"], read["launcher"], read["world_size"]) == (3, "torchrun", 24)


JOB = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
# the job's own comment: don't requeue (see the wiki)
export CUDA_DEVICE_MAX_CONNECTIONS=1
TRAINING_CMD="cd \\$REPO ; \\
  python pretrain_gpt.py --tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 \\
  --num-layers 40 --hidden-size 5120 --num-attention-heads 40 --seq-length 2048 \\
  --max-position-embeddings 2048 --micro-batch-size 2 --global-batch-size 10 \\
  --train-iters 1000 --lr 1e-4 --bf16"
srun -l {shell} "\\${{TRAINING_CMD}}"
"""
GBS_LINE = 13  # of the scripts below, where "--global-batch-size 10" is written


@pytest.mark.parametrize(("name", "before", "after", "shell"), [
    ("sbatch_heredoc", "sbatch <<EOF\n", "EOF\n", "bash -c"),
    ("login_shell", "sbatch <<EOF\n", "EOF\n", "bash -l -c"),
    ("long_option", "sbatch <<EOF\n", "EOF\n", "bash --login -c"),
    ("shell_option_argument", "sbatch <<EOF\n", "EOF\n", "bash -o pipefail -c"),
    ("piped", "cat <<EOF | sbatch --parsable\n", "EOF\n", "bash -c"),
    ("substitution", "JOBID=$(sbatch --parsable <<EOF\n", "EOF\n)\necho \"submitted $JOBID\"\n",
     "bash -xc"),
    ("tabs_stripped", "sbatch <<-EOF\n", "EOF\n", "bash -c"),
])
def test_each_way_of_submitting_a_heredoc_job(tmp_path: Path, name: str, before: str, after: str,
                                              shell: str) -> None:
    script = tmp_path / f"{name}.sh"
    script.write_text("#!/bin/bash\nREPO=/lustre/Megatron-LM\n" + before + JOB.format(shell=shell) + after)
    assert script.read_text().splitlines()[GBS_LINE - 1].strip().endswith("--global-batch-size 10 \\")
    assert codes(script) == [("GL002", GBS_LINE, "error")]


def test_a_quoted_delimiter_leaves_the_job_its_own_expansions(tmp_path: Path) -> None:
    """`sbatch <<'EOF'`: nothing is expanded by the submitting shell. `"${TRAINING_CMD}"` is
    then expanded by the job's shell (read); `"\\${TRAINING_CMD}"` reaches `bash -c` as the text
    `${TRAINING_CMD}`, which the new shell expands from its environment: empty unless exported."""
    body = JOB.replace("\\$", "$").replace('"\\${{TRAINING_CMD}}"', '"${{TRAINING_CMD}}"')
    expanded = tmp_path / "expanded.sh"
    expanded.write_text("#!/bin/bash\nsbatch <<'EOF'\n" + body.format(shell="bash -c") + "EOF\n")
    assert codes(expanded) == [("GL002", 12, "error")]
    # (a command alone: a `;` that comes out of an expansion is a word, not a separator)
    escaped = tmp_path / "escaped.sh"
    escaped.write_text(expanded.read_text().replace('"${TRAINING_CMD}"', '"\\${TRAINING_CMD}"')
                       .replace("cd $REPO ; \\\n  ", ""))
    assert codes(escaped) == []
    assert "entry_argv" not in facts(escaped.read_text())
    exported = tmp_path / "exported.sh"
    exported.write_text(escaped.read_text().replace("\nTRAINING_CMD=", "\nexport TRAINING_CMD="))
    assert codes(exported) == [("GL002", 11, "error")]


@pytest.mark.parametrize(("words", "code"), [
    (["bash", "-c", "CMD"], 2), (["bash", "-lc", "CMD"], 2), (["bash", "-x", "-c", "CMD", "name"], 3),
    (["bash", "--login", "-e", "-c", "CMD"], 4), (["bash", "-o", "pipefail", "-c", "CMD"], 4),
    (["sh", "-c", "--", "CMD"], 3), (["bash", "script.sh"], None), (["bash", "-x", "run.sh"], None),
    (["bash", "-o", "c", "run.sh"], None), (["python", "-c", "CMD"], None),
])
def test_the_code_of_a_shell_started_with_c(words: list[str], code: int | None) -> None:
    assert shell_code(words, 0) == code


# -- 3. a size table chosen by an argument -------------------------------------------------------

SIZES = """#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
MODEL_SIZE={size}
if [ "$MODEL_SIZE" = 7B ]; then
  NUM_LAYERS=32; HIDDEN_SIZE={hidden_7b}; NUM_HEADS=32
elif [ "$MODEL_SIZE" = 13B ]; then
  NUM_LAYERS=40; HIDDEN_SIZE=5140; NUM_HEADS=40
else
  echo "unknown model size $MODEL_SIZE"; exit 1
fi
torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 \\
  --num-layers ${{NUM_LAYERS}} --hidden-size ${{HIDDEN_SIZE}} --num-attention-heads ${{NUM_HEADS}} \\
  --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 64 \\
  --train-iters 100 --lr 3e-4 --bf16
"""


@pytest.mark.parametrize("size", ["$4", "$1", "${1:-7B}", "${4-13B}"])
def test_a_size_table_arm_that_breaks_a_rule_is_a_warning_naming_it(tmp_path: Path, size: str) -> None:
    """Megatron asserts hidden_size % num_attention_heads == 0 (GL206): the 13B arm's 5140 over
    40 heads is a warning naming the arm, whether the size is an argument or its default."""
    script = tmp_path / "pretrain.sh"
    script.write_text(SIZES.format(size=size, hidden_7b=4096))
    [(code, line, level, message)] = items(script)
    assert (code, line, level) == ("GL206", 7, "warning")
    assert "only when MODEL_SIZE is 13B (line 6)" in message


def test_an_argument_default_is_read_as_the_run_without_arguments() -> None:
    """The first reading of `${1:-7B}` is the one bash makes without arguments (the 7B arm), and
    each arm is an alternative all the same."""
    read = read_launch(SIZES.format(size="${1:-7B}", hidden_7b=4096), "pretrain.sh")
    assert (read.facts["hidden_size"].value, read.facts["num_attention_heads"].value) == (4096, 32)
    [alternatives] = read.undecided.values()
    assert [label for _, label in alternatives] == ["MODEL_SIZE is 7B (line 4)", "MODEL_SIZE is 13B (line 6)"]


def test_every_arm_breaking_it_is_an_error_naming_each(tmp_path: Path) -> None:
    """The else arm exits: it launches nothing, so it is no alternative; both sizes break GL206."""
    script = tmp_path / "pretrain.sh"
    script.write_text(SIZES.format(size="$1", hidden_7b=4100))
    [(code, line, level, message)] = items(script)
    assert (code, level) == ("GL206", "error")
    assert message.startswith("when MODEL_SIZE is 7B (line 4): hidden_size 4100")
    assert "; when MODEL_SIZE is 13B (line 6): hidden_size 5140" in message


def test_a_case_table_on_an_argument_default() -> None:
    path = MISSES / "pretrain_llama2_model_size.sh"
    [(code, line, level, message)] = items(path)
    assert (code, line, level) == ("GL206", 16, "warning")
    assert "only when MODEL_SIZE is 13B (line 15)" in message


def test_more_combinations_than_lint_reads_are_read_branch_by_branch_with_a_note() -> None:
    """Seven argument branches make 2,592 combinations: each branch's arms are read on their own
    (the others left open), so the 13B row still warns, and one note says what was not read."""
    path = MISSES / "run_pretrain_megatron_llama.sh"
    found = items(path)
    assert [(code, line, level) for code, line, level, _ in found] == [("GL901", 13, "note"),
                                                                       ("GL206", 59, "warning")]
    note, warning = found[0][3], found[1][3]
    assert "MODEL_SIZE (line 48)" in note and "2,592 combinations" in note
    assert f"more than the {MAX_COMBINATIONS} lint reads: each branch is read on its own" in note
    assert "only when MODEL_SIZE is 13B (line 56)" in warning


def _toggles(n: int) -> str:
    return "".join(f'if [ "${{OPT_{k}}}" = on ]; then\n  EXTRA_{k}="--log-interval {k + 1}"\nfi\n'
                   for k in range(n))


def test_a_rule_broken_in_every_arm_of_one_branch_read_on_its_own_is_an_error(tmp_path: Path) -> None:
    script = tmp_path / "pretrain.sh"
    script.write_text(SIZES.format(size="$1", hidden_7b=4100).replace(
        "torchrun", _toggles(4) + "torchrun", 1))
    found = items(script)
    assert [(code, level) for code, _, level, _ in found] == [("GL901", "note"), ("GL206", "error")]
    assert "32 combinations" in found[0][3]


def test_too_many_arms_are_not_expanded_and_a_note_says_why(tmp_path: Path) -> None:
    """Past MAX_ARMS not even one branch at a time is read: one note, at the first branch, says
    the size table was not expanded and why; its values stay unknown (no GL206 either way)."""
    script = tmp_path / "pretrain.sh"
    script.write_text(SIZES.format(size="$4", hidden_7b=4096).replace(
        "torchrun", _toggles(MAX_ARMS // 2) + "torchrun", 1))
    found = items(script)
    assert [(code, line, level) for code, line, level, _ in found] == [("GL901", 4, "note")]
    assert "MODEL_SIZE (line 4)" in found[0][3]
    assert f"more than the {MAX_ARMS} it reads one at a time: none is expanded (a size table among them " \
           "is not read)" in found[0][3]


def test_readings_of_undecided_branches() -> None:
    two = {1: [(0, "a"), (1, "b")], 2: [(0, "c"), (-1, "d")]}
    assert readings(two) == ([{1: 0, 2: 0}, {1: 0, 2: -1}, {1: 1, 2: 0}, {1: 1, 2: -1}], False)
    many = {k: [(0, "x"), (-1, "y")] for k in range(5)}  # 32 combinations, 10 arms
    assert readings(many) == ([{k: i} for k in range(5) for i in (0, -1)], True)
    assert readings({k: [(0, "x"), (-1, "y")] for k in range(MAX_ARMS)}) == ([], False)
    assert readings({}) == ([], False)
