"""The framework and dialect records (generator/frameworks.py) are the one place that knows
which framework is which: the schema's enums and the dialect tables agree with them, and the rest
of the code asks them instead of comparing names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from generator.dialects import dialect, megatron_dialect_names
from generator.frameworks import (
    ARGUMENT_DIALECTS,
    FRAMEWORKS,
    argument_dialect,
    forks,
    framework_of,
    on_vendor,
)
from generator.render import targets_for
from generator.spec.schema import spec_schema

PACKAGE = Path(__file__).resolve().parent.parent / "generator"
# the most comparisons of a framework or dialect name with a literal allowed outside the records
MAX_NAME_COMPARISONS = 10


def test_the_schema_enums_are_the_records() -> None:
    props = spec_schema()["properties"]
    assert props["framework"]["enum"] == list(FRAMEWORKS)
    assert [o["const"] for o in props["framework"]["oneOf"]] == list(FRAMEWORKS)
    assert props["megatron"]["properties"]["fork"]["enum"] == [d.fork for d in forks()]
    assert props["megatron"]["properties"]["fork"]["default"] == forks()[0].fork


def test_every_dialect_table_has_a_record_and_every_record_a_table() -> None:
    assert list(megatron_dialect_names()) == list(ARGUMENT_DIALECTS)
    for record in ARGUMENT_DIALECTS.values():
        assert framework_of(record.framework).megatron_arguments, record
        assert dialect(record.name).name == record.name


def test_each_megatron_framework_has_exactly_one_dialect_per_setting() -> None:
    """argument_dialect picks one dialect for every framework, fork and vendor a spec can give."""
    for name, framework in FRAMEWORKS.items():
        for fork in [d.fork for d in forks()]:
            for vendor in ("nvidia", "huawei", "amd", None):
                found = argument_dialect(name, fork, vendor)
                assert (found is None) == (not framework.megatron_arguments)
                if found is not None:
                    assert found.framework == name
    assert argument_dialect("megatron-lm", "bigscience", "huawei").name == "mindspeed-llm"
    assert argument_dialect("megatron-deepspeed", "bigscience", "huawei").name == "megatron-deepspeed/bigscience"
    assert on_vendor("megatron-lm", "huawei") == "mindspeed-llm"
    assert on_vendor("megatron-deepspeed/microsoft", "huawei") == "megatron-deepspeed/microsoft"


@pytest.mark.parametrize(("framework", "launcher", "targets"), [
    ("megatron-lm", "torchrun", ["megatron", "slurm"]),
    ("megatron-deepspeed", "deepspeed", ["deepspeed", "megatron", "slurm"]),
    ("deepspeed", "torchrun", ["deepspeed", "slurm"]),
    ("deepspeed", "accelerate", ["deepspeed", "trainer", "accelerate", "slurm"]),
    ("fsdp", "torchrun", ["trainer", "slurm"]),
    ("fsdp", "accelerate", ["trainer", "accelerate", "slurm"]),
])
def test_the_files_follow_from_the_record(framework: str, launcher: str, targets: list[str]) -> None:
    assert targets_for(framework, launcher) == targets


def _names() -> set[str]:
    return set(FRAMEWORKS) | set(ARGUMENT_DIALECTS) | {d.fork for d in forks()}


def name_comparisons(root: Path = PACKAGE) -> list[str]:
    """``file:line`` of every comparison (==, !=, in, not in, .startswith) of a framework, dialect
    or fork (an expression that says so: ``spec.framework``, ``megatron_dialect``, ``fork``, ``d.name``…)
    with such a name written as a literal, outside the records' module. (A launcher or a file
    named like a framework, ``launcher == "deepspeed"``, is not one.)"""
    names = _names()

    def about_frameworks(node: ast.AST) -> bool:
        text = ast.unparse(node)
        return any(word in text for word in ("framework", "dialect", "fork", "name", "candidate"))

    def literal_names(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value in names or node.value.rstrip("/") in names or node.value.startswith(
                tuple(f"{n}/" for n in names))
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return any(literal_names(e) for e in node.elts)
        return False

    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "frameworks.py" and path.parent == root:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            sides = (node.left, *node.comparators) if isinstance(node, ast.Compare) else ()
            hit = any(literal_names(n) for n in sides) and any(about_frameworks(n) for n in sides
                                                              if not literal_names(n))
            hit = hit or (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                          and node.func.attr in ("startswith", "endswith") and about_frameworks(node.func.value)
                          and any(literal_names(a) for a in node.args))
            if hit:
                found.append(f"{path.relative_to(root.parent).as_posix()}:{node.lineno}")
    return found


def test_framework_names_are_compared_in_few_places() -> None:
    """Code asks the record (framework_of(name).deepspeed_engine, …) instead of comparing names."""
    found = name_comparisons()
    assert len(found) <= MAX_NAME_COMPARISONS, "\n".join(found)


def test_the_count_sees_a_comparison(tmp_path: Path) -> None:
    (tmp_path / "module.py").write_text(
        'def f(framework, launcher):\n    return framework == "fsdp" or framework in ("deepspeed",)\n'
        'def g(name):\n    return name.startswith("megatron-deepspeed/")\n'
        'def h(launcher):\n    return launcher == "deepspeed"\n')
    shown = [line.split("/", 1)[1] for line in name_comparisons(tmp_path)]
    assert sorted(shown) == ["module.py:2", "module.py:2", "module.py:4"]
