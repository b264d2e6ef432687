"""Exhaustive layout search: every combination of the searched values that the structural rules
allow (the calculator's own rules, memoized per rule on the values each one reads), estimated
with the memory and step-time models, ranked by step time and then memory headroom. The best
candidates are resolved by the calculator before they are offered.

A layout fits when its estimate leaves a margin free (MARGIN of the GPU's memory by default,
beyond cluster.memory_headroom_gib): the estimate is an estimate, and a layout at 99 % of the
memory is one allocator fragment away from running out. Among the layouts within TIE of the
fastest step time, the one with the most memory free comes first (up to COMFORT of the
memory free; beyond that the faster): a 0.1 % faster step is not worth a run that may not start."""

from __future__ import annotations

import itertools
import math
import sys
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import Any

import numpy

from generator import presets
from generator.autoplan.space import expressible, virtual_stages
from generator.calculator.resolve import PlanError, batch_facts, checked_plan, spec_facts
from generator.dialects import dialect_of
from generator.estimate.memory import GIB, Memory, estimate_memory
from generator.estimate.params import Shape
from generator.estimate.performance import Performance, estimate_performance
from generator.estimate.plan import hardware_of, spec_layout, usable_memory_gib
from generator.frameworks import framework_of
from generator.plan.batch import solve_batch
from generator.rules import RULES, Fact, Finding
from generator.rules.megatron import uneven_split
from generator.values import record

SEARCH = "auto-plan"
MARGIN = 0.05  # of the GPU's memory, kept free of a fitting layout's estimate (plan --memory-margin)
TIE = 0.02  # step times within this fraction of the fastest count as equal: more memory free wins
COMFORT = 0.25  # ... up to this fraction of the usable memory free; beyond it the faster wins
# the facts a layout sets; everything else the rules read is fixed by the spec
VARYING = ("tp", "pp", "cp", "ep", "etp", "vpp", "first_stage_layers", "last_stage_layers", "dp",
           "sequence_parallel", "micro_batch_size",
           "gradient_accumulation_steps", "global_batch_size", "tokens_per_step",
           "tokens_per_step_target", "zero_stage", "distributed_optimizer")
# the loop level at which each varying fact is known (rules run as soon as theirs are)
_LEVEL = {"tp": 0, "sequence_parallel": 0, "etp": 0, "pp": 1, "cp": 1, "ep": 1, "dp": 1, "vpp": 2,
          "first_stage_layers": 2, "last_stage_layers": 2,
          "micro_batch_size": 3, "gradient_accumulation_steps": 3, "global_batch_size": 3,
          "tokens_per_step": 3, "tokens_per_step_target": 3, "zero_stage": 4,
          "distributed_optimizer": 4}


@dataclass(frozen=True)
class Candidate:
    """One layout auto-plan considered: its parallel sizes, batch split, sharding and estimates."""

    tp: int
    pp: int
    cp: int
    ep: int
    vpp: int
    dp: int
    micro_batch_size: int
    gradient_accumulation_steps: int
    global_batch_size: int
    zero_stage: int | None
    distributed_optimizer: bool
    recompute: str
    sequence_parallel: bool
    memory: Memory
    performance: Performance | None
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None

    @property
    def layout(self) -> tuple:
        """The parallel layout (how the model and the data are split: PTD-P's tp × pp × dp, with
        cp and ep): what a row of the ranking stands for, with its best schedule and settings."""
        return (self.tp, self.pp, self.cp, self.ep)

    @property
    def step_time(self) -> float:
        return self.performance.step_time_s if self.performance else 0.0

    @property
    def headroom(self) -> float:
        return (self.memory.capacity or 0.0) - self.memory.total

    @property
    def sharding(self) -> str:
        if self.zero_stage is not None:
            return f"ZeRO-{self.zero_stage}"
        return "dist-opt" if self.distributed_optimizer else "none"

    def values(self) -> dict[str, Any]:
        """The spec values this candidate sets, by dotted path."""
        return {"parallelism.tp": self.tp, "parallelism.pp": self.pp, "parallelism.cp": self.cp,
                "parallelism.ep": self.ep, "parallelism.vpp": self.vpp,
                "parallelism.first_stage_layers": self.first_stage_layers,
                "parallelism.last_stage_layers": self.last_stage_layers,
                "parallelism.zero_stage": self.zero_stage,
                "parallelism.distributed_optimizer": self.distributed_optimizer,
                "parallelism.sequence_parallel": self.sequence_parallel,
                "batch.micro_batch_size": self.micro_batch_size,
                "training.recompute": self.recompute}


@record
class Search:
    """What a layout search found: the fitting layouts ranked, or the smallest that does not fit."""

    # fitting, best first, one per parallel layout (its best micro batch, sharding, recompute),
    # each resolved by the calculator
    ranked: list[Candidate] = field(default_factory=list)
    smallest: Candidate | None = None  # the smallest memory estimate (reported when none fits)
    layouts: int = 0  # combinations of the searched values that pass the structural rules
    # rule code -> rejections (a choice rejected in an outer loop prunes every inner combination)
    rejected: Counter = field(default_factory=Counter)
    evaluated: int = 0  # candidates estimated (memory and step time)
    fitting: int = 0
    refused: Counter = field(default_factory=Counter)  # rule code -> fitting ones resolve refused
    seconds: float = 0.0
    limit_gib: float | None = None  # what a fitting estimate stays within: the usable memory less the margin
    margin: float = MARGIN  # the fraction of the GPU's memory kept free of a fitting estimate
    margin_gib: float = 0.0  # that margin in GiB
    notes: list[str] = field(default_factory=list)  # auto fields searched at one value (space.narrowed)

    @property
    def per_second(self) -> float:
        return self.evaluated / self.seconds if self.seconds else 0.0


class _Rules:
    """The calculator's structural rules, each memoized on the varying values it reads."""

    def __init__(self, static: dict[str, Fact], choices: dict[str, list] | None = None) -> None:
        self.static = {k: v for k, v in static.items() if k not in VARYING}
        # searched values the search only tries unset (a Megatron run's zero_stage)
        self.unset = {k for k, values in (choices or {}).items() if all(x is None for x in values)}
        self.cache: dict[tuple, Finding | None] = {}
        # per level: (rule, the varying values it reads, a getter of them from the level's values)
        self.by_level: list[list[tuple[Any, tuple[str, ...], Any]]] = [[] for _ in range(5)]
        self.fixed: list[Finding] = []  # errors of the fixed values alone: no layout helps
        for rule in RULES.values():
            if rule.severity != "error" or not self._can_fire(rule):
                continue
            names = tuple(n for n in (*rule.needs, *rule.optional) if n in _LEVEL)
            if names:
                self.by_level[max(_LEVEL[n] for n in names)].append((rule, names, itemgetter(*names)))
            elif (finding := rule.run(self.static)) is not None:
                self.fixed.append(finding)
        # a level's verdict, memoized on every value its rules read (one lookup for most calls)
        self.level_reads = [itemgetter(*{n for _, names, _ in rules for n in names}) if rules else None
                            for rules in self.by_level]
        self.level_cache: dict[tuple, Finding | None] = {}

    def _can_fire(self, rule) -> bool:
        """Whether the rule may fire at all: a fact it needs that the search does not vary and the
        spec leaves unset keeps it silent for every layout (Rule.run)."""
        return all((n in _LEVEL and n not in self.unset) or
                   (n in self.static and self.static[n].value is not None) for n in rule.needs)

    def first_error(self, level: int, varying: dict[str, Any]) -> Finding | None:
        """The first rule of ``level`` that rejects ``varying`` (which sets every name of the
        levels up to it)."""
        if self.level_reads[level] is None:
            return None
        verdict = (level, self.level_reads[level](varying))
        found = self.level_cache.get(verdict, _UNSEEN)
        if found is _UNSEEN:
            found = self.level_cache[verdict] = self._first_error(level, varying)
        return found

    def _first_error(self, level: int, varying: dict[str, Any]) -> Finding | None:
        cache = self.cache
        for rule, names, get in self.by_level[level]:
            key = (rule.code, get(varying))
            found = cache.get(key, _UNSEEN)
            if found is _UNSEEN:
                facts = {n: self.static[n] for n in (*rule.needs, *rule.optional) if n in self.static}
                facts.update({n: Fact(varying[n], SEARCH) for n in names if varying[n] is not None})
                found = cache[key] = rule.run(facts)
            if found is not None:
                return found
        return None


_UNSEEN = object()


PROGRESS_AFTER_S = 1.0  # a search that takes longer says how far it is


def _terminal_progress(evaluated: int, seconds: float, done: bool) -> None:
    """On a terminal, one line that counts the candidates (stderr; nothing in logs or pipes)."""
    if not sys.stderr.isatty():
        return
    sys.stderr.write(f"\rauto-plan: {evaluated:,} candidates in {seconds:.1f} s" + ("\n" if done else ""))
    sys.stderr.flush()


def search(spec, choices: dict[str, list], keep: int = 10, progress=_terminal_progress,
           margin: float = MARGIN) -> Search:
    """Rank every layout of ``choices`` (from space.domains) for the template ``spec``; the
    best ``keep`` that the calculator resolves are in ``ranked``. A layout fits when its
    estimate leaves ``margin`` (a fraction of the GPU's memory) free of the usable memory. A
    search longer than PROGRESS_AFTER_S reports ``progress(evaluated, seconds, done)`` every
    2,000 candidates."""
    start = time.perf_counter()
    reported = False
    out = Search(margin=margin)
    gpu = _gpu(spec.cluster.gpu)
    capacity = usable_memory_gib(spec, gpu)
    if capacity is not None:
        out.margin_gib = margin * gpu["memory_gib"]
        out.limit_gib = capacity - out.margin_gib
    hardware = hardware_of(gpu, spec.training.precision, spec.cluster.gpus_per_node)
    rules = _Rules(spec_facts(spec), choices)
    if rules.fixed:
        raise PlanError(rules.fixed)
    recomputes = choices["recompute"]
    rows: list[dict[str, Any]] = []  # the layouts that pass the rules, in the order found
    for v in _layouts(spec, choices, rules, out):
        rows.append(v)
        if len(rows) % 1000 == 0 and time.perf_counter() - start > PROGRESS_AFTER_S:
            progress(len(rows) * len(recomputes), time.perf_counter() - start, False)
            reported = True
    out.layouts = len(rows)
    out.evaluated = len(rows) * len(recomputes)  # candidate i: layout i // R with recompute i % R
    totals, steps = _estimate_all(spec, rows, recomputes, capacity, hardware)
    if reported:
        progress(out.evaluated, time.perf_counter() - start, True)
    shapes: dict[int, Shape] = {}

    def candidate(i: int) -> Candidate:
        v = rows[i // len(recomputes)]
        return _estimate(spec, _shape(spec, v["tp"], shapes), v, recomputes[i % len(recomputes)],
                         capacity, hardware)

    if rows:
        out.smallest = candidate(int(numpy.argmin(totals)))
    fitting = numpy.flatnonzero(totals <= out.limit_gib * GIB) if out.limit_gib is not None else \
        numpy.arange(len(totals))
    out.fitting = len(fitting)
    seen: set[tuple] = set()
    for i in _ranking(fitting, totals, steps, capacity):
        if len(out.ranked) == keep:
            break
        v = rows[i // len(recomputes)]
        if (v["tp"], v["pp"], v["cp"], v["ep"]) in seen:  # each parallel layout once, at its best
            continue
        best = candidate(int(i))
        error = _refusal(spec, best)
        if error is None:
            out.ranked.append(best)
            seen.add(best.layout)
        else:
            out.refused[error] += 1
    out.seconds = time.perf_counter() - start
    return out


def _ranking(fitting: numpy.ndarray, totals: numpy.ndarray, steps: numpy.ndarray,
             usable_gib: float | None) -> numpy.ndarray:
    """The fitting candidates best first: those within TIE of the fastest step time by the most
    memory free (up to COMFORT of the usable memory: beyond it more is worth nothing, and the
    faster wins), then the others fastest first (then the most memory free, then the order
    found)."""
    step, total = steps[fitting], totals[fitting]
    tied = step <= (step.min() if len(step) else 0.0) * (1 + TIE)
    usable = (usable_gib or 0.0) * GIB
    short = numpy.maximum(COMFORT * usable - (usable - total), 0.0)  # free memory short of COMFORT
    return fitting[numpy.lexsort((fitting, total, step, numpy.where(tied, short, 0.0), ~tied))]


# what differs between the candidates estimated together as arrays: the numbers (each a column)
_COLUMNS = {"pp": int, "cp": int, "ep": int, "vpp": int, "dp": int, "micro_batch_size": int,
            "gradient_accumulation_steps": int, "global_batch_size": float}


def _estimate_all(spec, rows: list[dict[str, Any]], recomputes: list[str], capacity: float | None,
                  hardware) -> tuple[numpy.ndarray, numpy.ndarray]:
    """(memory total, step time) of every candidate, by the plan's own formulas over arrays:
    the candidates that share tp (the model's padded vocabulary) and sharding are one Layout
    whose sizes, pipeline stages and recompute are arrays."""
    n = len(recomputes)
    totals, steps = numpy.zeros(len(rows) * n), numpy.zeros(len(rows) * n)
    groups: dict[tuple, list[int]] = {}
    for i, v in enumerate(rows):
        key = (v["tp"], v["etp"], v["sequence_parallel"], v["zero_stage"], v["distributed_optimizer"])
        groups.setdefault(key, []).append(i)
    # an even pipeline's stages as numbers (L/p each, what Layout.stage_layers gives for None),
    # so that even and uneven pipelines are one group
    layers = spec.model.num_layers
    stages = {name: [layers / v["pp"] if v[name] is None else v[name] for v in rows]
              for name in ("first_stage_layers", "last_stage_layers")}
    shapes: dict[int, Shape] = {}
    for members in groups.values():
        # candidate i is layout i // n with recompute i % n
        index = (numpy.array(members)[:, None] * n + numpy.arange(n)).ravel()
        # the group's shared values, each number a column (the global batch as floats: a
        # step's FLOPs overflow int64)
        values = {**rows[members[0]], **{
            name: None if rows[members[0]][name] is None else
            numpy.repeat(numpy.array([rows[i][name] for i in members], dtype=dtype), n)
            for name, dtype in _COLUMNS.items()}, **{
            name: numpy.repeat(numpy.array([column[i] for i in members], dtype=float), n)
            for name, column in stages.items()}}
        layout = _layout(spec, values, numpy.tile(numpy.array(recomputes), len(members)))
        shape = _shape(spec, values["tp"], shapes)
        totals[index] = estimate_memory(shape, layout, capacity).total
        if hardware is not None:
            steps[index] = estimate_performance(shape, layout, hardware,
                                                values["global_batch_size"]).step_time_s
    return totals, steps


def _layout(spec, v: dict[str, Any], recompute):
    """The estimate's layout of a row's values (numbers, or for a group columns of them)."""
    first, last = v["first_stage_layers"], v["last_stage_layers"]
    if spec.parallelism.pipeline_layout is not None:  # the first and last rank's layers of the layout
        first, last = _layout_stages(spec, v["pp"])
    return spec_layout(spec, zero_stage=v["zero_stage"], distributed_optimizer=v["distributed_optimizer"],
                       recompute=recompute, tp=v["tp"], pp=v["pp"], cp=v["cp"], ep=v["ep"], etp=v["etp"],
                       vpp=v["vpp"], dp=v["dp"], micro_batch_size=v["micro_batch_size"],
                       num_microbatches=v["gradient_accumulation_steps"],
                       sequence_parallel=v["sequence_parallel"],
                       first_stage_layers=first, last_stage_layers=last)


def _layout_stages(spec, pp):
    """(first, last) rank layers of the spec's pipeline layout at pp (a number or a column)."""
    def split(one: int) -> tuple[int | None, int | None]:
        return replace(spec.parallelism, pp=int(one)).split_layers(spec.model.num_layers)

    if numpy.ndim(pp) == 0:
        return split(pp)
    pairs = [split(one) for one in numpy.asarray(pp)]
    return (numpy.array([f if f is not None else numpy.nan for f, _ in pairs]),
            numpy.array([x if x is not None else numpy.nan for _, x in pairs]))


def _shape(spec, tp: int, shapes: dict[int, Shape]) -> Shape:
    """The model as built for a tp (Megatron pads the vocabulary for it), one per tp."""
    if tp not in shapes:
        megatron = framework_of(spec.framework).megatron_arguments
        shapes[tp] = Shape.of(spec.model, spec.model.padded_vocab_size(tp) if megatron else None,
                              dialect_of(spec))
    return shapes[tp]


def _layouts(spec, choices: dict[str, list], rules: _Rules, out: Search):
    """Every combination of the choices that passes the structural rules, as the varying facts;
    the rules of a level run as soon as its values are set, so a rejection prunes the levels
    below it."""
    # each level's values, from the values of the levels above that it reads (memoized on them)
    levels = ((_tensor, ()), (_sizes, ("tp",)), (_pipelines, ("pp", "dp")), (_batches, ("dp",)),
              (_sharding, ()))
    memo: dict[tuple, list[dict[str, Any]]] = {}

    def expand(level: int, v: dict[str, Any]):
        if level == len(levels):
            yield v
            return
        make, reads = levels[level]
        key = (level, *(v[n] for n in reads))
        if key not in memo:
            memo[key] = list(make(spec, choices, v))
        for update in memo[key]:
            values = {**v, **update}
            finding = rules.first_error(level, values)
            if finding is not None:
                out.rejected[finding.code] += 1
            else:
                yield from expand(level + 1, values)

    yield from expand(0, {})


def _tensor(spec, choices, v):
    fixed_sp = "sequence_parallel" in (spec.doc.data.get("parallelism") or {})
    expressible_sp = not framework_of(spec.framework).plain_deepspeed and \
        expressible(spec, "sequence_parallel", [True]) == [True]
    for tp in choices["tp"]:
        sp = spec.parallelism.sequence_parallel if fixed_sp else tp > 1 and expressible_sp
        yield {"tp": tp, "sequence_parallel": sp, "etp": spec.parallelism.etp or tp}


def _sizes(spec, choices, v):
    world = spec.cluster.nodes * spec.cluster.gpus_per_node
    for pp, cp, ep in itertools.product(choices["pp"], choices["cp"], choices["ep"]):
        model_parallel = v["tp"] * pp * cp
        yield {"pp": pp, "cp": cp, "ep": ep,
               "dp": world // model_parallel if world % model_parallel == 0 else None}


def _pipelines(spec, choices, v):
    if v["dp"] is None:  # GL003 has said why
        return
    for vpp, first, last in _pipeline_splits(spec, choices["vpp"], v["pp"]):
        yield {"vpp": vpp, "first_stage_layers": first, "last_stage_layers": last}


def _batches(spec, choices, v):
    """The batch the calculator solves for each micro batch (a token target picks its global)."""
    b = spec.batch
    for micro in choices["micro_batch_size"]:
        solved = solve_batch(micro, b.gradient_accumulation_steps, b.global_batch_size,
                             b.tokens_per_step, v["dp"], spec.model.seq_length)
        facts = {"micro_batch_size": Fact(micro, SEARCH),
                 "gradient_accumulation_steps": Fact(b.gradient_accumulation_steps, SEARCH),
                 "global_batch_size": Fact(b.global_batch_size, SEARCH),
                 "tokens_per_step": Fact(b.tokens_per_step, SEARCH)}
        batch_facts(facts, solved)
        yield {k: facts[k].value if k in facts else None for k in _BATCH}


_BATCH = ("micro_batch_size", "gradient_accumulation_steps", "global_batch_size",
          "tokens_per_step", "tokens_per_step_target")


def _sharding(spec, choices, v):
    for zero, dist_opt in itertools.product(choices["zero_stage"], choices["distributed_optimizer"]):
        yield {"zero_stage": zero, "distributed_optimizer": dist_opt}


def _pipeline_splits(spec, vpp_choice: list, pp: int) -> list[tuple[int, int | None, int | None]]:
    """(vpp, first stage layers, last stage layers) to try for one pp: even stages when pp
    divides the layers; else (a dialect with uneven pipelines, stage counts not fixed by the
    spec) the uneven split that keeps the rest even (rules.megatron.uneven_split)."""
    layers, p = spec.model.num_layers, spec.parallelism
    layout = p.layout()
    if layout is not None:  # its stages give vpp (the stages' layers: _layout); one that does not fit: GL235
        return [(layout.vpp(pp), None, None)] if len(layout.stages) % pp == 0 else [(1, None, None)]
    fixed = (p.first_stage_layers, p.last_stage_layers)
    d = dialect_of(spec)
    if fixed != (None, None) or layers % pp == 0 or d is None or not d.can("uneven_pipeline"):
        per_stage = layers // pp if layers % pp == 0 and fixed == (None, None) else \
            math.gcd(*(x for x in (*fixed, layers) if x))
        return [(v, *fixed) for v in virtual_stages(vpp_choice, per_stage, pp)]
    k = uneven_split(layers, pp)
    if k is None:
        return [(1, None, None)]  # GL009 says why
    out = []
    for v in virtual_stages(vpp_choice, math.gcd(k, (layers - 2 * k) // (pp - 2)), pp):
        kv = uneven_split(layers, pp, v)
        if kv is not None:
            out.append((v, kv, kv))
    return out


def _gpu(name: str) -> dict:
    return presets.gpus()[name]


def _estimate(spec, shape: Shape, v: dict[str, Any], recompute: str, capacity, hardware) -> Candidate:
    layout = _layout(spec, v, recompute)
    memory = estimate_memory(shape, layout, capacity)
    performance = None if hardware is None else estimate_performance(
        shape, layout, hardware, v["global_batch_size"])
    return Candidate(v["tp"], v["pp"], v["cp"], v["ep"], v["vpp"], v["dp"], v["micro_batch_size"],
                     v["gradient_accumulation_steps"], v["global_batch_size"], v["zero_stage"],
                     v["distributed_optimizer"], recompute, v["sequence_parallel"], memory, performance,
                     v["first_stage_layers"], v["last_stage_layers"])


def concrete(spec, candidate: Candidate):
    """The template spec with the candidate's values (for the calculator)."""
    p = replace(spec.parallelism, tp=candidate.tp, pp=candidate.pp, cp=candidate.cp, ep=candidate.ep,
                vpp=candidate.vpp, zero_stage=candidate.zero_stage,
                first_stage_layers=candidate.first_stage_layers,
                last_stage_layers=candidate.last_stage_layers,
                distributed_optimizer=candidate.distributed_optimizer,
                sequence_parallel=candidate.sequence_parallel)
    return replace(spec, parallelism=p,
                   batch=replace(spec.batch, micro_batch_size=candidate.micro_batch_size),
                   training=replace(spec.training, recompute=candidate.recompute))


def _refusal(spec, candidate: Candidate) -> str | None:
    """None when the calculator resolves the candidate, else the code of its first error (the
    rules and the dialect's checks: the search has estimated it, and it fits)."""
    try:
        checked_plan(concrete(spec, candidate))
    except PlanError as exc:
        return exc.findings[0].code
    return None
