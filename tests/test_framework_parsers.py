"""Oracle: every generated Megatron argument list is accepted by the real parser of its dialect
(shared/oracles: Megatron-LM core_v0.16.1 and main, microsoft's and BigScience's
Megatron-DeepSpeed), which derives the plan's dp, micro batch, global batch and accumulation.
Samples, their stages and sweep points, and seeded random specs across the dialects."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from generator.artifacts import spec_files
from generator.calculator.resolve import PlanError
from generator.readers.bash.evaluate import UNKNOWN, join, read_script
from generator.run import load_spec

from .conftest import ROOT, SAMPLES
from .helpers import spec_dict
from .oracle.workers import TREES, ask

pytestmark = pytest.mark.oracle
CAPABILITY = {"a100-40gb": [8, 0], "a100-80gb": [8, 0], "h100-80gb": [9, 0], "h200-141gb": [9, 0],
              "b200": [10, 0], "gb200": [10, 0]}


def cases_of(files: dict[str, str], label: str) -> list[dict]:
    """One case per megatron_args.sh among a spec's files (stages and sweep points included)."""
    out = []
    for path, text in sorted(files.items()):
        if not path.endswith("megatron_args.sh"):
            continue
        plan = json.loads(files[path.replace("megatron_args.sh", "plan.json")])
        values = read_script(text, path).variables["MEGATRON_ARGS"].values
        argv = [join(v).text.replace(UNKNOWN, "/run") for v in values]
        dialect = plan["dialect"]
        key = (dialect["name"], dialect["release"])
        out.append({"label": f"{label}:{path}", "tree": TREES.get(key), "dialect": dialect["title"],
                    "argv": argv, "world_size": plan["cluster"]["world_size"],
                    "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"},
                    "capability": CAPABILITY.get(plan["cluster"]["gpu"], [9, 0]),
                    "want": {"dp": plan["parallelism"]["dp"], "micro": plan["batch"]["micro_batch_size"],
                             "global": plan["batch"]["global_batch_size"],
                             "accumulation": plan["batch"]["gradient_accumulation_steps"]},
                    "ramp": plan["batch"]["changing"] is not None})
    return out


def random_specs(count: int, seed: int = 13) -> list[dict]:
    """Seeded specs across the dialects and their features (ones that do not resolve dropped)."""
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        framework = rng.choice(["megatron-lm", "megatron-deepspeed"])
        fork = rng.choice(["microsoft", "bigscience"])
        tp, pp = rng.choice([1, 2, 4]), rng.choice([1, 2, 4])
        heads = 16
        model = {"num_layers": 8, "hidden_size": 1024, "num_attention_heads": heads,
                 "vocab_size": 32000, "seq_length": rng.choice([1024, 2048])}
        if framework == "megatron-lm" or fork == "microsoft":
            model.update(position_embedding=rng.choice(["rope", "learned_absolute"]),
                         normalization=rng.choice(["rmsnorm", "layernorm"]),
                         activation=rng.choice(["swiglu", "gelu"]),
                         num_query_groups=rng.choice([16, 4]),
                         tie_embeddings=rng.choice([True, False]))
        else:
            model.update(position_embedding=rng.choice(["alibi", "rope", "learned_absolute"]),
                         activation=rng.choice(["swiglu", "gelu"]))
        training = {"train_iters": 1000, "lr": 1.0e-4, "warmup": {"iters": 10},
                    "precision": rng.choice(["bf16", "fp16"]),
                    "recompute": rng.choice(["none", "full"] + (["selective"] if fork == "microsoft"
                                                                or framework == "megatron-lm" else []))}
        parallelism = {"tp": tp, "pp": pp}
        if framework == "megatron-deepspeed":
            parallelism["zero_stage"] = rng.choice([0, 1])
        elif rng.random() < 0.5:
            parallelism["distributed_optimizer"] = True
        if tp > 1 and (framework == "megatron-lm" or fork == "microsoft"):
            parallelism["sequence_parallel"] = rng.random() < 0.5
        data = spec_dict(name=f"r{len(out)}", framework=framework, model=model,
                         cluster={"nodes": rng.choice([1, 2, 4]), "gpus_per_node": 8, "gpu": "h100-80gb"},
                         parallelism=parallelism,
                         batch={"micro_batch_size": rng.choice([1, 2, 4]),
                                "gradient_accumulation_steps": rng.choice([1, 3, 8])},
                         training=training,
                         megatron={"fork": fork} if framework == "megatron-deepspeed" else {})
        out.append(data)
    return out


def run_parsers(trees: dict[str, Path], cases: list[dict]) -> list[dict]:
    """Each case's result from the parser of its tree (None for a case no tree judges)."""
    results: dict[int, dict] = {}
    for tree in sorted({c["tree"] for c in cases if c["tree"]}):
        batch = [(k, c) for k, c in enumerate(cases) if c["tree"] == tree]
        got = ask(trees[tree], "parse", [c for _, c in batch])
        results.update({k: r for (k, _), r in zip(batch, got, strict=True)})
    return [results.get(k) for k in range(len(cases))]


def check(cases: list[dict], results: list[dict]) -> None:
    failures = []
    for case, result in zip(cases, results, strict=True):
        if result is None:
            continue
        if not result["ok"]:
            failures.append(f"{case['label']} ({case['dialect']}): {result['error']}")
            continue
        want = dict(case["want"])
        if case["ramp"]:  # a changing batch starts below the plan's final one
            want.pop("global")
            want.pop("accumulation")
        got = {k: result[k] for k in want}
        if got != want:
            failures.append(f"{case['label']}: parser derived {got}, plan has {want}")
    assert not failures, "\n".join(failures)


def test_every_sample_is_accepted_by_its_frameworks_parser(trees, tmp_path: Path) -> None:
    cases = []
    for sample in SAMPLES:
        files, _, _ = spec_files(load_spec(sample))
        cases += cases_of(files, sample.stem)
    judged = {c["dialect"] for c in cases if c["tree"]}
    assert {"Megatron-LM latest", "Megatron-DeepSpeed (microsoft)",
            "Megatron-DeepSpeed (bigscience, BLOOM's fork)"} <= judged, judged
    assert sum(1 for c in cases if c["tree"]) >= 12  # stages and sweep points too
    check(cases, run_parsers(trees, cases))


def test_random_specs_are_accepted_by_their_parsers(trees, tmp_path: Path) -> None:
    import yaml

    cases = []
    refused = 0
    for k, data in enumerate(random_specs(60)):
        for version in (["core_v0.16", "latest"] if data["framework"] == "megatron-lm" else [None]):
            if version:
                data = {**data, "megatron": {"version": version}}
            path = tmp_path / f"r{k}-{version}.yaml"
            path.write_text(yaml.safe_dump(data))
            try:
                files, _, _ = spec_files(load_spec(path))
            except PlanError:
                refused += 1
                continue
            cases += cases_of(files, path.stem)
    assert len(cases) >= 60 and refused < len(cases), (len(cases), refused)
    dialects = {c["dialect"] for c in cases}
    assert len(dialects) == 4, dialects
    check(cases, run_parsers(trees, cases))


def test_moe_runs_are_accepted_by_their_parsers(trees, tmp_path: Path) -> None:
    """MoE in Megatron-LM and in microsoft's fork (--num-experts/--topk/--moe-expert-parallel-size,
    experts tensor-parallel only with --enable-expert-tensor-parallelism, --create-moe-param-group
    with ZeRO)."""
    import yaml

    cases = []
    for k, (framework, parallelism) in enumerate([
            # (biased experts: expert tp 1, GL233)
            ("megatron-lm", {"tp": 2, "pp": 1, "ep": 4, "etp": 1}),
            ("megatron-deepspeed", {"tp": 2, "pp": 1, "ep": 2, "zero_stage": 1}),
            ("megatron-deepspeed", {"tp": 2, "pp": 1, "ep": 2, "etp": 1, "zero_stage": 1})]):
        data = spec_dict(name=f"moe{k}", framework=framework, parallelism=parallelism,
                         model={"num_experts": 8, "moe_top_k": 2})
        path = tmp_path / f"moe{k}.yaml"
        path.write_text(yaml.safe_dump(data))
        cases += cases_of(spec_files(load_spec(path))[0], path.stem)
    assert [c["tree"] is not None for c in cases] == [True, True, True]
    # microsoft's fork with ZeRO: the experts' own param groups (DeepSpeed's ZeRO asks for them)
    assert ["--create-moe-param-group" in c["argv"] for c in cases] == [False, True, True]
    check(cases, run_parsers(trees, cases))


def test_the_parsers_refuse_what_the_other_fork_writes(trees) -> None:
    """The oracle can fail: each fork's arguments are refused by the other fork's parser."""
    cases = []
    for sample in ("bloom-176b-rampup", "seed-pretrain-256"):
        files, _, _ = spec_files(load_spec(ROOT / "samples" / f"{sample}.yaml"))
        cases += cases_of(files, sample)
    swapped = {"megatron-deepspeed-bigscience-8387ae17": "megatron-deepspeed-microsoft-f4157bea",
               "megatron-deepspeed-microsoft-f4157bea": "megatron-deepspeed-bigscience-8387ae17"}
    for case in cases:
        case["tree"] = swapped[case["tree"]]
    results = run_parsers(trees, cases)
    assert [r["ok"] for r in results] == [False, False], results
    assert "--position-embedding-type" in results[0]["error"]  # bloom's ALiBi on microsoft's


def test_the_catalogue_script_reproduces_the_catalogue(trees) -> None:
    """scripts/extract_flags.py, run on the core_v0.16.1 tree, gives the catalogue the project
    keeps (every option, its action and nargs)."""
    tree = trees["megatron-lm-core_v0.16.1"]
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "extract_flags.py"), str(tree), "x"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    fresh = {tuple(f["options"]): (f["action"], f["nargs"]) for f in json.loads(proc.stdout)["flags"]}
    kept_file = ROOT / "generator" / "dialects" / "catalogues" / "megatron-lm-core_v0.16.1.json"
    kept = {tuple(f["options"]): (f["action"], f["nargs"]) for f in json.loads(kept_file.read_text())["flags"]}
    assert fresh == kept


# what the run reads and writes, per dialect: (spec sections, {the parser's argument dest: value})
_RUN_IO_COMMON = {
    "data": {"paths": [{"path": "/data/web_text_document", "weight": 0.7},
                       {"path": "/data/code_text_document", "weight": 0.3}], "split": "990,9,1"},
    "checkpoint": {"dir": "/ckpt/run", "interval": 500},
    "logging": {"tensorboard_dir": "/tb/run"},
    "eval": {"interval": 1000, "iters": 20},
}
_RUN_IO_NAMESPACE = {"data_path": ["0.7", "/data/web_text_document", "0.3", "/data/code_text_document"],
                     "split": "990,9,1", "save": "/ckpt/run", "load": "/ckpt/run", "save_interval": 500,
                     "tensorboard_dir": "/tb/run", "eval_interval": 1000, "eval_iters": 20}
RUN_IO_CASES = [
    ("megatron-lm", "core_v0.16",
     {"tokenizer": {"type": "HuggingFaceTokenizer", "model": "meta-llama/Meta-Llama-3-8B"},
      "data": {"cache_path": "/scratch/cache"},
      "checkpoint": {"format": "torch_dist", "async_save": True, "reshardable": True, "schedule": "spec"},
      "logging": {"wandb_project": "llama3-pretrain", "wandb_run_name": "run-1", "throughput": True}},
     {"tokenizer_type": "HuggingFaceTokenizer", "tokenizer_model": "meta-llama/Meta-Llama-3-8B",
      "data_cache_path": "/scratch/cache", "ckpt_format": "torch_dist", "async_save": True,
      "dist_ckpt_optim_fully_reshardable": True, "override_opt_param_scheduler": True,
      "wandb_project": "llama3-pretrain", "wandb_exp_name": "run-1", "log_throughput": True}),
    ("megatron-lm", "latest",
     {"tokenizer": {"type": "GPT2BPETokenizer", "vocab_file": "/tok/gpt2-vocab.json",
                    "merge_file": "/tok/gpt2-merges.txt"},
      "checkpoint": {"finetune_from": "/ckpt/base", "schedule": "checkpoint"}},
     {"tokenizer_type": "GPT2BPETokenizer", "vocab_file": "/tok/gpt2-vocab.json",
      "use_checkpoint_opt_param_scheduler": True,
      "merge_file": "/tok/gpt2-merges.txt", "load": "/ckpt/base", "finetune": True, "no_load_optim": True,
      "no_load_rng": True}),
    ("microsoft", None,
     {"tokenizer": {"type": "HuggingFaceTokenizer", "model": "meta-llama/Llama-2-7b-hf"},
      "logging": {"wandb_project": "llama2"}, "checkpoint": {"universal": True, "schedule": "spec"}},
     {"tokenizer_type": "HFTokenizer", "tokenizer_model": "meta-llama/Llama-2-7b-hf",
      "universal_checkpoint": True, "override_opt_param_scheduler": True,
      "wandb_project": "llama2", "wandb_exp_name": "io-microsoft"}),
    ("bigscience", None,
     {"tokenizer": {"type": "HuggingFaceTokenizer", "model": "bigscience/tokenizer"},
      "checkpoint": {"universal": True, "schedule": "checkpoint"}},
     {"tokenizer_type": "PretrainedFromHF", "tokenizer_name_or_path": "bigscience/tokenizer",
      "universal_checkpoint": True, "use_checkpoint_lr_scheduler": True}),
]


def test_data_tokenizer_checkpoints_logging_and_eval_reach_each_parsers_namespace(trees, tmp_path: Path) -> None:
    """The spec's data, tokenizer, checkpoint, logging and eval sections, rendered for each
    dialect, are accepted by its own parser and validate_args, and its namespace holds the spec's
    values (spelled as that fork names them: the Hugging Face tokenizer is HFTokenizer in
    microsoft's fork and PretrainedFromHF in BLOOM's)."""
    import yaml

    cases = []
    for dialect, version, sections, namespace in RUN_IO_CASES:
        name = f"io-{dialect}"
        data = spec_dict(name=name, batch={"micro_batch_size": 1, "gradient_accumulation_steps": 4})
        data["framework"] = "megatron-lm" if dialect == "megatron-lm" else "megatron-deepspeed"
        data["megatron"] = {"version": version} if version else {"fork": dialect}
        for section in {*_RUN_IO_COMMON, *sections}:
            data[section] = {**_RUN_IO_COMMON.get(section, {}), **sections.get(section, {})}
        if "finetune_from" in data["checkpoint"]:
            data["checkpoint"]["dir"] = "/ckpt/run"
        path = tmp_path / f"{name}-{version}.yaml"
        path.write_text(yaml.safe_dump(data))
        (case,) = cases_of(spec_files(load_spec(path))[0], path.stem)
        want = {**_RUN_IO_NAMESPACE, **namespace}
        case["show"] = sorted(want)
        case["namespace"] = want
        cases.append(case)
    failures = []
    for case, result in zip(cases, run_parsers(trees, cases), strict=True):
        if not result["ok"]:
            failures.append(f"{case['label']}: {result['error']}")
            continue
        for dest, value in case["namespace"].items():
            if result["shown"].get(dest) != value:
                failures.append(f"{case['label']}: args.{dest} = {result['shown'].get(dest)!r}, the spec gives {value!r}")
    assert not failures, "\n".join(failures)


def test_the_embedding_and_loss_counted_in_the_pipeline_split_are_what_megatron_accepts(trees, tmp_path: Path) -> None:
    """6 layers on pp 4 divide only with the embedding and the loss counted as layers (6 + 2 = 8):
    Megatron-LM's own validate_args (core_v0.16.1 and main) accepts the generated arguments with
    both flags, and refuses the same layout without them, as GL009 does. (With virtual stages
    Megatron checks this only when it builds the model.)"""
    import yaml

    data = spec_dict(name="split", model={"num_layers": 6}, cluster={"nodes": 1, "gpus_per_node": 8, "gpu": "h100-80gb"},
                     parallelism={"tp": 2, "pp": 4, "account_for_embedding_in_pipeline_split": True,
                                  "account_for_loss_in_pipeline_split": True},
                     batch={"micro_batch_size": 1, "gradient_accumulation_steps": 4})
    cases = []
    for version in ("core_v0.16", "latest"):
        path = tmp_path / f"split-{version}.yaml"
        path.write_text(yaml.safe_dump({**data, "megatron": {"version": version}}))
        (case,) = cases_of(spec_files(load_spec(path))[0], path.stem)
        case["show"] = ["account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"]
        without = dict(case, label=case["label"] + " without the flags",
                       argv=[w for w in case["argv"] if "pipeline-split" not in w])
        cases += [case, without]
    results = run_parsers(trees, cases)
    for case, result in zip(cases, results, strict=True):
        if case["label"].endswith("without the flags"):
            assert not result["ok"] and "divisible" in result["error"], (case["label"], result)
        else:
            assert result["ok"], (case["label"], result)
            assert result["shown"] == {"account_for_embedding_in_pipeline_split": True,
                                       "account_for_loss_in_pipeline_split": True}
    plain = dict(data, parallelism={"tp": 2, "pp": 4})
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump(plain))
    with pytest.raises(PlanError, match="GL009 num_layers 6 is not divisible by pp 4"):
        spec_files(load_spec(path))


def test_bf16_optimizer_state_reaches_megatrons_namespace(trees, tmp_path: Path) -> None:
    """training.optimizer_states / main_grads bf16: core_v0.16.1's and main's own parser accept
    the precision-aware optimizer's arguments and hold bf16 for both moments and the gradients."""
    import yaml

    cases = []
    for version in ("core_v0.16", "latest"):
        data = spec_dict(name=f"pao-{version}", megatron={"version": version},
                         parallelism={"tp": 2, "pp": 1, "distributed_optimizer": True},
                         training={"optimizer_states": "bf16", "main_grads": "bf16", "precision": "bf16"})
        path = tmp_path / f"pao-{version}.yaml"
        path.write_text(yaml.safe_dump(data))
        (case,) = cases_of(spec_files(load_spec(path))[0], path.stem)
        case["show"] = ["use_precision_aware_optimizer", "exp_avg_dtype", "exp_avg_sq_dtype", "main_grads_dtype"]
        cases.append(case)
    for case, result in zip(cases, run_parsers(trees, cases), strict=True):
        assert result["ok"], (case["label"], result)
        shown = result["shown"]
        assert shown["use_precision_aware_optimizer"] is True, shown
        assert {str(shown[k]).rsplit(".", 1)[-1] for k in ("exp_avg_dtype", "exp_avg_sq_dtype", "main_grads_dtype")} \
            == {"bfloat16"}, shown


def test_tp_comm_overlap_is_what_megatron_accepts_and_refuses(trees, tmp_path: Path) -> None:
    """parallelism.tp_comm_overlap writes --tp-comm-overlap, which core_v0.16.1's and main's own
    validate_args accept with sequence parallelism and refuse without it, exactly as GL225 says;
    the forks' parsers do not define it, so a Megatron-DeepSpeed spec is refused (GL218)."""
    import yaml

    cases = []
    for version in ("core_v0.16", "latest"):
        data = spec_dict(name=f"tpo-{version}", megatron={"version": version},
                         parallelism={"tp": 2, "pp": 1, "sequence_parallel": True, "tp_comm_overlap": True})
        path = tmp_path / f"tpo-{version}.yaml"
        path.write_text(yaml.safe_dump(data))
        (case,) = cases_of(spec_files(load_spec(path))[0], path.stem)
        case["show"] = ["tp_comm_overlap", "sequence_parallel"]
        without = dict(case, label=case["label"] + " without --sequence-parallel",
                       argv=[w for w in case["argv"] if w != "--sequence-parallel"])
        cases += [case, without]
    for case, result in zip(cases, run_parsers(trees, cases), strict=True):
        if case["label"].endswith("without --sequence-parallel"):
            assert not result["ok"] and "sequence parallelism" in result["error"], (case["label"], result)
        else:
            assert result["ok"], (case["label"], result)
            assert result["shown"] == {"tp_comm_overlap": True, "sequence_parallel": True}
    bad = spec_dict(parallelism={"tp": 2, "pp": 1, "tp_comm_overlap": True})
    path = tmp_path / "no-sp.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(PlanError, match="GL225 tp_comm_overlap needs sequence parallelism"):
        spec_files(load_spec(path))
    fork = spec_dict(framework="megatron-deepspeed", megatron={"fork": "microsoft"},
                     parallelism={"tp": 2, "pp": 1, "sequence_parallel": True, "tp_comm_overlap": True})
    path = tmp_path / "fork.yaml"
    path.write_text(yaml.safe_dump(fork))
    with pytest.raises(PlanError, match="GL218"):
        spec_files(load_spec(path))


def test_the_fp8_recipes_reach_megatrons_namespace(trees, tmp_path: Path) -> None:
    """training.fp8_recipe: core_v0.16.1's and main's own parsers accept --fp8-recipe tensorwise,
    blockwise and mxfp8 (on a Blackwell preset) and hold the recipe; delayed is the parser's
    default, written by no flag and held as delayed too."""
    import yaml

    cases = []
    for version in ("core_v0.16", "latest"):
        for recipe, gpu in (("delayed", "h100-80gb"), ("tensorwise", "h100-80gb"), ("blockwise", "h100-80gb"),
                            ("mxfp8", "b200")):
            data = spec_dict(name=f"fp8-{recipe}-{version}", megatron={"version": version},
                             cluster={"nodes": 2, "gpus_per_node": 8, "gpu": gpu},
                             parallelism={"tp": 2, "pp": 1, "distributed_optimizer": True},
                             training={"precision": "fp8", "fp8_recipe": recipe})
            path = tmp_path / f"{data['name']}.yaml"
            path.write_text(yaml.safe_dump(data))
            (case,) = cases_of(spec_files(load_spec(path))[0], path.stem)
            assert ("--fp8-recipe" in case["argv"]) == (recipe != "delayed")
            case["show"] = ["fp8_recipe", "fp8"]
            cases.append((recipe, case))
    results = run_parsers(trees, [case for _, case in cases])
    for (recipe, case), result in zip(cases, results, strict=True):
        assert result["ok"], (case["label"], result)
        assert str(result["shown"]["fp8_recipe"]).rsplit(".", 1)[-1] == recipe, result["shown"]
        assert result["shown"]["fp8"] == "hybrid"
    hopper = spec_dict(training={"precision": "fp8", "fp8_recipe": "mxfp8"})
    path = tmp_path / "mxfp8-hopper.yaml"
    path.write_text(yaml.safe_dump(hopper))
    with pytest.raises(PlanError, match="GL226 fp8_recipe mxfp8 needs Blackwell"):
        spec_files(load_spec(path))


def test_the_gradient_reduce_dtype_and_param_gather_overlap_are_megatrons(trees, tmp_path: Path) -> None:
    """What the step-time model counts for the data-parallel reduction is what Megatron-LM's own
    validate_args (core_v0.16.1 and main) makes of the generated arguments: gradients reduced in
    fp32 (4 bytes, estimate.memory.gradient_bytes) exactly where it sets
    accumulate_allreduce_grads_in_fp32 (bf16 and fp8 with fp32 main grads, not fp16 or bf16 main
    grads), the parameter all-gather overlapped with the forward exactly where
    overlap_param_gather is on (the distributed optimizer), and the pipeline sends overlapped
    with the chunks' compute exactly where overlap_p2p_comm stays on (an interleaved schedule)."""
    import yaml

    from generator.estimate.memory import gradient_bytes
    from generator.estimate.plan import layout_of
    from generator.run import resolve_run

    cases = []
    for version in ("core_v0.16", "latest"):
        for precision, main_grads, optimizer in (("bf16", "fp32", True), ("bf16", "fp32", False),
                                                 ("fp16", "fp32", True), ("bf16", "bf16", True),
                                                 ("fp8", "fp32", True)):
            data = spec_dict(name=f"grads-{precision}-{main_grads}-{optimizer}-{version}",
                             megatron={"version": version},
                             parallelism={"tp": 2, "pp": 1, "distributed_optimizer": optimizer},
                             training={"precision": precision, "main_grads": main_grads})
            path = tmp_path / f"{data['name']}.yaml"
            path.write_text(yaml.safe_dump(data))
            spec = load_spec(path)
            (case,) = cases_of(spec_files(spec)[0], path.stem)
            case["show"] = ["accumulate_allreduce_grads_in_fp32", "overlap_param_gather", "overlap_grad_reduce"]
            cases.append((layout_of(resolve_run(spec)[0]), case))
        for vpp in (1, 2):  # the pipeline sends: overlapped where the schedule is interleaved
            data = spec_dict(name=f"p2p-vpp{vpp}-{version}", megatron={"version": version},
                             parallelism={"tp": 2, "pp": 2, "vpp": vpp, "distributed_optimizer": True})
            path = tmp_path / f"{data['name']}.yaml"
            path.write_text(yaml.safe_dump(data))
            spec = load_spec(path)
            (case,) = cases_of(spec_files(spec)[0], path.stem)
            case["show"] = ["accumulate_allreduce_grads_in_fp32", "overlap_param_gather", "overlap_grad_reduce",
                            "overlap_p2p_comm"]
            cases.append((layout_of(resolve_run(spec)[0]), case))
    results = run_parsers(trees, [case for _, case in cases])
    for (layout, case), result in zip(cases, results, strict=True):
        assert result["ok"], (case["label"], result)
        shown = result["shown"]
        assert (gradient_bytes(layout) == 4) == shown["accumulate_allreduce_grads_in_fp32"], (case["label"], shown)
        assert (layout.sharding == "distributed_optimizer") == shown["overlap_param_gather"], (case["label"], shown)
        assert layout.overlap_grad_reduce == shown["overlap_grad_reduce"] is True
        if "overlap_p2p_comm" in shown:
            assert (layout.overlap_p2p_comm and layout.vpp > 1) == shown["overlap_p2p_comm"], (case["label"], shown)
    assert sum("overlap_p2p_comm" in case["show"] for _, case in cases) == 4


def test_the_flops_per_step_are_megatrons_count_of_the_model_built(trees, tmp_path: Path) -> None:
    """The step-time model's FLOPs are Megatron-LM's own count (training.py
    num_floating_point_operations, what its --log-throughput divides by, in core_v0.16.1 and main,
    the vocabulary padded by its own tokenizer code) for the arguments gen-launch writes, but for
    the attention core, which Megatron-LM halves for the causal mask and the model counts whole:
    a dense GQA model, an MoE model, and one with query heads × kv channels wider than the hidden
    size, routed experts narrower than the dense FFN, a shared expert and a dense first layer
    (Qwen3- and DeepSeek-style) — where the model once counted the dense FFN for every expert;
    multi-latent attention with and without a query latent and a multi-token prediction layer
    (DeepSeek-V3- and V2-Lite-like, and the deepseek-v3 preset), Qwen3-30B-A3B, and gpt-oss's
    attention sinks, sliding windows and gated quick-GELU (main only: core_v0.16 has no YaRN
    positions for it), where Megatron-LM counts full attention in the sliding layers and the
    gated quick-GELU as an ungated MLP (the model's FLOPs follow it). Both releases count these
    models alike (the same formula; main splits the core term out for packed sequences)."""
    import yaml

    from generator.estimate.params import Shape
    from generator.estimate.performance import forward_flops_per_token, step_flops
    from generator.run import resolve_run

    small = {"preset": None, "num_layers": 8, "hidden_size": 1024, "num_attention_heads": 16,
             "vocab_size": 32000, "seq_length": 4096, "max_position_embeddings": 4096,
             "normalization": "rmsnorm", "position_embedding": "rope", "tie_embeddings": False,
             "linear_bias": False}
    deepseek = {**small, "activation": "swiglu", "ffn_hidden_size": 2816, "multi_latent_attention": True,
                "qk_layernorm": True, "kv_lora_rank": 256, "qk_head_dim": 64, "qk_pos_emb_head_dim": 32,
                "v_head_dim": 64, "num_experts": 16, "moe_ffn_hidden_size": 384,
                "moe_shared_expert_intermediate_size": 384}
    models = {"dense": {"preset": "llama3-8b", "seq_length": 4096},
              "moe": {"preset": "mixtral-8x7b", "seq_length": 4096},
              "wide-heads-narrow-experts": {
                  **small, "num_query_groups": 4, "kv_channels": 128, "ffn_hidden_size": 3072,
                  "activation": "swiglu", "qk_layernorm": True, "num_experts": 16, "moe_top_k": 4,
                  "moe_ffn_hidden_size": 512, "moe_shared_expert_intermediate_size": 1024,
                  "moe_dense_layers": 1},
              "deepseek-v3-like": {
                  **deepseek, "q_lora_rank": 384, "moe_top_k": 4, "moe_dense_layers": 2,
                  "moe_router_score_function": "sigmoid", "moe_router_expert_bias": True,
                  "moe_router_num_groups": 4, "moe_router_group_topk": 2,
                  "moe_router_topk_scaling_factor": 2.5, "mtp_num_layers": 1},
              "deepseek-v2-lite-like": {**deepseek, "q_lora_rank": None, "moe_top_k": 6, "moe_dense_layers": 1,
                                        "moe_router_pre_softmax": True},
              "deepseek-v3": {"preset": "deepseek-v3", "seq_length": 4096},
              "qwen3-30b-a3b": {"preset": "qwen3-30b-a3b", "seq_length": 4096},
              "gpt-oss-like": {
                  **small, "linear_bias": True, "num_query_groups": 4, "kv_channels": 64, "ffn_hidden_size": 1024,
                  "activation": "quick_geglu", "glu_linear_offset": 1.0, "activation_clamp": 7.0,
                  "softmax_type": "learnable", "window_size": [128, 0], "window_attn_skip_freq": 2,
                  "rope_scaling": {"type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096,
                                   "truncate": False},
                  "num_experts": 8, "moe_top_k": 4}}
    latest_only = {"gpt-oss-like"}
    cases, shapes = [], []
    for version in ("core_v0.16", "latest"):
        for name, model in models.items():
            if version != "latest" and name in latest_only:
                continue
            moe = "num_experts" in model or model.get("preset") in ("mixtral-8x7b", "deepseek-v3", "qwen3-30b-a3b")
            data = spec_dict(name=f"flops-{name}-{version}", megatron={"version": version}, model=model,
                             parallelism={"tp": 2, "pp": 1, "ep": 4 if moe else 1, "distributed_optimizer": True,
                                          **({"etp": 1} if moe else {})})
            path = tmp_path / f"{data['name']}.yaml"
            path.write_text(yaml.safe_dump(data))
            spec = load_spec(path)
            plan = resolve_run(spec)[0]
            (case,) = cases_of(spec_files(spec)[0], path.stem)
            case["flops_vocab"] = plan.model.vocab_size
            cases.append(case)
            shapes.append((Shape.of(plan.model, plan.padded_vocab_size), plan.global_batch_size))
    results = run_parsers(trees, cases)
    for case, result, (shape, batch) in zip(cases, results, shapes, strict=True):
        assert result["ok"], (case["label"], result)
        ours = step_flops(shape, batch, "none")[0]
        core = forward_flops_per_token(shape)[1]
        causal_half = 3 * core / 2 * batch * shape.seq_length
        assert ours - causal_half == pytest.approx(result["flops"], rel=1e-12), case["label"]
