"""One step's pipeline schedule as a timeline: Megatron's 1F1B (PipeDream-Flush) and, with
virtual stages, its interleaved 1F1B (Narayanan et al. 2021, §2.2), each operation placed as
soon as its stage is free and its input has arrived. With every stage as fast as the slowest
(the estimate's assumption) and no time for the sends (the estimate counts them apart), a stage
idles (p − 1)/(v·m) of its busy time: the estimate's bubble."""

from __future__ import annotations

from generator.values import value

FORWARD_SHARE = 1 / 3  # fwd : bwd = 1 : 2 (the estimate's forward_s and backward_s)


@value
class Op:
    """One forward or backward pass of one micro-batch through one model chunk of one stage."""

    stage: int
    chunk: int
    micro: int
    forward: bool
    start: float
    end: float


def _order(stage: int, pp: int, vpp: int, m: int) -> list[tuple[bool, int, int]]:
    """(forward, chunk, micro-batch) in the order Megatron runs them on ``stage``: warm-up
    forwards, then one forward and one backward in turn, then the cool-down backwards; chunks
    visited in groups of pp micro-batches (megatron-core's microbatch_group_size_per_vp_stage)."""
    total = m * vpp

    def chunk_micro(k: int, forward: bool) -> tuple[int, int]:
        chunk = (k // pp) % vpp
        return (chunk if forward else vpp - 1 - chunk), (k // (pp * vpp)) * pp + k % pp

    warmup = min(total, (pp - stage - 1) * 2 + (vpp - 1) * pp) if vpp > 1 else min(m, pp - stage - 1)
    forwards = [(True, *chunk_micro(k, True)) for k in range(total)]
    backwards = [(False, *chunk_micro(k, False)) for k in range(total)]
    order = forwards[:warmup]
    for k in range(total - warmup):
        order += [forwards[warmup + k], backwards[k]]
    return order + backwards[total - warmup:]


def schedule(pp: int, vpp: int, m: int, busy_s: float) -> list[Op]:
    """Every operation of one step; ``busy_s``: one stage's compute for all m micro-batches
    (forward and backward, every chunk). Micro-batches beyond a whole number of groups of pp
    run as Megatron's do (the interleaved schedule needs m to be a multiple of pp: GL rules)."""
    unit = busy_s / (m * vpp)
    cost = {True: unit * FORWARD_SHARE, False: unit * (1 - FORWARD_SHARE)}
    orders = [_order(s, pp, vpp, m) for s in range(pp)]
    done: dict[tuple[bool, int, int], float] = {}  # (forward, virtual stage, micro) -> end
    free, cursor, ops = [0.0] * pp, [0] * pp, []
    last = pp * vpp - 1
    while any(cursor[s] < len(orders[s]) for s in range(pp)):
        progressed = False
        for s in range(pp):
            while cursor[s] < len(orders[s]):
                forward, chunk, micro = orders[s][cursor[s]]
                virtual = chunk * pp + s
                before = (True, virtual - 1, micro) if forward else \
                    (True, last, micro) if virtual == last else (False, virtual + 1, micro)
                ready = 0.0 if forward and virtual == 0 else done.get(before)
                if ready is None:
                    break
                start = max(free[s], ready)
                free[s] = done[(forward, virtual, micro)] = start + cost[forward]
                ops.append(Op(s, chunk, micro, forward, start, free[s]))
                cursor[s] += 1
                progressed = True
        if not progressed:
            raise ValueError(f"pipeline schedule pp {pp} vpp {vpp} m {m} deadlocks")
    return ops
