"""The codes table (generator/rules/codes.py) and the ``@rule`` definitions agree: every code in
the table is defined by the module it names, every rule defined is in the table under its own
module, and the registry imports only the modules of the rules asked for."""

from __future__ import annotations

import pkgutil
import re
import subprocess
import sys
from importlib import import_module

import pytest

import generator.rules as rules_package
from generator.rules import RULES
from generator.rules.codes import CODES
from generator.rules.registry import Rule, RuleTable

from .conftest import ROOT

# the modules of generator/rules/ that are not rule modules
NOT_RULES = {"codes", "registry", "suggest"}


def _rule_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(rules_package.__path__) if m.name not in NOT_RULES)


def test_every_code_is_defined_by_the_module_the_table_names() -> None:
    for name in _rule_modules():  # every module, including one the table does not name
        import_module(f"generator.rules.{name}")
    defined = {code: rule.check.__module__ for code, rule in RULES._rules.items()}
    assert set(defined) == set(CODES), "codes.py and the @rule definitions differ"
    assert {code: f"generator.rules.{module}" for code, module in CODES.items()} == defined
    assert sorted(set(CODES.values())) == _rule_modules()


def test_codes_are_well_formed() -> None:
    """GL0xx batch and parallel arithmetic, GL1xx DeepSpeed, GL2xx Megatron, GL3xx Slurm, GL9xx
    reading."""
    assert all(re.fullmatch(r"GL[01239]\d\d", code) for code in CODES)


def test_a_rule_outside_the_table_or_in_another_module_is_refused() -> None:
    table = RuleTable()

    def check(tp: int) -> None:
        return None

    def made(code: str) -> Rule:
        return Rule(code, "x", "x.", "error", ("tp",), (), "x", check)

    with pytest.raises(RuntimeError, match="GL999 .* is not in codes.py"):
        table.add(made("GL999"), "generator.rules.batch")
    with pytest.raises(RuntimeError, match="GL004 .* belongs to rules/launch.py"):
        table.add(made("GL004"), "generator.rules.batch")
    table.add(made("GL004"), "generator.rules.launch")
    with pytest.raises(RuntimeError, match="registered twice"):
        table.add(made("GL004"), "generator.rules.launch")


def test_the_table_lists_the_rules_in_its_order_and_looks_codes_up() -> None:
    assert list(RULES) == list(CODES) and len(RULES) == len(CODES)
    assert [r.code for r in RULES.values()] == list(CODES)
    assert "GL004" in RULES and "GL999" not in RULES and RULES.get("GL999") is None


def test_explaining_one_rule_loads_its_module_alone() -> None:
    """`gen-launch rules GL004` imports rules/launch.py and no other rule module (the registry,
    the codes table and the suggestions' helpers aside)."""
    probe = ("import sys\nfrom typer.testing import CliRunner\nfrom generator.cli import app\n"
             "result = CliRunner().invoke(app, ['rules', 'GL004'])\n"
             "assert result.exit_code == 0 and 'deepspeed-megatron-disagree' in result.stdout\n"
             "print(sorted(m for m in sys.modules if m.startswith('generator.rules.')))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ("['generator.rules.codes', 'generator.rules.launch', 'generator.rules.registry', "
                                  "'generator.rules.suggest']")
