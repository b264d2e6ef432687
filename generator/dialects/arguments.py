"""A plan's Megatron arguments in its dialect: the plan values (named as in the tables), the
table walked forward into argument lines, and what the dialect cannot express."""

from __future__ import annotations

from functools import cache
from typing import Any

from generator.dialects import (
    Dialect,
    TableError,
    dialect,
    megatron_dialect_names,
    megatron_releases,
    table_entries,
    value_fields,
)
from generator.frameworks import ARGUMENT_DIALECTS
from generator.values import value

# the spec sections of what the run reads and writes (run_io_values): written for the Megatron
# dialects only (GL223); data.packing is how the model sees the data, which every framework writes
RUN_IO_SECTIONS = ("data", "tokenizer", "checkpoint", "logging", "eval")


def _run_io(dotted: str) -> bool:
    return dotted.split(".")[0] in RUN_IO_SECTIONS and dotted != "data.packing"


@cache
def run_io_fields() -> dict[str, str]:
    """plan value -> spec field, for what the run reads and writes (from the tables)."""
    return {name: dotted for name, dotted in value_fields().items() if _run_io(dotted)}


@cache
def table_run_io(name: str) -> tuple[str, ...]:
    """The run-io fields a table other than Megatron's carries (trainer.yaml, torchtitan.yaml; the
    others are the entry point's own: GL223)."""
    fields = (e.origin or e.spec for e in table_entries(name))
    return tuple(dict.fromkeys(f for f in fields if f and _run_io(f)))


# switches whose false is a choice a dialect must be able to write (not "unused")
_FALSE_IS_A_CHOICE = {"linear_bias", "qkv_bias"}
# values that only say how others are written (no flag of their own has to carry them)
_CARRIED = {"world_size", "dp", "global", "accumulation", "steps", "warmup_steps", "vocab_size",
            "layers_per_virtual_stage", "lr_warmup_fraction",
            "wandb_exp_name",  # the run's name in wandb: written with the project, moot without it
            # Megatron-LM's companion of --num-query-groups: the groups are what a dialect must
            # express (microsoft's fork needs only --num-key-value-heads)
            "group_query_attention"}


@value
class Line:
    """One line of the argument array: a comment, or a flag with its (shell-ready) words."""

    comment: str | None = None
    flag: str | None = None
    words: tuple[str, ...] = ()
    raw: bool = False  # words are literal shell text from the table (not plan values)


def argument_lines(d: Dialect, values: dict[str, Any]) -> list[Line]:
    """The dialect's table walked forward over the plan values: comment and flag lines. A value
    the plan does not provide is a mistake in the table, never a flag left out."""
    unknown = sorted({name for entry in d.entries for name in entry.unknown(values)})
    if unknown:
        raise TableError(f"{d.name}: the plan provides no value {', '.join(unknown)} (the values: "
                         "megatron_values)")
    lines: list[Line] = []
    groups = dict(d.groups)
    pending: str | None = None
    for index, entry in enumerate(d.entries):
        if index in groups:
            pending = groups[index]
        words = entry.written(values)
        if words is None:
            continue
        comment = entry.group or pending
        if comment is not None:
            lines.append(Line(comment=comment.format(**values)))
            pending = None
        lines.append(Line(flag=entry.flag, words=tuple(words), raw=entry.raw is not None))
    return lines


def written_flags(d: Dialect, values: dict[str, Any]) -> list[str]:
    """The flags argument_lines writes for these values (without building the lines)."""
    return [e.flag for e in d.entries if e.written(values) is not None]


def unexpressed(d: Dialect, values: dict[str, Any]) -> list[str]:
    """Plan values that the run uses and that no entry of the dialect writes (nor its parser
    assumes): the dialect cannot express them."""
    # a value counts as expressed where an entry writes it, leaves it at the parser's default
    # (omit), or does not apply to this run
    written = {entry.value for entry in d.entries if entry.write and entry.value
               and (entry.written(values) is not None or not entry.applies(values)
                    or (entry.omit is not None and values.get(entry.value) == entry.omit))}
    missing = []
    fields = value_fields()
    for name, given in values.items():
        if name in written or name in _CARRIED or given is None:
            continue
        if name not in fields:
            raise TableError(f"plan value {name} has no spec field: give an entry that carries it "
                             "`spec:` or `origin:` (dialects/megatron.yaml), or list it in _CARRIED")
        if given is False and name not in _FALSE_IS_A_CHOICE:
            continue
        if name in d.defaults and d.defaults[name] == given:
            continue
        missing.append(name)
    return missing


def expressing(name: str, value: Any, values: dict[str, Any], release: str | None) -> list[str]:
    """The dialects that can write ``name`` = ``value``: at ``release`` where the dialect has
    releases, else the releases of it that can (a flag added later: "core_v0.18 or later")."""
    out = []
    values = {**values, name: value}
    for candidate in megatron_dialect_names():
        record = ARGUMENT_DIALECTS[candidate]
        if record.fork is None and (record.vendor == "huawei") != bool(values.get("ascend")):
            continue  # MindSpeed-LLM is Megatron-LM on Ascend, and only there
        d = dialect(candidate, release if record.releases else None)
        if name not in unexpressed(d, values):
            out.append(f"{d} ({record.selected_by})")
        elif record.releases:
            able = [r for r in megatron_releases() if name not in unexpressed(dialect(candidate, r), values)]
            if able:
                later = all(r in able for r in megatron_releases()[megatron_releases().index(able[0]):])
                names = f"{able[0]} or later" if later else ", ".join(able)
                out.append(f"{d.title} {names} (megatron.version: {able[0]})")
    return out

