"""The model's architecture in one line, as `explain` and plan.json name it: attention (groups,
multi-latent, sinks, windows), biases, norms, positions (RoPE base and scaling), MoE routing and
balancing, multi-token prediction."""

from __future__ import annotations


def architecture_line(m, ep: int = 1) -> str:
    """One line naming what the framework builds beyond the shape."""
    parts = [f"{m.num_layers} layers, hidden {m.hidden_size}"]
    if m.multi_latent_attention:
        parts.append(_latent_attention(m))
    elif m.num_query_groups != m.num_attention_heads:
        parts.append(f"{m.num_attention_heads} heads in {m.num_query_groups} GQA groups "
                     f"({m.num_attention_heads // m.num_query_groups} per group)")
    else:
        parts.append(f"{m.num_attention_heads} heads")
    if m.kv_channels != m.hidden_size // m.num_attention_heads and not m.multi_latent_attention:
        parts.append(f"{m.kv_channels} channels per head")
    if m.softmax_type != "vanilla":
        parts.append("a learned softmax sink per head" if m.softmax_type == "learnable"
                     else "off-by-one softmax")
    if m.window_size is not None:
        every = f", every {m.window_attn_skip_freq}th layer full" if m.window_attn_skip_freq else ""
        parts.append(f"sliding window {m.window_size[0]}{every}")
    parts.append(f"{_ACTIVATIONS[m.activation]} FFN {m.ffn_hidden_size}" + _gate(m))
    parts.append(f"{'RMSNorm' if m.normalization == 'rmsnorm' else 'LayerNorm'} ε {m.norm_epsilon:g}"
                 + (", QK-norm" if m.qk_layernorm else ""))
    if m.linear_bias:
        parts.append("linear biases")
    else:
        parts.append("QKV bias only" if m.qkv_bias else "no biases")
    parts.append(_positions(m))
    parts.append("tied embeddings" if m.tie_embeddings else "untied embeddings")
    if m.embedding_layernorm:
        parts.append("embedding LayerNorm")
    if m.parallel_residual:
        parts.append("parallel attention and MLP")
    parts.append(f"dropout {m.attention_dropout:g} attention / {m.hidden_dropout:g} hidden")
    parts.append(f"init std {m.init_method_std:g}")
    if m.num_experts:
        parts.append(_routing(m, ep))
    if m.mtp_num_layers:
        parts.append(f"{m.mtp_num_layers} MTP layer{'s' if m.mtp_num_layers > 1 else ''} "
                     f"(loss × {m.mtp_loss_scaling_factor:g})")
    return "; ".join(parts)


_ACTIVATIONS = {"gelu": "GeLU", "swiglu": "SwiGLU", "quick_geglu": "gated quick-GELU"}


def _gate(m) -> str:
    extras = [f"linear offset {m.glu_linear_offset:g}" if m.glu_linear_offset else "",
              f"clamped at {m.activation_clamp:g}" if m.activation_clamp is not None else ""]
    extras = [e for e in extras if e]
    return f" ({', '.join(extras)})" if extras else ""


def _latent_attention(m) -> str:
    query = f"query latent {m.q_lora_rank}" if m.q_lora_rank is not None else "queries projected directly"
    return (f"{m.num_attention_heads} heads of multi-latent attention ({query}, key/value latent "
            f"{m.kv_lora_rank}, heads {m.qk_head_dim} + {m.qk_pos_emb_head_dim} rotary, values "
            f"{m.v_head_dim})")


def _positions(m) -> str:
    if m.position_embedding == "rope":
        text = f"RoPE θ {m.rotary_base}" + (f" on {m.rotary_percent:.0%} of each head"
                                               if m.rotary_percent < 1 else "")
        s = m.rope_scaling
        if s is not None and s.type == "yarn":
            text += (f", YaRN ×{s.factor:g} from {s.original_max_position_embeddings} (β {s.beta_fast:g}/"
                     f"{s.beta_slow:g}, mscale {s.mscale:g}, all-dim {s.mscale_all_dim:g}"
                     + ("" if s.truncate else ", unrounded") + ")")
        elif s is not None:
            text += (f", Llama-3.1 scaling ×{s.factor:g} (low {s.low_freq_factor:g}, high "
                     f"{s.high_freq_factor:g}, original {s.original_max_position_embeddings})")
        return text
    return {"learned_absolute": "learned positions", "alibi": "ALiBi", "none": "no positions"}[
        m.position_embedding]


def _routing(m, ep: int) -> str:
    text = f"MoE {m.num_experts} experts, top-{m.moe_top_k or 1}"
    if m.moe_router_num_groups:
        text += f" within {m.moe_router_group_topk} of {m.moe_router_num_groups} groups"
    text += f" by {m.moe_router_score_function} scores" + (" (softmax before the top-k)"
                                                          if m.moe_router_pre_softmax else "")
    if m.moe_router_expert_bias:
        text += f", aux-loss-free expert bias (rate {m.moe_router_bias_update_rate:g})"
    if m.moe_router_topk_scaling_factor:
        text += f", weights ×{m.moe_router_topk_scaling_factor:g}"
    if m.moe_ffn_hidden_size and m.moe_ffn_hidden_size != m.ffn_hidden_size:
        text += f", expert FFN {m.moe_ffn_hidden_size}"
    if m.moe_shared_expert_intermediate_size:
        text += f", shared experts {m.moe_shared_expert_intermediate_size}"
    if m.moe_dense_layers:
        text += f", first {m.moe_dense_layers} layers dense"
    if m.moe_load_balancing == "sinkhorn":
        text += ", sinkhorn balancing"
    elif m.moe_load_balancing == "none" or not m.moe_aux_loss_coeff:
        text += ", no load balancing"
    else:
        text += f", {m.moe_load_balancing} {m.moe_aux_loss_coeff:g}"
    if m.moe_z_loss_coeff:
        text += f", z-loss {m.moe_z_loss_coeff:g}"
    text += ", dropless" if m.moe_capacity_factor is None else \
        f", capacity {m.moe_capacity_factor:g} (drops by {m.moe_token_drop_policy})"
    dispatcher = m.token_dispatcher(ep)
    if dispatcher == "flex":
        dispatcher += f" ({m.moe_flex_dispatcher_backend or 'deepep'})"
    return text + f", {dispatcher} dispatcher" + (", grouped GEMM" if m.moe_grouped_gemm else "")
