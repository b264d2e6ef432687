"""Build the model a Megatron-LM argument list describes, in Megatron-LM's own code, on the meta
device (one process per tree; no memory for the weights, so 405B costs nothing):

    python megatron_build.py TREE < cases.json > results.json

Each case is ``{"argv": [...], "world_size": N, "vocab_size": V, "capability": [9, 0]}`` (the
vocabulary is the tokenizer's, which the arguments do not carry). The arguments go through
``parse_args`` and ``validate_args``; the padded vocabulary comes from Megatron's
``_vocab_size_with_padding`` at the run's tp; ``core_transformer_config_from_args`` gives the
``TransformerConfig``; ``GPTModel`` is built as pretrain_gpt.py's builder builds it (layer specs of
``get_gpt_decoder_block_spec``, which places MoE and dense layers by --moe-layer-freq), whole
(tp = pp = cp = ep = 1, so every parameter is counted once), with megatron-core's local modules
(the Transformer Engine modules hold the same parameters). A Megatron-DeepSpeed tree builds its
own GPTModel the same way (see megatron_deepspeed). Each result, on the last line after MARK:
``{"ok": true, "params": N, "padded_vocab_size": .., "config": {...}, "args": {...}}`` (the
forks: params and padded_vocab_size) or ``{"ok": false, "error": "..."}``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys

from megatron_parse import MARK, REFUSALS, _plain, _prepare, case_environment, failure

# TransformerConfig fields that say which architecture is built
CONFIG = ("num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
          "ffn_hidden_size", "add_bias_linear", "add_qkv_bias", "gated_linear_unit", "normalization",
          "layernorm_epsilon", "attention_dropout", "hidden_dropout", "init_method_std", "qk_layernorm",
          "num_moe_experts", "moe_router_topk", "moe_router_load_balancing_type", "moe_aux_loss_coeff",
          "moe_z_loss_coeff", "moe_expert_capacity_factor", "moe_token_drop_policy",
          "moe_pad_expert_input_to_capacity", "moe_token_dispatcher_type", "moe_grouped_gemm",
          "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size", "moe_layer_freq")
# argument values the model builder reads beside the config, and the overlap switches
ARGS = ("position_embedding_type", "rotary_base", "rotary_percent", "use_rope_scaling", "rope_scaling_factor",
        "untie_embeddings_and_output_weights", "max_position_embeddings", "make_vocab_size_divisible_by",
        "overlap_grad_reduce", "overlap_param_gather", "use_distributed_optimizer", "swiglu")
# kernels that need Transformer Engine or apex, and the parallel sizes: one whole model
WHOLE = {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "context_parallel_size": 1,
         "expert_model_parallel_size": 1, "expert_tensor_parallel_size": 1, "sequence_parallel": False,
         "virtual_pipeline_model_parallel_size": None, "decoder_first_pipeline_num_layers": None,
         "decoder_last_pipeline_num_layers": None, "apply_rope_fusion": False, "bias_gelu_fusion": False,
         "bias_swiglu_fusion": False, "masked_softmax_fusion": False, "bias_dropout_fusion": False,
         "gradient_accumulation_fusion": False, "no_persist_layer_norm": True, "use_cpu_initialization": True,
         "perform_initialization": False, "fp8": None, "fp8_param_gather": False, "transformer_impl": "local", "tp_comm_overlap": False,
         # asked for, recorded, and built without: the grouped GEMM (a kernel) holds the same
         # parameters as the local experts; the alltoall dispatcher (no parameters) opens a CUDA stream
         "moe_grouped_gemm": False, "moe_token_dispatcher_type": "allgather"}
ASKED = ("moe_grouped_gemm", "moe_token_dispatcher_type")


# the same for the Megatron-DeepSpeed forks (their parsers are Megatron-LM's of 2022-23)
FORK_WHOLE = {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "moe_expert_parallel_size": 1,
              "ds_sequence_parallel_size": 1, "sequence_parallel": False, "use_cpu_initialization": True,
              "perform_initialization": False, "masked_softmax_fusion": False, "bias_gelu_fusion": False,
              "bias_dropout_fusion": False, "gradient_accumulation_fusion": False, "deepspeed": False}


def _init_gloo(mpu) -> None:
    import tempfile

    import torch

    if torch.distributed.is_initialized():  # a worker builds many batches in one process
        return
    store = os.path.join(tempfile.mkdtemp(), "store")  # a file rendezvous: no port to collide on
    torch.distributed.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    mpu.initialize_model_parallel(1, 1)


def megatron_lm(cases: list[dict]) -> list[dict]:
    """Megatron-LM (megatron.training): its GPTModel built as pretrain_gpt.py builds it."""
    with contextlib.redirect_stdout(io.StringIO()):
        import torch
        from megatron.core import num_microbatches_calculator as calc
        from megatron.core import parallel_state
        from megatron.core.models.gpt import GPTModel
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec
        from megatron.training import arguments, global_vars
        try:  # where each release keeps its padding function
            from megatron.training.tokenizer.tokenizer import _vocab_size_with_padding
        except ImportError:
            from megatron.core.tokenizers.utils.build_tokenizer import (
                vocab_size_with_padding as _vocab_size_with_padding,
            )
        _init_gloo(parallel_state)
    results = []
    for case in cases:
        err = io.StringIO()
        try:
            with case_environment(global_vars, calc, case), contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(err):
                args = arguments.parse_args()
                arguments.validate_args(args)
                padded = _vocab_size_with_padding(case["vocab_size"], args, logging_enabled=False)
                seen = {name: _plain(getattr(args, name, None)) for name in ARGS}
                asked = {name: getattr(args, name) for name in ASKED}
                for name, value in WHOLE.items():
                    setattr(args, name, value)
                config = arguments.core_transformer_config_from_args(args)
                switches = {name: _plain(getattr(config, name, None)) for name in CONFIG}
                switches.update(asked)
                switches["activation_func"] = getattr(config.activation_func, "__name__", None)
                spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False,
                                                  normalization=args.normalization)
                with torch.device("meta"):
                    model = GPTModel(config=config, transformer_layer_spec=spec, vocab_size=padded,
                                     max_sequence_length=args.max_position_embeddings,
                                     pre_process=True, post_process=True, parallel_output=True,
                                     share_embeddings_and_output_weights=not args.untie_embeddings_and_output_weights,
                                     position_embedding_type=args.position_embedding_type,
                                     rotary_percent=args.rotary_percent, rotary_base=args.rotary_base,
                                     rope_scaling=args.use_rope_scaling,
                                     rope_scaling_factor=args.rope_scaling_factor)
                moe_layers = sum(1 for layer in model.decoder.layers if type(layer.mlp).__name__ == "MoELayer")
            results.append({"ok": True, "params": sum(p.numel() for p in model.parameters()),
                            "padded_vocab_size": padded, "config": switches, "args": seen,
                            "moe_layers": moe_layers})
            del model
        except (SystemExit, *REFUSALS) as exc:
            results.append(failure(exc, err))
    return results


def megatron_deepspeed(cases: list[dict]) -> list[dict]:
    """A Megatron-DeepSpeed fork (megatron.model): its GPTModel, whole, with its parameters on
    the meta device (accelerate's init_empty_weights: the forks move rotary and ALiBi buffers
    between devices, which real tensors allow). Stood in for: the fused LayerNorm CUDA kernel
    module BLOOM's fork imports when it builds a LayerNorm, CUDA's current device for its ALiBi
    buffer, and its CPU initialisation into the (empty) weights."""
    import types

    with contextlib.redirect_stdout(io.StringIO()):
        import torch
        from accelerate import init_empty_weights
        from megatron import arguments, global_vars
        from megatron.model.gpt_model import GPTModel
        from megatron.tokenizer.tokenizer import _vocab_size_with_padding
        try:
            from megatron.core import parallel_state as mpu
        except ImportError:  # BLOOM's fork keeps its own mpu
            from megatron import mpu
        try:
            from megatron.model.enums import ModelType
        except ImportError:
            ModelType = None
        _init_gloo(mpu)
    sys.modules.setdefault("fused_mix_prec_layer_norm_cuda", types.ModuleType("fused_mix_prec_layer_norm_cuda"))
    torch.cuda.current_device = lambda: "cpu"
    if hasattr(mpu, "layers"):
        mpu.layers._initialize_affine_weight_cpu = lambda *args, **kwargs: None
    results = []
    for case in cases:
        err = io.StringIO()
        try:
            with case_environment(global_vars, None, case), contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(err):
                args = arguments.parse_args()
                if hasattr(arguments, "validate_args"):
                    arguments.validate_args(args)
                args.padded_vocab_size = padded = _vocab_size_with_padding(case["vocab_size"], args)
                for name, value in FORK_WHOLE.items():
                    setattr(args, name, value)
                if ModelType is not None:
                    args.model_type = ModelType.encoder_or_decoder
                global_vars._GLOBAL_ARGS = args
                with init_empty_weights():
                    if hasattr(arguments, "core_transformer_config_from_args"):
                        model = GPTModel(arguments.core_transformer_config_from_args(args), num_tokentypes=0,
                                         parallel_output=True, pre_process=True, post_process=True)
                    else:
                        model = GPTModel(num_tokentypes=0, parallel_output=True, pre_process=True,
                                         post_process=True)
            results.append({"ok": True, "params": sum(p.numel() for p in model.parameters()),
                            "padded_vocab_size": padded})
            del model
        except (SystemExit, *REFUSALS) as exc:
            results.append(failure(exc, err))
    return results


def build(tree: str, cases: list[dict]) -> list[dict]:
    """Each case's model built by the tree's own code (``_prepare`` done)."""
    modern = os.path.isdir(os.path.join(tree, "megatron", "training"))
    return (megatron_lm if modern else megatron_deepspeed)(cases)


def main() -> None:
    tree = sys.argv[1]
    _prepare(tree)
    print(f"\n{MARK} {json.dumps(build(tree, json.load(sys.stdin)))}")


if __name__ == "__main__":
    main()
