"""A plan against its dialect: values the dialect cannot write (GL218), and launch.extra_args
against the dialect's parser (GL219, GL220). Run by resolve once the plan exists (it runs rules,
so it lives above dialects/ and rules/)."""

from __future__ import annotations

import dataclasses
from typing import Any

from generator.dialects import Catalogue, Dialect, value_fields
from generator.dialects.arguments import (
    expressing,
    run_io_fields,
    table_run_io,
    unexpressed,
    written_flags,
)
from generator.dialects.argv import split
from generator.frameworks import framework_of, frameworks_where
from generator.plan.torchtitan import registry_dialect, torchtitan_values
from generator.plan.values import megatron_values, spec_value
from generator.rules import RULES, Fact, Finding
from generator.rules.dialect import did_you_mean
from generator.shell import ShellRef
from generator.values import value


def dialect_findings(plan) -> list[Finding]:
    findings = _ignored_settings(plan.spec)
    d = plan.dialect
    if d is None and plan.framework_record.config_registry and plan.spec.launch.check_extra_args:
        # torchtitan: launch.extra_args against tyro's options (its catalogue) and the table
        findings += extra_args_findings(plan, registry_dialect(plan.spec), torchtitan_values(plan))
    if d is None:
        return findings + _unwritten_run_io(plan.spec)
    values = megatron_values(plan)
    for name in unexpressed(d, values):
        field_ = value_fields()[name]
        shown = _spec_value(plan.spec, field_)
        others = [o for o in expressing(name, values[name], values, d.release)
                  if not o.startswith(f"{d} (")]
        fact = Fact((field_, shown, str(d), tuple(others)), plan.spec.where(field_))
        findings.append(RULES["GL218"].run({"dialect_unexpressed": fact}))
    if plan.spec.launch.check_extra_args:
        findings += extra_args_findings(plan, d, values)
    return findings


def _ignored_settings(spec) -> list[Finding]:
    """GL221: megatron.fork / megatron.version given where the framework does not read them."""
    given = spec.doc.data.get("megatron") or {}
    out = []
    for key in ("fork", "version"):
        frameworks = frameworks_where(dialect_setting=f"megatron.{key}")
        if key in given and spec.framework not in frameworks:
            fact = Fact((f"megatron.{key}", given[key], spec.framework, " or ".join(frameworks)),
                        spec.where(f"megatron.{key}"))
            out.append(RULES["GL221"].run({"megatron_setting_ignored": fact}))
    return out


def _unwritten_run_io(spec) -> list[Finding]:
    """GL223: run-io fields given for a framework without Megatron arguments."""
    out = []
    declared = {dotted for dotted, _ in spec.launch.arguments}
    record = framework_of(spec.framework)
    table = "trainer" if spec.uses_trainer else record.name if record.config_registry else None
    for dotted in dict.fromkeys(run_io_fields().values()):
        if table is not None and dotted in table_run_io(table):
            continue  # TrainingArguments carry it (trainer.yaml), or torchtitan's (torchtitan.yaml)
        if dotted in declared:
            continue  # the entry point's own option (launch.arguments)
        section, key = dotted.split(".")
        given = spec.doc.data.get(section) or {}
        if given.get(key) not in (None, False, [], {}):
            fact = Fact((dotted, spec.framework), spec.where(dotted))
            out.append(RULES["GL223"].run({"run_io_unwritten": fact}))
    return out


def _spec_value(spec, dotted: str) -> Any:
    value = spec_value(spec, dotted)
    if isinstance(value, ShellRef):  # a run-time word, as the spec writes it
        return value.text
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value


@value
class ArgProblem:
    """A word the parser would refuse: its index, the option (or word), why (unknown, stray,
    arity, choice) and the message."""

    index: int
    word: str
    kind: str
    message: str


def split_argv(words: list[str], cat: Catalogue,
               label: str) -> tuple[list[tuple[int, str, list[str]]], list[ArgProblem]]:
    """The words as the dialect's parser reads them (dialects/argv.py): [(index, flag, values)]
    for its options and a problem for every word it would refuse (unknown option, missing
    values, a value outside its choices, a stray word), in order."""
    def arity(flag: str):
        option = cat.get(flag)
        return None if option is None else option.arity

    split_options, stray = split(words, arity)
    options: list[tuple[int, str, list[str]]] = []
    problems = [ArgProblem(k, words[k], "stray", f"launch.extra_args[{k}] {words[k]!r} is not an option "
                           "(the parser takes no positional arguments)") for k in stray]
    for word in split_options:
        name, values, k = word.flag, word.texts(words), word.index
        option = cat.get(name)
        if option is None:
            problems.append(ArgProblem(k, name, "unknown", f"launch.extra_args[{k}] {name} is not an "
                                       f"option of {label}{did_you_mean(name, cat.defined)}"))
        elif not option.takes(len(values)):
            wanted = {0: "no value", 1: "one value"}.get(option.arity, f"{option.arity} values") \
                if isinstance(option.arity, int) else f"nargs {option.arity!r}"
            problems.append(ArgProblem(k, name, "arity",
                                       f"launch.extra_args[{k}] {name} takes {wanted}, got {len(values)}"))
        elif option.choices and any(v not in option.choices for v in values):
            problems.append(ArgProblem(k, name, "choice", f"launch.extra_args[{k}] {name} "
                                       f"{' '.join(values)}: choose from {', '.join(option.choices)}"))
        else:
            options.append((k, name, values))
    return options, sorted(problems, key=lambda p: p.index)


def extra_args_findings(plan, d: Dialect, values: dict[str, Any]) -> list[Finding]:
    spec = plan.spec
    words = [str(w) for w in spec.launch.extra_args]
    if not words:
        return []
    where = lambda k: str(spec.doc.locate(["launch", "extra_args", k]))  # noqa: E731
    options, problems = split_argv(words, d.catalogue, str(d))
    findings = []
    for problem in problems:
        fact = Fact((problem.message,), where(problem.index))
        findings.append(RULES["GL219"].run({"extra_arg_problem": fact}))
    written = {}
    entries = {e.flag: e for e in d.entries}
    for flag in written_flags(d, values):
        option = d.catalogue.get(flag)
        written[option.dest if option else flag] = flag
    for k, flag, _ in options:
        option = d.catalogue.get(flag)
        dest = option.dest if option and option.dest else flag
        if dest in written:
            mine = written[dest]
            entry = entries.get(mine)
            field_ = value_fields().get(entry.value, "") if entry and entry.value else ""
            origin = f" (from {field_} at {spec.where(field_)})" if field_ else ""
            message = (f"launch.extra_args[{k}] {flag} repeats {mine}, which the plan already writes"
                       f"{origin}; set the spec field instead and remove it from extra_args")
            findings.append(RULES["GL220"].run({"extra_arg_duplicate": Fact((message,), where(k))}))
    return findings
