"""The rules contract: every fact a rule reads (its parameter names) is one the plan gives the
rules or one a reader of lint gives them, so a misspelt fact name is a failing test, not a rule
that can never fire; and every rule lint can check is triggered by a file of the lint corpus.

The fact names are collected, not listed: each time any rule runs, the names of the facts it
is given are recorded,

- the plan's: while every sample resolves (its stages, its sweep points, auto-plan's search) and
  while the specs of REFUSALS below resolve (facts the plan gives only where something is wrong:
  a field the dialect cannot write, a stage that cannot resume the one before);
- the readers': while lint reads the lint corpus (tests/lint_corpus/), and every fact the
  readers take from the dialect tables (a Megatron or Trainer flag's ``value``/``fact``, a
  DeepSpeed or accelerate key's ``fact``, a launcher option's ``fact``, GPT-NeoX's keys).

A rule lint can check is one whose required facts the readers give; the others need a fact only
the plan has (an estimate, a spec field no launch file spells). Every rule lint can check has a
file in the corpus that triggers it, except the few of UNREACHABLE, whose facts the readers give
but never in a combination that breaks them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
import yaml

from generator.calculator.resolve import PlanError
from generator.rules import RULES
from generator.rules.registry import Rule
from generator.run import load_spec, resolve_run

from .conftest import ROOT, SAMPLES
from .helpers import spec_dict

CORPUS = ROOT / "tests" / "lint_corpus"

_STAGED = {**spec_dict(checkpoint={"dir": "/ckpt/relayout", "format": "torch"}), "model": {"preset": "llama3-8b"},
           "stages": [{"name": "short", "train_iters": 50},
                      {"name": "wide", "parallelism": {"tp": 4}, "train_iters": 50}]}

# (spec, the rule it breaks): facts the plan gives only where a spec is wrong, each shown firing
REFUSALS: list[tuple[dict, str]] = [
    (spec_dict(checkpoint={"dir": "/ckpt/run", "keep_last": 3}), "GL218"),
    (spec_dict(launch={"extra_args": ["--no-such-flag"]}), "GL219"),
    (spec_dict(data={"paths": ["/d"]}, launch={"extra_args": ["--data-path", "/other"]}), "GL220"),
    (spec_dict(megatron={"fork": "bigscience"}), "GL221"),
    # a pipeline layout of 4 stages on pp 2 (vpp 2) beside a vpp of 4
    (spec_dict(parallelism={"tp": 1, "pp": 2, "vpp": 4, "pipeline_layout": "Et|t|t|tL"}), "GL235"),
    (spec_dict(framework="fsdp", parallelism={"tp": 1, "pp": 1, "zero_stage": 3}, data={"paths": ["/d"]}),
     "GL223"),
    (spec_dict(training={"train_iters": 1000, "warmup": {"iters": 10}, "lr": None,
                         "lr_scaling": {"rule": "linear", "reference_global_batch_size": 256,
                                        "reference_lr": 1.0e-4}},
               cluster={"nodes": 1024}, batch={"gradient_accumulation_steps": 8}), "GL021"),
    ({**spec_dict(parallelism={"tp": 8, "pp": 1, "distributed_optimizer": False},
                  checkpoint={"dir": "/ckpt/70b", "format": "torch"},
                  cluster={"nodes": 8, "host_memory_gib": 512, "allow_oversize": True},
                  batch={"micro_batch_size": 1, "gradient_accumulation_steps": None, "global_batch_size": 64}),
      "model": {"preset": "llama3-70b"}}, "GL025"),
    (_STAGED, "GL313"),
]


@contextlib.contextmanager
def _recording() -> Iterator[set[str]]:
    """The names of the facts every rule is given while the block runs."""
    seen: set[str] = set()
    run = Rule.run

    def recorded(self: Rule, facts):
        seen.update(facts)
        return run(self, facts)

    Rule.run = recorded  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        Rule.run = run  # type: ignore[method-assign]


def _resolve(spec) -> list:
    """Every plan of a spec: its stages, or its sweep points (each point's plans)."""
    if spec.doc.data.get("sweep"):
        from generator.sweep import sweep_points

        return [plan for point in sweep_points(spec.doc) for plan in point.plans or ()]
    return resolve_run(spec)


def _findings(path: Path) -> list[str]:
    try:
        return [w.code for plan in _resolve(load_spec(path)) for w in plan.warnings]
    except PlanError as exc:
        return [f.code for f in exc.findings]


@cache
def _plan() -> tuple[frozenset[str], dict[str, list[str]]]:
    """(the fact names the plan gives, {refusal: the codes it produced})."""
    import tempfile

    fired: dict[str, list[str]] = {}
    with _recording() as seen, tempfile.TemporaryDirectory() as folder:
        for sample in SAMPLES:
            _resolve(load_spec(sample, f"samples/{sample.name}"))
        for k, (data, code) in enumerate(REFUSALS):
            path = Path(folder) / f"{code}-{k}.yaml"
            path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
            fired[f"{code}-{k}"] = _findings(path)
    return frozenset(seen), fired


def plan_facts() -> frozenset[str]:
    return _plan()[0]


def _table_facts() -> set[str]:
    """The facts the readers take from the dialect tables, asked of the readers' own tables."""
    from generator.dialects.keyed import keyed_dialect
    from generator.dialects.launchers import launchers
    from generator.readers.launch import _trainer_reading, megatron_reading
    from generator.readers.neox_config import _keys

    ints, switches, _ = megatron_reading()
    names = {*ints.values(), *switches.values(), *_trainer_reading().values(), *_keys().values()}
    for keyed in ("deepspeed", "accelerate"):
        names |= {name for name, _, _ in keyed_dialect(keyed).read_paths()}
    return names | {fact for launcher in launchers() for option in launcher.per_node + launcher.options
                    for fact in option.fact}


@cache
def reader_facts() -> frozenset[str]:
    from generator.lint import gather, lint_paths

    specs: list[Path] = []
    gather([CORPUS], specs)
    assert specs == [], "a spec in the lint corpus would bring the plan's facts in with the readers'"
    with _recording() as seen:
        lint_paths([CORPUS])
    return frozenset(seen | _table_facts())


def lint_checkable() -> set[str]:
    """The rules whose required facts the readers give (and, for a rule whose facts are all
    optional, at least one of them)."""
    readers = reader_facts()
    return {code for code, rule in RULES.items()
            if set(rule.needs) <= readers and readers & {*rule.needs, *rule.optional}}


# Rules whose facts the readers give, but never in a combination that breaks the rule: the
# framework lint reads decides the others (a script with Megatron's flags is read as Megatron's).
UNREACHABLE = {
    "GL106": "framework deepspeed is read from a DeepSpeed config without Megatron's arguments, "
             "and tp only from Megatron's arguments or GPT-NeoX's config (framework megatron-deepspeed)",
    "GL113": "framework fsdp is read from the Trainer's --fsdp or an accelerate FSDP config, neither "
             "of which gives a ZeRO stage or a model-parallel size (a DeepSpeed config makes it deepspeed)",
}


def corpus_codes() -> set[str]:
    expected = yaml.safe_load((CORPUS / "expected.yaml").read_text(encoding="utf-8"))
    return {code for items in expected.values() for code, _ in items}


def unread(rules) -> dict[str, list[str]]:
    """{code: the facts it reads that neither the plan nor a reader gives} for ``rules``."""
    given = plan_facts() | reader_facts()
    unknown = {rule.code: sorted(set(rule.needs + rule.optional) - given) for rule in rules}
    return {code: names for code, names in unknown.items() if names}


def test_every_fact_a_rule_reads_is_given_by_the_plan_or_a_reader() -> None:
    assert unread(RULES.values()) == {}, (
        "these rules read facts that neither the plan (samples, REFUSALS) nor a reader (the lint corpus, "
        "the dialect tables) gives: a misspelt name, or a fact nothing produces yet")


def test_a_misspelt_fact_breaks_the_contract() -> None:
    """A typo repeated in test_rules' cases passes there; here it fails."""
    import dataclasses

    typo = dataclasses.replace(RULES["GL002"], needs=("global_batch_size", "dp"),
                               optional=("micro_batch_sise", "gradient_accumulation_steps"))
    assert unread([RULES["GL002"], typo]) == {"GL002": ["micro_batch_sise"]}


@pytest.mark.parametrize("index", range(len(REFUSALS)))
def test_each_refusal_breaks_its_rule(index: int) -> None:
    code = REFUSALS[index][1]
    assert code in _plan()[1][f"{code}-{index}"]


def test_every_rule_lint_can_check_has_a_corpus_file_that_triggers_it() -> None:
    """expected.yaml's findings are the corpus's (test_lint holds them to each other)."""
    checkable = lint_checkable()
    assert set(UNREACHABLE) <= checkable - corpus_codes()  # revisit the list when a rule changes
    assert sorted(checkable - set(UNREACHABLE) - corpus_codes()) == [], \
        "add a file with the fault planted to tests/lint_corpus/ and expected.yaml"
    assert sorted(corpus_codes() - checkable) == []  # what lint reports, its readers gave


def test_a_rule_lint_cannot_check_needs_a_fact_only_the_plan_gives() -> None:
    """The rules lint cannot check, each with the facts no reader gives: all of them from the
    plan (an estimate, a spec field no launch file spells, a refusal of the spec)."""
    readers, plan = reader_facts(), plan_facts()
    for code in sorted(set(RULES) - lint_checkable()):
        missing = set(RULES[code].needs or RULES[code].optional) - readers
        assert missing and missing <= plan, code


def test_the_read_back_compares_facts_the_readers_give() -> None:
    """lint/readback.py compares the plan with what the readers see: each fact name it compares or
    requires is one a reader gives (a misspelt name would compare nothing), and each plan fact it
    compares is one plan_facts gives for some sample."""
    from generator.lint.readback import COMPARED, REQUIRED
    from generator.lint.readback import plan_facts as read_back_facts

    named = {name for names in COMPARED.values() for name in names} | {
        name for names in REQUIRED.values() for name in names}
    assert sorted(named - reader_facts()) == []
    given: set[str] = set()
    for sample in SAMPLES:
        for plan in _resolve(load_spec(sample, f"samples/{sample.name}")):
            given |= set(read_back_facts(plan))
    assert sorted(set(COMPARED) - given) == []
