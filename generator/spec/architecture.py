"""The model's architecture in one line, as `explain` and plan.json name it: biases, norms,
positions (RoPE base and scaling), attention groups, MoE routing and balancing."""

from __future__ import annotations


def architecture_line(m, ep: int = 1) -> str:
    """One line naming what the framework builds beyond the shape."""
    parts = [f"{m.num_layers} layers, hidden {m.hidden_size}"]
    if m.num_query_groups != m.num_attention_heads:
        parts.append(f"{m.num_attention_heads} heads in {m.num_query_groups} GQA groups "
                     f"({m.num_attention_heads // m.num_query_groups} per group)")
    else:
        parts.append(f"{m.num_attention_heads} heads")
    if m.kv_channels != m.hidden_size // m.num_attention_heads:
        parts.append(f"{m.kv_channels} channels per head")
    parts.append(f"{'SwiGLU' if m.activation == 'swiglu' else 'GeLU'} FFN {m.ffn_hidden_size}")
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
    return "; ".join(parts)


def _positions(m) -> str:
    if m.position_embedding == "rope":
        text = f"RoPE θ {m.rotary_base}" + (f" on {m.rotary_percent:.0%} of each head"
                                               if m.rotary_percent < 1 else "")
        s = m.rope_scaling
        if s is not None:
            text += (f", Llama-3.1 scaling ×{s.factor:g} (low {s.low_freq_factor:g}, high "
                     f"{s.high_freq_factor:g}, original {s.original_max_position_embeddings})")
        return text
    return {"learned_absolute": "learned positions", "alibi": "ALiBi", "none": "no positions"}[
        m.position_embedding]


def _routing(m, ep: int) -> str:
    text = f"MoE {m.num_experts} experts, top-{m.moe_top_k or 1}"
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
    return text + f", {m.token_dispatcher(ep)} dispatcher" + (", grouped GEMM" if m.moe_grouped_gemm else "")
