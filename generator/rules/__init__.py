"""The checks shared by the calculator and the linter; see registry.py. Importing the package
registers every rule."""

# isort: off
from generator.rules.registry import RULES, Fact, Facts, Finding, Rule, rule, run_rules
from generator.rules import batch, deepspeed, dialect, fsdp, launch, megatron, reading, resume, slurm  # noqa: F401,E501  (registers them)
# isort: on

__all__ = ["RULES", "Fact", "Facts", "Finding", "Rule", "rule", "run_rules"]
