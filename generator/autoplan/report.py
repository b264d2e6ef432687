"""What `gen-launch plan` prints: the ranked table, why the best beats the runner-up, and — when
nothing fits — the smallest estimate with its breakdown and what would make a layout fit."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from generator import presets
from generator.autoplan.search import TIE, Candidate, Search, search
from generator.autoplan.space import domains
from generator.estimate.memory import GIB
from generator.frameworks import framework_of

_COLUMNS = ("#", "tp", "pp", "cp", "ep", "vpp", "dp", "micro", "acc", "sharding", "recompute",
            "memory GiB", "step s", "MFU")
_PARTS = (("compute_s", "compute"), ("memory_s", "memory-bound work"), ("bubble_s", "pipeline bubble"),
          ("tp_comm_s", "tensor-parallel comm"), ("cp_comm_s", "context-parallel comm"),
          ("dp_comm_s", "data-parallel comm"), ("pp_comm_s", "pipeline p2p"),
          ("zero3_gather_s", "ZeRO-3 gathers"), ("moe_comm_s", "MoE all-to-all"))


def layout_text(c: Candidate) -> str:
    split = f" ({c.first_stage_layers}+…+{c.last_stage_layers} layers)" if c.first_stage_layers else ""
    parts = [f"tp {c.tp}", f"pp {c.pp}{split}"]
    parts += [f"{name} {value}" for name, value in (("cp", c.cp), ("ep", c.ep), ("vpp", c.vpp))
              if value > 1]
    parts += [f"micro {c.micro_batch_size}", c.sharding, f"recompute {c.recompute}"]
    return ", ".join(parts)


def _row(rank: int, c: Candidate) -> list[str]:
    p = c.performance
    pp = f"{c.pp}*" if c.first_stage_layers else str(c.pp)
    return [str(rank), str(c.tp), pp, str(c.cp), str(c.ep), str(c.vpp), str(c.dp),
            str(c.micro_batch_size), str(c.gradient_accumulation_steps), c.sharding, c.recompute,
            f"{c.memory.total / GIB:.1f}", f"{p.step_time_s:.3f}" if p else "-",
            f"{p.mfu * 100:.1f}%" if p else "-"]


def table(result: Search, top: int) -> str:
    rows = [list(_COLUMNS)] + [_row(i, c) for i, c in enumerate(result.ranked[:top], start=1)]
    widths = [max(len(r[k]) for r in rows) for k in range(len(_COLUMNS))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if any(c.first_stage_layers for c in result.ranked[:top]):
        lines.append("* uneven pipeline: first and last stage hold fewer layers "
                     "(--decoder-first/last-pipeline-num-layers)")
    return "\n".join(lines)


def summary(spec, result: Search) -> str:
    c = spec.cluster
    rejected = ", ".join(f"{code} {n:,}" for code, n in result.rejected.most_common())
    lines = [f"{spec.name}: {spec.framework} on {c.nodes} × {c.gpus_per_node} {c.gpu}",
             f"{_count(result.layouts, 'layout')} {'passes' if result.layouts == 1 else 'pass'} "
             f"the structural rules (rejections by rule, "
             f"each pruning what lies below it: {rejected or 'none'}); "
             f"{_count(result.evaluated, 'candidate')} estimated (× recompute choices), "
             f"{_fit(result.fitting)}{_within(result)}; {result.seconds:.3f} s, "
             f"{result.per_second:,.0f} candidates/s"]
    lines += [f"note: {note}" for note in result.notes]
    if result.refused:
        lines.append("refused by the calculator after estimating: " +
                     ", ".join(f"{code} {n}" for code, n in result.refused.items()))
    return "\n".join(lines)


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _fit(n: int, word: str = "") -> str:
    """'1 fits', '2 fit', '1 layout fits', '2 layouts fit'."""
    return f"{_count(n, word) if word else f'{n:,}'} {'fits' if n == 1 else 'fit'}"


def _within(result: Search) -> str:
    """' (within 75.6 GiB: 79.6 usable less a 4.0 GiB margin)', or '' without a known memory."""
    if result.limit_gib is None:
        return ""
    usable = result.limit_gib + result.margin_gib
    return (f" (within {result.limit_gib:.1f} GiB: {usable:.1f} usable less a {result.margin_gib:.1f} GiB "
            f"margin of {result.margin * 100:g} %)")


def why_best(ranked: list[Candidate], fitting: int = 1) -> str:
    """One sentence: what makes #1 faster than #2 (the step-time parts that differ most);
    ``fitting``: how many candidates fit (a row is a parallel layout at its best settings)."""
    if not ranked:
        return ""
    best = ranked[0]
    if len(ranked) == 1:
        verbs = "fits is" if fitting == 2 else "fit are"
        others = (f"; the other {_count(fitting - 1, 'candidate')} that {verbs} it with another micro "
                  "batch, recompute or schedule") if fitting > 1 else ""
        return f"{layout_text(best)} is the only parallel layout that fits{others}"
    runner = ranked[1]
    headroom = (f"memory {best.memory.total / GIB:.1f} vs {runner.memory.total / GIB:.1f} GiB of "
                f"{(best.memory.capacity or 0) / GIB:.1f}")
    if best.performance is None or runner.performance is None:
        return f"#1 ({layout_text(best)}) leaves the most memory free: {headroom}"
    gain = runner.step_time - best.step_time
    deltas = sorted(((getattr(runner.performance, attr) - getattr(best.performance, attr), label)
                     for attr, label in _PARTS), key=lambda d: -abs(d[0]))
    parts = ", ".join(f"{label} {'−' if d > 0 else '+'}{abs(d):.3f} s" for d, label in deltas[:2]
                      if abs(d) >= 0.0005)
    if gain == 0:
        return (f"#1 ({layout_text(best)}) and #2 ({layout_text(runner)}) take the same step time; "
                f"#1 leaves more memory free ({headroom})")
    if gain < 0:  # within TIE of the fastest: the memory decides
        return (f"#1 ({layout_text(best)}) is {-gain / runner.step_time * 100:.1f}% slower than #2 "
                f"({layout_text(runner)}), within {TIE * 100:g}%, and leaves more memory free: {headroom}")
    return (f"#1 ({layout_text(best)}) is {gain / runner.step_time * 100:.1f}% faster than #2 "
            f"({layout_text(runner)}): {parts}; {headroom}")


def breakdown(c: Candidate) -> str:
    m = c.memory
    return ", ".join(f"{name} {value / GIB:.1f}" for name, value in (
        ("weights", m.weights), ("gradients", m.gradients), ("optimizer", m.optimizer),
        ("activations", m.activations), ("logits", m.logits), ("other", m.other))) + " GiB"


def nothing_fits(spec, given: dict[str, Any], result: Search) -> str:
    """Why no layout fits and what would: more nodes, a larger GPU, searching more fields."""
    lines = []
    if result.smallest is None:
        rejected = ", ".join(f"{code} ({n:,})" for code, n in result.rejected.most_common(3))
        return (f"auto-plan: no layout passes the structural rules (most often broken: {rejected}); "
                "widen the searched values or change the fixed ones")
    s = result.smallest
    lines.append(f"auto-plan: nothing fits in {result.limit_gib or 0:.1f} GiB{_margin(result)}; the smallest "
                 f"estimate is {s.memory.total / GIB:.1f} GiB ({layout_text(s)}; {s.memory.stage} "
                 f"pipeline stage): {breakdown(s)}")
    tries = [(f"{factor}× the nodes ({spec.cluster.nodes * factor})",
              replace(spec, cluster=replace(spec.cluster, nodes=spec.cluster.nodes * factor)))
             for factor in (2, 4)]
    current = presets.gpus()[spec.cluster.gpu]
    tries += [(f"gpu {name}", replace(spec, cluster=replace(spec.cluster, gpu=name)))
              for name, gpu in presets.gpus().items()
              if (gpu["memory_gib"] or 0) > (current["memory_gib"] or 0)
              and gpu["vendor"] == current["vendor"]]
    would = []
    for label, changed in tries:
        found = search(changed, domains(given, changed), keep=1, margin=result.margin)
        if found.ranked:
            would.append(f"{label}: {_fit(found.fitting, 'layout')}, the best {layout_text(found.ranked[0])}")
    sharding = "parallelism.distributed_optimizer" \
        if framework_of(spec.framework).sharding == "distributed_optimizer" \
        else "parallelism.zero_stage"
    unsearched = [path for path in ("batch.micro_batch_size", "training.recompute", sharding,
                                    "parallelism.pp", "parallelism.tp") if path not in given]
    if unsearched:
        would.append("search more fields: set " + ", ".join(f"{p}: auto" for p in unsearched))
    lines.append("what would fit: " + ("; ".join(would) if would else "nothing tried fits"))
    return "\n".join(lines)


def _margin(result: Search) -> str:
    """' (80.0 less a 4.0 GiB margin)' when a margin is kept, else ''."""
    if not result.margin_gib or result.limit_gib is None:
        return ""
    return f" ({result.limit_gib + result.margin_gib:.1f} less a {result.margin_gib:.1f} GiB margin)"


def candidate_json(c: Candidate) -> dict[str, Any]:
    p = c.performance
    return {"tp": c.tp, "pp": c.pp, "cp": c.cp, "ep": c.ep, "vpp": c.vpp, "dp": c.dp,
            "first_stage_layers": c.first_stage_layers, "last_stage_layers": c.last_stage_layers,
            "micro_batch_size": c.micro_batch_size,
            "gradient_accumulation_steps": c.gradient_accumulation_steps,
            "zero_stage": c.zero_stage, "distributed_optimizer": c.distributed_optimizer,
            "sequence_parallel": c.sequence_parallel, "recompute": c.recompute,
            "memory_gib": round(c.memory.total / GIB, 2), "memory_stage": c.memory.stage,
            "step_time_s": round(p.step_time_s, 4) if p else None,
            "mfu": round(p.mfu, 4) if p else None,
            "tokens_per_s": round(p.tokens_per_s) if p else None}


def plan_json(spec, given: dict[str, Any], result: Search, missing: str | None) -> dict[str, Any]:
    return {"spec": spec.source, "name": spec.name, "searched": given,
            "layouts": result.layouts, "rejected_by_rule": dict(result.rejected),
            "candidates_evaluated": result.evaluated, "fitting": result.fitting,
            "memory_limit_gib": None if result.limit_gib is None else round(result.limit_gib, 2),
            "memory_margin_gib": round(result.margin_gib, 2),
            "refused_by_calculator": dict(result.refused),
            "seconds": round(result.seconds, 4),
            "candidates_per_second": round(result.per_second),
            "ranked": [candidate_json(c) for c in result.ranked],
            "why": why_best(result.ranked, result.fitting) or None, "nothing_fits": missing,
            "notes": result.notes}
