"""Exhaustive layout search: every combination of the searched values that the structural rules
allow (the calculator's own rules, memoized per rule on the values each one reads), estimated
with the memory and step-time models, ranked by step time and then memory headroom. The best
candidates are resolved by the calculator before they are offered."""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from generator.autoplan.space import expressible, virtual_stages
from generator.estimate.memory import Memory, estimate_memory
from generator.estimate.params import Shape
from generator.estimate.performance import Performance, estimate_performance
from generator.estimate.plan import hardware_of, spec_layout, usable_memory_gib
from generator.plan.batch import solve_batch
from generator.plan.plan import PlanError, batch_facts, resolve, spec_facts
from generator.rules import RULES, Fact, Finding
from generator.rules.megatron import uneven_split

SEARCH = "auto-plan"
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


@dataclass
class Search:
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

    @property
    def per_second(self) -> float:
        return self.evaluated / self.seconds if self.seconds else 0.0


class _Rules:
    """The calculator's structural rules, each memoized on the varying values it reads."""

    def __init__(self, static: dict[str, Fact]) -> None:
        self.static = {k: v for k, v in static.items() if k not in VARYING}
        self.cache: dict[tuple, Finding | None] = {}
        self.by_level: list[list[tuple[Any, tuple[str, ...]]]] = [[] for _ in range(5)]
        self.fixed: list[Finding] = []  # errors of the fixed values alone: no layout helps
        for rule in RULES.values():
            if rule.severity != "error":
                continue
            names = tuple(n for n in (*rule.needs, *rule.optional) if n in _LEVEL)
            if names:
                self.by_level[max(_LEVEL[n] for n in names)].append((rule, names))
            elif (finding := rule.run(self.static)) is not None:
                self.fixed.append(finding)

    def first_error(self, level: int, varying: dict[str, Any]) -> Finding | None:
        for rule, names in self.by_level[level]:
            key = (rule.code, *(varying.get(n) for n in names))
            if key not in self.cache:
                facts = {n: self.static[n] for n in (*rule.needs, *rule.optional) if n in self.static}
                facts.update({n: Fact(varying[n], SEARCH) for n in names if varying.get(n) is not None})
                self.cache[key] = rule.run(facts)
            if self.cache[key] is not None:
                return self.cache[key]
        return None


PROGRESS_AFTER_S = 1.0  # a search that takes longer says how far it is


def _terminal_progress(evaluated: int, seconds: float, done: bool) -> None:
    """On a terminal, one line that counts the candidates (stderr; nothing in logs or pipes)."""
    import sys

    if not sys.stderr.isatty():
        return
    sys.stderr.write(f"\rauto-plan: {evaluated:,} candidates in {seconds:.1f} s" + ("\n" if done else ""))
    sys.stderr.flush()


def search(spec, choices: dict[str, list], keep: int = 10, progress=_terminal_progress) -> Search:
    """Rank every layout of ``choices`` (from space.domains) for the template ``spec``; the
    best ``keep`` that the calculator resolves are in ``ranked``. A search longer than
    PROGRESS_AFTER_S reports ``progress(evaluated, seconds, done)`` every 2,000 candidates."""
    start = time.perf_counter()
    reported = False
    out = Search()
    gpu = _gpu(spec.cluster.gpu)
    capacity = usable_memory_gib(spec, gpu)
    hardware = hardware_of(gpu, spec.training.precision, spec.cluster.gpus_per_node)
    megatron = spec.framework.startswith("megatron")
    shapes: dict[int, Shape] = {}  # by tp: Megatron pads the vocabulary for it
    fitting: list[Candidate] = []
    rules = _Rules(spec_facts(spec))
    if rules.fixed:
        raise PlanError(rules.fixed)
    for v in _layouts(spec, choices, rules, out):
        out.layouts += 1
        for recompute in choices["recompute"]:
            tp = v["tp"] if megatron else 1
            if tp not in shapes:
                shapes[tp] = Shape.of(spec.model, spec.model.padded_vocab_size(tp) if megatron else None)
            candidate = _estimate(spec, shapes[tp], v, recompute, capacity, hardware)
            out.evaluated += 1
            if out.evaluated % 2000 == 0 and time.perf_counter() - start > PROGRESS_AFTER_S:
                progress(out.evaluated, time.perf_counter() - start, False)
                reported = True
            if out.smallest is None or candidate.memory.total < out.smallest.memory.total:
                out.smallest = candidate
            if candidate.memory.fits is not False:
                fitting.append(candidate)
    out.fitting = len(fitting)
    if reported:
        progress(out.evaluated, time.perf_counter() - start, True)
    fitting.sort(key=lambda x: (x.step_time, -x.headroom))
    seen: set[tuple] = set()
    for candidate in fitting:  # each parallel layout once, with its best micro batch and settings
        if len(out.ranked) == keep:
            break
        if candidate.layout in seen:
            continue
        error = _refusal(spec, candidate)
        if error is None:
            out.ranked.append(candidate)
            seen.add(candidate.layout)
        else:
            out.refused[error] += 1
    out.seconds = time.perf_counter() - start
    return out


def _layouts(spec, choices: dict[str, list], rules: _Rules, out: Search):
    """Every combination of the choices that passes the structural rules, as the varying facts;
    the rules of a level run as soon as its values are set, so a rejection prunes the levels
    below it."""
    levels = (_tensor, _sizes, _pipelines, _batches, _sharding)

    def expand(level: int, v: dict[str, Any]):
        if level == len(levels):
            yield v
            return
        for update in levels[level](spec, choices, v):
            values = {**v, **update}
            finding = rules.first_error(level, values)
            if finding is not None:
                out.rejected[finding.code] += 1
            else:
                yield from expand(level + 1, values)

    yield from expand(0, {})


def _tensor(spec, choices, v):
    fixed_sp = "sequence_parallel" in (spec.doc.data.get("parallelism") or {})
    expressible_sp = spec.framework != "deepspeed" and \
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
    from generator.dialects import dialect_of

    layers, p = spec.model.num_layers, spec.parallelism
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
    from generator import presets

    return presets.gpus()[name]


def _estimate(spec, shape: Shape, v: dict[str, Any], recompute: str, capacity, hardware) -> Candidate:
    layout = spec_layout(spec, zero_stage=v["zero_stage"], distributed_optimizer=v["distributed_optimizer"],
                         recompute=recompute, tp=v["tp"], pp=v["pp"], cp=v["cp"], ep=v["ep"], etp=v["etp"],
                         vpp=v["vpp"], dp=v["dp"], micro_batch_size=v["micro_batch_size"],
                         num_microbatches=v["gradient_accumulation_steps"],
                         sequence_parallel=v["sequence_parallel"],
                         first_stage_layers=v["first_stage_layers"], last_stage_layers=v["last_stage_layers"])
    memory = estimate_memory(shape, layout, capacity)
    performance = None if hardware is None else estimate_performance(
        shape, layout, hardware, v["global_batch_size"], spec.model.moe_top_k)
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
    """None when the calculator resolves the candidate, else the code of its first error."""
    try:
        resolve(concrete(spec, candidate))
    except PlanError as exc:
        return exc.findings[0].code
    return None
