"""Parameter counts from the model shape (weights of every linear layer, norms, biases,
embeddings), as Megatron builds GPT and Llama-style models."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Shape:
    """The model numbers the estimates need (from a spec's model section or a paper's table)."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_query_groups: int
    ffn_hidden_size: int
    vocab_size: int
    seq_length: int
    swiglu: bool = False
    rmsnorm: bool = False
    bias: bool = True  # GPT-style linear biases (Llama-style models have none)
    learned_positions: bool = True
    tie_embeddings: bool = True
    num_experts: int | None = None

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def of(cls, model) -> Shape:
        """From a spec's Model."""
        return cls(model.num_layers, model.hidden_size, model.num_attention_heads,
                   model.num_query_groups, model.ffn_hidden_size, model.vocab_size,
                   model.seq_length, swiglu=model.activation == "swiglu",
                   rmsnorm=model.normalization == "rmsnorm",
                   bias=model.activation != "swiglu",
                   learned_positions=model.position_embedding == "learned_absolute",
                   tie_embeddings=model.tie_embeddings, num_experts=model.num_experts)


@dataclass(frozen=True)
class Params:
    attention: int  # per layer
    mlp: int  # per layer, one expert (dense models: the MLP)
    norms: int  # per layer
    router: int  # per layer (MoE)
    embedding: int  # word (+ position) embeddings, first stage
    output: int  # untied output layer, last stage
    final_norm: int
    num_layers: int
    num_experts: int

    @property
    def per_layer(self) -> int:
        return self.attention + self.mlp * self.num_experts + self.norms + self.router

    @property
    def total(self) -> int:
        return self.per_layer * self.num_layers + self.embedding + self.output + self.final_norm


@lru_cache(maxsize=256)
def count_params(shape: Shape) -> Params:
    h, f = shape.hidden_size, shape.ffn_hidden_size
    kv = shape.num_query_groups * shape.head_dim
    bias = 1 if shape.bias else 0
    attention = h * (h + 2 * kv) + bias * (h + 2 * kv) + h * h + bias * h
    up = 2 * f if shape.swiglu else f
    mlp = h * up + bias * up + f * h + bias * h
    norm = h if shape.rmsnorm else 2 * h
    experts = shape.num_experts or 1
    embedding = shape.vocab_size * h + (shape.seq_length * h if shape.learned_positions else 0)
    return Params(attention=attention, mlp=mlp, norms=2 * norm,
                  router=h * experts if shape.num_experts else 0, embedding=embedding,
                  output=0 if shape.tie_embeddings else shape.vocab_size * h, final_norm=norm,
                  num_layers=shape.num_layers, num_experts=experts)
