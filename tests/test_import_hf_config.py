"""`gen-launch import config.json`: a Hugging Face checkpoint's config gives the spec's model
section. Every released config in tests/data/hf_configs (SOURCES.md says where each is from)
imports to the preset of that name, field by field; the errors are located and teach."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from generator import presets
from generator.cli import app
from generator.errors import UserError
from generator.importer import import_paths
from generator.importer.hf_config import model_section
from generator.run import load_spec
from generator.spec.model import Model, RopeScaling, model_from

from .conftest import ROOT

runner = CliRunner()
CONFIGS = sorted((ROOT / "tests" / "data" / "hf_configs").glob("*.json"))
# the model fields the import contract adds (generator/spec/model.py gains them in another branch)
NEW_FIELDS = {"multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim",
              "qk_pos_emb_head_dim", "v_head_dim", "mtp_num_layers", "moe_router_score_function",
              "moe_router_pre_softmax", "moe_router_expert_bias", "moe_router_num_groups",
              "moe_router_group_topk", "moe_router_topk_scaling_factor", "softmax_type",
              "window_size", "window_attn_skip_freq", "glu_linear_offset", "activation_clamp"}
_MODEL_FIELDS = {f.name for f in dataclasses.fields(Model)}
_SCALING_KEYS = {f.name for f in dataclasses.fields(RopeScaling)}


def _fields(path: Path) -> dict:
    return model_section(json.loads(path.read_text()), str(path))


def _known(fields: dict) -> tuple[dict, set[str]]:
    """The fields this release's Model has, and the names of those it does not have yet."""
    known = {k: v for k, v in fields.items() if k in _MODEL_FIELDS}
    later = set(fields) - set(known)
    scaling = known.get("rope_scaling")
    if isinstance(scaling, dict) and not set(scaling) <= _SCALING_KEYS | {"type"}:
        later.add("rope_scaling")
        del known["rope_scaling"]
    elif isinstance(scaling, dict) and "type" not in _SCALING_KEYS:
        known["rope_scaling"] = {k: v for k, v in scaling.items() if k != "type"}
    return known, later


def test_there_is_a_config_for_every_checkpoint_preset() -> None:
    names = {p.stem for p in CONFIGS}
    assert {"llama2-7b", "llama3-8b", "llama3.1-8b", "llama3.1-405b", "llama3.2-1b", "mistral-7b",
            "mixtral-8x7b", "qwen2.5-7b", "deepseek-v3", "deepseek-v2-lite", "qwen3-8b",
            "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-20b", "gpt-oss-120b"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_config_imports_to_the_preset_of_its_name(path: Path) -> None:
    fields = _fields(path)
    known, later = _known(fields)
    assert later <= NEW_FIELDS | {"rope_scaling"}, later
    if path.stem not in presets.models():  # a preset still to come: the import builds a model
        model = model_from({**known, "seq_length": 4096})
        assert model.num_layers == fields["num_layers"] and model.vocab_size == fields["vocab_size"]
        return
    imported = import_paths([path])
    section = {k.split(".", 1)[1]: v for k, v in imported.draft.values.items() if k.startswith("model.")}
    preset = model_from({"preset": path.stem})
    if "preset" not in section:
        section["seq_length"] = preset.seq_length
    resolved = model_from(section)
    differ = {f.name: (getattr(resolved, f.name), getattr(preset, f.name)) for f in dataclasses.fields(Model)
              if f.name != "preset" and getattr(resolved, f.name) != getattr(preset, f.name)}
    assert not differ
    assert section.get("preset") == path.stem  # written as the preset, not field by field


def test_deepseek_v3_maps_latent_attention_router_and_mtp() -> None:
    fields = _fields(ROOT / "tests/data/hf_configs/deepseek-v3.json")
    assert fields | {} == fields and {k: fields[k] for k in (
        "multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim",
        "v_head_dim", "num_experts", "moe_top_k", "moe_ffn_hidden_size",
        "moe_shared_expert_intermediate_size", "moe_dense_layers", "moe_load_balancing",
        "moe_aux_loss_coeff", "moe_router_score_function", "moe_router_expert_bias",
        "moe_router_num_groups", "moe_router_group_topk", "moe_router_topk_scaling_factor",
        "mtp_num_layers", "qk_layernorm", "ffn_hidden_size")} == {
        "multi_latent_attention": True, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_head_dim": 128,
        "qk_pos_emb_head_dim": 64, "v_head_dim": 128, "num_experts": 256, "moe_top_k": 8,
        "moe_ffn_hidden_size": 2048, "moe_shared_expert_intermediate_size": 2048, "moe_dense_layers": 3,
        "moe_load_balancing": "seq_aux_loss", "moe_aux_loss_coeff": 0.001,
        "moe_router_score_function": "sigmoid", "moe_router_expert_bias": True,
        "moe_router_num_groups": 8, "moe_router_group_topk": 4, "moe_router_topk_scaling_factor": 2.5,
        "mtp_num_layers": 1, "qk_layernorm": True, "ffn_hidden_size": 18432}
    assert fields["rope_scaling"] == {"type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
                                      "mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 32.0,
                                      "beta_slow": 1.0}
    assert "moe_router_pre_softmax" not in fields and "kv_channels" not in fields


def test_deepseek_v2_lite_routes_pre_softmax_without_groups() -> None:
    fields = _fields(ROOT / "tests/data/hf_configs/deepseek-v2-lite.json")
    assert fields["q_lora_rank"] is None and fields["moe_router_pre_softmax"] is True
    assert fields["moe_shared_expert_intermediate_size"] == 2 * 1408 and fields["moe_dense_layers"] == 1
    assert not {"moe_router_num_groups", "moe_router_expert_bias", "moe_router_score_function",
                "moe_router_topk_scaling_factor", "mtp_num_layers"} & set(fields)
    assert fields["rope_scaling"]["mscale"] == fields["rope_scaling"]["mscale_all_dim"] == 0.707


@pytest.mark.parametrize("name, layers, experts", [("gpt-oss-20b", 24, 32), ("gpt-oss-120b", 36, 128)])
def test_gpt_oss_maps_sinks_windows_and_clamped_glu(name: str, layers: int, experts: int) -> None:
    fields = _fields(ROOT / f"tests/data/hf_configs/{name}.json")
    assert {k: fields[k] for k in ("num_layers", "num_experts", "moe_top_k", "activation",
                                   "glu_linear_offset", "activation_clamp", "softmax_type", "window_size",
                                   "window_attn_skip_freq", "linear_bias", "kv_channels",
                                   "num_query_groups", "moe_aux_loss_coeff", "rotary_base")} == {
        "num_layers": layers, "num_experts": experts, "moe_top_k": 4, "activation": "quick_geglu",
        "glu_linear_offset": 1.0, "activation_clamp": 7.0, "softmax_type": "learnable",
        "window_size": [128, 0], "window_attn_skip_freq": 2, "linear_bias": True, "kv_channels": 64,
        "num_query_groups": 8, "moe_aux_loss_coeff": 0.9, "rotary_base": 150000}
    assert "moe_ffn_hidden_size" not in fields  # the experts' width is intermediate_size


@pytest.mark.parametrize("name, kv_channels, moe", [("qwen3-8b", None, None), ("qwen3-32b", 128, None),
                                                    ("qwen3-30b-a3b", 128, 768), ("qwen3-235b-a22b", 128, 1536)])
def test_qwen3_head_dim_and_experts(name: str, kv_channels: int | None, moe: int | None) -> None:
    fields = _fields(ROOT / f"tests/data/hf_configs/{name}.json")
    assert fields.get("kv_channels") == kv_channels and fields.get("moe_ffn_hidden_size") == moe
    assert fields["qk_layernorm"] is True and "moe_router_pre_softmax" not in fields


def _fill(text: str) -> str:
    """The imported spec with its undetermined values decided (what a user does next)."""
    values = {"nodes": "1", "gpus_per_node": "8", "gpu": "h100-80gb", "seq_length": "4096",
              "micro_batch_size": "1", "global_batch_size": "64", "train_iters": "1000", "lr": "3.0e-4"}
    for key, value in values.items():
        text = re.sub(rf"^(\s*{key}): null\b", rf"\1: {value}", text, flags=re.M)
    return text


def test_cli_imports_a_model_without_a_preset_to_a_spec_that_loads(tmp_path: Path) -> None:
    """A Qwen3 of 28 layers (no preset has that shape): written field by field, its training
    length marked as not determined."""
    config = json.loads((ROOT / "tests/data/hf_configs/qwen3-8b.json").read_text())
    config["num_hidden_layers"] = 28
    source = tmp_path / "config.json"
    source.write_text(json.dumps(config, indent=2))
    out = tmp_path / "spec.yaml"
    result = runner.invoke(app, ["import", str(source), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "not determined: model.seq_length" in result.output and "Traceback" not in result.output
    text = out.read_text()
    assert "preset" not in yaml.safe_load(text)["model"] and yaml.safe_load(text)["model"]["qk_layernorm"] is True
    out.write_text(_fill(text))
    spec = load_spec(out)
    assert (spec.model.num_layers, spec.model.num_query_groups, spec.model.ffn_hidden_size,
            spec.model.vocab_size, spec.model.rotary_base, spec.model.norm_epsilon) == (
        28, 8, 12288, 151936, 1000000, 1e-6)


@pytest.mark.parametrize("name", ["qwen3-8b", "deepseek-v3", "gpt-oss-20b"])
def test_cli_names_the_preset_of_a_released_config(name: str) -> None:
    result = runner.invoke(app, ["import", str(ROOT / f"tests/data/hf_configs/{name}.json")])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["model"] == {"preset": name}


def test_cli_writes_a_preset_when_the_config_is_one(tmp_path: Path) -> None:
    result = runner.invoke(app, ["import", str(ROOT / "tests/data/hf_configs/llama3.1-8b.json")])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["model"] == {"preset": "llama3.1-8b"}
    assert "not determined: model" not in result.output


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


_GPT_OSS = (ROOT / "tests/data/hf_configs/gpt-oss-20b.json").read_text()
_QWEN = (ROOT / "tests/data/hf_configs/qwen3-8b.json").read_text()
_BROKEN_TYPES = json.loads(_GPT_OSS)
_BROKEN_TYPES["layer_types"] = ["sliding_attention"] * 3 + ["full_attention"] + \
    ["sliding_attention", "full_attention"] * 10


@pytest.mark.parametrize("text, needle, fix", [
    (_QWEN.replace('"model_type": "qwen3"', '"model_type": "falcon"'), '"model_type"', "qwen3_moe"),
    (_QWEN.replace('"hidden_size": 4096,\n', ""), "{", "hidden_size: missing"),
    (json.dumps(_BROKEN_TYPES, indent=2), '"layer_types"', "window_attn_skip_freq"),
    (_QWEN.replace('"num_hidden_layers": 36', '"num_hidden_layers": "36"'), '"num_hidden_layers"',
     "expected an integer"),
    (_QWEN.replace('"hidden_size": 4096,', '"hidden_size": 4096'), '"initializer_range"', "not valid JSON"),
    (_GPT_OSS.replace('"rope_type": "yarn"', '"rope_type": "dynamic"'), '"rope_scaling"', "llama3"),
], ids=["unknown-model-type", "missing-key", "non-periodic-layers", "string-for-number", "invalid-json",
        "rope-type"])
def test_bad_config_is_a_located_error(text: str, needle: str, fix: str, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    result = runner.invoke(app, ["import", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and fix in result.output
    line = _line_of(text, needle)
    assert re.search(rf"{re.escape(str(path))}:{line}:\d+: ", result.output), result.output


def test_model_section_without_a_file_names_the_source() -> None:
    with pytest.raises(UserError) as error:
        model_section({"model_type": "llama"}, "cfg.json")
    assert str(error.value).startswith("cfg.json: ") and "num_hidden_layers: missing" in str(error.value)


def test_a_deepspeed_json_with_no_model_type_is_still_a_deepspeed_config(tmp_path: Path) -> None:
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2,
                                "gradient_accumulation_steps": 4}))
    imported = import_paths([path])
    assert imported.draft.get("batch.micro_batch_size") == 2
