"""The dialect tables against the parsers' catalogues, and launch.extra_args against the
dialect: unknown, malformed and repeated flags are located errors (exit 2), never internal ones."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from typer.testing import CliRunner

from generator.cli import app
from generator.dialects import TableError, dialect, megatron_dialect_names, megatron_releases
from generator.dialects.arguments import argument_lines

from .conftest import ROOT
from .helpers import spec_dict

runner = CliRunner()
DIALECTS = [(name, release) for name in megatron_dialect_names()
            for release in (megatron_releases() if name in ("megatron-lm", "mindspeed-llm") else [None])] \
    + [("trainer", None)]


def _value_choices(entry) -> list:
    """Every plan value for which the entry writes something."""
    if entry.map is not None:
        return list(entry.map)
    if entry.switch:
        return [entry.when]
    return [(7, 8, 9) if entry.nargs == "+" or entry.nargs > 1 else 7]


@pytest.mark.parametrize(("name", "release"), DIALECTS, ids=[f"{n}-{r}" for n, r in DIALECTS])
def test_every_written_flag_is_in_the_parsers_catalogue(name: str, release: str | None) -> None:
    d = dialect(name, release)
    checked = 0
    for entry in d.entries:
        option = d.catalogue.get(entry.flag)
        assert option is not None, f"{d}: {entry.flag} is not an option of {d.catalogue.source}"
        if not entry.write or entry.raw is not None:
            continue
        for value in _value_choices(entry):
            words = entry.spelled(value)
            assert words is not None
            assert option.takes(len(words)), f"{d}: {entry.flag} takes {option.arity}, written {words}"
            if option.choices:
                assert all(w in option.choices for w in words), (d, entry.flag, words, option.choices)
            checked += 1
    assert checked > (15 if name == "trainer" else 30)


def test_the_forks_spell_the_same_value_differently() -> None:
    ms, bs = dialect("megatron-deepspeed/microsoft"), dialect("megatron-deepspeed/bigscience")
    lm = dialect("megatron-lm")
    assert "--position-embedding-type" not in ms.catalogue and "--recompute-granularity" not in bs.catalogue
    assert ms.can("gqa") and not bs.can("gqa") and bs.can("alibi") and not lm.can("alibi")
    assert not dialect("megatron-lm", "core_v0.17").can("step_batch_schedule")
    assert dialect("megatron-lm", "core_v0.18").can("step_batch_schedule")
    assert dialect("megatron-lm", "core_v0.17").can("rampup") and not lm.can("rampup")


@pytest.mark.parametrize(("extra", "fragment"), [
    (["--save-intervall", "1000"], "--save-intervall is not an option of Megatron-LM latest; did you mean --save-interval"),
    (["--save-interval"], "--save-interval takes one value, got 0"),
    (["--tokenizer-type", "Bogus"], "--tokenizer-type Bogus: choose from"),
    (["stray"], "'stray' is not an option"),
    (["--micro-batch-size", "4"], "--micro-batch-size repeats --micro-batch-size, which the plan already writes (from batch.micro_batch_size at"),
    (["--num-layers=12"], "--num-layers=12"[:12]),
])
def test_extra_args_mistakes_are_located(write_spec, extra: list[str], fragment: str) -> None:
    import yaml

    path = write_spec(yaml.safe_dump(spec_dict(launch={"extra_args": extra})))
    result = runner.invoke(app, ["generate", str(path), "--target", "megatron"])
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output
    assert f"{path}:" in result.output and fragment in result.output, result.output


def test_valid_extra_args_pass_and_reach_the_script(write_spec) -> None:
    import yaml

    extra = ["--data-path", "0.7", "/d/a", "0.3", "/d/b", "--save-interval", "500", "--save", "$CKPT"]
    path = write_spec(yaml.safe_dump(spec_dict(launch={"extra_args": extra})))
    result = runner.invoke(app, ["generate", str(path), "--target", "slurm"])
    assert result.exit_code == 0, result.output
    assert "--save-interval 500" in result.output and "'$CKPT'" in result.output


def test_an_entry_point_with_options_of_its_own_opts_out(write_spec) -> None:
    import yaml

    data = spec_dict(launch={"extra_args": ["--my-option", "1"], "check_extra_args": False})
    result = runner.invoke(app, ["generate", str(write_spec(yaml.safe_dump(data))), "--target", "slurm"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("fork", "model", "fragment"), [
    ("bigscience", {"normalization": "rmsnorm"}, "model.normalization 'rmsnorm' cannot be expressed in Megatron-DeepSpeed (bigscience"),
    ("bigscience", {"num_query_groups": 4}, "model.num_query_groups 4 cannot be expressed"),
    ("microsoft", {"position_embedding": "alibi"}, "use Megatron-DeepSpeed (bigscience"),
])
def test_what_a_fork_cannot_express_is_refused(write_spec, fork: str, model: dict, fragment: str) -> None:
    import yaml

    data = spec_dict(framework="megatron-deepspeed", megatron={"fork": fork}, model=model,
                     parallelism={"tp": 2, "pp": 2, "zero_stage": 1})
    path = write_spec(yaml.safe_dump(data))
    result = runner.invoke(app, ["generate", str(path), "--target", "megatron"])
    assert result.exit_code == 2 and fragment in result.output, result.output
    assert "internal error" not in result.output


def test_each_dialect_writes_its_own_spellings(write_spec) -> None:
    import yaml

    texts = {}
    for fork in ("microsoft", "bigscience"):
        data = spec_dict(framework="megatron-deepspeed", megatron={"fork": fork},
                         model={"position_embedding": "rope"}, parallelism={"zero_stage": 1},
                         training={"recompute": "full", "train_iters": 100, "lr": 1e-4, "warmup": 0})
        result = runner.invoke(app, ["generate", str(write_spec(yaml.safe_dump(data))), "--target", "megatron"])
        assert result.exit_code == 0, result.output
        texts[fork] = result.output
    assert "--use-rotary-position-embeddings" in texts["microsoft"] and "--recompute-granularity full" in texts["microsoft"]
    assert "--position-embedding-type rotary" in texts["bigscience"] and "--checkpoint-activations" in texts["bigscience"]
    assert "--max-position-embeddings" not in texts["bigscience"]  # refused with rotary there


def test_lint_judges_a_script_by_its_own_fork(tmp_path: Path) -> None:
    from generator.lint import lint_paths

    common = ("--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 512 "
              "--micro-batch-size 1 --global-batch-size 8 --train-iters 10 --deepspeed "
              "--deepspeed_config ds.json --zero-stage 1")
    bloom = tmp_path / "bloom.sh"
    bloom.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py {common} "
                     "--position-embedding-type alibi --checkpoint-activations\n")
    wrong = tmp_path / "wrong.sh"
    wrong.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py {common} "
                     "--position-embedding-type alibi --recompute-granularity full --recompute-method uniform\n")
    codes = {}
    for path in (bloom, wrong):
        report = lint_paths([path])
        codes[path.name] = [str(i.finding) for i in report.items if i.finding.code == "GL201"]
    assert codes["bloom.sh"] == []
    assert len(codes["wrong.sh"]) == 1 and "--recompute-granularity" in codes["wrong.sh"][0] \
        and "--recompute-method" in codes["wrong.sh"][0], codes  # every such flag, one finding


def test_the_renderer_walks_the_table_in_order() -> None:
    d = dialect("megatron-lm")
    flags = [e.flag for e in d.entries]
    assert flags.index("--num-layers") < flags.index("--tensor-model-parallel-size") < flags.index("--lr")
    assert ROOT.joinpath("generator/dialects/megatron.yaml").is_file()
    with pytest.raises(TableError, match="the plan provides no value"):
        argument_lines(d, {})  # a table naming a value the plan lacks is a mistake, not a flag left out
    assert list(itertools.islice(megatron_releases(), 1)) == ["core_v0.12"]


def test_accelerate_keys_are_accelerates_config_keys() -> None:
    """Every top-level key accelerate's table writes is a field of accelerate 1.15's ClusterConfig
    (catalogues/accelerate-config.json); the sections it fills are its dict fields."""
    import json

    from generator.dialects.keyed import keyed_dialect

    catalogue = json.loads((ROOT / "generator/dialects/catalogues/accelerate-config.json").read_text())
    fields = {entry["key"]: entry["type"] for entry in catalogue["keys"]}
    table = keyed_dialect("accelerate")
    for key in table.keys:
        assert key.path[0] in fields, key.key
        if len(key.path) > 1:
            assert "dict" in fields[key.path[0]], key.key


def test_deepspeed_keys_are_in_deepspeeds_strict_sections() -> None:
    """Every key DeepSpeed's table writes inside a section DeepSpeed's models check strictly is
    one they define (the lists come from DeepSpeed 0.19.8's pydantic models)."""
    from generator.dialects.keyed import keyed_dialect

    table = keyed_dialect("deepspeed")
    strict = table.table["strict_sections"]
    for key in table.keys:
        section = ".".join(key.path[:-1])
        if section in strict:
            assert key.path[-1] in strict[section], key.key


def test_a_setting_the_framework_does_not_read_is_a_warning(write_spec) -> None:
    import yaml

    data = spec_dict(megatron={"fork": "bigscience"})
    result = runner.invoke(app, ["generate", str(write_spec(yaml.safe_dump(data))), "--target", "megatron"])
    assert result.exit_code == 0, result.output
    assert "GL221" in result.output and "megatron.fork 'bigscience' is ignored with framework megatron-lm" \
        in result.output


@pytest.mark.parametrize("release", megatron_releases())
def test_the_blockwise_fp8_capability_is_the_parsers_choice(release: str) -> None:
    """--fp8-recipe blockwise is a choice of the parsers from core_v0.14 (the catalogues): the
    fp8_blockwise capability GL226 reads says the same for every release."""
    d = dialect("megatron-lm", release)
    assert d.can("fp8_blockwise") == ("blockwise" in d.catalogue.get("--fp8-recipe").choices)
