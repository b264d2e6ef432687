"""Each spec field is defined once: the typed sections (spec/model.py) and the schema agree field
for field and default for default, every list of model fields is read from the fields'
metadata, and one constructor builds a section from the schema, so that adding a field is a
schema property and a typed field."""

from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any

import pytest

from generator.dialects import spec_field_names
from generator.run import load_spec
from generator.spec.fields import MISSING, At, _section_class, fields_of, section
from generator.spec.load import load_yaml
from generator.spec.model import (
    ARCHITECTURE,
    MODEL_REQUIRED,
    NULL_IS_A_VALUE,
    Model,
    RopeScaling,
    Spec,
    Training,
    Warmup,
)
from generator.spec.schema import spec_schema
from generator.values import value

from .conftest import ROOT

# schema properties that are no field of their section's class, and why
SCHEMA_ONLY = {
    "$.extends": "merged away by spec/overlay.py before the spec is typed",
    "$.stages": "each stage becomes a spec of its own (stage_specs); Spec.stage_names lists them",
    "$.sweep": "each point becomes a spec of its own (sweep.py)",
    "$.launch.unsafe_env": "read by launch.env's check (the names it permits), not used after",
}
# fields that are no schema property, and why
CLASS_ONLY = {
    "$.source": "the spec file's name as given", "$.doc": "the document, for locations",
    "$.stage": "set by stage_specs", "$.stage_names": "from $.stages",
    "$.auto": "auto-plan's search, when it ran",
}
# a section-typed field that mirrors no mapping of the schema (its convert builds it)
NOT_A_MIRROR = {"$.training.warmup": "a fraction or one of {iters|samples|tokens: N}: Warmup(unit, amount)"}


def _sections(cls: type = Spec, node: dict | None = None, path: str = "$"):
    """(class, its schema node, path) for the spec and every section nested in it."""
    node = spec_schema() if node is None else node
    yield cls, node, path
    properties = _properties(node)
    for f in dataclasses.fields(cls):
        nested = _section_class(cls, f)
        where = f"{path}.{f.name}"
        if nested is not None and f.name in properties and where not in NOT_A_MIRROR:
            yield from _sections(nested, properties[f.name], where)


def _properties(node: dict) -> dict[str, Any]:
    return node.get("properties", {})


def test_every_section_is_found() -> None:
    found = {path for _, _, path in _sections()}
    assert found == {"$", "$.cluster", "$.model", "$.model.rope_scaling", "$.parallelism", "$.batch",
                     "$.training", "$.training.lr_scaling", "$.launch", "$.slurm", "$.megatron", "$.torchtitan",
                     "$.data", "$.tokenizer", "$.checkpoint", "$.logging", "$.eval", "$.kubernetes",
                     "$.skypilot"}


@pytest.mark.parametrize(("cls", "node", "path"), list(_sections()), ids=lambda x: x if isinstance(x, str) else "")
def test_the_fields_are_the_schema_properties(cls: type, node: dict, path: str) -> None:
    """Every property of a section's schema is a field of its class, with the same name, and
    every field a property: but for the exceptions listed above, with why, and the fields a
    dialect table carries as they are (an entry with `spec:` and no `value:`: no code reads them,
    plan/values.py's spec_field_values gives them to the tables)."""
    properties = set(_properties(node))
    names = {f.name for f in dataclasses.fields(cls)}
    carried = {f"$.{dotted}" for dotted in spec_field_names()}
    assert {f"{path}.{k}" for k in properties - names} - carried == {
        k for k in SCHEMA_ONLY if k.rsplit(".", 1)[0] == path}
    assert {f"{path}.{k}" for k in names - properties} == {k for k in CLASS_ONLY if k.rsplit(".", 1)[0] == path}


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not MISSING else f.default


@pytest.mark.parametrize(("cls", "node", "path"), list(_sections()), ids=lambda x: x if isinstance(x, str) else "")
def test_a_default_is_defined_once(cls: type, node: dict, path: str) -> None:
    """A section's defaults are the schema's: its class gives none of its own. The model's are
    Megatron's, applied after the preset, so the schema cannot hold them as JSON Schema
    defaults (an editor or a validator would fill them in over the preset's): the class holds
    them, and each field's description states the same value ("Default 0.1")."""
    properties = _properties(node)
    for f in dataclasses.fields(cls):
        if f.name not in properties or _default(f) is MISSING:
            continue
        sub = properties[f.name]
        where = f"{path}.{f.name}"
        if cls not in (Model, RopeScaling):
            pytest.fail(f"{where}: the class gives a default; the schema's ({sub.get('default', 'none')}) "
                        "is the one used")
        if "default" in sub:
            assert sub["default"] == _default(f), where
            continue
        stated = re.search(r"[Dd]efault:? \(?([^\s,;:()]+)", sub["description"])
        assert stated, f"{where}: the description does not state the default {_default(f)!r}"
        assert _parsed(stated.group(1).rstrip(".")) == _default(f), where


def _parsed(text: str) -> Any:
    words = {"null": None, "true": True, "false": False}
    if text in words:
        return words[text]
    try:
        return float(text)
    except ValueError:
        return text


def test_model_metadata_matches_the_schema() -> None:
    """Every model field (but the preset) has a group and says what it means for a resume; a
    required one cannot be null; a null_is_a_value one can, and has no schema default (an absent
    field would null the preset's value); a derived one has no default of its own."""
    properties = _properties(spec_schema()["properties"]["model"])
    for f in dataclasses.fields(Model):
        types = properties[f.name].get("type", [])
        nullable = "null" in types or None in properties[f.name].get("enum", ())
        if f.name != "preset":
            assert f.metadata["group"] in ("shape", "architecture", "moe"), f.name
            assert f.metadata["resume"] in ("weights", "behaviour", None), f.name
        if f.name in MODEL_REQUIRED:
            assert not nullable and f.default is MISSING, f.name
        if f.name in NULL_IS_A_VALUE:
            assert nullable and "default" not in properties[f.name], f.name
        if "derive" in f.metadata:
            assert f.default is MISSING, f.name


def test_the_model_lists_are_the_metadata() -> None:
    assert MODEL_REQUIRED == ("num_layers", "hidden_size", "num_attention_heads", "vocab_size", "seq_length")
    assert NULL_IS_A_VALUE == ("qkv_bias", "rope_scaling", "kv_channels", "q_lora_rank", "window_size",
                               "window_attn_skip_freq", "activation_clamp", "mtp_num_layers",
                               "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size", "moe_z_loss_coeff",
                               "moe_router_pre_softmax", "moe_router_num_groups", "moe_router_group_topk",
                               "moe_router_topk_scaling_factor", "moe_router_dtype", "moe_capacity_factor",
                               "moe_token_dispatcher", "moe_flex_dispatcher_backend")
    derived = {"qkv_bias", "kv_channels", "moe_router_pre_softmax"}
    assert not derived & set(ARCHITECTURE)
    assert set(fields_of(Model, group=("architecture", "moe"))) == {*ARCHITECTURE, *derived}


# a spec field the code has never seen, added the way the recipe says: a typed field ...
@value
class _TrainingWithMore(Training):
    eval_tokens: int | None  # a count (4Mi)
    noise_scale: float  # a number with a default
    probe_dirs: tuple[str, ...]  # a list


# ... and a schema property (on a scratch copy of the schema)
def _schema_with_more() -> dict:
    schema = copy.deepcopy(spec_schema())
    count = copy.deepcopy(schema["properties"]["training"]["properties"]["train_tokens"])
    schema["properties"]["training"]["properties"].update(
        eval_tokens={**count, "description": "Tokens of each evaluation."},
        noise_scale={"type": "number", "default": 0, "description": "Gradient noise."},
        probe_dirs={"type": "array", "items": {"type": "string"}, "default": [], "description": "Probes."})
    return schema


def test_a_new_field_is_a_schema_property_and_a_typed_field() -> None:
    """The constructor fills, defaults and converts a field it has never seen by name: no
    constructor edit."""
    path = ROOT / "samples" / "llama3-8b-pretrain.yaml"
    text = path.read_text().replace("training:\n", "training:\n  eval_tokens: 4Mi\n  probe_dirs: [/a, /b]\n", 1)
    doc = load_yaml(text, "scratch.yaml")
    node = _schema_with_more()["properties"]["training"]
    built = section(_TrainingWithMore, doc.data["training"], node, At(doc, ("training",)))
    assert built.eval_tokens == 4 * 2**20
    assert built.noise_scale == 0.0 and isinstance(built.noise_scale, float)
    assert built.probe_dirs == ("/a", "/b")
    spec = load_spec(path)
    assert all(getattr(built, f.name) == getattr(spec.training, f.name) for f in dataclasses.fields(Training))

    bad = load_yaml(text.replace("eval_tokens: 4Mi", "eval_tokens: 0Mi"), "scratch.yaml")
    with pytest.raises(Exception, match=r"\$\.training\.eval_tokens: must be positive, got '0Mi'") as caught:
        section(_TrainingWithMore, bad.data["training"], node, At(bad, ("training",)))
    assert str(caught.value.location).startswith("scratch.yaml:")


def test_warmup_is_converted_by_its_own_field() -> None:
    spec = load_spec(ROOT / "samples" / "llama3-8b-pretrain.yaml")
    assert spec.training.warmup == Warmup("iters", 2000)


@pytest.mark.parametrize(("sample", "setting", "message"), [
    ("bloom-176b-rampup", 'batch.rampup.samples="0M"', r"\$\.batch\.rampup\.samples: must be positive, got '0M'"),
    ("llama3-8b-pretrain", 'training.warmup={iters: "0K"}',
     r"\$\.training\.warmup\.iters: must be positive, got '0K'"),
    ("llama3-8b-pretrain", "training.train_tokens=0T", r"\$\.training\.train_tokens: must be positive, got '0T'"),
])
def test_a_count_is_held_to_its_schema_bounds_in_every_form(sample: str, setting: str, message: str) -> None:
    """A count written with a suffix is held to the minimum of the schema's integer form, as the
    integer is (0 is refused; 0M was taken for a ramp-up or warmup of nothing)."""
    from generator.errors import UserError

    with pytest.raises(UserError, match=message) as caught:
        load_spec(ROOT / "samples" / f"{sample}.yaml", overrides=(setting,))
    assert re.match(r"--set .*:\d+:\d+$", str(caught.value.location))
