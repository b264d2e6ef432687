"""The dialect tables are the only map between plan values, flags or keys and spec fields: every
value a table writes is one the plan provides, every value the Megatron arguments carry has one
spec field (from the tables' `spec:` / `origin:` keys), and a name nobody provides is an error,
never a flag silently left out."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from generator.dialects import (
    TableError,
    dialect,
    megatron_dialect_names,
    table_entries,
    value_fields,
)
from generator.dialects.arguments import _CARRIED, argument_lines, run_io_fields, unexpressed
from generator.dialects.keyed import keyed_dialect
from generator.plan.values import accelerate_values, deepspeed_values, megatron_values, trainer_values
from generator.run import load_spec, resolve_run

from .conftest import SAMPLES


@cache
def _plans() -> tuple:
    out = []
    for sample in SAMPLES:
        spec = load_spec(sample)
        if spec.doc.data.get("sweep"):
            continue
        out += resolve_run(spec)
    return tuple(out)


def _provided(kind: str) -> set[str]:
    """The names of the values the plan gives a table of this kind (union over the samples)."""
    names: set[str] = set()
    for plan in _plans():
        if kind == "megatron" and plan.uses_megatron:
            names |= set(megatron_values(plan))
        elif kind == "trainer" and plan.uses_trainer:
            names |= set(trainer_values(plan))
        elif kind == "deepspeed" and plan.uses_deepspeed:
            names |= set(deepspeed_values(plan))
        elif kind == "accelerate" and plan.spec.launch.launcher == "accelerate":
            names |= set(accelerate_values(plan))
    assert names, f"no sample renders a {kind} file"
    return names


@pytest.mark.parametrize("name", [*megatron_dialect_names(), "trainer"])
def test_every_value_a_table_writes_is_one_the_plan_provides(name: str) -> None:
    provided = _provided("trainer" if name == "trainer" else "megatron")
    unknown = sorted({f"{e.flag}: {v}" for e in table_entries(name) if e.write
                      for v in (e.value, e.same_as, *(e.only or ())) if v is not None and v not in provided})
    assert not unknown, unknown


@pytest.mark.parametrize("name", ["deepspeed", "accelerate"])
def test_every_value_a_keyed_table_writes_is_one_the_plan_provides(name: str) -> None:
    provided = _provided(name)
    unknown = sorted({f"{k.key}: {v}" for k in keyed_dialect(name).keys if k.write
                      for v in (k.value, *(k.only or ())) if v is not None and v not in provided})
    assert not unknown, unknown


def test_every_value_the_megatron_arguments_carry_has_one_spec_field() -> None:
    """A dialect without a spelling for a set value refuses it at its field (GL218): so each value
    needs its field, from a table (or is one of the values that only say how others are written)."""
    fields = value_fields()
    missing = sorted(provided for provided in _provided("megatron")
                     if provided not in fields and provided not in _CARRIED)
    assert not missing, missing
    assert fields["num_query_groups"] == "model.num_query_groups"
    assert fields["load"] == "checkpoint.dir" and fields["fp8_param_gather"] == "training.precision"
    assert run_io_fields()["save"] == "checkpoint.dir" and "packing" not in run_io_fields()


def test_a_value_no_table_maps_is_an_error_not_a_silent_skip() -> None:
    d = dialect("megatron-deepspeed/bigscience")
    plan = next(p for p in _plans() if p.uses_megatron)
    values = megatron_values(plan)
    with pytest.raises(TableError, match="moe_new_knob has no spec field"):
        unexpressed(d, {**values, "moe_new_knob": 4})
    with pytest.raises(TableError, match="the plan provides no value"):
        argument_lines(d, {k: v for k, v in values.items() if k != "num_layers"})


def _fork_lines(text: str, name: str) -> list[str]:
    start = text.index(f"\n{name}:\n")
    end = text.find("\n\n", start + 1)
    return [line.strip() for line in text[start:end if end > 0 else None].splitlines()
            if line.strip().startswith("- {flag:")]


def test_forks_share_their_common_entries_not_copies() -> None:
    """The two Megatron-DeepSpeed tables write what they spell alike from one definition (anchors
    listed in place): most of their entries are equal, yet megatron.yaml holds each such line once."""
    microsoft = table_entries("megatron-deepspeed/microsoft")
    bigscience = table_entries("megatron-deepspeed/bigscience")
    shared = {repr(e) for e in microsoft} & {repr(e) for e in bigscience}
    assert len(shared) >= 50
    text = (Path(__file__).resolve().parent.parent / "generator/dialects/megatron.yaml").read_text()
    copied = set(_fork_lines(text, "megatron-deepspeed/microsoft")) & set(
        _fork_lines(text, "megatron-deepspeed/bigscience"))
    assert len(copied) <= 3, sorted(copied)
