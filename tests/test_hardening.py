"""Hostile input: every class a fuzz campaign found (unbounded work, internal errors, counts
written as floats, code through the environment) ends in a located refusal (exit 2), a finding
(exit 1) or a correct file, in bounded time; and a seeded fuzz over specs and scripts keeps it so.
The command runs in a subprocess with a timeout: a hang fails the test instead of stopping CI."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.dialects import dialect
from generator.lint.engine import lint_texts

from .conftest import ROOT
from .helpers import spec_dict

LOCATED = re.compile(r"^\S.*:\d+:\d+: ", re.S)  # file:line:col (the file, or the --set option)
TIMEOUT = 60


def gen_launch(*args: str, cwd: Path, stdin: str | None = None) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "generator", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT, input=stdin if stdin is not None else "",
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return proc.returncode, proc.stdout, proc.stderr


def write(tmp_path: Path, data: dict | str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def assert_refused(code: int, stderr: str, fragment: str) -> None:
    assert code == 2, stderr
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr
    assert LOCATED.match(stderr.strip().splitlines()[0]), stderr
    assert fragment in stderr, stderr


BASE = spec_dict()


@pytest.mark.parametrize(("change", "fragment"), [
    ({"cluster": {"nodes": 10**22}}, "$.cluster.nodes: must be at most 100000"),
    ({"cluster": {"gpus_per_node": 1.0e308}}, "$.cluster.gpus_per_node: must be at most 64, got 1e+308"),
    ({"model": {"num_attention_heads": 10**21 + 1}}, "$.model.num_attention_heads: must be at most"),
    ({"model": {"num_layers": 10**21 + 1}}, "$.model.num_layers: must be at most"),
    ({"batch": {"gradient_accumulation_steps": None, "global_batch_size": 10**23 + 1}},
     "$.batch.global_batch_size: must be at most"),
    ({"batch": {"gradient_accumulation_steps": None, "tokens_per_step": "9999999Ti"}},
     "$.batch.tokens_per_step: '9999999Ti' is"),
    ({"training": {"warmup": {"iters": 10**15}}}, "$.training.warmup.iters: must be at most"),
    ({"launch": {"env": {"BASH_ENV": "$(touch x)"}}}, "list it in launch.unsafe_env: [BASH_ENV]"),
    ({"launch": {"env": {"PROMPT_COMMAND": "x"}}}, "launch.unsafe_env"),
    ({"launch": {"env": {"IFS": ":"}}}, "launch.sbatch sets or relies on IFS itself"),
    ({"launch": {"env": {"MEGATRON_ARGS": "x"}}}, "launch.sbatch sets or relies on MEGATRON_ARGS"),
    ({"launch": {"env": {"PATH": "/x"}}}, "PATH makes every bash"),
    ({"launch": {"extra_args": ["a\x00b"], "check_extra_args": False}}, "holds the control character '\\x00'"),
    ({"launch": {"extra_args": ["a\nb"], "check_extra_args": False}}, "holds the control character '\\n'"),
    ({"slurm": {"partition": "gpu\n#SBATCH --x"}}, "$.slurm.partition"),
    ({"batch": {"rampup": {"start": 2, "increment": 2, "samples": 1000}, "gradient_accumulation_steps": None,
                "global_batch_size": 2 * 10**6, "micro_batch_size": 1}, "training": {"train_samples": 10**8,
                                                                                      "train_iters": None}},
     "increments of 2"),
])
def test_hostile_spec_values_are_refused_where_they_are(change, fragment, tmp_path: Path) -> None:
    data = spec_dict(**change)
    code, _, stderr = gen_launch("spec.yaml", "--target", "all", "-o", "out", cwd=write(tmp_path, data).parent)
    assert_refused(code, stderr, fragment)


def test_a_null_run_length_is_refused_at_its_line_and_counts_as_not_given(tmp_path: Path) -> None:
    """training.train_iters: null is no run length (it was counted as given and ended in an
    internal error): refused where it is written; beside another length, null is not a second one."""
    data = spec_dict()
    data["training"]["train_iters"] = None
    code, _, stderr = gen_launch("spec.yaml", "--target", "all", "-o", "out", cwd=write(tmp_path, data).parent)
    assert_refused(code, stderr, "$.training.train_iters: null gives no run length")
    line = next(i for i, text in enumerate((tmp_path / "spec.yaml").read_text().splitlines(), 1)
                if "train_iters" in text)
    assert stderr.startswith(f"spec.yaml:{line}:"), stderr
    data["training"]["train_tokens"] = "16M"
    code, _, stderr = gen_launch("spec.yaml", "--target", "all", "-o", "out", cwd=write(tmp_path, data).parent)
    assert code == 0, stderr


def test_an_allowed_unsafe_name_is_exported_quoted(tmp_path: Path) -> None:
    data = spec_dict(launch={"env": {"BASH_ENV": "/etc/site.sh"}, "unsafe_env": ["BASH_ENV"]})
    code, out, stderr = gen_launch("spec.yaml", "--target", "slurm", cwd=write(tmp_path, data).parent)
    assert code == 0, stderr
    assert "export BASH_ENV=/etc/site.sh" in out


@pytest.mark.parametrize(("text", "fragment"), [
    (yaml.safe_dump(BASE) + "x: " + "[" * 2000 + "]" * 2000 + "\n", "nested more than 64 levels deep"),
    (yaml.safe_dump(BASE) + "".join("  " * i + f"k{i}:\n" for i in range(300)) + "  " * 300 + "v\n",
     "nested more than 64 levels deep"),
    ("name: t\x01\n" + yaml.safe_dump({k: v for k, v in BASE.items() if k != "name"}),
     "the character '\\x01' (U+0001) is not allowed"),
    (yaml.safe_dump(BASE) + "extends: " + "a" * 300 + "\n", "cannot be a file here"),
])
def test_hostile_spec_files_are_refused_where_they_are(text: str, fragment: str, tmp_path: Path) -> None:
    code, _, stderr = gen_launch("spec.yaml", "--target", "megatron", cwd=write(tmp_path, text).parent)
    assert_refused(code, stderr, fragment)


@pytest.mark.parametrize(("option", "fragment"), [
    ("model.x=" + "[" * 2000 + "]" * 2000, "nested more than 64 levels deep"),
    ("a..b=1", "expected PATH=VALUE"), ("model.tp", "expected PATH=VALUE"),
])
def test_hostile_set_options_are_refused_at_the_option(option: str, fragment: str, tmp_path: Path) -> None:
    code, _, stderr = gen_launch("spec.yaml", "--target", "megatron", "--set", option,
                                 cwd=write(tmp_path, BASE).parent)
    assert_refused(code, stderr, fragment)
    assert stderr.startswith(f"--set {option}:")


def test_a_control_character_in_the_spec_path_is_refused(tmp_path: Path) -> None:
    write(tmp_path, BASE, "new\nline.yaml")
    code, _, stderr = gen_launch("new\nline.yaml", "--target", "megatron", cwd=tmp_path)
    assert code == 2 and "the path holds a control character" in stderr and "internal error" not in stderr


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/stdin", "/proc/self/status"])
def test_generate_reads_no_special_file(target: str, tmp_path: Path) -> None:
    code, _, stderr = gen_launch(target, "--target", "megatron", cwd=tmp_path)
    assert code == 2 and "only regular files are read" in stderr, stderr


def test_whole_number_floats_are_written_as_counts(tmp_path: Path) -> None:
    """micro 2.0, nodes 2.0 with a token target, cpus 96.0: the files say 2, 96 (never 2.0)."""
    data = spec_dict(cluster={"nodes": 2.0, "gpus_per_node": 8.0, "gpu": "h100-80gb"},
                     batch={"micro_batch_size": 2.0, "gradient_accumulation_steps": None,
                            "tokens_per_step": 65536.0},
                     model={"num_layers": 8.0, "rotary_base": 1.0e6, "position_embedding": "rope"},
                     slurm={"cpus_per_task": 96.0})
    code, _, stderr = gen_launch("spec.yaml", "--target", "all", "-o", "out", cwd=write(tmp_path, data).parent)
    assert code == 0, stderr
    out = tmp_path / "out"
    assert_counts_are_integers(out)
    assert "#SBATCH --cpus-per-task=96\n" in (out / "launch.sbatch").read_text()
    assert "  --micro-batch-size 2\n" in (out / "megatron_args.sh").read_text()
    assert "  --rotary-base 1000000\n" in (out / "megatron_args.sh").read_text()


_INT_FLAGS = {e.flag for name in ("megatron-lm", "megatron-deepspeed/microsoft", "megatron-deepspeed/bigscience")
              for e in dialect(name).entries if e.type == "int"}


def assert_counts_are_integers(out: Path) -> None:
    """Every int flag of the Megatron arguments, #SBATCH count and DeepSpeed batch key is an integer."""
    for path in out.rglob("*"):
        if path.name == "megatron_args.sh":
            for line in path.read_text().splitlines():
                words = line.split()
                if words and words[0] in _INT_FLAGS:
                    assert all(re.fullmatch(r"\d+", w) for w in words[1:]), line
        elif path.name == "launch.sbatch":
            for line in path.read_text().splitlines():
                if re.match(r"#SBATCH --(nodes|ntasks-per-node|cpus-per-task|gpus-per-node)=", line):
                    assert re.fullmatch(r"#SBATCH --[a-z-]+=(\w+:)?\d+", line), line
        elif path.name == "ds_config.json":
            config = json.loads(path.read_text())
            for key in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"):
                assert isinstance(config.get(key, 0), int), (key, config)


# -- lint and import -----------------------------------------------------------------------------

SCRIPTS = {
    "doubling.sh": "A=(x)\n" + 'A=("${A[@]}" "${A[@]}")\n' * 22 + 'torchrun pretrain_gpt.py "${A[@]}"\n',
    "long-line.sh": "torchrun pretrain_gpt.py --micro-batch-size 2 " + "x" * 1_000_000 + "\n",
    "nested-default.sh": "X=" + "${A:-" * 1000 + "x" + "}" * 1000 + "\ntorchrun pretrain_gpt.py $X\n",
    "nested-subst.sh": 'X=' + '"$(' * 1000 + "x" + ')"' * 1000 + "\ntorchrun pretrain_gpt.py $X\n",
    "late-sbatch.sh": "echo hi\n#SBATCH --nodes=2\nsrun torchrun --nproc-per-node $SLURM_NTASKS pretrain_gpt.py "
                      "--micro-batch-size 2\n",
    "kmsg.sh": "source /proc/kmsg\ntorchrun pretrain_gpt.py --micro-batch-size 2\n",
}
# what each reading must report: a stopped reading is an error (exit 1), never silence
EXPECTED = {"doubling.sh": "GL902", "nested-default.sh": "GL902", "nested-subst.sh": "GL902",
            "late-sbatch.sh": "GL302"}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_hostile_scripts_lint_and_import_in_bounds(name: str, tmp_path: Path) -> None:
    write(tmp_path, SCRIPTS[name], name)
    code, out, stderr = gen_launch("lint", name, cwd=tmp_path)
    assert code in (0, 1) and "internal error" not in stderr + out, stderr + out
    if name in EXPECTED:
        assert EXPECTED[name] in out and code == 1, out
    code, out, stderr = gen_launch("import", name, cwd=tmp_path)
    assert code in (0, 1, 2) and "internal error" not in stderr, stderr


def test_special_files_are_findings_not_hangs(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.sh")
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "folder" / "in-folder.sh")
    (tmp_path / "zero.sh").symlink_to("/dev/zero")
    code, out, stderr = gen_launch("lint", "fifo.sh", "folder", "zero.sh", "/dev/stdin", cwd=tmp_path)
    assert code == 1, stderr
    assert out.count("GL900") == 4, out
    assert "not a regular file" in out and "a special file (/dev/zero)" in out
    code, _, stderr = gen_launch("import", "fifo.sh", cwd=tmp_path)
    assert code == 2 and "not a regular file" in stderr


# -- seeded fuzz ---------------------------------------------------------------------------------

_HOSTILE_VALUES = [0, -1, 4.0, 2.5, 1.0e308, float("inf"), 10**30, "", "auto", "4Mi", "1e9", "a\x00b",
                   "$(touch pwned)", None, [], [1, 2], {"x": 1}, True, "x" * 300, "\u202e"]


def _paths(data, prefix=()):
    if isinstance(data, dict):
        for key, value in data.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_mutated_specs_end_in_a_located_refusal_or_integer_counts(rng: random.Random) -> None:
    """A valid spec with a few values replaced by hostile ones: exit 0, 1 or 2, never an
    internal error; a refusal is located; written files carry integer counts."""
    import tempfile

    from typer.testing import CliRunner

    from generator.cli import app

    data = spec_dict(launch={"launcher": rng.choice(["torchrun", "srun", "deepspeed"])})
    paths = list(_paths(data))
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(paths)
        node = data
        for part in path[:-1]:
            node = node[part] if isinstance(node.get(part), dict) else None
            if node is None:
                break
        if node is not None:
            node[path[-1]] = rng.choice(_HOSTILE_VALUES)
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.yaml"
        spec.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
        result = CliRunner().invoke(app, ["generate", str(spec), "--target", "all", "-o", str(Path(tmp) / "out")])
        assert result.exit_code in (0, 1, 2), (data, result.output)
        assert "internal error" not in result.output and not isinstance(result.exception, Exception) or \
            isinstance(result.exception, SystemExit), (data, result.output)
        if result.exit_code == 2:
            assert LOCATED.match(result.stderr.strip()), (data, result.stderr)
        elif result.exit_code == 0:
            assert_counts_are_integers(Path(tmp) / "out")


_FRAGMENTS = ["${A:-", '"$(', "$((", "<<EOF\n", "'", '"', "\\\n", "A=(x)\n", 'A=("${A[@]}" "${A[@]}")\n',
              "if [ -n x ]; then\n", "fi\n", "case $X in\n", "esac\n", "source ./x.sh\n", "\x00", "\x1b[",
              "--micro-batch-size 1e400 ", "--num-attention-heads 99999999999999999999999 ", "#SBATCH --nodes=",
              "$SLURM_NTASKS ", "eval \"$X\"\n", "bash -c '", "}" * 50, ")" * 50]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_mutated_scripts_lint_without_internal_errors(rng: random.Random) -> None:
    """Real-style launch scripts with fragments spliced in: lint reads every one (findings, no
    exception), whatever is spliced where."""
    corpus = sorted((ROOT / "tests" / "lint_corpus").glob("*/*.sh"))
    text = rng.choice(corpus).read_text()
    for _ in range(rng.randint(1, 6)):
        at = rng.randint(0, len(text))
        text = text[:at] + rng.choice(_FRAGMENTS) * rng.randint(1, 300) + text[at:]
    result = lint_texts({"run.sh": text})
    assert isinstance(result.findings, list)


@pytest.mark.parametrize("searched", [{"parallelism": {"tp": "auto"}},
                                      {"sweep": {"grid": {"parallelism.tp": [1, 2]}}}])
def test_a_count_written_as_a_float_stays_a_count_through_auto_plan_and_sweeps(
        tmp_path: Path, searched: dict) -> None:
    """`nodes: 4.0` is the count 4: the schema check makes it one, and so it stays once an
    auto-plan choice or a sweep point is set in the document (both rebuild it from the file's
    YAML and check it again) — with auto-plan once an internal error, the rendered files'
    read-back not finding the world size in `--nodes=4.0`."""
    from typer.testing import CliRunner

    from generator.cli import app

    data = spec_dict(cluster={"nodes": 4.0}, **searched)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    result = CliRunner().invoke(app, ["generate", str(spec), "--target", "all", "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "out").rglob("launch.sbatch"))
    assert_counts_are_integers(tmp_path / "out")


# -- issue 41: inputs that hung or ended in an internal error ----------------------------------

def assert_no_crash(code: int, stderr: str) -> None:
    assert code == 2, stderr
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr


def test_a_large_sweep_grid_is_refused_naming_its_count_and_fields(tmp_path: Path) -> None:
    """3 × 50 values are 125,000 points: refused at once (it hung), naming the count and the
    fields that multiply to it."""
    grid = {"parallelism.tp": list(range(1, 51)), "batch.micro_batch_size": list(range(1, 51)),
            "model.seq_length": list(range(1, 51))}
    write(tmp_path, spec_dict(sweep={"grid": grid}))
    for command in (("spec.yaml", "-o", "out"), ("explain", "spec.yaml")):
        code, _, stderr = gen_launch(*command, cwd=tmp_path)
        assert_refused(code, stderr, "125,000 points")
        assert "parallelism.tp (50) × batch.micro_batch_size (50) × model.seq_length (50)" in stderr, stderr
    assert not (tmp_path / "out").exists()


def test_sweep_labels_are_unique_in_linear_time() -> None:
    """Equal labels get -<number>, a label never repeats (de-duplicated with a set: 8,000
    points took 18 s)."""
    from generator.sweep import unique_labels

    labels = unique_labels([{"a": "x/"}, {"a": "x_"}, {"a": "x/"}, {"a": "y"}])
    assert labels == ["ax_", "ax_-2", "ax_-3", "ay"]
    many = unique_labels([{"a": 1}] * 20_000)
    assert len(set(many)) == 20_000


def _plan_json(tmp_path: Path) -> Path:
    data = spec_dict(checkpoint={"dir": "/ckpt", "interval": 100})
    code, _, stderr = gen_launch(str(write(tmp_path, data)), "-o", str(tmp_path / "run"), cwd=tmp_path)
    assert code == 0, stderr
    return tmp_path / "run" / "plan.json"


def test_resume_check_refuses_a_sweep_spec(tmp_path: Path) -> None:
    _plan_json(tmp_path)
    data = spec_dict(parallelism={"cp": "auto"}, sweep={"grid": {"parallelism.tp": [1, 2]}})
    write(tmp_path, data, "new.yaml")
    code, _, stderr = gen_launch("resume-check", "run", "new.yaml", cwd=tmp_path)
    assert_refused(code, stderr, "a sweep of 2 points; resume-check compares one run")


@pytest.mark.parametrize(("edit", "fragment"), [
    (lambda p: p.pop("model"), "run/plan.json: $.model: missing"),
    (lambda p: p.update(batch=[]), "run/plan.json: $.batch: expected an object, got []"),
    (lambda p: p["parallelism"].pop("tp"), "$.parallelism.tp: missing"),
    (lambda p: p["parallelism"].update(tp="2"), '$.parallelism.tp: expected a whole number of at least 1, got "2"'),
    (lambda p: p["tokenizer"].pop("type"), "$.tokenizer.type: missing"),
    (lambda p: p["batch"].update(tokens_per_step=0), "$.batch.tokens_per_step: expected a whole number"),
    (lambda p: p.update(dialect={"name": "megatron-nope"}), "$.dialect.name: 'megatron-nope' is not"),
    (lambda p: p.update(dialect="x"), "$.dialect: expected an object"),
    (lambda p: p.update(checkpoint={"dir": "/ckpt"}), "$.checkpoint.format: missing"),
])
def test_a_hand_edited_plan_json_is_refused_naming_the_key(edit, fragment: str, tmp_path: Path) -> None:
    plan = _plan_json(tmp_path)
    record = json.loads(plan.read_text())
    edit(record)
    plan.write_text(json.dumps(record))
    code, _, stderr = gen_launch("resume-check", "run", "spec.yaml", cwd=tmp_path)
    assert_no_crash(code, stderr)
    assert fragment in stderr and "regenerate it" in stderr, stderr


def test_every_leaf_of_a_plan_json_mistyped_is_a_refusal_or_a_report(tmp_path: Path) -> None:
    """Each value of a real plan.json removed or replaced by another type: resume-check reports
    or refuses it (UserError), never another exception."""
    from generator.errors import UserError
    from generator.resume import check

    plan = _plan_json(tmp_path)
    original = json.loads(plan.read_text())

    def leaves(node, path=()):
        if isinstance(node, dict):
            for key, value in node.items():
                yield (*path, key)
                yield from leaves(value, (*path, key))

    for path in leaves(original):
        for replacement in (None, "x", [], {}, -1, 0, 1.5, True, "__delete__"):
            record = json.loads(json.dumps(original))
            node = record
            for key in path[:-1]:
                node = node[key]
            if replacement == "__delete__":
                del node[path[-1]]
            else:
                node[path[-1]] = replacement
            plan.write_text(json.dumps(record))
            with contextlib.suppress(UserError):
                check(plan, plan)


@pytest.mark.parametrize(("content", "fragment"), [
    (b'{"generator": "gen-launch", "x": "caf\xe9"}', "run/plan.json:1:38: not valid UTF-8 (byte 0xe9)"),
    (b"[" * 3000 + b"]" * 3000, "run/plan.json:1:65: nested more than 64 levels deep"),
    (b'{"generator": "gen-launch", "n": ' + b"1" * 5000 + b"}", "run/plan.json:1:34: a number of 5,000 digits"),
])
def test_a_broken_plan_json_is_a_located_error(content: bytes, fragment: str, tmp_path: Path) -> None:
    plan = _plan_json(tmp_path)
    plan.write_bytes(content)
    code, _, stderr = gen_launch("resume-check", "run", "spec.yaml", cwd=tmp_path)
    assert_refused(code, stderr, fragment)


def test_resume_check_reads_no_special_file(tmp_path: Path) -> None:
    """A FIFO, a folder whose plan.json is a FIFO, a link to /dev/zero: refused, not waited on."""
    _plan_json(tmp_path)
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "folder" / "plan.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    for name, fragment in (("fifo.json", "not a regular file"), ("folder", "not a regular file"),
                           ("zero.json", "a special file (/dev/zero)")):
        code, _, stderr = gen_launch("resume-check", "run", name, cwd=tmp_path)
        assert_no_crash(code, stderr)
        assert fragment in stderr, stderr


def test_a_spec_that_is_a_symlink_loop_is_refused(tmp_path: Path) -> None:
    (tmp_path / "loop.yaml").symlink_to("loop.yaml")
    code, _, stderr = gen_launch("loop.yaml", "--target", "megatron", cwd=tmp_path)
    assert_no_crash(code, stderr)
    assert stderr.startswith("loop.yaml: ") and "cannot read" in stderr, stderr


def test_a_spec_name_that_is_not_utf8_is_shown_escaped_and_written(tmp_path: Path) -> None:
    """A file name of bytes that are not UTF-8: its name reaches the files escaped (n\\xffx.yaml),
    and generation succeeds (it wrote megatron_args.sh, then failed on the next file)."""
    name = os.fsdecode(b"n\xffx.yaml")
    write(tmp_path, BASE, name)
    proc = subprocess.run([sys.executable, "-m", "generator", name, "-o", "out"], cwd=tmp_path,
                          capture_output=True, timeout=TIMEOUT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    plan = json.loads((tmp_path / "out" / "plan.json").read_text(encoding="utf-8"))
    assert plan["spec"] == "n\\xffx.yaml"
    assert "n\\xffx.yaml" in (tmp_path / "out" / "megatron_args.sh").read_text(encoding="utf-8")


def test_a_failed_generation_writes_nothing_into_out(tmp_path: Path, monkeypatch) -> None:
    """Files are written into a folder beside --out and moved into place once all are written:
    a failure part-way leaves --out as it was."""
    from generator import artifacts

    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("old")
    calls = []

    def failing(path: Path, text: str, encoding: str) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed")
        Path.write_text(path, text, encoding=encoding)

    monkeypatch.setattr(artifacts, "_write_text", failing)
    with pytest.raises(Exception):  # noqa: B017 - whatever the failure, nothing is left behind
        artifacts.write_files(out, {"a.sh": "a", "b.sh": "b", "sub/c.sh": "c"})
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    monkeypatch.setattr(artifacts, "_write_text", lambda p, t, encoding: Path.write_text(p, t, encoding=encoding))
    artifacts.write_files(out, {"a.sh": "a", "sub/c.sh": "c"})
    assert (out / "a.sh").read_text() == "a" and (out / "sub" / "c.sh").read_text() == "c"
    assert (out / "keep.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("launch", [
    "torchrun --nproc_per_node 0 pretrain_gpt.py",
    "torchrun --nnodes 0 --nproc_per_node 8 pretrain_gpt.py",
    "deepspeed --num_gpus 0 pretrain_gpt.py",
    "deepspeed --num_nodes 0 --num_gpus 8 pretrain_gpt.py",
])
def test_a_zero_count_in_a_launcher_is_a_finding_not_a_crash(launch: str, tmp_path: Path) -> None:
    write(tmp_path, f"{launch} --micro-batch-size 2 --global-batch-size 16 --tensor-model-parallel-size 2\n",
          "run.sh")
    code, out, stderr = gen_launch("lint", "run.sh", cwd=tmp_path)
    assert code in (0, 1) and "internal error" not in stderr + out, stderr + out
    assert "is not a count" in out, out
    code, _, stderr = gen_launch("import", "run.sh", cwd=tmp_path)
    assert code in (0, 1, 2) and "internal error" not in stderr, stderr


def test_a_json_integer_of_5000_digits_is_located(tmp_path: Path) -> None:
    write(tmp_path, '{\n  "train_batch_size": ' + "1" * 5000 + "\n}\n", "ds_config.json")
    code, out, stderr = gen_launch("lint", "ds_config.json", cwd=tmp_path)
    assert code == 1 and "internal error" not in stderr + out, stderr + out
    assert "ds_config.json:2:23" in out and "a number of 5,000 digits" in out, out


def test_a_yaml_integer_of_5000_digits_is_located(tmp_path: Path) -> None:
    write(tmp_path, yaml.safe_dump(BASE) + "x: " + "1" * 5000 + "\n")
    code, _, stderr = gen_launch("spec.yaml", "--target", "megatron", cwd=tmp_path)
    assert_refused(code, stderr, "a number of 5,000 digits")


def test_values_built_from_unknown_variables_are_bounded(tmp_path: Path) -> None:
    """x=$x$x$x$x with x unset, 16 times: 4^16 unknown pieces (it hung); the value budget counts
    them, and the reading stops with GL902."""
    write(tmp_path, "x=$x$x$x$x\n" * 16 + "torchrun pretrain_gpt.py --micro-batch-size $x\n", "run.sh")
    code, out, stderr = gen_launch("lint", "run.sh", cwd=tmp_path)
    assert code == 1 and "GL902" in out, stderr + out
    code, _, stderr = gen_launch("import", "run.sh", cwd=tmp_path)
    assert code in (0, 1, 2) and "internal error" not in stderr, stderr



# -- issue 41: counts of 0 (or less) in a linted script ---------------------------------------

ENTRY = "torchrun --nnodes $SLURM_NNODES --nproc_per_node 8 pretrain_gpt.py"
ARGS = {"--micro-batch-size": "2", "--global-batch-size": "64", "--tensor-model-parallel-size": "2",
        "--pipeline-model-parallel-size": "2", "--num-layers": "8"}
HEADER = "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --gpus-per-node=8\n"


def assert_a_note_not_a_crash(tmp_path: Path, script: str) -> None:
    write(tmp_path, script, "run.sh")
    code, out, stderr = gen_launch("lint", "run.sh", cwd=tmp_path)
    assert code in (0, 1) and "internal error" not in stderr + out and "Traceback" not in stderr, stderr + out
    assert "GL901" in out and "is not a count (at least 1)" in out, out
    code, _, stderr = gen_launch("import", "run.sh", cwd=tmp_path)
    assert code in (0, 1, 2) and "internal error" not in stderr and "Traceback" not in stderr, stderr


@pytest.mark.parametrize("value", ["0", "-2"])
@pytest.mark.parametrize("flag", sorted(ARGS))
def test_a_megatron_count_of_zero_or_less_is_a_note_not_a_crash(flag: str, value: str, tmp_path: Path) -> None:
    """--micro-batch-size 0 (or tp, pp 0) ended in a division by zero in the batch rules."""
    args = " ".join(f"{name} {value if name == flag else given}" for name, given in ARGS.items())
    assert_a_note_not_a_crash(tmp_path, f"{HEADER}srun {ENTRY} {args}\n")


@pytest.mark.parametrize("option", ["--nodes", "--ntasks-per-node", "--gpus-per-node"])
def test_an_sbatch_count_of_zero_is_a_note_not_a_crash(option: str, tmp_path: Path) -> None:
    """#SBATCH --nodes=0 with torchrun --nnodes $SLURM_NNODES ended in a division by zero."""
    args = " ".join(f"{name} {given}" for name, given in ARGS.items())
    header = re.sub(f"{option}=[0-9]+", f"{option}=0", HEADER)
    assert_a_note_not_a_crash(tmp_path, f"{header}srun {ENTRY} {args}\n")


@pytest.mark.parametrize(("plan", "fragment"), [
    ('{"spec": "spec.yaml", "pad": "' + "x" * (5 << 20) + '"}', "more than 4,194,304 bytes"),
    ('{"spec": ' + "1" * 5000 + "}", "a number of 5,000 digits"),
    ('{"spec": "spec.yaml",', "plan.json:2:1: not JSON"),
    ('["spec.yaml"]', 'no "spec" names one'),
], ids=["large", "digits", "broken", "list"])
def test_generate_check_reads_a_plan_json_as_untrusted_input(plan: str, fragment: str, tmp_path: Path) -> None:
    """generate --check on a generated file finds its spec in the plan.json above it: that file
    is read bounded, as resume-check reads it (it was read whole, its numbers parsed whole); what
    cannot be read is a note that says why, the file not checked."""
    folder = tmp_path / "launch" / "run"
    folder.mkdir(parents=True)
    write(folder, "# generated\n", "megatron_args.sh")
    write(folder, plan + "\n", "plan.json")
    code, out, stderr = gen_launch("generate", "--check", "launch/run/megatron_args.sh", cwd=tmp_path)
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr
    assert "launch/run/megatron_args.sh: no plan.json beside it names a spec (" in stderr, stderr
    assert fragment in stderr, stderr
