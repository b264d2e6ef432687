"""The command line: commands, the short form, targets, output folders and exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from generator import __version__
from generator.cli import app, entrypoint

from .conftest import ROOT

runner = CliRunner()
SEED = str(ROOT / "samples" / "seed-pretrain-256.yaml")
SFT = str(ROOT / "samples" / "seed-sft-64.yaml")


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"gen-launch {__version__}"


def test_help_lists_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("generate", "explain", "schema", "rules"):
        assert command in result.stdout


def test_help_names_every_file_generate_writes() -> None:
    """The top-level help names each artifact generate can write (the Trainer's arguments and the
    accelerate config were missing), and plan.json."""
    from generator.render import ARTIFACTS, PLAN_FILE

    text = " ".join(runner.invoke(app, ["--help"], terminal_width=400).stdout.split())
    for name, _ in ARTIFACTS.values():
        assert name in text, name
    assert PLAN_FILE in text and "Hugging Face Trainer arguments, an accelerate config" in text


@pytest.mark.parametrize("command", ["generate", "explain", "plan", "lint", "import", "resume-check",
                                     "schema", "rules"])
def test_each_command_runs_alone_from_the_console_script(command: str, capsys, monkeypatch) -> None:
    """The console script hands typer only the command a run calls (entrypoint): every command,
    named as `gen-launch --help` lists it, still parses its own options, and only its own."""
    import typer.main

    built: list[object] = []
    make = typer.main.get_command_from_info
    monkeypatch.setattr(typer.main, "get_command_from_info",
                        lambda *args, **kwargs: built.append(args or kwargs) or make(*args, **kwargs))
    with pytest.raises(SystemExit) as exit_:
        entrypoint([command, "--help"])
    assert exit_.value.code == 0
    assert f"Usage: gen-launch {command} [OPTIONS]" in capsys.readouterr().out
    assert len(built) == 1 and runner.invoke(app, ["--help"]).stdout.count(command) >= 1


def test_short_form_prints_one_target(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        entrypoint([SEED, "--target", "deepspeed"])
    assert exit_.value.code == 0
    config = json.loads(capsys.readouterr().out)
    assert config["train_batch_size"] == 4096


def test_all_targets_written_to_default_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["generate", SEED, "--target", "all"])
    assert result.exit_code == 0, result.stderr
    folder = tmp_path / "launch" / "seed-pretrain-256"
    assert sorted(p.name for p in folder.iterdir()) == [
        "ds_config.json", "launch.sbatch", "megatron_args.sh", "plan.json"]
    plan = json.loads((folder / "plan.json").read_text())
    assert plan["batch"]["global_batch_size"] == 4096
    assert "note: train_tokens: 300,000,000,000 tokens" in result.stderr


def test_out_folder_and_single_target(tmp_path: Path) -> None:
    result = runner.invoke(app, ["generate", SEED, "--target", "slurm", "--out", str(tmp_path / "x")])
    assert result.exit_code == 0
    assert [p.name for p in (tmp_path / "x").iterdir()] == ["launch.sbatch"]


def test_target_not_used_by_framework_is_refused() -> None:
    result = runner.invoke(app, ["generate", SFT, "--target", "deepspeed"])
    assert result.exit_code == 2
    assert "framework megatron-lm does not use ds_config.json" in result.stderr


def test_unknown_target_is_a_usage_error() -> None:
    result = runner.invoke(app, ["generate", SEED, "--target", "mpi"])
    assert result.exit_code == 2


def test_explain_json_is_the_plan() -> None:
    result = runner.invoke(app, ["explain", SEED, "--format", "json"])
    assert result.exit_code == 0
    plan = json.loads(result.stdout)
    assert plan["parallelism"]["dp"] == 32 and plan["batch"]["tokens_per_step"] == 8_388_608
    assert plan["derivation"][1] == "dp = world_size / (pp × tp × cp) = 256 / (2 × 4 × 1) = 32"


def test_schema_command_prints_the_schema() -> None:
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["$schema"] == "http://json-schema.org/draft-07/schema#"


def test_rules_command() -> None:
    listing = runner.invoke(app, ["rules"])
    assert listing.exit_code == 0 and "GL002  global-batch-not-divisible" in listing.stdout
    one = runner.invoke(app, ["rules", "gl002"])
    assert one.exit_code == 0 and "microbatch calculator" in one.stdout
    assert runner.invoke(app, ["rules", "GL999"]).exit_code == 2


def test_output_is_deterministic(tmp_path: Path) -> None:
    for name in ("a", "b"):
        assert runner.invoke(app, ["generate", SEED, "--out", str(tmp_path / name)]).exit_code == 0
    for file in (tmp_path / "a").iterdir():
        assert file.read_bytes() == (tmp_path / "b" / file.name).read_bytes()


def test_unwritable_output_is_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = runner.invoke(app, ["generate", SEED, "--out", str(blocker / "sub")])
    assert result.exit_code == 2 and "cannot write" in result.stderr


def test_internal_errors_have_no_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    import generator.artifacts as artifacts

    def broken(plan):
        raise KeyError("boom")

    monkeypatch.setattr(artifacts, "render_all", broken)
    monkeypatch.delenv("GEN_LAUNCH_DEBUG", raising=False)
    result = runner.invoke(app, ["generate", SEED])
    assert result.exit_code == 2
    assert "internal error: KeyError" in result.stderr and "Traceback" not in result.stderr
    assert os.environ.get("GEN_LAUNCH_DEBUG") is None


def test_help_texts_read_as_a_man_page() -> None:
    """No ``<bool>`` after a switch, required arguments as ``SPEC...``, `gen-launch SPEC` named."""
    top = runner.invoke(app, ["--help"]).output
    assert "<bool>" not in top and "`gen-launch SPEC` is short for `gen-launch generate SPEC`" in \
        " ".join(top.replace("│", " ").split())
    generate = runner.invoke(app, ["generate", "--help"]).output
    assert "generate [OPTIONS] SPEC..." in generate and "{" not in generate.split("\n", 3)[1]
    assert "<bool>" not in generate and "--quiet" in generate
    assert "explain [OPTIONS] SPEC" in runner.invoke(app, ["explain", "--help"]).output
    assert "``" not in runner.invoke(app, ["rules", "GL901"]).output


@pytest.mark.parametrize(("field", "value", "meant"), [
    ("gpu", "H100", "did you mean one of 'h100-80gb', 'h100-96gb'?"), ("gpu", "A100", "did you mean one of 'a100-40gb', 'a100-80gb'?"),
    ("precision", "BF16", "did you mean 'bf16'?"), ("framework", "Megatron-LM", "did you mean 'megatron-lm'?")])
def test_every_enumerated_value_gets_a_did_you_mean(field, value, meant, tmp_path: Path) -> None:
    from .helpers import spec_dict

    data = spec_dict()
    section = {"gpu": "cluster", "precision": "training"}.get(field)
    if section:
        data[section][field] = value
    else:
        data[field] = value
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["explain", str(tmp_path / "spec.yaml")])
    assert result.exit_code == 2 and meant in result.stderr, result.stderr


def test_quiet_leaves_the_notes_out(tmp_path: Path) -> None:
    sample = str(ROOT / "samples" / "llama3-8b-pretrain.yaml")
    loud = runner.invoke(app, ["generate", sample, "--target", "megatron"])
    quiet = runner.invoke(app, ["generate", sample, "--target", "megatron", "--quiet"])
    assert "note: train_tokens" in loud.stderr and "note:" not in quiet.stderr
    assert quiet.stdout == loud.stdout and quiet.exit_code == loud.exit_code == 0


def test_generate_imports_no_search_and_no_numpy(tmp_path: Path) -> None:
    """A spec without auto fields is generated without the layout search or numpy (the CLI's
    start-up stays the cost of what a generate needs), and never with pydantic (typer 0.29
    imports it to coerce options: ~150 ms); one with auto fields searches."""
    import subprocess
    import sys

    code = ("import sys\nfrom generator.cli import entrypoint\n"
            "try:\n    entrypoint(sys.argv[1:])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print(sorted(m for m in ('numpy', 'generator.autoplan.search', 'pydantic') if m in sys.modules))")
    env = {**os.environ, "GEN_LAUNCH_CACHE": str(tmp_path / "cache")}
    seen = {}
    for sample in ("seed-pretrain-256.yaml", "llama3.1-405b-auto.yaml"):
        run = subprocess.run([sys.executable, "-c", code, str(ROOT / "samples" / sample), "--target", "all",
                              "--out", str(tmp_path / sample)], capture_output=True, text=True, env=env,
                             cwd=ROOT, check=True)
        seen[sample] = run.stdout.strip().splitlines()[-1]
    assert seen == {"seed-pretrain-256.yaml": "[]",
                    "llama3.1-405b-auto.yaml": "['generator.autoplan.search', 'numpy']"}


def test_every_dataclass_has_a_docstring() -> None:
    """Python 3.11 writes a missing dataclass docstring from inspect.signature when the class is
    created: ~0.25 ms a class at import, 15 ms of a generate for the 60 that had none."""
    import ast

    missing = [f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
               for path in sorted((ROOT / "generator").rglob("*.py"))
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.ClassDef) and ast.get_docstring(node) is None
               and any("dataclass" in ast.unparse(d) for d in node.decorator_list)]
    assert not missing


def _explained(tmp_path: Path, data: dict) -> str:
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    result = runner.invoke(app, ["explain", str(tmp_path / "spec.yaml")])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_explain_speaks_of_a_trainer_run_in_its_own_terms() -> None:
    """A Trainer run has no pipeline and counts no samples: explain neither speaks of "the first
    pipeline stage" nor of Megatron's counts, and a fine-tune gets no pre-training LR advice."""
    text = runner.invoke(app, ["explain", str(ROOT / "samples" / "sft-llama3-8b-accelerate-zero3.yaml")]).stdout
    schedule = text.split("Schedule")[1].split("\n\n")[0]
    assert "samples" not in schedule and "Megatron" not in schedule
    assert "the Trainer counts the schedule in optimizer steps (--max_steps, --warmup_steps)" in schedule
    assert "Memory per GPU (8.03B parameters)" in text and "pipeline stage" not in text
    assert "lr ≈" not in text and "DeepSeek LLM" not in text and "pipeline bubble" not in text


def test_a_fine_tune_gets_no_pre_training_advice_and_no_empty_header(tmp_path: Path) -> None:
    from .helpers import spec_dict

    pretrain = _explained(tmp_path, spec_dict())
    assert "lr ≈" in pretrain and "(first) pipeline stage" in pretrain
    assert "(32,000 samples)" in pretrain and "Megatron counts the schedule in iterations" in pretrain
    finetune = _explained(tmp_path, spec_dict(checkpoint={"dir": "/ckpt/ft", "finetune_from": "/ckpt/base"}))
    assert "lr ≈" not in finetune and "DeepSeek LLM" not in finetune and "micro batch: 8" in finetune
    # nothing to advise: no "Advice" header over nothing
    quiet = _explained(tmp_path, spec_dict(checkpoint={"dir": "/ckpt/ft", "finetune_from": "/ckpt/base"},
                                           batch={"micro_batch_size": 8, "gradient_accumulation_steps": 1}))
    assert "Advice" not in quiet


def test_cos_min_ratio_is_the_ratio_as_written_and_deepspeed_ends_at_min_lr(tmp_path: Path) -> None:
    """ds_config.json's cos_min_ratio is min_lr / lr rounded once (0.1 for 2e-6 / 2e-5, not the
    float division's 0.09999999999999999); DeepSpeed's own WarmupCosineLR, read from the file,
    ends at min_lr (within one rounding of lr × ratio)."""
    import math

    out = tmp_path / "out"
    sample = str(ROOT / "samples" / "sft-llama3-8b-accelerate-zero3.yaml")
    assert runner.invoke(app, ["generate", sample, "--out", str(out)]).exit_code == 0
    params = json.loads((out / "ds_config.json").read_text())["scheduler"]["params"]
    assert params["cos_min_ratio"] == 0.1 and repr(params["cos_min_ratio"]) == "0.1"
    torch = pytest.importorskip("torch")
    lr_schedules = pytest.importorskip("deepspeed.runtime.lr_schedules")
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=2.0e-5)  # the spec's lr
    scheduler = lr_schedules.WarmupCosineLR(optimizer, **params)
    scheduler.step(params["total_num_steps"])
    assert math.isclose(scheduler.get_lr()[0], 2.0e-6, rel_tol=1e-15)
