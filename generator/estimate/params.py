"""Parameter counts from the model's architecture (every linear layer's weights and biases,
norms, router, embeddings), as megatron-core's GPTModel builds them: the test suite builds the
presets on the meta device and holds these counts to the built model's."""

from __future__ import annotations

from functools import lru_cache

from generator.values import value


@value
class Mla:
    """Multi-latent attention's sizes (DeepSeek): the query latent (None: queries projected
    directly), the key/value latent, and each head's channels without and with rotary position
    and of its value."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_head_dim: int
    qk_pos_emb_head_dim: int
    v_head_dim: int

    @property
    def q_head_dim(self) -> int:
        return self.qk_head_dim + self.qk_pos_emb_head_dim


@value
class Shape:
    """The model numbers the estimates need (from a spec's model section or a paper's table)."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_query_groups: int
    ffn_hidden_size: int
    vocab_size: int  # as built (padded where the framework pads it)
    seq_length: int
    gated: bool = False  # a gated MLP (SwiGLU, gpt-oss's quick-GEGLU): two up projections
    rmsnorm: bool = False
    bias: bool = True  # biases in every linear layer (Megatron's default)
    learned_positions: bool = True
    tie_embeddings: bool = True
    num_experts: int | None = None
    top_k: int = 1  # the routed experts each token runs (moe_top_k; 1 without experts)
    qkv_bias: bool | None = None  # None: as ``bias``
    kv_channels: int | None = None  # None: hidden / heads
    qk_layernorm: bool = False
    embedding_layernorm: bool = False
    max_position_embeddings: int | None = None  # learned positions built (None: seq_length)
    moe_ffn_hidden_size: int | None = None  # None: ffn_hidden_size
    shared_expert_size: int = 0
    moe_dense_layers: int = 0
    vocab_padding: int = 0  # rows of vocab_size that the tokenizer's vocabulary does not have
    mla: Mla | None = None  # multi-latent attention's latents and head dims
    # Megatron-LM main's MLA with qk_layernorm and no query latent fuses a norm over the hidden
    # state into the query projection, which the checkpoint (DeepSeek-V2-Lite) does not have
    mla_query_norm: bool = False
    sinks: bool = False  # a learned softmax sink per head (gpt-oss)
    mtp_layers: int = 0  # multi-token prediction layers (on the last stage, apart from the main model)
    quick_geglu: bool = False  # gpt-oss's gated quick-GELU (Megatron-LM's FLOP count takes it as ungated)

    @property
    def head_dim(self) -> int:
        return self.kv_channels or self.hidden_size // self.num_attention_heads

    @property
    def query_width(self) -> int:
        """The query heads' channels (heads × head dim: the hidden size unless kv_channels differs)."""
        return self.num_attention_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """The key (or value) channels: query groups × head dim."""
        return self.num_query_groups * self.head_dim

    @classmethod
    def of(cls, model, vocab: int | None = None, dialect=None) -> Shape:
        """From a spec's Model, with the vocabulary as built (``vocab``; None: as it is), as
        ``dialect`` builds it where that differs (None: as the checkpoint holds it)."""
        vocab = vocab or model.vocab_size
        return cls(model.num_layers, model.hidden_size, model.num_attention_heads,
                   model.num_query_groups, model.ffn_hidden_size, vocab,
                   model.seq_length, gated=model.activation in ("swiglu", "quick_geglu"),
                   rmsnorm=model.normalization == "rmsnorm", bias=model.linear_bias,
                   learned_positions=model.position_embedding == "learned_absolute",
                   tie_embeddings=model.tie_embeddings, num_experts=model.num_experts,
                   top_k=(model.moe_top_k or 1) if model.num_experts else 1,
                   qkv_bias=model.qkv_bias, kv_channels=model.kv_channels,
                   qk_layernorm=model.qk_layernorm, embedding_layernorm=model.embedding_layernorm,
                   max_position_embeddings=model.max_position_embeddings,
                   moe_ffn_hidden_size=model.moe_ffn_hidden_size,
                   shared_expert_size=model.moe_shared_expert_intermediate_size or 0,
                   moe_dense_layers=model.moe_dense_layers if model.num_experts else 0,
                   vocab_padding=vocab - model.vocab_size,
                   mla=Mla(model.q_lora_rank, model.kv_lora_rank, model.qk_head_dim,
                           model.qk_pos_emb_head_dim, model.v_head_dim)
                   if model.multi_latent_attention else None,
                   mla_query_norm=bool(model.multi_latent_attention and model.q_lora_rank is None
                                       and model.qk_layernorm and dialect is not None
                                       and dialect.can("mla_query_norm")),
                   sinks=model.softmax_type == "learnable", mtp_layers=model.mtp_num_layers or 0,
                   quick_geglu=model.activation == "quick_geglu")


@value
class Params:
    """Parameter counts of the model built, per layer part and in total."""

    attention: int  # per layer (with QK norms)
    mlp: int  # per layer, one routed expert (dense models: the MLP)
    norms: int  # per layer
    router: int  # per MoE layer
    embedding: int  # word (+ position) embeddings (+ their norm), first stage
    output: int  # untied output layer, last stage
    final_norm: int
    num_layers: int
    num_experts: int
    shared: int = 0  # per MoE layer: the shared experts
    dense_mlp: int = 0  # per dense layer of an MoE model
    dense_layers: int = 0
    vocab_padding: int = 0  # of embedding + output: the padding rows
    mtp: int = 0  # per MTP layer: its norms, its projection and its transformer layer
    mtp_layers: int = 0

    @property
    def moe_layers(self) -> int:
        return self.num_layers - self.dense_layers

    @property
    def layers_tp(self) -> int:
        """All layers' parameters that tensor parallelism splits (not the routed experts)."""
        return (self.num_layers * (self.attention + self.norms) + self.dense_layers * self.dense_mlp
                + self.moe_layers * (self.router + self.shared))

    @property
    def layers_experts(self) -> int:
        """All layers' routed-expert parameters (dense models: the MLPs)."""
        return self.moe_layers * self.mlp * self.num_experts

    @property
    def per_layer(self) -> int:
        """The largest layer."""
        return self.attention + self.norms + max(self.mlp * self.num_experts + self.router + self.shared,
                                                 self.dense_mlp)

    @property
    def main(self) -> int:
        """The main model: without the multi-token prediction layers."""
        return self.layers_tp + self.layers_experts + self.embedding + self.output + self.final_norm

    @property
    def total(self) -> int:
        """Every parameter Megatron builds (the MTP layers share the embedding and output head)."""
        return self.main + self.mtp_layers * self.mtp

    @property
    def published(self) -> int:
        """The main model without the vocabulary padding: the count a release of the model states
        (DeepSeek-V3's 671B leaves its MTP module apart)."""
        return self.main - self.vocab_padding


def _mlp(h: int, f: int, gated: bool, bias: bool) -> int:
    up = 2 * f if gated else f
    return h * up + f * h + ((up + h) if bias else 0)


def _norm(width: int, rmsnorm: bool) -> int:
    return width if rmsnorm else 2 * width


def _mla_attention(shape: Shape, mla: Mla) -> int:
    """megatron-core's MLASelfAttention: the query (through its latent and the latent's norm, or
    projected directly), the key/value latent with the rotary channels beside it, its norm and
    its up projection to every head's key and value, and the output projection; no biases but
    the output's. The latents' norms are built with qk_layernorm (else identities)."""
    h, heads = shape.hidden_size, shape.num_attention_heads
    if mla.q_lora_rank is None:
        query = h * heads * mla.q_head_dim + (_norm(h, shape.rmsnorm) if shape.mla_query_norm else 0)
    else:
        query = h * mla.q_lora_rank + mla.q_lora_rank * heads * mla.q_head_dim
        query += _norm(mla.q_lora_rank, shape.rmsnorm) if shape.qk_layernorm else 0
    kv = h * (mla.kv_lora_rank + mla.qk_pos_emb_head_dim)
    kv += mla.kv_lora_rank * heads * (mla.qk_head_dim + mla.v_head_dim)
    kv += _norm(mla.kv_lora_rank, shape.rmsnorm) if shape.qk_layernorm else 0
    return query + kv + heads * mla.v_head_dim * h + (h if shape.bias else 0)


@lru_cache(maxsize=256)
def count_params(shape: Shape) -> Params:
    h = shape.hidden_size
    if shape.mla is not None:
        attention = _mla_attention(shape, shape.mla)
    else:
        query, kv = shape.query_width, shape.kv_width
        qkv_bias = shape.bias if shape.qkv_bias is None else (shape.qkv_bias or shape.bias)
        attention = h * (query + 2 * kv) + query * h  # linear_qkv and linear_proj
        attention += (query + 2 * kv if qkv_bias else 0) + (h if shape.bias else 0)
        if shape.qk_layernorm:  # one norm over a head's channels for queries, one for keys
            attention += 2 * _norm(shape.head_dim, shape.rmsnorm)
    if shape.sinks:  # softmax_type learnable: one sink logit per head
        attention += shape.num_attention_heads
    norm = _norm(h, shape.rmsnorm)
    experts = shape.num_experts or 1
    f = shape.ffn_hidden_size
    expert_ffn = (shape.moe_ffn_hidden_size or f) if shape.num_experts else f
    embedding = shape.vocab_size * h
    if shape.learned_positions:
        embedding += (shape.max_position_embeddings or shape.seq_length) * h
    if shape.embedding_layernorm:
        embedding += 2 * h
    shared = _mlp(h, shape.shared_expert_size, shape.gated, shape.bias) if shape.shared_expert_size else 0
    mlp = _mlp(h, expert_ffn, shape.gated, shape.bias)
    router = (h + (1 if shape.bias else 0)) * experts if shape.num_experts else 0
    # an MTP layer (MultiTokenPredictionLayer): norms of the embedding and of the hidden state,
    # their joint projection (no bias), a transformer layer as the last decoder layer, its final norm
    last_layer = attention + 2 * norm + (mlp * experts + router + shared if shape.num_experts else mlp)
    mtp = 3 * norm + 2 * h * h + last_layer
    return Params(attention=attention, mlp=mlp, norms=2 * norm,
                  # the router: a weight per expert (and a bias with the linear biases)
                  router=router,
                  embedding=embedding,
                  output=0 if shape.tie_embeddings else shape.vocab_size * h, final_norm=norm,
                  num_layers=shape.num_layers, num_experts=experts, shared=shared,
                  dense_mlp=_mlp(h, f, shape.gated, shape.bias) if shape.moe_dense_layers else 0,
                  dense_layers=shape.moe_dense_layers,
                  vocab_padding=shape.vocab_padding * h * (1 if shape.tie_embeddings else 2),
                  mtp=mtp if shape.mtp_layers else 0, mtp_layers=shape.mtp_layers)
