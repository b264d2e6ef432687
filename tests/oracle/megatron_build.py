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
          "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size", "moe_layer_freq",
          # multi-latent attention, its YaRN, multi-token prediction, routing, sinks and windows
          "multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim",
          "v_head_dim", "rope_type", "rotary_scaling_factor", "mscale", "mscale_all_dim",
          "original_max_position_embeddings", "beta_fast", "beta_slow", "mtp_num_layers", "mtp_loss_scaling_factor",
          "moe_router_score_function", "moe_router_pre_softmax", "moe_router_enable_expert_bias",
          "moe_router_bias_update_rate", "moe_router_num_groups", "moe_router_group_topk",
          "moe_router_topk_scaling_factor", "moe_router_dtype", "softmax_type", "window_size",
          "window_attn_skip_freq", "glu_linear_offset", "activation_func_clamp_value",
          "yarn_rotary_scaling_factor", "yarn_original_max_position_embeddings", "yarn_beta_fast",
          "yarn_beta_slow", "yarn_mscale", "yarn_mscale_all_dim", "yarn_correction_range_round_to_int")
# argument values the model builder reads beside the config, and the overlap switches
ARGS = ("position_embedding_type", "rotary_base", "rotary_percent", "use_rope_scaling", "rope_scaling_factor",
        "untie_embeddings_and_output_weights", "max_position_embeddings", "make_vocab_size_divisible_by",
        "overlap_grad_reduce", "overlap_param_gather", "use_distributed_optimizer", "swiglu")
# kernels that need Transformer Engine or apex, and the parallel sizes: one whole model
WHOLE = {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "context_parallel_size": 1,
         "expert_model_parallel_size": 1, "expert_tensor_parallel_size": 1, "sequence_parallel": False,
         "virtual_pipeline_model_parallel_size": None, "decoder_first_pipeline_num_layers": None,
         "pipeline_model_parallel_layout": None, "overlap_moe_expert_parallel_comm": False,
         "recompute_granularity": None, "recompute_modules": None, "recompute_method": None,
         "recompute_num_layers": None,
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


def _local_mla_core_attention(spec, config) -> None:
    """MLA hands its core attention the key and value head widths (k_channels, v_channels), which
    Transformer Engine's DotProductAttention takes and megatron-core's local one does not. The
    core attention holds no parameters (vanilla softmax): a local one that takes and drops the
    widths builds the same parameters."""
    from megatron.core.transformer.dot_product_attention import DotProductAttention

    class LocalMlaCoreAttention(DotProductAttention):
        def __init__(self, *args, k_channels=None, v_channels=None, **kwargs):
            super().__init__(*args, **kwargs)

    for layer in spec.layer_specs:
        attention = layer.submodules.self_attention.submodules
        if attention.core_attention is DotProductAttention:
            attention.core_attention = LocalMlaCoreAttention
        if config.q_lora_rank is None and config.qk_layernorm:
            # as Transformer Engine's layer spec: no standalone query norm without a query
            # latent; main's MLA then fuses one into the query projection (below)
            from megatron.core.transformer.identity_op import IdentityOp

            attention.q_layernorm = IdentityOp


def _local_fused_norm_linear() -> None:
    """main's MLA with qk_layernorm and no query latent normalises the hidden state inside the
    query projection, with the backend's fused norm+linear (Transformer Engine's
    LayerNormColumnParallelLinear: a norm weight over the input, and a bias for LayerNorm, before
    the linear), which the local backend lacks. A local linear holding those parameters stands in
    for it; Megatron's own resolver decides where it goes."""
    import torch
    from megatron.core.models import backends
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear

    class LocalNormColumnParallelLinear(ColumnParallelLinear):
        def __init__(self, input_size, output_size, *args, config, **kwargs):
            super().__init__(input_size, output_size, *args, config=config, **kwargs)
            self.layer_norm_weight = torch.nn.Parameter(torch.empty(input_size))
            if config.normalization == "LayerNorm":
                self.layer_norm_bias = torch.nn.Parameter(torch.empty(input_size))

    if hasattr(backends, "LocalSpecProvider"):
        backends.LocalSpecProvider.column_parallel_layer_norm_linear = lambda self: LocalNormColumnParallelLinear


def _config_error(arguments, args) -> str | None:
    """What megatron-core's TransformerConfig says of the run's own arguments (its parallel
    sizes, dispatcher, recompute modules, layout), before they are made whole for the count:
    None where it takes them. (Checks that need Transformer Engine fail here without it.)"""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            arguments.core_transformer_config_from_args(args)
    except REFUSALS as exc:
        return f"{type(exc).__name__}: {exc}"[:600]
    return None


def _layout(args) -> dict:
    """A --pipeline-model-parallel-layout as megatron-core reads and validates it (the check
    TransformerConfig makes at start-up): the transformer and MTP layers of each pipeline rank,
    and the virtual stages."""
    if getattr(args, "pipeline_model_parallel_layout", None) is None:
        return {}
    from megatron.core.transformer.enums import LayerType
    from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout

    layout = PipelineParallelLayerLayout(args.pipeline_model_parallel_layout, args.pipeline_model_parallel_size)
    layout.validate_layer_layout(num_layers=args.num_layers, mtp_num_layers=args.mtp_num_layers)
    ranks = layout.layout  # [pp rank][virtual stage] -> layer types
    return {"layout_vpp": layout.virtual_pipeline_model_parallel_size,
            "layout_layers": [sum(stage.count(LayerType.decoder) for stage in rank) for rank in ranks],
            "layout_mtp": [sum(stage.count(LayerType.mtp) for stage in rank) for rank in ranks]}


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
    # YaRN's rotary embedding (MLA, gpt-oss) puts its frequencies on the current CUDA device
    # whatever use_cpu_initialization says: the CPU stands in for it (no parameters live there)
    torch.cuda.current_device = lambda: "cpu"
    # the MTP layer asks whether its projection is Transformer Engine's inference linear, an
    # isinstance over TE classes that are not there without TE: it is not (a local linear)
    with contextlib.suppress(ImportError, AttributeError):
        from megatron.core.transformer import multi_token_prediction

        multi_token_prediction.is_inference_column_parallel_linear = lambda module: False
    # core_v0.16's MLA takes Transformer Engine for present when its extension module imports
    # (it does without TE, with stand-ins that are not classes) and asks isinstance of them
    from megatron.core.transformer import multi_latent_attention

    if not isinstance(getattr(multi_latent_attention, "TELinear", None), type):
        multi_latent_attention.HAVE_TE = False
    _local_fused_norm_linear()
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
                layout = _layout(args)
                config_error = _config_error(arguments, args)
                for name, value in WHOLE.items():
                    setattr(args, name, value)
                config = arguments.core_transformer_config_from_args(args)
                switches = {name: _plain(getattr(config, name, None)) for name in CONFIG}
                switches.update(asked)
                switches["activation_func"] = getattr(config.activation_func, "__name__", None)
                spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False,
                                                  normalization=args.normalization)
                if getattr(config, "multi_latent_attention", False):
                    _local_mla_core_attention(spec, config)
                mtp = None
                if getattr(config, "mtp_num_layers", None):  # as pretrain_gpt.py: after the last layer's spec
                    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_mtp_block_spec
                    mtp = get_gpt_mtp_block_spec(config, spec.layer_specs[-1], use_transformer_engine=False)
                with torch.device("meta"):
                    model = GPTModel(config=config, transformer_layer_spec=spec, vocab_size=padded,
                                     **({"mtp_block_spec": mtp} if mtp is not None else {}),
                                     max_sequence_length=args.max_position_embeddings,
                                     pre_process=True, post_process=True, parallel_output=True,
                                     share_embeddings_and_output_weights=not args.untie_embeddings_and_output_weights,
                                     position_embedding_type=args.position_embedding_type,
                                     rotary_percent=args.rotary_percent, rotary_base=args.rotary_base,
                                     rope_scaling=args.use_rope_scaling,
                                     rope_scaling_factor=args.rope_scaling_factor)
                moe_layers = sum(1 for layer in model.decoder.layers if type(layer.mlp).__name__ == "MoELayer")
                mtp_block = getattr(model, "mtp", None)
            results.append({"ok": True, "params": sum(p.numel() for p in model.parameters()), **layout,
                            "config_error": config_error,
                            "mtp_params": sum(p.numel() for p in mtp_block.parameters()) if mtp_block else 0,
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
