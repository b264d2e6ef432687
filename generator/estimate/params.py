"""Parameter counts from the model's architecture (every linear layer's weights and biases,
norms, router, embeddings), as megatron-core's GPTModel builds them: the test suite builds the
presets on the meta device and holds these counts to the built model's."""

from __future__ import annotations

from functools import lru_cache

from generator.values import value


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
    swiglu: bool = False
    rmsnorm: bool = False
    bias: bool = True  # biases in every linear layer (Megatron's default)
    learned_positions: bool = True
    tie_embeddings: bool = True
    num_experts: int | None = None
    qkv_bias: bool | None = None  # None: as ``bias``
    kv_channels: int | None = None  # None: hidden / heads
    qk_layernorm: bool = False
    embedding_layernorm: bool = False
    max_position_embeddings: int | None = None  # learned positions built (None: seq_length)
    moe_ffn_hidden_size: int | None = None  # None: ffn_hidden_size
    shared_expert_size: int = 0
    moe_dense_layers: int = 0
    vocab_padding: int = 0  # rows of vocab_size that the tokenizer's vocabulary does not have

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
    def of(cls, model, vocab: int | None = None) -> Shape:
        """From a spec's Model, with the vocabulary as built (``vocab``; None: as it is)."""
        vocab = vocab or model.vocab_size
        return cls(model.num_layers, model.hidden_size, model.num_attention_heads,
                   model.num_query_groups, model.ffn_hidden_size, vocab,
                   model.seq_length, swiglu=model.activation == "swiglu",
                   rmsnorm=model.normalization == "rmsnorm", bias=model.linear_bias,
                   learned_positions=model.position_embedding == "learned_absolute",
                   tie_embeddings=model.tie_embeddings, num_experts=model.num_experts,
                   qkv_bias=model.qkv_bias, kv_channels=model.kv_channels,
                   qk_layernorm=model.qk_layernorm, embedding_layernorm=model.embedding_layernorm,
                   max_position_embeddings=model.max_position_embeddings,
                   moe_ffn_hidden_size=model.moe_ffn_hidden_size,
                   shared_expert_size=model.moe_shared_expert_intermediate_size or 0,
                   moe_dense_layers=model.moe_dense_layers if model.num_experts else 0,
                   vocab_padding=vocab - model.vocab_size)


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
    def total(self) -> int:
        return self.layers_tp + self.layers_experts + self.embedding + self.output + self.final_norm

    @property
    def published(self) -> int:
        """Without the vocabulary padding: the count a release of the model states."""
        return self.total - self.vocab_padding


def _mlp(h: int, f: int, swiglu: bool, bias: bool) -> int:
    up = 2 * f if swiglu else f
    return h * up + f * h + ((up + h) if bias else 0)


@lru_cache(maxsize=256)
def count_params(shape: Shape) -> Params:
    h = shape.hidden_size
    query, kv = shape.query_width, shape.kv_width
    qkv_bias = shape.bias if shape.qkv_bias is None else (shape.qkv_bias or shape.bias)
    attention = h * (query + 2 * kv) + query * h  # linear_qkv and linear_proj
    attention += (query + 2 * kv if qkv_bias else 0) + (h if shape.bias else 0)
    norm = h if shape.rmsnorm else 2 * h
    if shape.qk_layernorm:  # one norm over a head's channels for queries, one for keys
        attention += 2 * (shape.head_dim if shape.rmsnorm else 2 * shape.head_dim)
    experts = shape.num_experts or 1
    f = shape.ffn_hidden_size
    expert_ffn = (shape.moe_ffn_hidden_size or f) if shape.num_experts else f
    embedding = shape.vocab_size * h
    if shape.learned_positions:
        embedding += (shape.max_position_embeddings or shape.seq_length) * h
    if shape.embedding_layernorm:
        embedding += 2 * h
    shared = _mlp(h, shape.shared_expert_size, shape.swiglu, shape.bias) if shape.shared_expert_size else 0
    return Params(attention=attention, mlp=_mlp(h, expert_ffn, shape.swiglu, shape.bias), norms=2 * norm,
                  # the router: a weight per expert (and a bias with the linear biases)
                  router=(h + (1 if shape.bias else 0)) * experts if shape.num_experts else 0,
                  embedding=embedding,
                  output=0 if shape.tie_embeddings else shape.vocab_size * h, final_norm=norm,
                  num_layers=shape.num_layers, num_experts=experts, shared=shared,
                  dense_mlp=_mlp(h, f, shape.swiglu, shape.bias) if shape.moe_dense_layers else 0,
                  dense_layers=shape.moe_dense_layers,
                  vocab_padding=shape.vocab_padding * h * (1 if shape.tie_embeddings else 2))
