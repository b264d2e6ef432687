"""A config registry's command line (torchtitan 0.3: ``--module M --config F`` then tyro's
``--section.field`` overrides and, last, a subcommand word) -> facts, walking its dialect table
backward: each entry's value under its fact name (tp, dp_shard, global_batch_size, ...), and what
the run's batch comes to (torchtitan's local batch is the micro batch, or with pipelining
pipeline micro-batches of pipeline_parallel_microbatch_size). Static: the config function the
words name is not imported (a value it sets and the words leave is unknown)."""

from __future__ import annotations

from generator.dialects import Dialect, dialect, table
from generator.dialects.argv import is_flag, split
from generator.frameworks import FRAMEWORKS


def registry_dialect_of(texts: list[str | None]) -> Dialect | None:
    """The dialect of an entry point's words when they name a config function and override its
    fields (--section.field), at the newest release of its table; else None."""
    flags = {(t or "").partition("=")[0] for t in texts if is_flag(t)}
    name = next(f.name for f in FRAMEWORKS.values() if f.config_registry)
    naming = set(table(name)["extra_options"])  # --module, --config: the function the run starts from
    if not naming <= flags or not any("." in f for f in flags):
        return None
    return dialect(name, tuple(table(name)["releases"])[-1])


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.lstrip("-").isdigit() else None


def _number(kind: str, text: str | None) -> int | float | None:
    """An int or float option's value (None: not a number, or not known statically)."""
    if kind == "int":
        return _int(text)
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def registry_facts(d: Dialect, texts: list[str | None]) -> dict[str, tuple[object, int]]:
    """{fact: (value, index of the word that gives it)} of the words in dialect ``d``."""
    entries = {e.flag: e for e in d.entries}
    options, stray = split(texts, lambda flag: entries[flag].arity if flag in entries else None)
    out: dict[str, tuple[object, int]] = {}
    for option in options:
        entry = entries.get(option.flag)
        if entry is None or entry.value is None:
            continue
        words = option.texts(texts)
        where = option.values[0] if option.values else option.index
        meaning = _number(entry.type, words[0]) if entry.type in ("int", "float") and words \
            else entry.meaning(words)
        out[entry.fact or entry.value] = (meaning, where)
    for k in stray:  # tyro's subcommand (activation-checkpoint:full)
        entry = entries.get(texts[k] or "")
        if entry is not None and entry.value is not None:
            out[entry.fact or entry.value] = (entry.when, k)
    _batch(out)
    return out


def _batch(out: dict[str, tuple[object, int]]) -> None:
    """The plan's micro batch, dp and accumulation as torchtitan derives them from the words."""
    def get(name: str):
        return out.get(name, (None, -1))

    pp, local, piped_micro = get("pp")[0], get("local_batch_size"), get("pp_microbatch_size")
    micro = piped_micro if isinstance(pp, int) and pp > 1 and piped_micro[0] else local
    if isinstance(micro[0], int) and micro[0] > 0:
        out["micro_batch_size"] = micro
    replicate, shard = get("dp_replicate")[0] or 1, get("dp_shard")
    if isinstance(shard[0], int) and shard[0] > 0:  # -1: the leftover ranks (not read here)
        out["dp"] = (replicate * shard[0], shard[1])
    total, dp = get("global_batch_size"), get("dp")[0]
    if isinstance(total[0], int) and isinstance(dp, int) and isinstance(micro[0], int) and micro[0] > 0 \
            and total[0] % (micro[0] * dp) == 0:
        out["gradient_accumulation_steps"] = (total[0] // (micro[0] * dp), total[1])
