"""framework torchtitan without torchtitan installed: the files a plan renders and what they
say, the refusals (located, exit 2), the dialect table against the presets and the schema, and
lint reading a hand-written torchtitan launch and its config module statically."""

from __future__ import annotations

import ast
import shlex
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from generator import presets
from generator.artifacts import render_all
from generator.cli import app
from generator.dialects import table
from generator.lint.engine import lint_texts, views
from generator.spec.schema import spec_schema

from .conftest import ROOT
from .helpers import plan_of

runner = CliRunner()
CORPUS = ROOT / "tests" / "lint_corpus" / "bad"


def _spec(**more) -> dict:
    base = {"name": "titan", "framework": "torchtitan",
            "cluster": {"nodes": 2, "gpus_per_node": 8, "gpu": "h100-80gb"},
            "model": {"preset": "llama3-8b"}, "parallelism": {"tp": 4, "dp_shard": 4},
            "batch": {"micro_batch_size": 2, "global_batch_size": 64},
            "training": {"train_iters": 100, "lr": 3.0e-4, "warmup": {"iters": 10}},
            "launch": {"launcher": "torchrun"}}
    return {**base, **more}


def _words(files: dict[str, str]) -> list[str]:
    return shlex.split(files["torchtitan_args.sh"].split("TORCHTITAN_ARGS=(", 1)[1].rsplit(")", 1)[0],
                       comments=True)


def _options(words: list[str]) -> dict[str, str]:
    return {w: words[k + 1] for k, w in enumerate(words[:-1]) if w.startswith("--") and
            not words[k + 1].startswith("--")}


def test_the_files_of_a_torchtitan_run(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, _spec())
    files = render_all(plan)
    assert sorted(files) == ["launch.sbatch", "plan.json", "torchtitan_args.sh", "torchtitan_config.py"]
    words = _words(files)
    options = _options(words)
    assert options["--module"] == "torchtitan_config" and options["--config"] == "gen_launch_run"
    assert (options["--parallelism.data_parallel_replicate_degree"], options["--parallelism.data_parallel_shard_degree"],
            options["--parallelism.tensor_parallel_degree"]) == ("1", "4", "4")
    # 16 GPUs / tp 4 = dp 4: global 64 = local 2 × accumulation 8 × dp 4
    assert (options["--training.local_batch_size"], options["--training.global_batch_size"]) == ("2", "64")
    assert plan.gradient_accumulation_steps == 8
    assert words[-1] == "activation-checkpoint:none"  # the subcommand last
    assert "--training.disable_cuda_graphs" not in words  # no pipelining, no experts
    assert 'source "${GEN_LAUNCH_DIR}/torchtitan_args.sh"' in files["launch.sbatch"]
    assert '-m torchtitan.train "${EXTRA_ARGS[@]}" "${TRAIN_ARGS[@]}"' in files["launch.sbatch"]


def test_the_config_module_builds_the_presets_flavor(tmp_path: Path) -> None:
    """Read as lint reads it (ast): the one model_registry call, with the table's flavor."""
    module = ast.parse(render_all(plan_of(tmp_path, _spec(model={"preset": "qwen3-32b"})))["torchtitan_config.py"])
    imports = [n.module for n in ast.walk(module) if isinstance(n, ast.ImportFrom)]
    calls = [n for n in ast.walk(module) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "model_registry"]
    assert imports == ["torchtitan.models.qwen3", "torchtitan.models.qwen3.config_registry"]
    assert [c.args[0].value for c in calls] == ["32B"]


def test_pipelining_carries_the_accumulation_as_pipeline_micro_batches(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, _spec(parallelism={"tp": 2, "pp": 2, "vpp": 2, "dp_shard": 4},
                                   batch={"micro_batch_size": 1, "gradient_accumulation_steps": 8}))
    words = _words(render_all(plan))
    options = _options(words)
    assert (options["--parallelism.pipeline_parallel_microbatch_size"], options["--training.local_batch_size"]) \
        == ("1", "8")  # 8 pipeline micro-batches a local batch; torchtitan accumulates once
    assert int(options["--training.global_batch_size"]) == 8 * plan.dp == plan.global_batch_size
    assert options["--parallelism.pipeline_parallel_schedule"] == "Interleaved1F1B"
    # torchtitan: ceil((32 layers + 1 embedding + 1 output) / 9) = 4 stages = pp 2 × vpp 2
    assert options["--parallelism.pipeline_parallel_layers_per_stage"] == "9"
    assert "--training.disable_cuda_graphs" in words


@pytest.mark.parametrize(("change", "words"), [
    ({"model": {"preset": "bloom-176b"}}, "bloom-176b has none. Use one of llama3-8b"),
    ({"model": {"num_layers": 8, "hidden_size": 1024, "num_attention_heads": 16, "vocab_size": 32000,
                "seq_length": 2048}}, "a model without a preset has none"),
    ({"model": {"preset": "llama3-8b", "num_layers": 16}}, "flavor 8B fixes the architecture; remove num_layers"),
    ({"training": {"train_iters": 100, "lr": 3.0e-4, "warmup": {"iters": 10}, "precision": "fp16"}},
     "not float16; use bf16"),
])
def test_what_torchtitan_cannot_build_is_refused_where_it_is_written(tmp_path: Path, change, words) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(_spec(**change), sort_keys=False))
    result = runner.invoke(app, ["generate", str(spec), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert f"{spec}:" in result.output and words in result.output
    assert "Traceback" not in result.output


def test_the_table_names_presets_and_identifiers() -> None:
    models = table("torchtitan")["models"]
    assert set(models) <= set(presets.models())
    for module, function, flavor in models.values():
        assert module.isidentifier() and function.isidentifier() and flavor.replace("-", "").isalnum()
    for entry in table("torchtitan")["fp8"].values():  # torchtitan_config.py writes these as Python names
        converters = [entry["linear"][0]] + ([entry["experts"][0]] if "experts" in entry else [])
        keywords = [*entry.get("experts", [None, {}])[1], *entry.get("moe_linear", {})]
        assert all(name.isidentifier() for name in converters + keywords), entry
    version = spec_schema()["properties"]["torchtitan"]["properties"]["version"]
    assert version["enum"] == list(table("torchtitan")["releases"])


def test_lint_reads_a_torchtitan_launch_and_its_config_module() -> None:
    files = {name: (CORPUS / name).read_text() for name in ("titan_70b.sbatch", "modules/titan_llama.py")}
    result = lint_texts(files)
    facts = views(next(run for run in result.runs if run.name == "titan_70b.sbatch"))[0]
    assert facts["framework"].value == "torchtitan"
    assert (facts["num_layers"].value, facts["hidden_size"].value) == (80, 8192)  # the 70B flavor, by ast
    assert facts["num_layers"].source == "modules/titan_llama.py:9:25"
    assert (facts["dp_replicate"].value, facts["dp_shard"].value, facts["tp"].value) == (2, 8, 4)
    assert facts["recompute"].value == "full"
    assert [f.code for f in result.findings if f.severity == "error"] == ["GL026"]


def test_a_config_module_that_names_no_flavor_is_a_note_not_a_guess() -> None:
    files = {"titan_70b.sbatch": (CORPUS / "titan_70b.sbatch").read_text(),
             "modules/titan_llama.py": "from torchtitan.models.llama3.config_registry import llama3_70b as run\n"}
    result = lint_texts(files)
    facts = views(next(run for run in result.runs if run.name == "titan_70b.sbatch"))[0]
    assert "num_layers" not in facts
    assert any("model_registry" in what for _, what in result.problems)


SHORT_FORM = """#!/bin/bash
#SBATCH --nodes=4
#SBATCH --gpus-per-node=8
head_node_ip=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun torchrun --nnodes 4 --nproc_per_node 8 --rdzv_id 101 --rdzv_backend c10d \\
  --rdzv_endpoint "$head_node_ip:29500" -m torchtitan.train --module llama3 --config {function} \\
  --parallelism.tensor_parallel_degree 8 --training.local_batch_size 1 --training.global_batch_size 32
"""


def test_torchtitans_own_config_function_gives_the_model(tmp_path: Path) -> None:
    """`--module llama3 --config llama3_70b` (torchtitan's run_train.sh form) names a function of
    torchtitan's own registry, not a file of the run: lint reads its flavor from the table's
    `functions` (the 70B's 80 layers, at the --config word) and import writes its preset, with the
    sequence length the function leaves unknown marked; a function the table does not know is a
    note, not a guess."""
    script = SHORT_FORM.format(function="llama3_70b")
    result = lint_texts({"run_train.sbatch": script})
    facts = views(next(run for run in result.runs))[0]
    assert (facts["preset"].value, facts["num_layers"].value) == ("llama3-70b", 80)
    assert facts["num_layers"].source.startswith("run_train.sbatch:6:")
    assert not result.problems
    (tmp_path / "run_train.sbatch").write_text(script)
    imported = CliRunner().invoke(app, ["import", str(tmp_path / "run_train.sbatch")])
    spec = yaml.safe_load(imported.stdout)
    assert spec["framework"] == "torchtitan" and spec["model"]["preset"] == "llama3-70b"
    assert "config function's value" in imported.stdout.split("seq_length:")[1].splitlines()[0]
    unknown = lint_texts({"run_train.sbatch": SHORT_FORM.format(function="llama3_debugmodel")})
    assert "preset" not in views(next(run for run in unknown.runs))[0]
    assert any("llama3_debugmodel is not one gen-launch knows" in what for _, what in unknown.problems)


def _fp8(tmp_path: Path, recipe: str | None, gpu: str = "h100-80gb", compile_: bool = True):
    training = {"train_iters": 100, "lr": 3.0e-4, "warmup": {"iters": 10}, "precision": "fp8",
                **({"fp8_recipe": recipe} if recipe else {})}
    return plan_of(tmp_path, _spec(training=training, torchtitan={"compile": compile_},
                                   cluster={"nodes": 2, "gpus_per_node": 8, "gpu": gpu}))


def test_fp8_is_a_converter_of_the_flavor_that_lint_reads_back(tmp_path: Path) -> None:
    files = render_all(_fp8(tmp_path, "rowwise"))
    module = ast.parse(files["torchtitan_config.py"])
    configs = [n for n in ast.walk(module) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "Config"]
    assert [(c.func.value.id, {k.arg: k.value.value for k in c.keywords}) for c in configs] == \
        [("Float8LinearConverter", {"recipe_name": "rowwise", "model_compile_enabled": True})]
    assert "--training.mixed_precision_param" not in _words(files)  # bf16 parameters: torchtitan's default
    facts = views(next(r for r in lint_texts(files).runs if r.name == "launch.sbatch"))[0]
    assert (facts["precision"].value, facts["fp8_recipe"].value) == ("fp8", "rowwise")
    mx = ast.parse(render_all(_fp8(tmp_path, "mxfp8", gpu="b200", compile_=False))["torchtitan_config.py"])
    calls = [n for n in ast.walk(mx) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "Config"]
    assert [(c.func.value.id, [k.arg for k in c.keywords]) for c in calls] == \
        [("MXFP8LinearConverter", ["model_compile_enabled"])]


def _moe_fp8(tmp_path: Path, recipe: str, gpu: str = "h100-80gb"):
    return plan_of(tmp_path, _spec(model={"preset": "qwen3-30b-a3b", "seq_length": 4096},
                                   parallelism={"dp_shard": 16, "ep": 8},
                                   batch={"micro_batch_size": 1, "global_batch_size": 64},
                                   cluster={"nodes": 2, "gpus_per_node": 8, "gpu": gpu},
                                   training={"train_iters": 100, "lr": 3.0e-4, "warmup": {"iters": 10},
                                             "precision": "fp8", "fp8_recipe": recipe}))


def _converters(text: str) -> list[tuple[str, dict]]:
    module = ast.parse(text)
    return [(c.func.value.id, {k.arg: ast.literal_eval(k.value) for k in c.keywords}) for c in ast.walk(module)
            if isinstance(c, ast.Call) and getattr(c.func, "attr", "") == "Config"]


def test_an_moe_flavor_in_fp8_also_converts_its_grouped_experts(tmp_path: Path) -> None:
    """The table's experts converter beside the linear one, which leaves the router's gate and the
    output head in bf16 (as torchtitan's deepseek_v3 FP8 functions); lint reads the run back as fp8."""
    files = render_all(_moe_fp8(tmp_path, "rowwise"))
    assert _converters(files["torchtitan_config.py"]) == [
        ("Float8LinearConverter", {"recipe_name": "rowwise", "filter_fqns": ["lm_head", "router.gate"],
                                   "model_compile_enabled": False}),
        ("Float8GroupedExpertsConverter", {"model_compile_enabled": False})]
    facts = views(next(r for r in lint_texts(files).runs if r.name == "launch.sbatch"))[0]
    assert (facts["precision"].value, facts["fp8_recipe"].value) == ("fp8", "rowwise")
    mx = render_all(_moe_fp8(tmp_path, "mxfp8", gpu="b200"))["torchtitan_config.py"]
    assert _converters(mx) == [
        ("MXFP8LinearConverter", {"fqns": ["attention", "shared_experts", "feed_forward"],
                                  "model_compile_enabled": False}),
        ("MXFP8GroupedExpertsConverter", {"recipe_name": "mxfp8_rceil", "pad_multiple": 128,
                                          "model_compile_enabled": False})]


def test_async_tp_is_the_tp_comm_overlap_and_needs_compile(tmp_path: Path) -> None:
    """parallelism.tp_comm_overlap is torchtitan's async TP (--compile.enable_async_tensor_parallel),
    which torchtitan's CompileConfig refuses without compile (GL241, where the spec says it);
    torchtitan does not ask for sequence parallelism with it (GL225's is Megatron-LM's)."""
    from generator.calculator.resolve import PlanError

    files = render_all(plan_of(tmp_path, _spec(parallelism={"tp": 4, "dp_shard": 4, "tp_comm_overlap": True},
                                               torchtitan={"compile": True})))
    assert "--compile.enable_async_tensor_parallel" in _words(files)
    assert "--parallelism.no_enable_sequence_parallel" in _words(files)
    with pytest.raises(PlanError, match=r"spec.yaml:\d+:\d+: GL241 tp_comm_overlap is torchtitan's async TP"):
        plan_of(tmp_path, _spec(parallelism={"tp": 4, "dp_shard": 4, "tp_comm_overlap": True}))


def test_an_moe_fp8_run_imports_to_a_spec_that_generates_the_same_files(tmp_path: Path) -> None:
    """import reads the converters' recipe and the flavor's model (not plan.json's derived values,
    which the flavor would refuse as changes), and the spec it writes generates the same run."""
    from generator.importer import import_paths

    first = tmp_path / "first"
    first.mkdir()
    files = render_all(_moe_fp8(tmp_path, "rowwise"))
    for name, text in files.items():
        (first / name).write_text(text, encoding="utf-8")
    imported = yaml.safe_load(import_paths([first]).text)
    assert (imported["training"]["precision"], imported["training"]["fp8_recipe"]) == ("fp8", "rowwise")
    imported["cluster"]["gpu"] = "h100-80gb"
    (tmp_path / "again").mkdir()
    again = render_all(plan_of(tmp_path / "again", imported))
    for name in ("torchtitan_args.sh", "torchtitan_config.py"):  # below the header's source line
        assert again[name].split("\n", 2)[2] == files[name].split("\n", 2)[2], name


def test_mxfp8_experts_on_hopper_are_refused_where_the_recipe_is_written(tmp_path: Path) -> None:
    from generator.calculator.resolve import PlanError

    with pytest.raises(PlanError, match=r"spec.yaml:\d+:\d+: GL226 fp8_recipe mxfp8 needs Blackwell's"):
        _moe_fp8(tmp_path, "mxfp8")


@pytest.mark.parametrize(("recipe", "gpu", "words"), [
    (None, "h100-80gb", r"fp8_recipe delayed is not one of torchtitan's \(rowwise, mxfp8\)"),
    ("mxfp8", "h100-80gb", "fp8_recipe mxfp8 needs Blackwell's"),
    ("rowwise", "a100-80gb", "precision fp8 needs FP8 tensor cores"),
])
def test_fp8_recipes_torchtitan_cannot_run_are_refused(tmp_path: Path, recipe, gpu: str, words: str) -> None:
    from generator.calculator.resolve import PlanError

    with pytest.raises(PlanError, match=words):
        _fp8(tmp_path, recipe, gpu=gpu)


def test_rowwise_is_not_transformer_engines(tmp_path: Path) -> None:
    from generator.calculator.resolve import PlanError

    from .helpers import spec_dict

    with pytest.raises(PlanError, match="fp8_recipe rowwise is torchtitan's"):
        plan_of(tmp_path, spec_dict(training={"train_iters": 100, "lr": 1.0e-4, "warmup": {"iters": 10},
                                              "precision": "fp8", "fp8_recipe": "rowwise"}))


def test_extra_words_come_before_the_subcommand(tmp_path: Path) -> None:
    """tyro gives the words after activation-checkpoint:X to the subcommand: launch.extra_args go
    first, TORCHTITAN_ARGS (its subcommand last) after them."""
    plan = plan_of(tmp_path, _spec(launch={"launcher": "torchrun", "extra_args": ["--metrics.log_freq", "5"]}))
    sbatch = render_all(plan)["launch.sbatch"]
    assert '-m torchtitan.train "${EXTRA_ARGS[@]}" "${TRAIN_ARGS[@]}"' in sbatch
    assert "EXTRA_ARGS=(--metrics.log_freq 5)" in sbatch


def test_extra_words_are_checked_against_torchtitans_options(tmp_path: Path) -> None:
    """tyro exits 2 on an option it does not know: launch.extra_args are held to the catalogue
    extracted from torchtitan 0.3.0's parser (GL219) and to what the plan writes (GL220)."""
    from generator.calculator.resolve import PlanError

    extra = ["--metrics.log_freq", "5", "--traning.steps", "3", "--training.seq_len", "4096"]
    with pytest.raises(PlanError) as exc:
        plan_of(tmp_path, _spec(launch={"launcher": "torchrun", "extra_args": extra}))
    message = str(exc.value)
    assert "GL219 launch.extra_args[2] --traning.steps is not an option of torchtitan 0.3; did you mean " \
           "--training.steps" in message
    assert "GL220 launch.extra_args[4] --training.seq_len repeats --training.seq_len" in message
    assert "--metrics.log_freq" not in message
