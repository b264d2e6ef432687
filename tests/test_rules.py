"""Every rule, violated and satisfied, over facts (the form both the calculator and the linter
use), plus end-to-end checks that a spec error points at the spec's line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from generator.calculator.resolve import PlanError
from generator.dialects import Catalogue
from generator.dialects.script_parser import ScriptParser
from generator.rules import RULES, Fact

from .helpers import plan_of, spec_dict

# code -> (facts that break the rule, facts that satisfy it, a fragment of the message)
CASES: dict[str, list[tuple[dict, dict, str]]] = {
    "GL001": [({"global_batch_size": 4000, "micro_batch_size": 16, "gradient_accumulation_steps": 8, "dp": 32},
               {"global_batch_size": 4096, "micro_batch_size": 16, "gradient_accumulation_steps": 8, "dp": 32},
               "global batch 4000 != micro 16 × accumulation 8 × dp 32 = 4096")],
    "GL002": [({"global_batch_size": 1000, "dp": 32, "micro_batch_size": 16},
               {"global_batch_size": 1024, "dp": 32, "micro_batch_size": 16},
               "global batch 1000 is not divisible by micro 16 × dp 32 = 512; use 512 or 1024"),
              ({"global_batch_size": 100, "dp": 8, "gradient_accumulation_steps": 4},
               {"global_batch_size": 96, "dp": 8, "gradient_accumulation_steps": 4},
               "global batch 100 is not divisible by accumulation 4 × dp 8 = 32; use 96 or 128"),
              # a DeepSpeed config with train_batch_size alone: accumulation 1
              ({"global_batch_size": 100, "dp": 8, "framework": "deepspeed"},
               {"global_batch_size": 104, "dp": 8, "framework": "deepspeed"},
               "train_batch_size 100 alone is not divisible by dp 8")],
    "GL003": [({"world_size": 250, "tp": 4, "pp": 2, "cp": 1}, {"world_size": 256, "tp": 4, "pp": 2, "cp": 1},
               "world size 250 is not divisible by tp 4 × pp 2 × cp 1 = 8; use a world of 248 or 256 GPUs"),
              ({"world_size": 8, "tp": 1, "pp": 4, "cp": 1, "ep": 8, "etp": 1},
               {"world_size": 32, "tp": 1, "pp": 4, "cp": 1, "ep": 8, "etp": 1},
               "world size 8 is not divisible by etp 1 × ep 8 × pp 4 = 32 (the expert grid)")],
    "GL004": [({"ds_micro_batch_size": 4, "micro_batch_size": 2}, {"ds_micro_batch_size": 2, "micro_batch_size": 2},
               "DeepSpeed micro batch 4 ≠ --micro-batch-size 2"),
              ({"ds_zero_stage": 3, "zero_stage": 1}, {"ds_zero_stage": 1, "zero_stage": 1},
               "DeepSpeed zero_optimization.stage 3 ≠ --zero-stage 1")],
    "GL005": [({"launcher": "torchrun", "sbatch_nodes": 4, "launcher_nodes": 2},
               {"launcher": "torchrun", "sbatch_nodes": 4, "launcher_nodes": 4},
               "#SBATCH allocates 4 nodes but torchrun starts on 2"),
              ({"launcher": "deepspeed", "sbatch_gpus_per_node": 8, "procs_per_node": 4},
               {"launcher": "deepspeed", "sbatch_gpus_per_node": 8, "procs_per_node": 8},
               "#SBATCH allocates 8 GPUs per node but deepspeed starts 4 processes per node")],
    "GL006": [({"rampup": (16, 16, 5_000_000), "global_batch_size": 1024, "micro_batch_size": 1, "dp": 64},
               {"rampup": (64, 64, 5_000_000), "global_batch_size": 1024, "micro_batch_size": 1, "dp": 64},
               "--rampup-batch-size start 16 is not divisible by micro 1 × dp 64 = 64"),
              ({"rampup": (16, 24, 6_000_000), "global_batch_size": 2048},
               {"rampup": (16, 16, 6_000_000), "global_batch_size": 2048},
               "global batch 2048 − start 16 = 2032 is not divisible by the increment 24")],
    "GL007": [({"megatron_flags": {"--rampup-batch-size": "x.yaml:9:1", "--train-iters": "x.yaml:9:1"}},
               {"megatron_flags": {"--rampup-batch-size": "x.yaml:9:1", "--train-samples": "x.yaml:9:1"}},
               "--rampup-batch-size with --train-iters"),
              ({"megatron_flags": {"--step-batch-size-schedule": "x.yaml:9:1", "--global-batch-size": "x.yaml:9:1"}},
               {"megatron_flags": {"--step-batch-size-schedule": "x.yaml:9:1"}},
               "--step-batch-size-schedule cannot be combined with --global-batch-size"),
              ({"rampup": (16, 16, 100), "iteration_based": True}, {"rampup": (16, 16, 100), "iteration_based": False},
               "a batch ramp-up needs sample-based training")],
    "GL024": [({"memory_total_gib": 130.0, "memory_capacity_gib": 80.0}, {"memory_total_gib": 119.0,
                                                                              "memory_capacity_gib": 80.0},
               "is 1.6× the 80 GiB of the GPU")],
    "GL020": [({"memory_total_gib": 90.0, "memory_capacity_gib": 80.0}, {"memory_total_gib": 70.0, "memory_capacity_gib": 80.0},
               "estimated 90.0 GiB per GPU exceeds the 80 GiB of the GPU")],
    "GL021": [({"lr_scaling_rule": "linear", "global_batch_size": 16384}, {"lr_scaling_rule": "sqrt", "global_batch_size": 16384},
               "linear LR scaling to a global batch of 16384 sequences")],
    "GL101": [({"ds_auto": (("zero_optimization.stage", "x.yaml:4:1"),)}, {"ds_auto": (("train_batch_size", "x.yaml:4:1"),)},
               "\"auto\" at zero_optimization.stage: DeepSpeed silently replaces it"),
              ({"ds_auto": (("train_batch_size", "x.yaml:4:1"),), "launcher": "deepspeed"},
               {"ds_auto": (("train_batch_size", "x.yaml:4:1"),), "launcher": "accelerate"},
               "only the HF Trainer / accelerate fill it in"),
              # the Trainer fills bf16.enabled, not zero_optimization.stage
              ({"ds_auto": (("bf16.enabled", "x.yaml:4:1"), ("zero_optimization.stage", "x.yaml:5:1")),
                "trainer": True},
               {"ds_auto": (("bf16.enabled", "x.yaml:4:1"), ("zero_optimization.reduce_bucket_size", "x.yaml:5:1")),
                "trainer": True},
               "\"auto\" at zero_optimization.stage: DeepSpeed silently replaces it with the default; the HF "
               "Trainer and accelerate do not fill this key"),
              ({"ds_auto": (("steps_per_print", "x.yaml:4:1"),), "launcher": "accelerate"},
               {"ds_auto": (("optimizer.params.lr", "x.yaml:4:1"),), "launcher": "accelerate"},
               "\"auto\" at steps_per_print: the HF Trainer and accelerate do not fill this key")],
    "GL102": [({"ds_removed_keys": (("elasticity", "x.yaml:4:1"),)}, {"ds_removed_keys": ()},
               "elasticity was removed from DeepSpeed"),
              ({"ds_unknown_keys": (("zero_optimization.overlap_com", "x.yaml:4:1"),)}, {"ds_unknown_keys": ()},
               "zero_optimization.overlap_com is not a DeepSpeed key")],
    "GL103": [({"ds_fp16": True, "ds_bf16": True}, {"ds_fp16": False, "ds_bf16": True}, "fp16 and bf16 are both enabled")],
    "GL105": [({"ds_scheduler": ("WarmupDecayLR", {"warmup_num_steps": 10})},
               {"ds_scheduler": ("WarmupDecayLR", {"warmup_num_steps": 10, "total_num_steps": 100})},
               "WarmupDecayLR needs scheduler.params.total_num_steps"),
              ({"ds_scheduler": ("WarmupCosineLR", {"warmup_num_steps": 100, "total_num_steps": 100})},
               {"ds_scheduler": ("WarmupLR", {"warmup_num_steps": 100})},
               "warmup_num_steps 100 is not shorter than total_num_steps 100")],
    "GL110": [({"zero_offload": "optimizer_and_params", "framework": "deepspeed", "zero_stage": 2},
               {"zero_offload": "optimizer_and_params", "framework": "deepspeed", "zero_stage": 3},
               "offloading the parameters needs zero_stage 3 (got 2)"),
              ({"zero_offload": "optimizer", "framework": "megatron-lm"},
               {"zero_offload": "none", "framework": "megatron-lm"}, "zero_offload is a DeepSpeed feature")],
    "GL111": [({"decay": "wsd", "framework": "deepspeed"}, {"decay": "wsd", "framework": "megatron-lm"},
               "decay wsd needs Megatron")],
    "GL115": [({"zero_stage": 3, "num_experts": 8, "framework": "megatron-deepspeed"},
               {"zero_stage": 2, "num_experts": 8, "framework": "megatron-deepspeed"},
               "num_experts 8 with zero_stage 3: DeepSpeed's engine refuses its MoE layer"),
              # Megatron-LM's own MoE is not DeepSpeed's
              ({"zero_stage": 3, "num_experts": 8, "framework": "megatron-deepspeed"},
               {"zero_stage": 3, "num_experts": 8, "framework": "megatron-lm"}, "use zero_stage 1 or 2")],
    "GL116": [({"megatron_flags": {"--num-experts": "x.yaml:9:1"}, "megatron_dialect": "megatron-deepspeed/microsoft",
                "deepspeed_flag": True, "num_experts": 8, "zero_stage": 1},
               {"megatron_flags": {"--num-experts": "x.yaml:9:1", "--create-moe-param-group": "x.yaml:10:1"},
                "megatron_dialect": "megatron-deepspeed/microsoft", "deepspeed_flag": True, "num_experts": 8,
                "zero_stage": 1, "moe_param_group": True},
               "num_experts 8 with ZeRO stage 1 and no --create-moe-param-group"),
              # ZeRO-0 keeps the param groups as they are (and ZeRO-3 is GL115's)
              ({"megatron_flags": {"--num-experts": "x.yaml:9:1"}, "megatron_dialect": "megatron-deepspeed/microsoft",
                "deepspeed_flag": True, "num_experts": 8, "zero_stage": 2},
               {"megatron_flags": {"--num-experts": "x.yaml:9:1"}, "megatron_dialect": "megatron-deepspeed/microsoft",
                "deepspeed_flag": True, "num_experts": 8, "zero_stage": 0}, "add --create-moe-param-group")],
    "GL201": [({"megatron_flags": {"--checkpoint-activations": "x.yaml:9:1"}, "megatron_dialect": "megatron-lm"},
               {"megatron_flags": {"--recompute-activations": "x.yaml:9:1"}, "megatron_dialect": "megatron-lm"},
               "--checkpoint-activations is refused by validate_args in Megatron-LM latest"),
              # BLOOM's fork has --checkpoint-activations and no --recompute-granularity
              ({"megatron_flags": {"--recompute-granularity": "x.yaml:9:1"}, "megatron_dialect": "megatron-deepspeed/bigscience"},
               {"megatron_flags": {"--checkpoint-activations": "x.yaml:9:1"}, "megatron_dialect": "megatron-deepspeed/bigscience"},
               "--recompute-granularity is not an option of Megatron-DeepSpeed (bigscience"),
              # a no-op is GL222's note, not an error
              ({"megatron_flags": {"--batch-size": "x.yaml:9:1", "--use-flash-attn": "x.yaml:9:2"},
                "megatron_dialect": "megatron-lm"},
               {"megatron_flags": {"--use-flash-attn": "x.yaml:9:1"}, "megatron_dialect": "megatron-lm"},
               "--batch-size is refused by validate_args in Megatron-LM latest; use --micro-batch-size and --global-batch-size")],
    "GL222": [({"megatron_flags": {"--use-flash-attn": "x.yaml:9:1"}, "megatron_dialect": "megatron-lm", "ascend": False},
               # MindSpeed-LLM (Ascend) uses --use-flash-attn
               {"megatron_flags": {"--use-flash-attn": "x.yaml:9:1"}, "megatron_dialect": "megatron-lm", "ascend": True},
               "--use-flash-attn is a no-op in Megatron-LM latest"),
              ({"megatron_flags": {"--use-rotary-position-embeddings": "x.yaml:9:1"}, "megatron_dialect": "megatron-lm"},
               {"megatron_flags": {"--position-embedding-type": "x.yaml:9:1"}, "megatron_dialect": "megatron-lm"},
               "--use-rotary-position-embeddings is a legacy spelling"),
              ({"megatron_flags": {"--use-mcore-models": "x.yaml:9:1"}, "megatron_dialect": "megatron-lm"},
               {"megatron_flags": {"--use-mcore-models": "x.yaml:9:1"}, "megatron_dialect": "megatron-deepspeed/microsoft"},
               "--use-mcore-models is a no-op")],
    "GL307": [({"command_cuts": (("x.yaml:9:3", "comment"),)}, {"command_cuts": ()},
               "a comment inside a backslash-continued command ends it"),
              ({"command_cuts": (("x.yaml:9:3", "backslash"), ("x.yaml:12:3", "comment"))}, {"command_cuts": ()},
               "a backslash followed by blanks does not continue the line; the command ends there (and 1 more)")],
    "GL308": [({"sbatch_invalid_directives": (("<ACCOUNT>", "x.yaml:2:1"),)}, {"sbatch_invalid_directives": ()},
               "sbatch refuses the script: '<ACCOUNT>' on an #SBATCH line is not an option")],
    "GL227": [({"megatron_flag_values": {"--position-embedding-type": ("rotary",)},
                "megatron_flags": {"--position-embedding-type": "x.yaml:9:1", "--attention-backend": "x.yaml:9:2"},
                "megatron_dialect": "megatron-lm"},
               {"megatron_flag_values": {"--position-embedding-type": ("rope",)},
                "megatron_flags": {"--position-embedding-type": "x.yaml:9:1", "--attention-backend": "x.yaml:9:2"},
                "megatron_dialect": "megatron-lm"},
               "--position-embedding-type rotary: invalid choice 'rotary'; choose from learned_absolute, rope"),
              ({"megatron_flag_values": {"--num-layers": ("24L",)}, "megatron_flags": {"--num-layers": "x.yaml:9:1"},
                "megatron_dialect": "megatron-lm"},
               {"megatron_flag_values": {"--num-layers": (None,)}, "megatron_flags": {"--num-layers": "x.yaml:9:1"},
                "megatron_dialect": "megatron-lm"},  # known only at run time: not checked
               "--num-layers 24L: invalid int value '24L'")],
    "GL228": [({"entry_parser": ScriptParser("train.py (its own argparse parser)", "repository",
                                             Catalogue("train.py", {"--microbatch_size": ("microbatch_size", 1, None, "int", 1)}),
                                             abbreviations=True),
                "megatron_flags": {"--micro_batch_size": "x.yaml:9:1"}},
               {"entry_parser": ScriptParser("train.py (its own argparse parser)", "repository",
                                             Catalogue("train.py", {"--microbatch_size": ("microbatch_size", 1, None, "int", 1)}),
                                             abbreviations=True),
                "megatron_flags": {"--microbatch": "x.yaml:9:1"}},  # a unique prefix: accepted
               "--micro_batch_size is not an option of train.py (its own argparse parser); did you mean --microbatch_size?")],
    "GL900": [({"unreadable_file": "binary file"}, {}, "cannot read: binary file")],
    "GL903": [({"named_file_missing": "DeepSpeed config ds.json exists nowhere"}, {},
               "DeepSpeed config ds.json exists nowhere")],
    "GL901": [({"not_checked": "DeepSpeed config ds.json not found"}, {}, "not checked: DeepSpeed config ds.json")],
    "GL902": [({"reading_stopped": "reading stopped: nesting too deep to follow"}, {},
               "reading stopped: nesting too deep")],
    "GL202": [({"megatron_flags": {"--num-query-groups": "x.yaml:9:1"}, "framework": "megatron-lm"},
               {"megatron_flags": {"--num-query-groups": "x.yaml:9:1", "--group-query-attention": "x.yaml:9:1"}, "framework": "megatron-lm"},
               "--num-query-groups has no effect without --group-query-attention")],
    "GL203": [({"tp": 2, "framework": "megatron-lm", "megatron_dialect": "megatron-lm"},
               {"tp": 2, "framework": "megatron-lm", "megatron_dialect": "megatron-lm", "cuda_device_max_connections": "1"},
               "CUDA_DEVICE_MAX_CONNECTIONS is not set"),
              ({"tp": 2, "framework": "megatron-lm", "megatron_dialect": "megatron-lm", "cuda_device_max_connections": "8"},
               {"tp": 2, "framework": "megatron-lm", "megatron_dialect": "megatron-lm", "nvidia_cc": 10.0},
               "CUDA_DEVICE_MAX_CONNECTIONS is = 8"),
              # a config file alone (GPT-NeoX's) says nothing of the environment
              ({"tp": 2, "framework": "megatron-deepspeed", "megatron_dialect": "megatron-lm"},
               {"tp": 2, "framework": "megatron-deepspeed"}, "CUDA_DEVICE_MAX_CONNECTIONS is not set"),
              # microsoft's fork without --deepspeed: its async all-reduce, unless turned off
              ({"tp": 2, "framework": "megatron-lm", "megatron_dialect": "megatron-deepspeed/microsoft",
                "megatron_flags": {"--DDP-impl": "x.yaml:9:1"}},
               {"tp": 2, "framework": "megatron-lm", "megatron_dialect": "megatron-deepspeed/microsoft",
                "megatron_flags": {"--no-async-tensor-model-parallel-allreduce": "x.yaml:9:1"}},
               "with the async tensor-parallel all-reduce (no --deepspeed)"),
              # microsoft's fork: only with --sequence-parallel (or without --deepspeed) ...
              ({"tp": 2, "framework": "megatron-deepspeed", "megatron_dialect": "megatron-deepspeed/microsoft",
                "sequence_parallel": True, "deepspeed_flag": True},
               {"tp": 2, "framework": "megatron-deepspeed", "megatron_dialect": "megatron-deepspeed/microsoft",
                "sequence_parallel": False, "deepspeed_flag": True},
               "Megatron-DeepSpeed (microsoft) requires export CUDA_DEVICE_MAX_CONNECTIONS=1 with --sequence-parallel"),
              ({"tp": 1, "framework": "megatron-deepspeed", "megatron_dialect": "megatron-deepspeed/microsoft",
                "sequence_parallel": False, "deepspeed_flag": False},
               {"tp": 4, "framework": "megatron-deepspeed", "megatron_dialect": "megatron-deepspeed/bigscience",
                "sequence_parallel": False, "deepspeed_flag": True},  # ... BigScience's never checks it
               "with the async tensor-parallel all-reduce (no --deepspeed)")],
    "GL301": [({"launcher": "torchrun", "srun_line": True, "sbatch_ntasks_per_node": 8},
               {"launcher": "torchrun", "srun_line": True, "sbatch_ntasks_per_node": 1},
               "8 tasks per node each start torchrun"),
              ({"launcher": "srun", "sbatch_nodes": 2, "sbatch_ntasks": 8, "sbatch_ntasks_per_node": 8},
               {"launcher": "srun", "sbatch_nodes": 2, "sbatch_ntasks": 16, "sbatch_ntasks_per_node": 8},
               "--ntasks 8 ≠ --nodes 2 × --ntasks-per-node 8")],
    "GL302": [({"sbatch_late_lines": ("x.sh:9:1",)}, {"sbatch_late_lines": ()}, "1 #SBATCH line(s) after the first command")],
    "GL303": [({"slurm_variables": {"SLURM_NTASKS": "x.yaml:5:1"}, "sbatch_options": ("--nodes",)},
               {"slurm_variables": {"SLURM_NTASKS": "x.yaml:5:1"}, "sbatch_options": ("--ntasks",)},
               "$SLURM_NTASKS is not set by Slurm without -n or --ntasks or --ntasks-per-node or --gpus-per-task")],
    "GL022": [({"batch_ramp_kind": "rampup", "framework": "deepspeed", "megatron_version": "latest"},
               {"batch_ramp_kind": "rampup", "framework": "megatron-lm", "megatron_version": "latest"},
               "DeepSpeed has no batch rampup"),
              ({"batch_ramp_kind": "schedule", "framework": "megatron-lm", "megatron_version": "core_v0.16"},
               {"batch_ramp_kind": "schedule", "framework": "megatron-lm", "megatron_version": "core_v0.18"},
               "--step-batch-size-schedule needs megatron-core 0.18 or later"),
              # every release before 0.18, from the dialect's capability record
              ({"batch_ramp_kind": "schedule", "framework": "megatron-lm", "megatron_version": "core_v0.12"},
               {"batch_ramp_kind": "schedule", "framework": "megatron-lm", "megatron_version": "core_v0.19"},
               "megatron.version is core_v0.12")],
    "GL023": [({"batch_schedule": ((100, 16), (200, 32))}, {"batch_schedule": ((0, 16), (200, 32))},
               "the first schedule threshold must be 0, got 100"),
              ({"batch_schedule": ((0, 16), (200, 24)), "micro_batch_size": 1, "dp": 16, "global_batch_size": 24},
               {"batch_schedule": ((0, 16), (200, 24)), "micro_batch_size": 1, "dp": 8, "global_batch_size": 24},
               "scheduled batch 24 (from 200 tokens) is not divisible by micro 1 × dp 16 = 16"),
              ({"batch_schedule": ((0, 16), (200, 32)), "global_batch_size": 64},
               {"batch_schedule": ((0, 16), (200, 64)), "global_batch_size": 64},
               "the last scheduled batch 32 is not the global batch 64")],
    "GL008": [({"num_attention_heads": 100, "tp": 8}, {"num_attention_heads": 96, "tp": 8},
               "num_attention_heads 100 is not divisible by tp 8; use tp 5 or 10"),
              ({"num_attention_heads": 96, "num_query_groups": 3, "tp": 8},
               {"num_attention_heads": 96, "num_query_groups": 2, "tp": 8},
               "num_query_groups 3 is neither a multiple nor a divisor of tp 8")],
    "GL224": [({"optimizer_states": "bf16", "main_grads": "fp32", "framework": "megatron-lm",
                "distributed_optimizer": False},
               {"optimizer_states": "bf16", "main_grads": "fp32", "framework": "megatron-lm",
                "distributed_optimizer": True}, "need the distributed optimizer"),
              ({"optimizer_states": "fp32", "main_grads": "bf16", "framework": "fsdp"},
               {"optimizer_states": "fp32", "main_grads": "fp32", "framework": "fsdp"},
               "Megatron-LM's precision-aware optimizer, not fsdp's")],
    "GL025": [({"host_load_gib": 920.0, "host_memory_gib": 512.0, "host_load_how": "resuming"},
               {"host_load_gib": 400.0, "host_memory_gib": 512.0, "host_load_how": "resuming"},
               "loading needs about 920 GiB of CPU memory on a node (resuming), more than its 512 GiB")],
    "GL226": [({"fp8_recipe": "mxfp8", "nvidia_cc": 9.0, "gpu": "h100-80gb"},
               {"fp8_recipe": "mxfp8", "nvidia_cc": 10.0, "gpu": "b200"},
               "fp8_recipe mxfp8 needs Blackwell's block-scaled FP8 tensor cores"),
              # --fp8-recipe without --fp8-format: Megatron ignores it, the run does not fail
              ({"fp8_recipe": "mxfp8", "nvidia_cc": 9.0, "gpu": "h100-80gb", "precision": "fp8"},
               {"fp8_recipe": "mxfp8", "nvidia_cc": 9.0, "gpu": "h100-80gb", "precision": "bf16"},
               "fp8_recipe mxfp8 needs Blackwell's block-scaled FP8 tensor cores"),
              ({"fp8_recipe": "blockwise", "megatron_dialect": "megatron-lm", "megatron_version": "core_v0.13"},
               {"fp8_recipe": "blockwise", "megatron_dialect": "megatron-lm", "megatron_version": "core_v0.14"},
               "fp8_recipe blockwise needs megatron-core 0.14")],
    "GL225": [({"tp_comm_overlap": True, "tp": 8, "sequence_parallel": False},
               {"tp_comm_overlap": True, "tp": 8, "sequence_parallel": True},
               "tp_comm_overlap needs sequence parallelism"),
              ({"tp_comm_overlap": True, "tp": 1, "sequence_parallel": True},
               {"tp_comm_overlap": False, "tp": 1, "sequence_parallel": True},
               "tp_comm_overlap with tp 1"),
              ({"tp_comm_overlap": True, "tp": 8, "sequence_parallel": True, "gpu_vendor": "amd"},
               {"tp_comm_overlap": True, "tp": 8, "sequence_parallel": True, "gpu_vendor": "nvidia"},
               "Transformer Engine's userbuffers run on NVIDIA GPUs only")],
    "GL009": [({"num_layers": 126, "pp": 8, "vpp": 8, "framework": "megatron-lm"},  # Llama-3.1-405B
               {"num_layers": 126, "pp": 8, "vpp": 8, "framework": "megatron-lm",
                "pipeline_split_embedding": True, "pipeline_split_loss": True},
               "num_layers 126 is not divisible by pp 8"),
              ({"num_layers": 126, "pp": 8, "framework": "megatron-lm", "pipeline_split_embedding": True,
                "first_stage_layers": 15},
               {"num_layers": 126, "pp": 8, "framework": "megatron-lm", "first_stage_layers": 14,
                "last_stage_layers": 16},
               "exclude each other"),
              ({"num_layers": 95, "pp": 16, "framework": "megatron-lm"},
               {"num_layers": 95, "pp": 16, "framework": "megatron-deepspeed"},
               "num_layers 95 is not divisible by pp 16; use pp 5 or 19"),
              ({"num_layers": 96, "pp": 16, "vpp": 4, "framework": "megatron-lm"},
               {"num_layers": 96, "pp": 16, "vpp": 3, "framework": "megatron-lm"},
               "num_layers 96 / pp 16 = 6 layers per stage is not divisible by vpp 4; use vpp in [2, 3, 6]"),
              # uneven stages (Llama 3 405B: 126 = 7 + 14 × 8 + 7)
              ({"num_layers": 126, "pp": 16, "first_stage_layers": 6, "last_stage_layers": 7,
                "framework": "megatron-lm"},
               {"num_layers": 126, "pp": 16, "first_stage_layers": 7, "last_stage_layers": 7,
                "framework": "megatron-lm"},
               "num_layers 126 − first 6 − last 7 = 113 layers do not divide over the 14 other stage(s)"),
              ({"num_layers": 126, "pp": 16, "vpp": 2, "first_stage_layers": 7, "last_stage_layers": 7,
                "framework": "megatron-lm"},
               {"num_layers": 126, "pp": 16, "vpp": 1, "first_stage_layers": 7, "last_stage_layers": 7,
                "framework": "megatron-lm"},
               "stage layer counts [7, 7, 8] (pp 16, first 7, last 7) are not all divisible by vpp 2")],
    "GL010": [({"sequence_parallel": True, "tp": 1}, {"sequence_parallel": True, "tp": 2},
               "sequence_parallel has no effect at tp 1")],
    "GL011": [({"seq_length": 4098, "cp": 2, "framework": "megatron-lm"}, {"seq_length": 4096, "cp": 2, "framework": "megatron-lm"},
               "seq_length 4098 is not divisible by 2 × cp 2 = 4; use seq_length 4096 or 4100")],
    "GL012": [({"num_experts": 8, "ep": 3}, {"num_experts": 8, "ep": 4},
               "num_experts 8 is not divisible by ep 3; use ep in [1, 2, 4, 8]")],
    "GL013": [({"dp_given": 16, "world_size": 256, "tp": 4, "pp": 2, "cp": 1},
               {"dp_given": 32, "world_size": 256, "tp": 4, "pp": 2, "cp": 1},
               "dp 16 does not match world 256 / (tp 4 × pp 2 × cp 1) = 32")],
    "GL014": [({"tokens_per_step": 4_000_000, "global_batch_size": 2048, "seq_length": 2048},
               {"tokens_per_step": 4_194_304, "global_batch_size": 2048, "seq_length": 2048},
               "tokens_per_step 4,000,000 != global batch 2048 × seq_length 2048 = 4,194,304")],
    "GL015": [({"ep": 2, "num_experts": None}, {"ep": 2, "num_experts": 8}, "ep 2 needs model.num_experts")],
    "GL016": [({"vpp": 2, "pp": 4, "gradient_accumulation_steps": 6}, {"vpp": 2, "pp": 4, "gradient_accumulation_steps": 8},
               "with vpp 2, 6 micro-batches per step must be a multiple of pp 4; use accumulation 4 or 8")],
    "GL017": [({"vpp": 2, "pp": 1}, {"vpp": 2, "pp": 2}, "vpp 2 needs pp > 1")],
    "GL018": [({"spec": "s.yaml", "global_batch_size": 64}, {"spec": "s.yaml", "global_batch_size": 64, "micro_batch_size": 2},
               "global_batch_size does not determine the batch")],
    "GL019": [({"tokens_per_step_target": 1_000_000, "global_batch_size": 1024, "seq_length": 2048},
               {"tokens_per_step_target": 2_000_000, "global_batch_size": 1024, "seq_length": 2048},
               "tokens_per_step target 1,000,000 is unreachable")],
    "GL104": [({"zero_stage": 2, "pp": 2, "framework": "megatron-deepspeed"},
               {"zero_stage": 1, "pp": 2, "framework": "megatron-deepspeed"},
               "zero_stage 2 is incompatible with DeepSpeed pipeline parallelism (pp 2)")],
    "GL106": [({"tp": 2, "framework": "deepspeed"}, {"tp": 2, "framework": "megatron-deepspeed"},
               "tp 2 needs Megatron's tensor-parallel layers")],
    "GL107": [({"precision": "fp16", "gpu": "cpu"}, {"precision": "bf16", "gpu": "cpu"},
               "precision fp16 is not supported on the cpu preset")],
    "GL108": [({"warmup_iters": 1, "framework": "deepspeed"}, {"warmup_iters": 2, "framework": "deepspeed"},
               "DeepSpeed's schedulers warm up for at least 2 steps")],
    "GL109": [({"seq_length": 4096, "num_attention_heads": 12, "cp": 8, "framework": "deepspeed"},
               {"seq_length": 4096, "num_attention_heads": 16, "cp": 8, "framework": "deepspeed"},
               "Ulysses sequence parallelism cp 8 must divide seq_length 4096 and num_attention_heads 12; use cp in [1, 2, 4]"),
              # microsoft's --ds-sequence-parallel-size is Ulysses too; Megatron-LM's cp is not
              ({"seq_length": 4096, "num_attention_heads": 12, "cp": 8, "framework": "megatron-deepspeed"},
               {"seq_length": 4096, "num_attention_heads": 12, "cp": 8, "framework": "megatron-lm"},
               "Ulysses sequence parallelism cp 8")],
    "GL204": [({"warmup_iters": 100, "train_iters": 100}, {"warmup_iters": 99, "train_iters": 100},
               "warmup of 100 iterations is not shorter than the run of 100 iterations"),
              ({"megatron_flags": {"--train-iters": "x.yaml:9:1", "--train-samples": "x.yaml:9:1"}}, {"megatron_flags": {"--train-iters": "x.yaml:9:1"}},
               "--train-iters and --train-samples are both given"),
              ({"megatron_flags": {"--lr-warmup-fraction": "x.yaml:9:1", "--lr-warmup-iters": "x.yaml:9:1"}},
               {"megatron_flags": {"--lr-warmup-fraction": "x.yaml:9:1", "--train-iters": "x.yaml:9:1"}},
               "--lr-warmup-fraction excludes --lr-warmup-iters"),
              ({"megatron_flags": {"--train-samples": "x.yaml:9:1", "--lr-decay-iters": "x.yaml:9:1"}},
               {"megatron_flags": {"--train-samples": "x.yaml:9:1", "--lr-decay-samples": "x.yaml:9:1"}},
               "--train-samples with --lr-decay-iters")],
    "GL205": [({"max_position_embeddings": 2048, "seq_length": 4096}, {"max_position_embeddings": 4096, "seq_length": 4096},
               "max_position_embeddings 2048 is less than seq_length 4096")],
    "GL206": [({"hidden_size": 12280, "num_attention_heads": 96}, {"hidden_size": 12288, "num_attention_heads": 96},
               "hidden_size 12280 is not divisible by num_attention_heads 96"),
              # Minitron-8B: 48 heads of 128 with hidden 4096, the head dimension given
              ({"hidden_size": 4096, "num_attention_heads": 48},
               {"hidden_size": 4096, "num_attention_heads": 48, "kv_channels": 128},
               "hidden_size 4096 is not divisible by num_attention_heads 48")],
    "GL207": [({"num_attention_heads": 32, "num_query_groups": 6}, {"num_attention_heads": 32, "num_query_groups": 8},
               "num_attention_heads 32 is not divisible by num_query_groups 6")],
    "GL208": [({"zero_stage": 1, "framework": "megatron-lm"}, {"zero_stage": 1, "framework": "megatron-deepspeed"},
               "zero_stage 1 has no effect with megatron-lm")],
    "GL209": [({"distributed_optimizer": True, "framework": "deepspeed"}, {"distributed_optimizer": True, "framework": "megatron-lm"},
               "distributed_optimizer is a megatron-lm option")],
    "GL210": [({"vpp": 2, "framework": "megatron-deepspeed", "megatron_dialect": "megatron-deepspeed/microsoft"},
               {"vpp": 2, "framework": "megatron-lm", "megatron_dialect": "megatron-lm"},
               "vpp 2 is not supported by Megatron-DeepSpeed (microsoft)"),
              ({"vpp": 2, "framework": "deepspeed"}, {"vpp": 1, "framework": "deepspeed"},
               "vpp 2 is not supported by deepspeed")],
    "GL211": [({"moe_top_k": 3, "num_experts": 2}, {"moe_top_k": 2, "num_experts": 8}, "moe_top_k 3 exceeds num_experts 2")],
    "GL212": [({"min_lr": 1e-3, "lr": 1e-4}, {"min_lr": 1e-5, "lr": 1e-4}, "min_lr 0.001 is greater than lr 0.0001")],
    "GL213": [({"position_embedding": "alibi", "framework": "megatron-lm"},
               {"position_embedding": "alibi", "framework": "megatron-deepspeed"},
               "position_embedding alibi is not available in megatron-lm")],
    "GL214": [({"framework": "megatron-deepspeed", "first_stage_layers": 7,
                "megatron_dialect": "megatron-deepspeed/bigscience"},
               {"framework": "megatron-lm", "first_stage_layers": 7, "megatron_dialect": "megatron-lm"},
               "first_stage_layers / last_stage_layers are not supported by Megatron-DeepSpeed (bigscience")],
    "GL215": [({"precision": "fp8", "framework": "megatron-lm", "gpu": "a100-80gb", "gpu_has_fp8": False, "megatron_dialect": "megatron-lm"},
               {"precision": "fp8", "framework": "megatron-lm", "gpu": "h100-80gb", "gpu_has_fp8": True, "megatron_dialect": "megatron-lm"},
               "precision fp8 needs FP8 tensor cores, which a100-80gb does not have"),
              ({"precision": "fp8", "framework": "megatron-deepspeed", "megatron_dialect": "megatron-deepspeed/microsoft"},
               {"precision": "bf16", "framework": "megatron-deepspeed", "megatron_dialect": "megatron-deepspeed/microsoft"},
               "precision fp8 (Transformer Engine) is a Megatron-LM feature, not Megatron-DeepSpeed (microsoft)'s"),
              ({"precision": "fp8", "framework": "deepspeed"}, {"precision": "bf16", "framework": "deepspeed"},
               "is a Megatron-LM feature, not deepspeed's")],
    "GL216": [({"packing": True, "framework": "deepspeed"}, {"packing": True, "framework": "megatron-lm"},
               "data.packing renders nothing for plain DeepSpeed"),
              ({"packing": True, "framework": "deepspeed", "launcher": "torchrun"},
               {"packing": True, "framework": "deepspeed", "launcher": "accelerate"},
               "data.packing renders nothing for plain DeepSpeed")],
    "GL217": [({"reset_position_ids": True, "reset_attention_mask": False},
               {"reset_position_ids": True, "reset_attention_mask": True},
               "--reset-position-ids without --reset-attention-mask")],
    "GL218": [({"dialect_unexpressed": ("model.normalization", "rmsnorm", "Megatron-DeepSpeed (bigscience)",
                                        ("Megatron-DeepSpeed (microsoft)",))},
               {"dialect_unexpressed": None},
               "model.normalization 'rmsnorm' cannot be expressed in Megatron-DeepSpeed (bigscience)")],
    "GL219": [({"extra_arg_problem": ("launch.extra_args[0] --save-intervall is not an option",)},
               {"extra_arg_problem": None}, "--save-intervall is not an option")],
    "GL220": [({"extra_arg_duplicate": ("launch.extra_args[0] --micro-batch-size repeats",)},
               {"extra_arg_duplicate": None}, "--micro-batch-size repeats")],
    "GL221": [({"megatron_setting_ignored": ("megatron.fork", "bigscience", "megatron-lm", "megatron-deepspeed")},
               {"megatron_setting_ignored": None},
               "megatron.fork 'bigscience' is ignored with framework megatron-lm; it applies to megatron-deepspeed")],
    "GL223": [({"run_io_unwritten": ("data.paths", "fsdp")}, {"run_io_unwritten": None},
               "data.paths is not written for framework fsdp")],
    "GL309": [({"train_seconds": 10 * 86400, "time_limit_minutes": 2880},
               {"train_seconds": 10 * 86400, "time_limit_minutes": 2880, "checkpoint_dir": "/ckpt"},
               "training is estimated at 10.0 days and slurm.time allows 2.0 days (≈5 allocations)")],
    "GL310": [({"save_interval": 5000, "step_time_s": 6.0, "time_limit_minutes": 240},
               {"save_interval": 500, "step_time_s": 6.0, "time_limit_minutes": 240},
               "checkpoint.interval 5,000 steps × 6.00 s = 8.3 h, more than the 4.0 h allocation")],
    "GL315": [({"checkpoint_dir": "/lustre/ckpt/run", "container_image": "nvcr.io#nvidia/pytorch:25.01-py3",
                "container_mounts": ("/data:/data",)},
               {"checkpoint_dir": "/lustre/ckpt/run", "container_image": "nvcr.io#nvidia/pytorch:25.01-py3",
                "container_mounts": ("/data:/data", "/lustre:/lustre")},
               "checkpoint.dir /lustre/ckpt/run is not under any of slurm.container_mounts (/data)")],
    "GL314": [({"slurm_time": "7-00:00:00", "partition_max_time": "2-00:00:00"},
               {"slurm_time": "48:00:00", "partition_max_time": "2-00:00:00"},
               "slurm.time 7-00:00:00 exceeds the partition's maximum 2-00:00:00"),
              ({"slurm_time": "UNLIMITED", "partition_max_time": "04:00:00"},
               {"slurm_time": "UNLIMITED", "partition_max_time": "INFINITE"}, "exceeds the partition's maximum")],
    "GL313": [({"stage_resume": ("long", "short", "parallelism.tp", 2, 4, "OLD saves one file per rank", "")},
               {}, "stage long cannot resume stage short's checkpoint: parallelism.tp 2 -> 4: stage short saves")],
    "GL311": [({"checkpoint_dir": "/tmp/ckpt"}, {"checkpoint_dir": "/lustre/ckpt"}, "/tmp/ckpt is under /tmp")],
    "GL306": [({"exports": (("NCCL_IB_TIMEOUT", "22"),), "ascend": True},
               {"exports": (("NCCL_IB_TIMEOUT", "22"),), "ascend": False},
               "NCCL_IB_TIMEOUT is not read on Ascend NPUs, which use HCCL")],
    "GL112": [({"accelerate_num_processes": 8, "nodes": 2, "sbatch_gpus_per_node": 8},
               {"accelerate_num_processes": 16, "nodes": 2, "sbatch_gpus_per_node": 8},
               "accelerate num_processes 8 ≠ 2 nodes × 8 GPUs allocated = 16"),
              ({"accelerate_num_processes": 16, "nodes": 2, "accelerate_num_machines": 1},
               {"accelerate_num_processes": 16, "nodes": 2, "accelerate_num_machines": 2},
               "accelerate num_machines 1 ≠ 2 nodes allocated")],
    "GL113": [({"framework": "fsdp", "zero_stage": 1}, {"framework": "fsdp", "zero_stage": 3},
               "zero_stage 1 has no FSDP2 form"),
              ({"framework": "fsdp", "tp": 2, "pp": 1}, {"framework": "fsdp", "tp": 1, "pp": 1},
               "framework fsdp has no model parallelism here (tp 2)"),
              ({"framework": "deepspeed", "hybrid_shard": True}, {"framework": "fsdp", "hybrid_shard": True},
               "hybrid_shard is an FSDP setting")],
    "GL114": [({"launcher": "accelerate", "framework": "megatron-lm"},
               {"launcher": "accelerate", "framework": "fsdp"},
               "launcher accelerate starts deepspeed and fsdp runs, not megatron-lm"),
              ({"launcher": "deepspeed", "framework": "fsdp"}, {"launcher": "torchrun", "framework": "fsdp"},
               "the DeepSpeed launcher does not start FSDP2 runs")],
    "GL304": [({"container_mounts": ("/a:/b",)}, {"container_image": "img", "container_mounts": ("/a:/b",)},
               "container_mounts given without container_image")],
    "GL305": [({"output": "logs/%j/out.txt"}, {"output": "logs/%x-%j.out"},
               "logs/%j/out.txt puts a Slurm pattern in a folder name")],
}
CASE_IDS = [(code, i) for code, cases in CASES.items() for i in range(len(cases))]


def facts(values: dict) -> dict[str, Fact]:
    return {k: Fact(v, f"x.yaml:{i + 1}") for i, (k, v) in enumerate(values.items())}


def test_every_rule_has_cases_and_docs() -> None:
    assert set(CASES) == set(RULES)
    for rule in RULES.values():
        assert rule.summary and rule.name == rule.name.lower()
        assert "Fix" in rule.explanation and "Example:" in rule.explanation, rule.code


@pytest.mark.parametrize(("code", "index"), CASE_IDS)
def test_rule_fires_on_violation(code: str, index: int) -> None:
    bad, _, fragment = CASES[code][index]
    finding = RULES[code].run(facts(bad))
    assert finding is not None, code
    assert fragment in finding.message
    assert finding.sources and finding.sources[0].startswith("x.yaml:")


@pytest.mark.parametrize(("code", "index"), CASE_IDS)
def test_rule_passes_when_satisfied(code: str, index: int) -> None:
    _, good, _ = CASES[code][index]
    assert RULES[code].run(facts(good)) is None


def test_rule_waits_for_unknown_facts() -> None:
    assert RULES["GL002"].run(facts({"global_batch_size": 1000})) is None


# End to end: a spec breaking a rule gets the code, the values and the spec line.
@pytest.mark.parametrize(
    ("overrides", "code", "line_key"),
    [
        ({"cluster": {"nodes": 3, "gpus_per_node": 6}, "parallelism": {"tp": 4, "pp": 1}}, "GL003", "nodes"),
        ({"model": {"num_attention_heads": 12}, "parallelism": {"tp": 8, "pp": 1}}, "GL008", "num_attention_heads"),
        ({"model": {"num_layers": 7}}, "GL009", "num_layers"),
        ({"parallelism": {"cp": 2, "pp": 1}, "model": {"seq_length": 2050, "max_position_embeddings": 4096}}, "GL011", "seq_length"),
        ({"model": {"max_position_embeddings": 1024}}, "GL205", "max_position_embeddings"),
        ({"parallelism": {"vpp": 3}}, "GL009", "num_layers"),
        ({"parallelism": {"ep": 2}}, "GL015", "ep"),
        ({"model": {"num_experts": 6}, "parallelism": {"ep": 4, "tp": 1, "pp": 1}}, "GL012", "num_experts"),
        ({"framework": "megatron-deepspeed", "parallelism": {"zero_stage": 2}}, "GL104", "zero_stage"),
        ({"framework": "megatron-deepspeed", "model": {"num_experts": 8, "moe_top_k": 2},
          "parallelism": {"zero_stage": 3, "pp": 1}}, "GL115", "num_experts"),
        ({"parallelism": {"dp": 3}}, "GL013", "dp"),
        ({"training": {"warmup": {"iters": 1000}}}, "GL204", "iters"),
        ({"model": {"num_query_groups": 3}}, "GL207", "num_attention_heads"),
        ({"slurm": {"container_workdir": "/w"}}, "GL304", "container_workdir"),
    ],
)
def test_spec_errors_are_located(tmp_path: Path, overrides: dict, code: str, line_key: str) -> None:
    data = spec_dict(**overrides)
    with pytest.raises(PlanError) as err:
        plan_of(tmp_path, data)
    codes = [f.code for f in err.value.findings]
    assert code in codes
    finding = next(f for f in err.value.findings if f.code == code)
    text = (tmp_path / "spec.yaml").read_text().splitlines()
    file, line, _col = finding.sources[0].rsplit(":", 2)
    assert file.endswith("spec.yaml")
    assert line_key in text[int(line) - 1]


def test_warnings_do_not_stop_the_plan(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, spec_dict(parallelism={"tp": 1, "pp": 1, "sequence_parallel": True}))
    assert [w.code for w in plan.warnings] == ["GL010"]
    line = int(plan.warnings[0].sources[0].rsplit(":", 2)[1])
    assert "sequence_parallel" in (tmp_path / "spec.yaml").read_text().splitlines()[line - 1]


def test_warnings_are_printed_and_exit_0(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from generator.cli import app

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_dict(parallelism={"tp": 1, "pp": 1, "sequence_parallel": True})))
    result = CliRunner().invoke(app, ["generate", str(path), "--target", "megatron"])
    assert result.exit_code == 0
    assert "warning: " in result.stderr and "GL010 sequence_parallel has no effect at tp 1" in result.stderr
