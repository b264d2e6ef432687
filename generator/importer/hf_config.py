"""A Hugging Face checkpoint's config.json -> the spec's model section (``gen-launch import``).

The mapping is per ``model_type`` (the decoder families the spec can build); what a config gives
that the spec cannot express is refused with the key and the reason, never dropped. A key the
model type's Hugging Face configuration class defaults (rope_theta, attention_bias, dropout, ...)
takes that default when absent, as ``from_pretrained`` does; a key without one is required.
Nothing read is executed: the file is parsed as JSON, with every key's line and column kept for
the messages.
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
import re
from collections.abc import Callable
from typing import Any

from generator import presets
from generator.errors import Location, UserError, UserErrors
from generator.frameworks import FRAMEWORKS
from generator.importer.draft import Draft
from generator.importer.model import _matching_preset
from generator.readers.jsonc import JsonError, Node, parse
from generator.spec.model import Model, model_from
from generator.spec.schema import spec_schema

# model_type -> the defaults of its transformers configuration class for the keys read below
# (LlamaConfig, MistralConfig, MixtralConfig, Qwen2Config, Qwen3Config, Qwen3MoeConfig,
# DeepseekV2Config, DeepseekV3Config, GptOssConfig)
_COMMON = {"hidden_act": "silu", "rope_theta": 10000, "rope_scaling": None, "attention_bias": False,
           "attention_dropout": 0.0, "initializer_range": 0.02, "tie_word_embeddings": False}
DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {**_COMMON, "mlp_bias": False},
    "mistral": {**_COMMON, "sliding_window": None},
    "mixtral": {**_COMMON, "rope_theta": 1000000, "router_aux_loss_coef": 0.001, "sliding_window": None},
    "qwen2": {**_COMMON, "use_sliding_window": False},
    "qwen3": {**_COMMON, "use_sliding_window": False},
    "qwen3_moe": {**_COMMON, "use_sliding_window": False, "decoder_sparse_step": 1, "mlp_only_layers": [],
                  "norm_topk_prob": False, "router_aux_loss_coef": 0.001},
    "deepseek_v2": {**_COMMON, "first_k_dense_replace": 0, "moe_layer_freq": 1, "n_shared_experts": None,
                    "scoring_func": "softmax", "topk_method": "greedy", "n_group": None, "topk_group": None,
                    "norm_topk_prob": False, "routed_scaling_factor": 1.0, "aux_loss_alpha": 0.001,
                    "seq_aux": True, "num_nextn_predict_layers": 0},
    "deepseek_v3": {**_COMMON, "first_k_dense_replace": 3, "moe_layer_freq": 1, "n_shared_experts": 1,
                    "scoring_func": "sigmoid", "topk_method": "noaux_tc", "n_group": 8, "topk_group": 4,
                    "norm_topk_prob": True, "routed_scaling_factor": 2.5, "aux_loss_alpha": 0.001,
                    "seq_aux": True, "num_nextn_predict_layers": 0},
    "gpt_oss": {**_COMMON, "rope_theta": 150000, "attention_bias": True, "router_aux_loss_coef": 0.9,
                "swiglu_limit": 7.0, "layer_types": None, "sliding_window": 128},
}
SUPPORTED = tuple(DEFAULTS)
_MOE = ("mixtral", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt_oss")
_DEEPSEEK = ("deepseek_v2", "deepseek_v3")
# key groups, for "a missing key the model type needs"
_SHAPE = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size",
          "max_position_embeddings", "rms_norm_eps")
_MLA = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
MARKER = "model_type"  # the key that tells a Hugging Face config from a DeepSpeed JSON


def looks_like_hf_config(text: str) -> bool:
    """A JSON object with a top-level ``model_type``: a Hugging Face config (a DeepSpeed JSON has
    none). Cheap: a text without the key is not parsed."""
    if f'"{MARKER}"' not in text:
        return False
    try:
        root = parse(text)
    except JsonError:
        return text.lstrip().startswith("{")  # broken JSON that names model_type: read, to say where
    return isinstance(root.value, dict) and MARKER in root.value


def read_hf_config(text: str, source: str) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(the spec's model fields, the config as plain data, notes) of a config.json's text."""
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def at(offset: int) -> Location:
        line = next(i for i in range(len(starts), 0, -1) if starts[i - 1] <= offset)
        return Location(source, line, offset - starts[line - 1] + 1)

    try:
        root = parse(text)
    except JsonError as exc:
        message = str(exc).replace("in DeepSpeed config", "in config.json")
        raise UserError(f"not valid JSON: {message}; a Hugging Face config.json is one JSON object",
                        at(exc.offset)) from None
    if not isinstance(root.value, dict):
        raise UserError("a Hugging Face config.json is a JSON object", at(root.offset))

    def locate(key: str) -> Location:
        node: Node | None = root.get(key)
        if node is None:
            return at(root.offset)
        return at(node.offset)

    notes: list[str] = []
    config = root.plain()
    return model_section(config, source, locate, notes), config, notes


def model_section(config: dict[str, Any], source: str,
                  locate: Callable[[str], Location] | None = None,
                  notes: list[str] | None = None) -> dict[str, Any]:
    """The spec's model fields a config.json gives (spec names, the contract's values), or a
    UserError naming the key, why, and what the spec can take. ``locate`` places a key in the
    file (default: the file)."""
    return _Mapper(config, source, locate, notes if notes is not None else []).fields()


class _Mapper:
    def __init__(self, config: dict[str, Any], source: str, locate, notes: list[str]) -> None:
        self.config, self.source, self.notes = config, source, notes
        self.locate = locate or (lambda key: Location(source))
        kind = config.get(MARKER)
        if kind not in DEFAULTS:
            raise UserError(f"model_type {kind!r}: import reads the decoder families "
                            f"{', '.join(SUPPORTED)}; write the model section by hand (gen-launch "
                            "schema lists its fields) or choose a preset", self.locate(MARKER))
        self.kind: str = kind
        missing = [k for k in self._required() if self.config.get(k) is None]
        if missing:
            raise UserErrors([UserError(
                f"{key}: missing; a {self.kind} config.json gives it (the model's "
                f"{_WHAT.get(key, 'shape')}) and it has no default; add it (the released checkpoint's "
                "config.json has it)", self.locate("")) for key in missing])

    # --- reading values -------------------------------------------------------------------------

    def _required(self) -> list[str]:
        keys = list(_SHAPE)
        if self.kind not in ("llama", *_DEEPSEEK):  # their classes default it to the head count
            keys.append("num_key_value_heads")
        if self.kind in ("qwen3_moe", *_DEEPSEEK):
            keys.append("moe_intermediate_size")
        keys.append("intermediate_size")
        if self.kind in _MOE:
            keys.append({"mixtral": "num_local_experts", "gpt_oss": "num_local_experts",
                         "qwen3_moe": "num_experts"}.get(self.kind, "n_routed_experts"))
        if self.kind in _DEEPSEEK:
            keys += [k for k in _MLA if k != "q_lora_rank"]
        return keys

    def raw(self, key: str) -> Any:
        if key in self.config:
            return self.config[key]
        return DEFAULTS[self.kind].get(key)

    def _bad(self, key: str, value: Any, expected: str) -> UserError:
        return UserError(f"{key}: expected {expected}, got {_shown(value)}; fix config.json",
                         self.locate(key))

    def int(self, key: str, minimum: int = 1) -> int:
        value = self.raw(key)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self._bad(key, value, f"an integer ≥ {minimum}")
        return value

    def number(self, key: str) -> float:
        value = self.raw(key)
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise self._bad(key, value, "a number")
        return float(value)

    def bool(self, key: str) -> bool:
        value = self.raw(key)
        if not isinstance(value, bool):
            raise self._bad(key, value, "true or false")
        return value

    def refuse(self, key: str, why: str) -> UserError:
        return UserError(f"{key} {_shown(self.raw(key))}: {why}", self.locate(key))

    # --- the mapping ----------------------------------------------------------------------------

    def fields(self) -> dict[str, Any]:
        heads = self.int("num_attention_heads")
        hidden = self.int("hidden_size")
        groups = self.int("num_key_value_heads") if self.raw("num_key_value_heads") is not None else heads
        out: dict[str, Any] = {
            "num_layers": self.int("num_hidden_layers"),
            "hidden_size": hidden,
            "num_attention_heads": heads,
            "num_query_groups": groups,
            "ffn_hidden_size": self.int("intermediate_size"),
            "vocab_size": self.int("vocab_size"),
            "max_position_embeddings": self.int("max_position_embeddings"),
            "activation": self._activation(),
            "normalization": "rmsnorm",
            "position_embedding": "rope",
            "tie_embeddings": self.bool("tie_word_embeddings"),
            "rotary_base": self._rotary_base(),
            "rope_scaling": self._rope_scaling(),
            "norm_epsilon": self.number("rms_norm_eps"),
            "attention_dropout": self.number("attention_dropout"),
            "hidden_dropout": 0.0,  # the Hugging Face decoders have no dropout after the blocks
            "init_method_std": self.number("initializer_range"),
        }
        if heads % groups:
            raise self.refuse("num_key_value_heads", f"does not divide num_attention_heads {heads}")
        out.update(self._biases())
        head_dim = self.raw("head_dim")
        if head_dim is not None and self.kind not in _DEEPSEEK and self.int("head_dim") != hidden // heads:
            out["kv_channels"] = head_dim
        if self.kind in ("qwen3", "qwen3_moe", *_DEEPSEEK):
            out["qk_layernorm"] = True  # Qwen3's QK norm; MLA's latent norms (--qk-layernorm)
        if self.kind in _DEEPSEEK:
            out.update(self._mla())
        if self.kind in _MOE:
            out.update(self._moe())
        if self.kind == "gpt_oss":
            out.update(self._gpt_oss())
        self._sliding_window(out)
        return out

    def _activation(self) -> str:
        act = self.raw("hidden_act")
        if self.kind == "gpt_oss":
            return "quick_geglu"  # gpt-oss's clamped SwiGLU: σ(1.702·x)·x gated, +1 on the linear half
        if act not in ("silu", "swish"):
            raise self.refuse("hidden_act", "the spec's gated MLP is SwiGLU (silu); a gated MLP with "
                              "another activation cannot be expressed")
        return "swiglu"

    def _rotary_base(self) -> int:
        theta = self.number("rope_theta")
        if not theta.is_integer() or theta < 1:
            raise self.refuse("rope_theta", "model.rotary_base is an integer (Megatron's --rotary-base)")
        return int(theta)

    def _rope_scaling(self) -> dict[str, Any] | None:
        block = self.raw("rope_scaling")
        if block is None:
            return None
        if not isinstance(block, dict):
            raise self._bad("rope_scaling", block, "an object or null")
        kind = block.get("rope_type", block.get("type"))
        number = _BlockReader(self, block)
        if kind == "default":
            return None
        if kind == "llama3":
            return {"type": "llama3", "factor": number("factor"),
                    "low_freq_factor": number("low_freq_factor", 1.0),
                    "high_freq_factor": number("high_freq_factor", 4.0),
                    "original_max_position_embeddings": int(number("original_max_position_embeddings", 8192))}
        if kind == "yarn":
            truncate = block.get("truncate", True)
            if not isinstance(truncate, bool):
                raise self._bad("rope_scaling", block, "truncate true or false")
            return {"type": "yarn", "factor": number("factor"),
                    "original_max_position_embeddings": int(number("original_max_position_embeddings")),
                    "mscale": number("mscale", 1.0), "mscale_all_dim": number("mscale_all_dim", 0.0),
                    "beta_fast": number("beta_fast", 32.0), "beta_slow": number("beta_slow", 1.0),
                    # gpt-oss keeps YaRN's correction range unrounded
                    **({} if truncate else {"truncate": False})}
        raise self.refuse("rope_scaling", f"RoPE scaling of type {kind!r}: the spec's model.rope_scaling "
                          "takes llama3 (Llama 3.1) and yarn (DeepSeek, gpt-oss) only")

    def _biases(self) -> dict[str, Any]:
        if self.kind == "qwen2":  # a bias on the QKV projection only, always (no key says it)
            return {"linear_bias": False, "qkv_bias": True}
        bias = self.bool("attention_bias")
        if self.kind == "gpt_oss":
            if not bias:
                raise self.refuse("attention_bias", "gpt-oss's experts and router carry biases "
                                  "(model.linear_bias true); without the attention's the spec cannot "
                                  "express the mix")
            return {"linear_bias": True}
        if bias:
            raise self.refuse("attention_bias", "biases on the attention projections only, none on the "
                              "MLP: the spec's linear_bias covers both (qkv_bias alone is Qwen2's)")
        if self.kind == "llama" and self.bool("mlp_bias"):
            raise self.refuse("mlp_bias", "biases on the MLP only: the spec's linear_bias covers the "
                              "attention too")
        return {"linear_bias": False}

    def _mla(self) -> dict[str, Any]:
        q_rank = self.raw("q_lora_rank")
        return {"multi_latent_attention": True,
                "q_lora_rank": None if q_rank is None else self.int("q_lora_rank"),
                "kv_lora_rank": self.int("kv_lora_rank"),
                "qk_head_dim": self.int("qk_nope_head_dim"),
                "qk_pos_emb_head_dim": self.int("qk_rope_head_dim"),
                "v_head_dim": self.int("v_head_dim")}

    def _moe(self) -> dict[str, Any]:
        experts_key = {"mixtral": "num_local_experts", "gpt_oss": "num_local_experts",
                       "qwen3_moe": "num_experts"}.get(self.kind, "n_routed_experts")
        top_key = "num_experts_per_tok" if "num_experts_per_tok" in self.config else "experts_per_token"
        out: dict[str, Any] = {"num_experts": self.int(experts_key), "moe_top_k": self.int(top_key)}
        if self.kind in ("qwen3_moe", *_DEEPSEEK):
            out["moe_ffn_hidden_size"] = self.int("moe_intermediate_size")
        if self.kind == "qwen3_moe" and (self.int("decoder_sparse_step") != 1 or self.raw("mlp_only_layers")):
            key = "mlp_only_layers" if self.raw("mlp_only_layers") else "decoder_sparse_step"
            raise self.refuse(key, "dense layers between the MoE layers: the spec builds every "
                              "layer as MoE (moe_dense_layers: the first ones only)")
        if self.kind in _DEEPSEEK:
            out.update(self._deepseek_router())
        else:
            out["moe_load_balancing"] = "aux_loss"
            out["moe_aux_loss_coeff"] = self.number("router_aux_loss_coef")
            if self.kind == "qwen3_moe" and not self.bool("norm_topk_prob"):
                out["moe_router_pre_softmax"] = True  # softmax over all experts, top-k not renormalised
        return out

    def _deepseek_router(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        shared = self.raw("n_shared_experts")
        if shared:
            width = self.int("moe_intermediate_size")
            out["moe_shared_expert_intermediate_size"] = self.int("n_shared_experts") * width
        out["moe_dense_layers"] = self.int("first_k_dense_replace", minimum=0)
        if self.int("moe_layer_freq") != 1:
            raise self.refuse("moe_layer_freq", "MoE on every other layer: the spec builds every layer "
                              "after moe_dense_layers as MoE (moe_layer_freq 1)")
        alpha = self.number("aux_loss_alpha")
        out["moe_load_balancing"] = "seq_aux_loss" if self.bool("seq_aux") else "aux_loss"
        out["moe_aux_loss_coeff"] = alpha
        score = self.raw("scoring_func")
        if score not in ("softmax", "sigmoid"):
            raise self.refuse("scoring_func", "the router scores with softmax or sigmoid "
                              "(model.moe_router_score_function)")
        if score != "softmax":
            out["moe_router_score_function"] = score
        normalised = self.bool("norm_topk_prob")
        if score == "softmax" and not normalised:
            out["moe_router_pre_softmax"] = True  # softmax over all experts, top-k not renormalised
        if score == "sigmoid" and not normalised:
            raise self.refuse("norm_topk_prob", "sigmoid scores without normalising the top k: "
                              "Megatron normalises sigmoid top-k scores")
        method = self.raw("topk_method")
        if method not in ("greedy", "group_limited_greedy", "noaux_tc"):
            raise self.refuse("topk_method", "the spec's router takes greedy, group_limited_greedy "
                              "and noaux_tc (expert bias)")
        if method == "noaux_tc":
            out["moe_router_expert_bias"] = True
        groups = self.raw("n_group")
        if method != "greedy" and groups is not None and self.int("n_group") > 1:
            out["moe_router_num_groups"] = groups
            out["moe_router_group_topk"] = self.int("topk_group")
        scale = self.number("routed_scaling_factor")
        if scale != 1.0:
            out["moe_router_topk_scaling_factor"] = scale
        mtp = self.int("num_nextn_predict_layers", minimum=0)
        if mtp:
            out["mtp_num_layers"] = mtp
        return out

    def _gpt_oss(self) -> dict[str, Any]:
        return {"softmax_type": "learnable",  # attention sinks: a learned logit per head
                "glu_linear_offset": 1.0, "activation_clamp": self.number("swiglu_limit")}

    def _sliding_window(self, out: dict[str, Any]) -> None:
        window = self.raw("sliding_window")
        types = self.raw("layer_types")
        if self.kind in ("qwen2", "qwen3", "qwen3_moe"):
            if self.bool("use_sliding_window"):
                raise self.refuse("use_sliding_window", "sliding-window attention on the layers from "
                                  "max_window_layers on: the spec's window pattern is periodic "
                                  "(window_attn_skip_freq)")
            return
        if types is None:
            if window is not None:  # Mistral: every layer slides
                width = self.int("sliding_window")
                self.notes.append(f"sliding_window {width} on every layer: full causal attention at a "
                                  f"seq_length up to {width}; beyond it set model.window_size "
                                  f"[{width}, 0] (a framework flag)")
            return
        if not isinstance(types, list) or not types or \
                any(t not in ("sliding_attention", "full_attention") for t in types):
            raise self._bad("layer_types", types, "a list of sliding_attention / full_attention")
        if len(types) != out["num_layers"]:
            raise self.refuse("layer_types", f"{len(types)} entries for num_hidden_layers "
                              f"{out['num_layers']}")
        full = [i + 1 for i, t in enumerate(types) if t == "full_attention"]
        if len(full) == len(types):
            return
        out["window_size"] = [self.int("sliding_window"), 0]
        if not full:
            return  # every layer slides
        period = full[0]
        if full != list(range(period, len(types) + 1, period)):
            raise self.refuse("layer_types", f"full attention on layers {_ranges(full)} (1-based): the "
                              "spec's pattern is one full-attention layer after every N-1 sliding ones "
                              "(model.window_attn_skip_freq N); this one is not periodic that way")
        out["window_attn_skip_freq"] = period


class _BlockReader:
    """A number from the rope_scaling block (its default when absent), located at the block."""

    def __init__(self, mapper: _Mapper, block: dict[str, Any]) -> None:
        self.mapper, self.block = mapper, block

    def __call__(self, key: str, default: float | None = None) -> float:
        value = self.block.get(key, default)
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise self.mapper._bad(f"rope_scaling.{key}", value, "a number")
        return float(value)


_WHAT = {"moe_intermediate_size": "experts' width", "intermediate_size": "MLP width",
         "num_local_experts": "expert count", "num_experts": "expert count",
         "n_routed_experts": "expert count", "num_key_value_heads": "key/value head count",
         "rms_norm_eps": "normalisation ε", "kv_lora_rank": "latent attention",
         "qk_nope_head_dim": "latent attention", "qk_rope_head_dim": "latent attention",
         "v_head_dim": "latent attention"}


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _ranges(numbers: list[int]) -> str:
    text = ", ".join(map(str, numbers[:8]))
    return text + (", ..." if len(numbers) > 8 else "")


def name_of(source: str) -> str:
    """A run name from the config's path: its folder's name (the checkpoint's), else the file's."""
    parts = [p for p in re.split(r"[\\/]", source) if p]
    stem = parts[-1].rsplit(".", 1)[0] if parts else "model"
    if stem == "config" and len(parts) > 1:
        stem = parts[-2]
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.") or "model"
    return name[:100]


def hf_draft(text: str, source: str) -> Draft:
    """The spec a config.json implies: its model section (a preset when one has every field the
    config gives), and the run's other required values marked as not determined."""
    fields, _, notes = read_hf_config(text, source)
    fields = _expressible(fields, source)
    draft = Draft(notes=list(notes))
    draft.unknown("name", "named after the checkpoint's folder", name_of(source))
    draft.unknown("framework", "a config.json does not say how the model is trained; Megatron-LM "
                  "assumed", next(iter(FRAMEWORKS)))
    for key in ("nodes", "gpus_per_node", "gpu"):
        draft.unknown(f"cluster.{key}", "not in a config.json: the cluster you train on")
    _model(draft, fields)
    for key in ("tp", "pp"):
        draft.unknown(f"parallelism.{key}", "not in a config.json; 1 assumed (gen-launch plan "
                      "searches the parallel sizes)", 1)
    folder = posixpath.dirname(source.replace("\\", "/")) or "."
    draft.set("tokenizer.type", "HuggingFaceTokenizer")
    draft.unknown("tokenizer.model", "the checkpoint's folder, assuming its tokenizer files are "
                  "there", folder)
    draft.unknown("batch.micro_batch_size", "not in a config.json: the training run's batch")
    draft.unknown("batch.global_batch_size", "not in a config.json: the training run's batch")
    draft.unknown("training.train_iters", "not in a config.json: the training run's length")
    draft.unknown("training.lr", "not in a config.json: the training run's learning rate")
    return draft


def _model(draft: Draft, fields: dict[str, Any]) -> None:
    model = model_from({**fields, "seq_length": fields["max_position_embeddings"]})
    closest = _matching_preset(model, None)
    differ = _differences(model, closest) if closest else None
    if closest and not differ:
        preset = presets.models()[closest]
        draft.set("model.preset", closest)
        draft.notes.append(f"every model field the config gives is preset {closest}'s; seq_length "
                           f"{preset['seq_length']} is its training length (override it in the spec)")
        return
    for key, value in fields.items():
        draft.set(f"model.{key}", value)
    draft.unknown("model.seq_length", "the training sequence length: not in a config.json "
                  f"(max_position_embeddings {fields['max_position_embeddings']} is the context the "
                  "positions are built for)")
    if closest:
        draft.notes.append(f"the shape is preset {closest}'s, but {', '.join(differ)} differ: "
                           "written field by field")


def _differences(model: Model, name: str) -> list[str]:
    preset = model_from({"preset": name})
    return [f.name for f in dataclasses.fields(Model) if f.name not in ("preset", "seq_length")
            and getattr(preset, f.name) != getattr(model, f.name)]


def _expressible(fields: dict[str, Any], source: str) -> dict[str, Any]:
    """The fields as this release's spec writes them: a field (or a rope_scaling key) the schema
    does not have is refused, naming it, rather than dropped; Llama 3's scaling type is the only
    one a schema without ``type`` means."""
    model = spec_schema()["properties"]["model"]["properties"]
    unknown = [k for k in fields if k not in model]
    scaling = fields.get("rope_scaling")
    if isinstance(scaling, dict):
        keys = model["rope_scaling"].get("properties", {})
        if "type" not in keys and scaling.get("type") == "llama3":
            scaling = {k: v for k, v in scaling.items() if k != "type"}
            fields = {**fields, "rope_scaling": scaling}
        unknown += [f"rope_scaling.{k}" for k in scaling if k not in keys]
    if unknown:
        raise UserError(f"the model needs {', '.join(f'model.{k}' for k in unknown)}, which this "
                        f"gen-launch's spec does not have (gen-launch schema lists the model fields); "
                        "a newer release may", Location(source))
    return fields
