"""Rules over facts: written once, run forwards by the calculator and backwards by the linter.

A *fact* is a value with the place it came from (``spec.yaml:12:5``, ``train.sh:41``). A rule
names the facts it needs; it runs only when all of them are known, so the same rule works on a
complete plan and on the partial facts read from hand-written scripts. Codes are stable:
GL0xx batch and parallel arithmetic, GL1xx DeepSpeed, GL2xx Megatron-LM.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Fact:
    value: Any
    source: str


Facts = Mapping[str, Fact]


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    severity: str
    message: str
    sources: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.sources[0] if self.sources else '-'}: {self.code} {self.message}"


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    summary: str
    severity: str
    needs: tuple[str, ...]
    optional: tuple[str, ...]
    explanation: str
    check: Callable[..., str | None]

    def run(self, facts: Facts) -> Finding | None:
        if any(facts.get(n) is None or facts[n].value is None for n in self.needs):
            return None
        args = {n: facts[n].value for n in self.needs}
        args.update({n: facts[n].value if n in facts else None for n in self.optional})
        message = self.check(**args)
        if message is None:
            return None
        used = [n for n in (*self.needs, *self.optional) if facts.get(n) is not None
                and facts[n].value is not None]
        located = sorted(used, key=lambda n: facts[n].source in _UNLOCATED)
        sources = tuple(dict.fromkeys(facts[n].source for n in located))
        return Finding(self.code, self.name, self.severity, message, sources)


_UNLOCATED = ("derived", "default")


RULES: dict[str, Rule] = {}


def rule(code: str, name: str, summary: str, severity: str = "error"):
    """Register ``check(**facts) -> message | None``; parameters with a default are optional."""

    def register(check: Callable[..., str | None]) -> Callable[..., str | None]:
        params = inspect.signature(check).parameters.values()
        needs = tuple(p.name for p in params if p.default is inspect.Parameter.empty)
        optional = tuple(p.name for p in params if p.default is not inspect.Parameter.empty)
        if code in RULES:
            raise RuntimeError(f"rule code {code} registered twice")
        RULES[code] = Rule(code, name, summary, severity, needs, optional,
                           inspect.cleandoc(check.__doc__ or summary), check)
        return check

    return register


def run_rules(facts: Facts, codes: list[str] | None = None) -> Iterator[Finding]:
    from generator.rules import batch, deepspeed, megatron  # noqa: F401  (registers the rules)

    for code in codes or sorted(RULES):
        finding = RULES[code].run(facts)
        if finding is not None:
            yield finding
