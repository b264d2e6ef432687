"""The JSON Schema is valid draft-07, documents every field, and matches the presets."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft7Validator

from generator import presets
from generator.spec.schema import spec_schema

from .conftest import SAMPLES


def walk(schema: dict[str, Any], path: str = "$"):
    yield path, schema
    for key, sub in schema.get("properties", {}).items():
        yield from walk(sub, f"{path}.{key}")
    for index, sub in enumerate(schema.get("oneOf", [])):
        if sub.get("type") == "object":
            yield from walk(sub, f"{path}.oneOf[{index}]")


def test_schema_is_valid_draft7() -> None:
    schema = spec_schema()
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    Draft7Validator.check_schema(schema)


def test_every_field_has_a_description_and_objects_are_closed() -> None:
    for path, sub in walk(spec_schema()):
        assert sub.get("description"), f"{path} has no description"
        if sub.get("type") == "object" and "properties" in sub:
            assert sub.get("additionalProperties") is False, f"{path} is open"


def test_preset_names_match_the_preset_files() -> None:
    props = spec_schema()["properties"]
    assert props["cluster"]["properties"]["gpu"]["enum"] == list(presets.gpus())
    assert props["model"]["properties"]["preset"]["enum"] == list(presets.models())


def test_the_megatron_enums_are_the_dialect_tables() -> None:
    """megatron.version lists the releases megatron.yaml has catalogues for, megatron.fork its
    Megatron-DeepSpeed tables: adding a release or a fork is one table entry and one enum value."""
    from generator.dialects import megatron_dialect_names, megatron_releases

    props = spec_schema()["properties"]["megatron"]["properties"]
    assert props["version"]["enum"] == list(megatron_releases())
    forks = [name.split("/", 1)[1] for name in megatron_dialect_names() if name.startswith("megatron-deepspeed/")]
    assert props["fork"]["enum"] == forks


def test_required_presets_exist() -> None:
    assert {"a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb", "b200", "gb200", "mi300x", "mi325x",
            "gaudi3", "ascend-910b", "cpu"} <= set(presets.gpus())
    assert {"gpt3-13b", "gpt3-175b", "llama2-7b", "llama2-70b", "llama3-8b", "llama3-70b",
            "llama3.1-405b", "mixtral-8x7b", "bloom-176b", "gpt-neox-20b"} <= set(presets.models())


def test_model_presets_satisfy_the_shape_rules() -> None:
    for name, shape in presets.models().items():
        assert shape["hidden_size"] % shape["num_attention_heads"] == 0, name
        groups = shape.get("num_query_groups", shape["num_attention_heads"])
        assert shape["num_attention_heads"] % groups == 0, name


def test_samples_carry_the_modeline() -> None:
    for sample in SAMPLES:
        first = sample.read_text().splitlines()[0]
        assert first == "# yaml-language-server: $schema=../schemas/spec.schema.json", sample
