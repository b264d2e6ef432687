"""The values the dialect tables render, computed once from the plan under the tables' names:
the Megatron arguments' (megatron_values), the Trainer's (trainer_values), ds_config.json's
(deepspeed_values) and accelerate_config.yaml's (accelerate_values). A table entry names one of
these; a name none of them provides is a TableError (dialects/), never a flag left out."""

from __future__ import annotations

import json
from typing import Any

from generator import presets
from generator.dialects import dialect, flash_attention, spec_field_names
from generator.dialects.arguments import run_io_fields
from generator.dialects.keyed import keyed_dialect

# Megatron's fixed Llama-3.1 frequencies (rope_utils: low 1, high 4, original context 8192)
_MEGATRON_ROPE_FREQUENCIES = (1.0, 4.0, 8192)


# Megatron-FSDP's --data-parallel-sharding-strategy for each ZeRO stage (what it shards)
FSDP_SHARDING = {0: "no_shard", 1: "optim", 2: "optim_grads", 3: "optim_grads_params"}


def megatron_values(plan) -> dict[str, Any]:
    """Every value the Megatron arguments carry, under the names the dialect tables use; None
    (or False) where the run does not use it."""
    s, m, p, t = plan.spec, plan.model, plan.spec.parallelism, plan.spec.training
    sample_based = plan.schedule.sample_based
    gqa = m.num_query_groups != m.num_attention_heads
    experts = bool(m.num_experts)
    wsd = t.decay == "wsd"
    ascend = plan.gpu.get("vendor") == "huawei"
    record = plan.framework_record
    # Megatron's own gradient reduction (a DeepSpeed engine reduces in its own way)
    megatron_reduces = record.megatron_core
    return {
        "num_layers": m.num_layers, "hidden_size": m.hidden_size, "ffn_hidden_size": m.ffn_hidden_size,
        "num_attention_heads": m.num_attention_heads, "group_query_attention": gqa,
        "num_query_groups": m.num_query_groups if gqa else None, "seq_length": m.seq_length,
        "max_position_embeddings": m.max_position_embeddings, "vocab_size": m.vocab_size,
        "activation": m.activation,
        "normalization": m.normalization, "untie_embeddings": not m.tie_embeddings,
        "packing": s.data.packing, "num_experts": m.num_experts if experts else None,
        "moe_top_k": m.moe_top_k if experts else None,
        "tp": plan.tp, "pp": plan.pp, "cp": plan.cp, "ep": plan.ep if experts else None,
        "etp": plan.etp if experts else None, "first_stage_layers": p.first_stage_layers,
        "last_stage_layers": p.last_stage_layers,
        # a pipeline layout says the virtual stages itself (Megatron refuses both)
        "vpp": plan.vpp if plan.vpp > 1 and p.pipeline_layout is None else None,
        "pipeline_layout": p.pipeline_layout,
        "pipeline_split_embedding": p.account_for_embedding_in_pipeline_split,
        "pipeline_split_loss": p.account_for_loss_in_pipeline_split,
        "optimizer_states": None if t.optimizer_states == "fp32" else t.optimizer_states,
        "main_grads": None if t.main_grads == "fp32" else t.main_grads,
        "precision_aware_optimizer": "bf16" in (t.optimizer_states, t.main_grads),
        "sequence_parallel": p.sequence_parallel, "tp_comm_overlap": p.tp_comm_overlap,
        "ep_comm_overlap": p.ep_comm_overlap,
        "recompute_modules": t.recompute_modules if t.recompute == "selective" else None,
        # Megatron-FSDP (v1) runs with the distributed optimizer (validate_args turns it on)
        "distributed_optimizer": p.distributed_optimizer or p.megatron_fsdp,
        # the distributed optimizer's instances (HSDP); one: no replicas, nothing to write
        "dp_replicate": plan.dp_replicate if plan.dp_replicate > 1 else None,
        "megatron_fsdp": p.megatron_fsdp,
        "fsdp_sharding_strategy": FSDP_SHARDING[plan.zero_stage] if p.megatron_fsdp else None,
        "micro_batch_size": plan.micro_batch_size,
        "batch_schedule": plan.step_schedule,
        "rampup": plan.rampup_flag if plan.step_schedule is None else None,
        "global_batch_size": plan.global_batch_size if plan.step_schedule is None else None,
        "train_samples": plan.train_samples if sample_based else None,
        "lr_warmup_samples": plan.warmup_samples if sample_based else None,
        "lr_decay_samples": plan.train_samples if sample_based else None,
        "train_iters": None if sample_based else plan.schedule.train_iters,
        "lr_warmup_iters": None if sample_based else plan.schedule.warmup_iters,
        "lr_decay_iters": None if sample_based else plan.schedule.train_iters,
        "lr": plan.lr, "min_lr": t.min_lr, "decay": t.decay,
        "wsd_decay_samples": plan.wsd_decay_samples if wsd and sample_based else None,
        "wsd_decay_iters": plan.wsd_decay_iters if wsd and not sample_based else None,
        "weight_decay": t.weight_decay, "adam_beta1": t.adam_betas[0], "adam_beta2": t.adam_betas[1],
        "adam_eps": t.adam_eps, "clip_grad": t.gradient_clipping, "seed": t.seed,
        "log_interval": t.log_interval, "precision": t.precision,
        "fp8_param_gather": t.precision == "fp8" and p.distributed_optimizer,
        "fp8_recipe": t.fp8_recipe if t.precision == "fp8" else None,  # a switch of FP8 runs only
        "recompute": t.recompute, "ascend": ascend,
        **spec_field_values(s),
        **architecture_values(m, plan.ep),
        **run_io_values(plan.spec),
        "exit_duration_minutes": plan.exit_duration_minutes,
        **_run_schedule(plan),
        # what the step-time model counts as hidden under the backward pass (estimate/performance)
        "overlap_grad_reduce": megatron_reduces and plan.overlap_grad_reduce,
        "overlap_param_gather": megatron_reduces and plan.overlap_grad_reduce
        and (p.distributed_optimizer or p.megatron_fsdp),
        "flash_attention": flash_attention(plan.spec) if ascend else False,
        "deepspeed_flag": record.deepspeed_engine,
        "deepspeed_config": "ds_config.json" if record.deepspeed_engine else None,
        "zero_stage": plan.zero_stage if record.deepspeed_engine else None,
        # DeepSpeed's ZeRO optimizer wants the experts' parameters in param groups of their own
        # (a dialect without MoE refuses num_experts itself: GL218 once, not again for this)
        "moe_param_group": experts and record.deepspeed_engine and bool(plan.zero_stage)
        and plan.dialect is not None and plan.dialect.can("moe"),
        # for the comments only
        "world_size": plan.world_size, "dp": plan.dp, "global": plan.global_batch_size,
        "accumulation": plan.gradient_accumulation_steps, "steps": plan.schedule.train_iters,
        "warmup_steps": plan.schedule.warmup_iters,
    }


def spec_field_values(spec) -> dict[str, Any]:
    """The spec fields the tables carry as they are (an entry with `spec:` and no `value:`),
    under their dotted names: the value the spec (or its model preset) gives, None where it gives
    none (the framework's own default: no flag written). Such a field needs no code here: a
    schema field and a table entry are the whole of it."""
    return {dotted: None if spec.where(dotted) == "default" else spec_value(spec, dotted)
            for dotted in spec_field_names()}


def spec_value(spec, dotted: str) -> Any:
    """A spec field's value: the typed spec's, else (a field only a table reads) the document's
    or the model preset's."""
    value: Any = spec
    for part in dotted.split("."):
        value = getattr(value, part, _ABSENT)
        if value is _ABSENT:
            return _untyped(spec, dotted)
    return value


_ABSENT = object()


def _untyped(spec, dotted: str) -> Any:
    """A field the typed spec does not hold: as the document gives it, else the model preset."""
    parts = dotted.split(".")
    node: Any = spec.doc.data
    for name in parts:
        node = node.get(name) if isinstance(node, dict) else None
    if node is None and parts[0] == "model" and len(parts) == 2:
        return presets.models().get(spec.model.preset or "", {}).get(parts[1])
    return node


def scheduler_state(plan) -> dict[str, Any]:
    """What the run's learning-rate scheduler holds, as a resumed run's scheduler compares it with
    the checkpoint's. Megatron's OptimizerParamScheduler is stepped by the global batch, so its
    steps are samples whichever unit the arguments count in (training.py multiplies --*-iters by
    the global batch); the Trainer's and DeepSpeed's schedulers count optimizer steps."""
    if not plan.uses_megatron:
        return {"counts_in": "steps", "lr": plan.lr, "min_lr": plan.spec.training.min_lr,
                "warmup_steps": plan.schedule.warmup_iters, "decay_steps": plan.schedule.train_iters,
                "decay_style": plan.spec.training.decay}
    v = megatron_values(plan)

    def samples(name: str) -> int | None:
        given = v.get(f"{name}_samples")
        iters = v.get(f"{name}_iters")
        return given if given is not None else None if iters is None else iters * plan.global_batch_size

    return {"counts_in": "samples", "lr": v["lr"], "min_lr": v["min_lr"],
            "warmup_steps": samples("lr_warmup"), "decay_steps": samples("lr_decay"),
            "decay_style": v["decay"], "wsd_decay_steps": samples("wsd_decay"),
            "weight_decay": v["weight_decay"], "weight_decay_steps": samples("train"),
            "follows": "checkpoint" if v.get("resume_schedule") else
            "spec" if v.get("override_schedule") else None}


def _run_schedule(plan) -> dict[str, Any]:
    """A stage of a run in stages: the whole run's schedule, in samples (plan.run); nothing for a
    run of one stage."""
    r = plan.run
    if r is None:
        return {}
    return {"train_samples": r.end_samples, "lr_warmup_samples": r.warmup_samples,
            "lr_decay_samples": r.decay_samples, "train_iters": None, "lr_warmup_iters": None,
            "lr_decay_iters": None, "wsd_decay_samples": r.wsd_decay_samples, "wsd_decay_iters": None,
            "resume_schedule": r.resumes or plan.spec.checkpoint.schedule == "checkpoint"}


def run_io_values(s) -> dict[str, Any]:
    """What the run reads and writes beyond the model: data, tokenizer, checkpoints, logging and
    evaluation, under the tables' names (None: not given, the framework's default)."""
    d, tok, ckpt, log = s.data, s.tokenizer, s.checkpoint, s.logging
    blend = tuple(w for p in d.paths for w in ((repr(p[1]), p[0]) if isinstance(p, tuple) else (p,)))
    finetune = ckpt.finetune_from is not None
    return {
        "data_path": blend or None, "data_split": d.split, "data_cache_path": d.cache_path,
        "mock_data": d.mock,
        "tokenizer_type": tok.type, "tokenizer_model": tok.model, "vocab_file": tok.vocab_file,
        "merge_file": tok.merge_file,
        "save": ckpt.dir, "load": ckpt.finetune_from if finetune else ckpt.dir, "finetune": finetune,
        "save_interval": ckpt.interval, "async_save": ckpt.async_save,
        # Megatron-FSDP checkpoints in its own format (validate_args refuses another)
        "ckpt_format": ckpt.format or ("fsdp_dtensor" if s.parallelism.megatron_fsdp else None),
        "keep_last": ckpt.keep_last,
        "resume_schedule": ckpt.schedule == "checkpoint", "override_schedule": ckpt.schedule == "spec",
        "reshardable": ckpt.reshardable, "universal_checkpoint": ckpt.universal,
        "wandb_project": log.wandb_project,
        "wandb_exp_name": (log.wandb_run_name or s.name) if log.wandb_project else None,
        "tensorboard_dir": log.tensorboard_dir, "log_throughput": log.throughput,
        "eval_interval": s.eval.interval, "eval_iters": s.eval.iters,
    }


def entry_point_arguments(s) -> list[tuple[str, tuple[Any, ...]]]:
    """launch.arguments: (option, its words) for each run field given that an entry point
    without a table reads (a switch alone; data.paths as Megatron writes it, weight-path pairs
    for a blend)."""
    values = run_io_values(s)
    named = {}
    for name, dotted in run_io_fields().items():
        named.setdefault(dotted, name)  # checkpoint.dir: save (= load)
    out: list[tuple[str, tuple[Any, ...]]] = []
    for dotted, option in s.launch.arguments:
        value = values[named[dotted]]
        if value in (None, False, ()):
            continue
        out.append((option, () if value is True else value if isinstance(value, tuple) else (value,)))
    return out


def architecture_values(m, ep: int) -> dict[str, Any]:
    """The model's architecture beyond its shape, under the tables' names: None where the model
    does not use it (rotary values without rope, MoE values without experts)."""
    rope = m.position_embedding == "rope"
    mla = m.multi_latent_attention
    scaling = m.rope_scaling if rope else None
    llama3 = scaling if scaling is not None and scaling.type == "llama3" and not mla else None
    yarn = scaling if scaling is not None and scaling.type == "yarn" else None
    experts = bool(m.num_experts)
    capacity = m.moe_capacity_factor if experts else None
    dense = m.moe_dense_layers if experts else 0
    out = {
        "linear_bias": m.linear_bias, "qkv_bias": None if m.qkv_bias == m.linear_bias else m.qkv_bias,
        # YaRN outside MLA is a position embedding type of its own (MLA: --rope-type)
        "position_embedding": "yarn" if yarn is not None and not mla else m.position_embedding,
        "rotary_base": m.rotary_base if rope else None, "rotary_percent": m.rotary_percent if rope else None,
        "rope_scaling": llama3 is not None, "rope_scaling_factor": llama3.factor if llama3 else None,
        "rope_scaling_frequencies": None if llama3 is None or (
            llama3.low_freq_factor, llama3.high_freq_factor,
            llama3.original_max_position_embeddings) == _MEGATRON_ROPE_FREQUENCIES else
        f"low {llama3.low_freq_factor}, high {llama3.high_freq_factor}, "
        f"original {llama3.original_max_position_embeddings}",
        **_yarn_values(yarn, mla),
        "mla_rope_scaling": scaling.type if mla and scaling is not None and yarn is None else None,
        # multi-latent attention (the latent ranks and head dims mean nothing without it)
        "multi_latent_attention": mla,
        **{k: getattr(m, k) if mla else None
           for k in ("q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim")},
        "rope_type": ("yarn" if yarn is not None else "rope") if mla and rope else None,
        "softmax_type": None if m.softmax_type == "vanilla" else m.softmax_type,
        "window_size": None if m.window_size is None else ",".join(map(str, m.window_size)),
        "window_attn_skip_freq": m.window_attn_skip_freq if m.window_size is not None else None,
        "glu_linear_offset": m.glu_linear_offset or None,
        "activation_clamp": m.activation_clamp,
        "mtp_num_layers": m.mtp_num_layers or None,
        "mtp_loss_scaling_factor": m.mtp_loss_scaling_factor if m.mtp_num_layers else None,
        "norm_epsilon": m.norm_epsilon, "attention_dropout": m.attention_dropout,
        "hidden_dropout": m.hidden_dropout, "init_method_std": m.init_method_std,
        "qk_layernorm": m.qk_layernorm, "make_vocab_size_divisible_by": m.make_vocab_size_divisible_by,
        "kv_channels": None if m.kv_channels == m.hidden_size // m.num_attention_heads else m.kv_channels,
        "embedding_layernorm": m.embedding_layernorm, "parallel_residual": m.parallel_residual,
    }
    moe = {
        "moe_ffn_hidden_size": None if m.moe_ffn_hidden_size in (None, m.ffn_hidden_size)
        else m.moe_ffn_hidden_size,
        "moe_shared_expert_intermediate_size": m.moe_shared_expert_intermediate_size,
        # Megatron's --moe-layer-freq pattern: 0 for a dense layer, 1 for an MoE layer
        "moe_dense_layers": f"([0]*{dense}+[1]*{m.num_layers - dense})" if dense else None,
        "moe_expert_interval": 1 if not dense else None,  # microsoft's fork: MoE in every layer
        "moe_load_balancing": m.moe_load_balancing, "moe_aux_loss_coeff": m.moe_aux_loss_coeff,
        "moe_z_loss_coeff": m.moe_z_loss_coeff, "moe_capacity_factor": capacity,
        "moe_dropless": capacity is None,
        "moe_token_drop_policy": m.moe_token_drop_policy if capacity is not None else None,
        "moe_pad_to_capacity": m.moe_pad_to_capacity,
        # (Megatron-LM's default, allgather, is left to it when the spec does not name one)
        "moe_token_dispatcher": None if m.moe_token_dispatcher is None
        and m.token_dispatcher(ep) == "allgather" else m.token_dispatcher(ep),
        "moe_grouped_gemm": m.moe_grouped_gemm,
        "moe_flex_dispatcher_backend": m.moe_flex_dispatcher_backend
        if m.token_dispatcher(ep) == "flex" else None,
        "moe_router_pre_softmax": m.moe_router_pre_softmax,
        "moe_router_score_function": None if m.moe_router_score_function == "softmax"
        else m.moe_router_score_function,
        "moe_router_expert_bias": m.moe_router_expert_bias,
        "moe_router_bias_update_rate": m.moe_router_bias_update_rate
        if m.moe_router_expert_bias and m.moe_router_bias_update_rate != 1e-3 else None,
        "moe_router_num_groups": m.moe_router_num_groups, "moe_router_group_topk": m.moe_router_group_topk,
        "moe_router_topk_scaling_factor": m.moe_router_topk_scaling_factor,
        "moe_router_dtype": m.moe_router_dtype,
    }
    return {**out, **{k: v if experts else None for k, v in moe.items()}}


# megatron-core's YaRN defaults (YarnRotaryEmbedding; MLATransformerConfig fixes the bounds)
_YARN_DEFAULTS = {"original": 4096, "beta_fast": 32.0, "beta_slow": 1.0}


def _yarn_values(yarn, mla: bool) -> dict[str, Any]:
    """YaRN's values (None where the scaling is not YaRN or a value is Megatron's default):
    MLA's and the yarn position embedding's share the factor and the attention scales; the
    correction bounds and their rounding are arguments of the latter only (MLA fixes them)."""
    names = ("yarn_factor", "yarn_mscale", "yarn_mscale_all_dim", "yarn_original", "yarn_beta_fast",
             "yarn_beta_slow", "yarn_unrounded", "mla_yarn_bounds")
    if yarn is None:
        return dict.fromkeys(names)
    bounds = {"original": yarn.original_max_position_embeddings, "beta_fast": yarn.beta_fast,
              "beta_slow": yarn.beta_slow}
    out = {"yarn_factor": yarn.factor, "yarn_mscale": None if yarn.mscale == 1.0 else yarn.mscale,
           "yarn_mscale_all_dim": yarn.mscale_all_dim or None}
    if mla:
        changed = {k: v for k, v in bounds.items() if v != _YARN_DEFAULTS[k]}
        return {**dict.fromkeys(names), **out,
                "mla_yarn_bounds": ", ".join(f"{k} {v:g}" for k, v in changed.items()) or None}
    return {**dict.fromkeys(names), **out,
            **{f"yarn_{k}": None if v == _YARN_DEFAULTS[k] else v for k, v in bounds.items()},
            "yarn_unrounded": not yarn.truncate}


def entry_point_name(entrypoint: str) -> str:
    """How the Trainer table's `only: {entry_point: [...]}` names an entry point: its script's
    file name (trl/scripts/sft.py: sft.py), or a command's first two words (trl sft)."""
    words = entrypoint.split()
    if not words:
        return ""
    first = words[0].rsplit("/", 1)[-1]
    return first if first.endswith(".py") or len(words) == 1 else f"{first} {words[1]}"


def known_entry_points() -> frozenset[str]:
    """The entry points whose own arguments the Trainer table writes (the model, its length)."""
    return frozenset(name for e in dialect("trainer").entries
                     for name in (e.only or {}).get("entry_point", ()))


def hf_repo(model) -> str | None:
    """The preset's Hugging Face repo id (published.source where it is one: owner/name, no
    spaces; a paper citation is not), None for a model without a preset or a released checkpoint."""
    source = ((presets.models().get(model.preset) or {}).get("published") or {}).get("source") \
        if model.preset else None
    ok = isinstance(source, str) and source.count("/") == 1 and not any(c.isspace() for c in source)
    return source if ok else None


def _entry_point_values(s) -> dict[str, Any]:
    """The entry point's own arguments (trainer.yaml's last group): its name, the preset's
    Hugging Face repo and the sequence length; a value launch.extra_args already gives is not
    written twice (the entry point's parser would take the later one)."""
    given = {w.split("=", 1)[0] for w in s.launch.extra_args if isinstance(w, str) and w.startswith("--")}
    name = entry_point_name(s.launch.entrypoint)
    length_flags = {"--max_length", "--max_seq_length", "--block_size", "--cutoff_len"}
    return {"entry_point": name,
            "hf_model": None if "--model_name_or_path" in given else hf_repo(s.model),
            "seq_length": None if given & length_flags else s.model.seq_length,
            "entry_point_known": name in known_entry_points()}


def trainer_values(plan) -> dict[str, Any]:
    """The values the Trainer's arguments carry, under the names of trainer.yaml."""
    t, s = plan.spec.training, plan.spec
    kwargs = None
    if plan.hf_scheduler == "cosine_with_min_lr":
        kwargs = {"min_lr": t.min_lr}
    elif plan.hf_scheduler == "warmup_stable_decay":
        kwargs = {"num_decay_steps": plan.wsd_decay_iters, "min_lr_ratio": plan.min_lr_ratio}
    fsdp_sharded = plan.framework_record.fsdp
    fsdp = fsdp_sharded and s.launch.launcher != "accelerate"
    shard = "full_shard" if plan.fsdp_reshard_after_forward else "shard_grad_op"
    return {
        "micro_batch_size": plan.micro_batch_size,
        "gradient_accumulation_steps": plan.gradient_accumulation_steps,
        "train_iters": plan.schedule.train_iters, "lr_warmup_iters": plan.schedule.warmup_iters,
        "lr": plan.lr, "hf_scheduler": plan.hf_scheduler,
        "lr_scheduler_kwargs": None if kwargs is None else json.dumps(kwargs, sort_keys=True),
        "weight_decay": t.weight_decay, "adam_beta1": t.adam_betas[0], "adam_beta2": t.adam_betas[1],
        "adam_eps": t.adam_eps, "clip_grad": t.gradient_clipping, "seed": t.seed,
        "log_interval": t.log_interval, "precision": t.precision, "packing": s.data.packing,
        "fsdp": f"{shard} auto_wrap" if fsdp else None,
        "fsdp_config": json.dumps(plan.fsdp_trainer_config, sort_keys=True) if fsdp else None,
        # (FSDP checkpoints activations through its own config: fsdp_config)
        "gradient_checkpointing": t.recompute != "none" and not fsdp_sharded,
        **spec_field_values(s),
        **_trainer_run_io(s),
        **_entry_point_values(s),
        # for the comments only
        "global": plan.global_batch_size, "accumulation": plan.gradient_accumulation_steps,
        "dp": plan.dp, "steps": plan.schedule.train_iters, "warmup_steps": plan.schedule.warmup_iters,
    }


def _trainer_run_io(s) -> dict[str, Any]:
    """Checkpoints in the output folder (the Trainer's example scripts resume from its last
    checkpoint there), every checkpoint.interval steps; evaluation every eval.interval steps;
    wandb (its project from WANDB_PROJECT, exported by trainer_args.sh)."""
    io = run_io_values(s)
    return {"save": io["save"], "save_strategy": "steps" if io["save_interval"] else None,
            "save_interval": io["save_interval"], "keep_last": io["keep_last"],
            "eval_strategy": "steps" if io["eval_interval"] else None, "eval_interval": io["eval_interval"],
            "report_to": "wandb" if io["wandb_project"] else None, "wandb_project": io["wandb_project"],
            "wandb_exp_name": io["wandb_exp_name"]}


def deepspeed_values(plan) -> dict[str, Any]:
    """The values ds_config.json carries, under the names deepspeed.yaml uses; None where the
    run does not use them (plain DeepSpeed owns the optimizer and scheduler; Megatron-DeepSpeed
    passes its own)."""
    t, p = plan.spec.training, plan.spec.parallelism
    plain = plan.framework_record.plain_deepspeed
    return {
        "global_batch_size": plan.global_batch_size, "micro_batch_size": plan.micro_batch_size,
        "gradient_accumulation_steps": plan.gradient_accumulation_steps,
        "log_interval": t.log_interval, "clip_grad": t.gradient_clipping,
        "offload_optimizer": p.zero_offload != "none",
        "offload_param": p.zero_offload == "optimizer_and_params",
        # ZeRO-3 under the Trainer: save_model writes whole 16-bit weights, not empty shards
        "gather_16bit_weights": plan.uses_trainer and plan.zero_stage == 3,
        "zero_stage": plan.zero_stage, "precision": t.precision,
        "overlap_comm": plan.overlap_grad_reduce and bool(plan.zero_stage),
        "pipeline_stages": plan.pp if plain and plan.pp > 1 else None,
        "sequence_parallel_size": plan.cp if plain and plan.cp > 1 else None,
        "optimizer": plain, "optimizer_lr": plan.lr if plain else None,
        "adam_betas": list(t.adam_betas) if plain else None,
        "adam_eps": t.adam_eps if plain else None, "weight_decay": t.weight_decay if plain else None,
        "torch_adam": plain and plan.gpu.get("vendor") == "cpu",
        "scheduler": t.decay if plain else None,
        "total_num_steps": plan.schedule.train_iters if plain else None,
        "warmup_num_steps": plan.schedule.warmup_iters if plain else None,
        "cos_min_ratio": plan.min_lr_ratio if plain else None,
        "warmup_max_lr": plan.lr if plain else None,
    }


def deepspeed_config(plan) -> dict[str, Any]:
    """The DeepSpeed config of a plan, keys in the table's order."""
    return keyed_dialect("deepspeed").build(deepspeed_values(plan))


def accelerate_values(plan) -> dict[str, Any]:
    """The values accelerate_config.yaml carries, under the names accelerate.yaml uses."""
    s, p, t = plan.spec, plan.spec.parallelism, plan.spec.training
    fsdp = plan.framework_record.fsdp
    deepspeed = plan.framework_record.deepspeed_engine
    mesh = fsdp and (plan.dp_replicate > 1 or plan.tp > 1 or plan.cp > 1)
    return {
        "framework": plan.framework,
        "mixed_precision": {"bf16": "bf16", "fp16": "fp16"}.get(t.precision, "no") if fsdp else None,
        "nodes": s.cluster.nodes, "world_size": plan.world_size,
        "use_cpu": plan.gpu.get("vendor") == "cpu",
        "deepspeed": deepspeed,
        "zero3_init": plan.zero_stage == 3 if deepspeed else None,
        "fsdp": fsdp,
        "reshard_after_forward": plan.fsdp_reshard_after_forward if fsdp else None,
        "offload_params": p.zero_offload != "none" if fsdp else None,
        "activation_checkpointing": t.recompute != "none" if fsdp else None,
        # accelerate's parallelism_config, where the run is more than FSDP2 over every process
        "dp_replicate_size": plan.dp_replicate if mesh else None,
        "dp_shard_size": plan.dp_shard if mesh else None,
        "tp_size": plan.tp if mesh and plan.tp > 1 else None,
        "cp_size": plan.cp if mesh and plan.cp > 1 else None,
    }


def accelerate_config(plan) -> dict[str, Any]:
    return keyed_dialect("accelerate").build(accelerate_values(plan))
