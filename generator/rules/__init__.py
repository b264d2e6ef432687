"""The checks shared by the calculator and (later) the linter; see registry.py."""

from generator.rules.registry import RULES, Fact, Facts, Finding, Rule, rule, run_rules

__all__ = ["RULES", "Fact", "Facts", "Finding", "Rule", "rule", "run_rules"]
