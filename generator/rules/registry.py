"""Rules over facts: written once, run forwards by the calculator and backwards by the linter.

A *fact* is a value with the place it came from (``spec.yaml:12:5``, ``train.sh:41``). A rule
names the facts it needs; it runs only when all of them are known, so the same rule works on a
complete plan and on the partial facts read from hand-written scripts. Codes are stable:
GL0xx batch and parallel arithmetic, GL1xx DeepSpeed, GL2xx Megatron-LM, GL3xx Slurm, GL9xx
reading; codes.py says which module defines each, and RULES loads a module when it is needed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from generator.rules.codes import CODES
from generator.values import value


@dataclass(frozen=True)
class Fact:
    """A value a rule reads, with where it came from."""

    value: Any
    source: str


Facts = Mapping[str, Fact]


class Uncertain(str):
    """The message of an error-level rule that holds only under one reading of the script (it
    does not say which framework or fork it runs): reported as a warning."""
_UNLOCATED = ("derived", "default", "plan")


def _rank(source: str) -> int:
    """Places in a file first (a finding is reported at the first), then a preset's values (they
    have no line: ``preset llama3-8b``), then derived and default values."""
    return 2 if source in _UNLOCATED else 1 if source.startswith("preset ") else 0
_CONTEXT = ("framework", "gpu")  # facts that select a rule rather than take part in it


@value
class Finding:
    """What a rule says about a plan or a script."""

    code: str
    name: str
    severity: str
    message: str
    values: tuple[tuple[str, str], ...]  # (fact name, where its value came from), located first
    parser: str | None = None  # the parser a linted script runs, as lint knows it (lint/engine.py)

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(source for _, source in self.values))

    def __str__(self) -> str:
        located = [(n, s) for n, s in self.values if s not in _UNLOCATED and n not in _CONTEXT]
        head = located[0][1] if located else (self.values[0][1] if self.values else "-")
        origins = f" [{', '.join(f'{n} at {s}' for n, s in located)}]" if len(located) > 1 else ""
        return f"{head}: {self.code} {self.message}{origins}"


@value
class Rule:
    """A check with its code, name, severity and the facts it reads."""

    code: str
    name: str
    summary: str
    severity: str
    needs: tuple[str, ...]
    optional: tuple[str, ...]
    explanation: str
    check: Callable[..., str | tuple[str, tuple[str, ...]] | None]

    def run(self, facts: Facts) -> Finding | None:
        if any(facts.get(n) is None or facts[n].value is None for n in self.needs):
            return None
        args = {n: facts[n].value for n in self.needs}
        args.update({n: facts[n].value if n in facts else None for n in self.optional})
        message = self.check(**args)
        if message is None:
            return None
        involved: tuple[str, ...] = (*self.needs, *self.optional)
        place: tuple[tuple[str, str], ...] = ()
        if isinstance(message, tuple):  # (message, the facts it is about[, (label, location)])
            message, involved, *rest = message
            place = tuple(rest)
        used = [n for n in involved if facts.get(n) is not None and facts[n].value is not None]
        located = sorted(used, key=lambda n: _rank(facts[n].source))
        values = place + tuple((n, facts[n].source) for n in located)
        severity = "warning" if isinstance(message, Uncertain) and self.severity == "error" else self.severity
        return Finding(self.code, self.name, severity, str(message), values)


class RuleTable(Mapping[str, Rule]):
    """Every rule by code, in the order of the codes table (codes.py). A rule's module is
    imported when one of its codes is first asked for: ``RULES["GL004"]`` loads launch.py alone;
    iterating over the values loads every module."""

    def __init__(self) -> None:
        self._rules: dict[str, Rule] = {}

    def __getitem__(self, code: str) -> Rule:
        if code not in self._rules:
            module = CODES[code]  # KeyError: no such code
            import_module(f"{__package__}.{module}")
            if code not in self._rules:
                raise RuntimeError(f"codes.py places rule {code} in rules/{module}.py, which does not "
                                   "define it")
        return self._rules[code]

    def __iter__(self) -> Iterator[str]:
        return iter(CODES)

    def __len__(self) -> int:
        return len(CODES)

    def __contains__(self, code: object) -> bool:
        return code in CODES

    def add(self, rule: Rule, module: str) -> None:
        """Register ``rule``, defined in ``module``: the codes table must place it there."""
        if rule.code in self._rules:
            raise RuntimeError(f"rule code {rule.code} registered twice")
        place = CODES.get(rule.code)
        if place is None or f"{__package__}.{place}" != module:
            where = "is not in codes.py" if place is None else f"belongs to rules/{place}.py"
            raise RuntimeError(f"rule {rule.code} defined in {module} {where}")
        self._rules[rule.code] = rule


RULES = RuleTable()


def rule(code: str, name: str, summary: str, severity: str = "error"):
    """Register ``check(**facts) -> message | (message, fact names[, (label, location)]) | None``;
    parameters with a default are optional. Returning fact names narrows the finding to the
    values involved; a (label, location) pair puts a place inside a fact (one flag of many) first.
    The code must be in codes.py, under the module the check is defined in."""

    def register(check: Callable[..., str | None]) -> Callable[..., str | None]:
        params = inspect.signature(check).parameters.values()
        needs = tuple(p.name for p in params if p.default is inspect.Parameter.empty)
        optional = tuple(p.name for p in params if p.default is not inspect.Parameter.empty)
        RULES.add(Rule(code, name, summary, severity, needs, optional,
                       inspect.cleandoc(check.__doc__ or summary), check), check.__module__)
        return check

    return register


def run_rules(facts: Facts, codes: list[str] | None = None) -> Iterator[Finding]:
    for code in codes or sorted(RULES):
        finding = RULES[code].run(facts)
        if finding is not None:
            yield finding
