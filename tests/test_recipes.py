"""The recipes of docs/architecture.md, performed on a scratch copy of the package: adding a flag
is a schema field and a table entry, adding a Megatron fork is a record and a table, and a
deliberate typo in either is refused loudly (never a flag or a fork silently dropped)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT
from .helpers import spec_dict

FLAG = "--moe-input-jitter-eps"  # defined by every Megatron-LM release's parser
FIELD = "moe_input_jitter_eps"
MOE = {"num_layers": 8, "hidden_size": 1024, "num_attention_heads": 16, "vocab_size": 32000,
       "seq_length": 2048, "num_experts": 8, "moe_top_k": 2, "linear_bias": False}  # (biased experts: GL233)


def _scratch(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    for folder in ("generator", "schemas", "templates", "docs"):
        shutil.copytree(ROOT / folder, tree / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return tree


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{path}: {old!r} is not there once"
    path.write_text(text.replace(old, new), encoding="utf-8")


def _run(tree: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree), "GEN_LAUNCH_CACHE": str(tree / ".cache")}
    env.pop("GEN_LAUNCH_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "generator", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _spec(tmp_path: Path, name: str, data: dict) -> str:
    (tmp_path / name).write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return name


def _add_schema_field(tree: Path, name: str = FIELD) -> None:
    path = tree / "schemas" / "spec.schema.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    schema["properties"]["model"]["properties"][name] = {
        "type": "number", "exclusiveMinimum": 0,
        "description": "Noise added to the router's input (Switch Transformer's jitter)."}
    path.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _add_table_entry(tree: Path, spec: str = f"model.{FIELD}") -> None:
    anchor = "    - {flag: --moe-router-topk, value: moe_top_k, type: int, spec: model.moe_top_k}\n"
    _edit(tree / "generator" / "dialects" / "megatron.yaml", anchor,
          anchor + f"    - {{flag: {FLAG}, spec: {spec}, type: float}}\n")


def test_adding_a_flag_is_a_schema_field_and_a_table_entry(tmp_path: Path) -> None:
    tree = _scratch(tmp_path)
    _add_schema_field(tree)
    _add_table_entry(tree)
    moe = {**MOE, FIELD: 0.01}
    given = _spec(tmp_path, "moe.yaml", spec_dict(model=moe))
    done = _run(tree, given, "--target", "megatron", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{FLAG} 0.01" in done.stdout  # written, and read back by lint before it was
    # not given: the parser's default, no flag
    plain = _run(tree, _spec(tmp_path, "plain.yaml", spec_dict(model=MOE)), "--target", "megatron",
                 cwd=tmp_path)
    assert plain.returncode == 0 and FLAG not in plain.stdout, plain.stderr
    # a dialect whose table has no entry for it refuses it where it is given, naming who can
    fork = spec_dict(framework="megatron-deepspeed", model=moe, parallelism={"tp": 2, "pp": 1, "ep": 2},
                     batch={"micro_batch_size": 2, "gradient_accumulation_steps": 4})
    refused = _run(tree, _spec(tmp_path, "fork.yaml", fork), "--target", "megatron", cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout
    line = next(n for n, text in enumerate((tmp_path / "fork.yaml").read_text().splitlines(), 1)
                if text.strip().startswith(f"{FIELD}:"))
    assert f"fork.yaml:{line}:" in refused.stderr
    assert f"GL218 model.{FIELD} 0.01 cannot be expressed in Megatron-DeepSpeed (microsoft)" in refused.stderr
    assert "use Megatron-LM latest (framework: megatron-lm)" in refused.stderr
    assert "internal error" not in refused.stderr


@pytest.mark.parametrize("typo", ["table", "schema"])
def test_a_typo_in_the_flags_field_is_refused_not_dropped(tmp_path: Path, typo: str) -> None:
    tree = _scratch(tmp_path)
    _add_schema_field(tree, FIELD if typo == "table" else FIELD.replace("jitter", "jiter"))
    _add_table_entry(tree, f"model.{FIELD.replace('jitter', 'jiter')}" if typo == "table" else f"model.{FIELD}")
    done = _run(tree, _spec(tmp_path, "moe.yaml", spec_dict(model=MOE)), "--target", "megatron", cwd=tmp_path)
    assert done.returncode != 0
    assert "TableError" in done.stderr and "which schemas/spec.schema.json does not define" in done.stderr


def _add_fork(tree: Path, record_name: str = "megatron-deepspeed/acme",
              table_name: str = "megatron-deepspeed/acme") -> None:
    """Acme's fork: microsoft's parser without grouped-query attention (a record and a table)."""
    last = '"!--recompute-granularity"),)),\n)}\n'  # the end of ARGUMENT_DIALECTS
    _edit(tree / "generator" / "frameworks.py", last,
          '"!--recompute-granularity"),)),\n'
          f'    ArgumentDialect("{record_name}", "megatron-deepspeed", "megatron.fork: acme", fork="acme",\n'
          '                    description="Acme\'s fork of microsoft\'s, without GQA.",\n'
          '                    decisive=(("--acme-fused-kernels",),)),\n)}\n')
    path = tree / "generator" / "dialects" / "megatron.yaml"
    text = path.read_text(encoding="utf-8")
    tables = yaml.safe_load(text)
    microsoft = tables["megatron-deepspeed/microsoft"]
    table = {"title": "Megatron-DeepSpeed (acme)", "catalogue": microsoft["catalogue"],
             "capabilities": {**microsoft["capabilities"], "gqa": False},
             "defaults": microsoft["defaults"], "refused": microsoft["refused"],
             "arguments": [e for e in microsoft["arguments"] if not (isinstance(e, dict) and e.get(
                 "flag") == "--num-key-value-heads")]}
    path.write_text(text + "\n" + yaml.safe_dump({table_name: table}, sort_keys=False, width=200),
                    encoding="utf-8")


def _refresh_schema(tree: Path) -> None:
    """python -m generator.docs's part that writes the records' values into the schema."""
    env = {**os.environ, "PYTHONPATH": str(tree), "GEN_LAUNCH_CACHE": str(tree / ".cache")}
    code = ("from pathlib import Path; from generator.docs import SCHEMA, schema_text; "
            f"root = Path({str(tree)!r}); (root / SCHEMA).write_text(schema_text(root))")
    subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, check=True, timeout=120)


def test_adding_a_fork_is_a_record_and_a_table(tmp_path: Path) -> None:
    tree = _scratch(tmp_path)
    _add_fork(tree)
    _refresh_schema(tree)
    schema = json.loads((tree / "schemas" / "spec.schema.json").read_text())
    assert schema["properties"]["megatron"]["properties"]["fork"]["enum"][-1] == "acme"
    base = spec_dict(framework="megatron-deepspeed", megatron={"fork": "acme"},
                     parallelism={"tp": 2, "pp": 1})
    done = _run(tree, _spec(tmp_path, "acme.yaml", base), "--target", "megatron", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "--deepspeed" in done.stdout and "--tensor-model-parallel-size 2" in done.stdout
    # what its table cannot write is refused, naming the forks that can (no KeyError)
    gqa = {**base, "model": {**base["model"], "num_query_groups": 4}}
    refused = _run(tree, _spec(tmp_path, "gqa.yaml", gqa), "--target", "megatron", cwd=tmp_path)
    assert refused.returncode == 2 and "internal error" not in refused.stderr, refused.stderr
    assert "cannot be expressed in Megatron-DeepSpeed (acme)" in refused.stderr
    assert "Megatron-DeepSpeed (microsoft) (megatron.fork: microsoft)" in refused.stderr
    # lint and import recognise it by its record's hint
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 8 "
                      "--hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
                      "--max-position-embeddings 2048 --micro-batch-size 2 --global-batch-size 64 "
                      "--tensor-model-parallel-size 2 --train-iters 100 --lr 1e-4 --deepspeed "
                      "--deepspeed_config ds.json --acme-fused-kernels\n")
    imported = _run(tree, "import", str(script), cwd=tmp_path)
    assert imported.returncode in (0, 1), imported.stderr
    assert yaml.safe_load(imported.stdout)["megatron"]["fork"] == "acme"


@pytest.mark.parametrize("side", ["record", "table"])
def test_a_fork_with_a_record_or_a_table_alone_is_refused(tmp_path: Path, side: str) -> None:
    tree = _scratch(tmp_path)
    names = {"record_name": "megatron-deepspeed/acme", "table_name": "megatron-deepspeed/acme"}
    names[f"{side}_name"] = "megatron-deepspeed/acmee"
    _add_fork(tree, **names)
    done = _run(tree, _spec(tmp_path, "plain.yaml", spec_dict()), "--target", "megatron", cwd=tmp_path)
    assert done.returncode != 0
    assert "TableError" in done.stderr and "a dialect is one of each, named alike" in done.stderr
