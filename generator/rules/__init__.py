"""The checks shared by the calculator and the linter; see registry.py. codes.py maps every code
to the module that defines it; RULES imports a module when one of its rules is first asked for."""

from generator.rules.registry import RULES, Fact, Facts, Finding, Rule, rule, run_rules

__all__ = ["RULES", "Fact", "Facts", "Finding", "Rule", "rule", "run_rules"]
