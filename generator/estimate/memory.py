"""Per-GPU memory of the most loaded pipeline stage (the first): weights, gradients and optimizer
states by precision and sharding, activations per Korthikanti et al. 2022 (arXiv 2205.05198,
Table 2), the logits on the last stage, and an allowance for what formulas miss; model states
as in ZeRO (Rajbhandari et al. 2020, arXiv 1910.02054, §3) and megatron-core's distributed
optimizer."""

from __future__ import annotations

from dataclasses import replace

from generator.estimate.params import Shape, count_params
from generator.frameworks import framework_of
from generator.values import value
from generator.vectors import maximum, minimum, where

GIB = 1 << 30
# What the formulas miss: CUDA context and NCCL buffers (a fixed amount per GPU) plus allocator
# fragmentation (a share of the rest). Stated, not calibrated: measured peaks vary by 1-3 GiB.
ALLOWANCE_FIXED_GIB = 2.0
ALLOWANCE_FRACTION = 0.05


@value
class Layout:
    """How the model is split and trained; everything the memory formulas depend on."""

    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 1
    vpp: int = 1
    dp: int = 1
    micro_batch_size: int = 1
    num_microbatches: int = 1
    sequence_parallel: bool = False
    recompute: str = "none"  # none | selective | full
    flash_attention: bool = True
    precision: str = "bf16"
    fp8_recipe: str = "delayed"  # Transformer Engine's scaling with precision fp8 (training.fp8_recipe)
    sharding: str = "none"  # none | distributed_optimizer | zero1 | zero2 | zero3
    framework: str = "megatron-lm"
    offload: str = "none"  # none | optimizer | optimizer_and_params (ZeRO-Offload to CPU memory)
    first_stage_layers: int | None = None  # uneven pipelines: the first and last stage's layers,
    last_stage_layers: int | None = None  # the rest spread evenly over the middle stages
    shard_dp: int | None = None  # hybrid sharding: the ranks state is sharded over (a node)
    optimizer_states: str = "fp32"  # Adam's moments (bf16: Megatron's precision-aware optimizer)
    main_grads: str = "fp32"
    overlap_grad_reduce: bool = True  # the data-parallel reduction runs under the backward pass
    moe_dispatcher: str = "alltoall"  # how tokens reach their experts: alltoall | allgather | flex
    ep_comm_overlap: bool = False  # MoE dispatch/combine overlapped with another micro-batch's compute
    # selective recompute's modules (training.recompute_modules; None: megatron-core's default,
    # the attention core)
    recompute_modules: tuple[str, ...] | None = None
    tp_comm_overlap: bool = False  # the tensor-parallel collectives pipelined with the GEMMs
    overlap_p2p_comm: bool = False  # interleaved pipelines' sends overlapped with the chunks' compute
    # DeepSpeed's data_types.grad_accum_dtype: None, its default (and what gen-launch renders),
    # accumulates in the training dtype; "fp32" in fp32 copies (its BF16_Optimizer)
    grad_accum_dtype: str | None = None
    # the model runs under torch.compile (torchtitan.compile): Inductor fuses the elementwise
    # kernels and recomputes them in the backward instead of keeping their outputs
    compiled: bool = False

    @property
    def state_shards(self) -> int:
        """The ranks a dense parameter's sharded state is split over: Megatron's distributed
        optimizer shards over data × context parallel ranks (megatron-core's data-parallel group
        with context parallelism); ZeRO and FSDP over the data-parallel ranks (a node's with
        hybrid sharding)."""
        if self.sharding == "distributed_optimizer":
            return (self.shard_dp or self.dp) * self.cp
        return self.shard_dp or self.dp

    @property
    def expert_dp(self) -> int:
        """The ranks that hold the same experts (world / (etp × ep × pp)), over which the experts'
        sharded state is split (megatron-core's expert data-parallel group; DeepSpeed's too)."""
        return maximum(1, self.tp * self.pp * self.cp * self.dp // (self.etp * self.ep * self.pp))

    def stage_layers(self, num_layers: int) -> tuple[float, float, float]:
        """(first, middle, last) stage layer counts (all L/p when the pipeline is even)."""
        given = [x for x in (self.first_stage_layers, self.last_stage_layers) if x is not None]
        middle_stages = self.pp - len(given)
        middle = where(middle_stages > 0, (num_layers - sum(given)) / maximum(middle_stages, 1), 0.0)
        first = self.first_stage_layers if self.first_stage_layers is not None else middle
        last = self.last_stage_layers if self.last_stage_layers is not None else middle
        return first, middle, last


@value
class Memory:
    """Per-GPU memory of the most loaded rank, in bytes, by what holds it."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    logits: float
    other: float
    capacity: float | None
    stage: str = "first"  # which pipeline stage this is (the most loaded one)

    @property
    def total(self) -> float:
        return (self.weights + self.gradients + self.optimizer + self.activations + self.logits
                + self.other)

    @property
    def fits(self) -> bool | None:
        return None if self.capacity is None else self.total <= self.capacity

    def gib(self) -> dict[str, float | bool | None]:
        def g(x: float | None) -> float | None:
            return None if x is None else round(x / GIB, 2)
        return {"weights_gib": g(self.weights), "gradients_gib": g(self.gradients),
                "optimizer_gib": g(self.optimizer), "activations_gib": g(self.activations),
                "logits_gib": g(self.logits), "other_gib": g(self.other), "total_gib": g(self.total),
                "capacity_gib": g(self.capacity), "fits": self.fits, "stage": self.stage}


def rank_params(shape: Shape, layout: Layout) -> tuple[float, float]:
    """(dense, routed-expert) parameters one rank holds on average: its tp × pp share of the
    dense ones (an MoE model's attention, shared experts and dense layers too), its
    ep × etp × pp share of the routed experts."""
    p = count_params(shape)
    experts = p.layers_experts if shape.num_experts else 0
    return (p.total - experts) / (layout.tp * layout.pp), experts / (layout.ep * layout.etp * layout.pp)


def fp8_params(precision: str, sharding: str) -> bool:
    """Whether the parameters live in FP8: with --fp8-param-gather, which gen-launch renders for
    FP8 runs with the distributed optimizer (so its all-gather moves 1-byte values too)."""
    return precision == "fp8" and sharding == "distributed_optimizer"


def state_bytes_per_param(precision: str, sharding: str, dp: int, optimizer_states: str = "fp32",
                          main_grads: str = "fp32") -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per parameter with Adam.

    Megatron (bf16 params, fp32 main grads and master weights + two moments): 2 + 4 + 12 = 18,
    with the distributed optimizer 6 + 12/d; fp16: 2 + 2 + 16 (20, or 4 + 16/d); fp32: 4 + 4 + 8
    (docs/user-guide/features/dist_optimizer.md). DeepSpeed ZeRO (Rajbhandari et al. 2020):
    16-bit params and grads, K = 12 bytes of optimizer state; stage 1 shards the optimizer, 2 also
    the gradients, 3 also the weights. Megatron's precision-aware optimizer keeps the moments
    (optimizer_states) and the main gradients in bf16: 2 bytes each instead of 4 (the fp32
    master weights stay).
    """
    if sharding.startswith("zero"):  # (fp8 is refused for DeepSpeed: GL215)
        weight, grad, opt = (4.0, 4.0, 8.0) if precision == "fp32" else (2.0, 2.0, 12.0)
        stage = int(sharding[-1])
        return (weight / dp if stage >= 3 else weight, grad / dp if stage >= 2 else grad,
                opt / dp if stage >= 1 else opt)
    # Transformer Engine FP8: parameters in FP8 (fp8_params), else in bf16 plus the FP8 copy its
    # GEMMs use
    fp8_weight = 1.0 if fp8_params(precision, sharding) else 3.0
    weight, grad, opt = {"bf16": (2.0, 4.0, 12.0), "fp8": (fp8_weight, 4.0, 12.0), "fp16": (2.0, 2.0, 16.0),
                         "fp32": (4.0, 4.0, 8.0)}[precision]
    if precision in ("bf16", "fp8"):
        grad = 2.0 if main_grads == "bf16" else grad
        opt -= 4.0 if optimizer_states == "bf16" else 0.0  # two moments of 2 bytes, not 4
    return weight, grad, opt / dp if sharding == "distributed_optimizer" else opt


def recomputes(layout: Layout, module: str):
    """Whether selective recompute reruns ``module`` (Megatron-LM's --recompute-modules names;
    without them, megatron-core's default: the attention core alone)."""
    reruns = (layout.recompute == "selective") & (module in (layout.recompute_modules or ("core_attn",)))
    # torch.compile's partitioner (min-cut) recomputes what pointwise ops and norms make from
    # tensors the backward keeps anyway: the norms' outputs and the activation function's
    return reruns | (layout.compiled & (module in COMPILE_RECOMPUTES))


# What torch.compile's default partitioner reruns in the backward instead of keeping (the norms'
# outputs, recomputed from the block inputs kept for the norms' own backward; the activation
# function's output, from the first GEMM's output) — the modules Megatron-LM names layernorm and
# moe_act, and a dense MLP's activation (ACTIVATION_OUTPUT).
ACTIVATION_OUTPUT = "mlp_act"
COMPILE_RECOMPUTES = ("layernorm", "moe_act", ACTIVATION_OUTPUT)


def activation_bytes_per_layer(shape: Shape, layout: Layout, moe: bool = False) -> float:
    """Korthikanti Table 2, per transformer layer and micro-batch, 16-bit activations: s·b·h times
    10 + 24/t (replicated LayerNorm, dropout and block inputs, plus the TP-split part), the
    sequence-parallel form 34/t, plus the attention core 5·a·s/(h·t) unless it is recomputed
    (selective) or never stored (flash attention); full recompute keeps only the layer input 2sbh.
    The 24 (and 34) follow the FFN width as Megatron's estimator does (18 + 4f/h = 34 at f = 4h);
    gating (SwiGLU) and GQA are not modelled, as there. Multi-latent attention keeps other tensors
    than Q, K, V of width h: attention_activation_widths. CP divides the sequence. With FP8,
    Transformer Engine stores the inputs of the QKV, projection and both MLP GEMMs in one byte.
    An MoE layer (``moe``) keeps its experts' tensors instead of the MLP's (moe_activation_bytes).
    Module-level recompute drops what its modules keep: the two norms' outputs (layernorm, 4 of
    the 10), MLA's up-projected queries, keys and values (mla_up_proj), a dense layer's MLP (mlp).
    Without dropout (p = 0, as Llama-style models train) no masks are kept: 2 of the 10 after
    attention and MLP, a·s of the 5·a·s scores."""
    s = shape.seq_length / layout.cp
    b, h, a, t = layout.micro_batch_size, shape.hidden_size, shape.num_attention_heads, layout.tp
    latents, attention, output = attention_activation_widths(shape)
    # a dense MLP keeps its activation's input and output (2 + 2 bytes a channel of the FFN width)
    kept_widths = where(recomputes(layout, ACTIVATION_OUTPUT), 2, 4)
    mlp = 0.0 if moe else where(recomputes(layout, "mlp"), 0.0, kept_widths * shape.ffn_hidden_size / h)
    split = attention + mlp - where(recomputes(layout, "mla_up_proj"), up_projected_width(shape), 0.0)
    masks = 0 if shape.hidden_dropout else 2  # (of the 10: the dropout masks after attention and MLP)
    replicated = 10 + latents - where(recomputes(layout, "layernorm"), 4, 0) - masks
    per = (replicated + split) / t if layout.sequence_parallel else replicated + split / t
    if layout.precision == "fp8":  # the GEMM inputs kept in FP8: 1 byte saved per element (a latent's
        # up projection input: 1 of its 4 bytes)
        hidden_rows = t if layout.sequence_parallel else 1
        per -= (2 + latents / 4) / hidden_rows + \
            (output + where(recomputes(layout, ACTIVATION_OUTPUT), 0.0, mlp / 4)) / t
    scores = 5 if shape.attention_dropout else 4  # QKᵀ and softmax (2 bytes each), the dropout mask
    core = where(recomputes(layout, "core_attn") | layout.flash_attention, 0.0, scores * a * s / (h * t))
    kept = s * b * h * (per + core) + (moe_activation_bytes(shape, layout) if moe else 0.0)
    if framework_of(layout.framework).selective_recompute == "ops":
        kept = where(layout.recompute == "selective", op_checkpoint_bytes(shape, layout, moe), kept)
    return where(layout.recompute == "full", 2 * s * b * h / (t if layout.sequence_parallel else 1), kept)


def op_checkpoint_bytes(shape: Shape, layout: Layout, moe: bool) -> float:
    """Per micro-batch, what a layer keeps under torchtitan's per-op selective checkpointing
    (0.3.0's distributed/activation_checkpoint.py SelectiveAC: the outputs of attention and of
    every other linear, counted from the layer's first, the rest rerun in the backward), 2 bytes
    each. A 0.3.0 Llama-style layer calls its linears as fused wqkv, wo, w1, w3, w2
    (models/llama3: fuse_qkv; common/feed_forward.py w2(silu(w1(x)) * w3(x))), so it keeps the
    layer's input (the checkpoint's), wqkv's output (q + 2kv wide), attention's output, w1's and
    w2's — 2h + 2(q + 2kv) + 2q + 2f + 2h bytes a token; wo and w3 rerun. An MoE layer keeps
    its attention's the same way and what its MoE block keeps without checkpointing
    (moe_activation_bytes; torchtitan reruns its grouped GEMMs but saves its all-to-all outputs:
    counted whole, an over-count). torchtitan's tensor parallelism splits them all (its norms
    sequence-parallel)."""
    s = shape.seq_length / layout.cp
    h, query, kv = shape.hidden_size, shape.query_width, shape.kv_width
    attention = 2 * h + 2 * (query + 2 * kv) + 2 * query
    mlp = 0.0 if moe else 2 * shape.ffn_hidden_size + 2 * h
    kept = layout.micro_batch_size * s * (attention + mlp) / layout.tp
    return kept + (moe_activation_bytes(shape, layout) if moe else 0.0)


def moe_activation_bytes(shape: Shape, layout: Layout) -> float:
    """Per micro-batch, what an MoE layer keeps for its backward on one rank beyond the layer's
    input and norms, as megatron-core's MoE layer runs it: each routed copy of a token (top-k
    of them, spread evenly over the ep ranks) keeps its permuted hidden state (the experts' first
    GEMM input), the first GEMM's output (two of the FFN width when gated: the activation's
    input) and the activation's output weighted by the token's routing score (the second GEMM's
    input; the fused weighted activation keeps no other copy, and the combine keeps no expert
    output), 16-bit; the rows are the rank's tokens (b·s/(cp·tp): megatron-core runs MoE with tp
    under sequence parallelism) gathered over the expert tensor parallel group, whose ranks split
    the FFN width. The shared experts keep a tensor-parallel MLP's two tensors; the router its
    fp32 logits and scores. FP8 keeps the experts' GEMM inputs in one byte. Module recompute: the
    experts' activation (moe_act), the shared experts (shared_experts), or the whole MoE layer
    (moe) are rerun instead."""
    h, k, t, e = shape.hidden_size, shape.top_k, layout.tp, layout.etp
    f = shape.moe_ffn_hidden_size or shape.ffn_hidden_size
    tokens = layout.micro_batch_size * shape.seq_length / layout.cp
    fc1 = 2 * f if shape.gated else f
    activation = where(recomputes(layout, "moe_act"), 0.0, 2 * f)
    routed = k * (2 * h + (2 * fc1 + activation) / e)
    if layout.precision == "fp8":
        routed = routed - k * (h + where(recomputes(layout, "moe_act"), 0.0, f) / e)
    shared_width = shape.shared_expert_size
    shared_fc1 = 2 * shared_width if shape.gated else shared_width
    shared = where(recomputes(layout, "shared_experts"), 0.0, (2 * shared_fc1 + 2 * shared_width) / t)
    router = 2 * 4 * (shape.num_experts or 0) / t
    kept = tokens * (routed * e / t + shared + router)
    return where(recomputes(layout, "moe"), 0.0, kept)


def up_projected_width(shape: Shape) -> float:
    """Multi-latent attention's up-projected queries and keys (query-key and rope dims a head)
    and values (v dims a head), 2 bytes each, per token per unit of h: what mla_up_proj
    recompute drops (megatron-core reruns the up projections before the attention backward);
    none without MLA."""
    mla = shape.mla
    if mla is None:
        return 0.0
    return 2 * shape.num_attention_heads * (2 * mla.q_head_dim + mla.v_head_dim) / shape.hidden_size


def attention_activation_widths(shape: Shape) -> tuple[float, float, float]:
    """One attention layer's activations kept for the backward, in bytes per token per unit of h
    beyond the replicated 10 of Korthikanti's count (the attention input and dropout mask among
    them): (the latents, which tensor parallelism does not split; what it splits; of that, the
    output projection's input, in elements per h).
    Multi-head attention (Korthikanti): Q and K for the scores (4), V (2), the projection's input
    (2) — 8, all of width h. Multi-latent attention as megatron-core's MLASelfAttention runs it:
    each latent (the query's, where there is one, and the key/value one) kept as its norm's input
    and as its up projection's input, 2 + 2 bytes a channel (its down projections are duplicated
    on the tp ranks, so the latents are whole, split by the sequence under sequence parallelism);
    the up-projected query and key of qk + rope dims a head and the value of v dims a head, which
    the attention core keeps, and the projection's input of v dims a head, split over tp — 4·heads
    ·(qk + rope + v dims) in all, against multi-head attention's 8·h (DeepSeek-V3: 22.9 + 1.1 for
    the latents, against 8: its 128 heads of 192 and 128 dims are three times the hidden size)."""
    mla = shape.mla
    if mla is None:
        return 0.0, 8.0, 1.0
    h, heads = shape.hidden_size, shape.num_attention_heads
    latents = 4 * ((mla.q_lora_rank or 0) + mla.kv_lora_rank) / h
    return latents, 4 * heads * (mla.q_head_dim + mla.v_head_dim) / h, heads * mla.v_head_dim / h


def mtp_input_bytes(shape: Shape, layout: Layout) -> float:
    """Per micro-batch, what an MTP layer keeps beyond its transformer layer's activations: the
    inputs of its two norms (the shifted tokens' embedding, the hidden state) and of its
    projection (the two normed, concatenated: 2h), 2 bytes each — 8·s·b·h; under full recompute
    (megatron-core checkpoints the MTP layer) only its two inputs beside the layer input, 2·s·b·h
    more. Split by tp with sequence parallelism."""
    s = shape.seq_length / layout.cp
    rows = s * layout.micro_batch_size * shape.hidden_size / (layout.tp if layout.sequence_parallel else 1)
    return where(layout.recompute == "full", 2 * rows, 8 * rows)


def estimate_memory(shape: Shape, layout: Layout, capacity_gib: float | None) -> Memory:
    """The most loaded GPU: the first pipeline stage (embeddings, p micro-batches in flight),
    with pp > 1 the last (output layer, logits, one micro-batch in flight) and, when the first
    stage is given fewer layers, the second (p − 1 in flight) — whichever is largest."""
    first_layers, middle_layers, last_layers = layout.stage_layers(shape.num_layers)
    p = layout.pp
    most = stage_memory(shape, layout, capacity_gib, first_layers, p, first=True, last=p == 1)
    others = ((p > 1, stage_memory(shape, layout, capacity_gib, last_layers, 1, first=False, last=True)),
              ((p > 2) & (middle_layers > first_layers),
               stage_memory(shape, layout, capacity_gib, middle_layers, p - 1, first=False, last=False,
                            name="second")))
    for counted, stage in others:  # the first of the largest (ties keep the earlier stage)
        larger = counted & (stage.total > most.total)
        most = Memory(*(where(larger, getattr(stage, f), getattr(most, f)) for f in _PARTS),
                      capacity=most.capacity, stage=where(larger, stage.stage, most.stage))
    return most


_PARTS = ("weights", "gradients", "optimizer", "activations", "logits", "other")


def stage_memory(shape: Shape, layout: Layout, capacity_gib: float | None, layers: float,
                 in_flight: int, first: bool, last: bool, name: str | None = None) -> Memory:
    """One stage holding ``layers`` layers with ``in_flight`` micro-batches' activations stashed
    (1F1B: stage i of p holds p − i)."""
    params = count_params(shape)
    # per layer on average (an MoE model's dense layers and shared experts included)
    dense = params.layers_tp / params.num_layers / layout.tp
    expert = params.layers_experts / params.num_layers / layout.ep / \
        (layout.etp if shape.num_experts else layout.tp)
    stage_dense, stage_expert = layers * dense, layers * expert
    if first:
        stage_dense += params.embedding / layout.tp
    # a tied output layer keeps its own copy of the word embeddings on the last stage
    output = params.output or (0 if first else shape.vocab_size * shape.hidden_size)
    stage_dense = stage_dense + where(last, (output + params.final_norm) / layout.tp, 0.0)
    # the MTP layers on the last stage (megatron-core places them with the output layer), their
    # routed experts split like the others, the rest like a layer's; beyond the first stage the
    # embedding they embed the shifted tokens with (megatron-core builds it where they run)
    mtp_experts = params.mtp_layers * params.mlp * params.num_experts
    mtp_dense = params.mtp_layers * params.mtp - mtp_experts
    mtp_embedding = params.embedding if params.mtp_layers and not first else 0
    stage_dense = stage_dense + where(last, (mtp_dense + mtp_embedding) / layout.tp, 0.0)
    stage_expert = stage_expert + where(last, mtp_experts / layout.ep /
                                        (layout.etp if shape.num_experts else layout.tp), 0.0)
    kept = (layout.optimizer_states, layout.main_grads)
    dense_bytes = state_bytes_per_param(layout.precision, layout.sharding, layout.state_shards, *kept)
    expert_bytes = state_bytes_per_param(layout.precision, layout.sharding, layout.expert_dp, *kept) \
        if shape.num_experts else dense_bytes  # (a dense model's MLPs count as its one "expert")
    # (weights, gradients, optimizer) of the stage's parameters, each part by its own sharding
    weights, grads, opts = (stage_dense * d + stage_expert * e for d, e in zip(dense_bytes, expert_bytes,
                                                                               strict=True))
    # 1F1B: the first stage holds p micro-batches in flight of its layers (L/p each when even:
    # all L layers' worth), times the interleaving penalty; fewer micro-batches than stages hold
    # fewer; the last stage holds one micro-batch of its own layers.
    microbatches = where((in_flight > 1) & (layout.vpp > 1),
                         in_flight * (1 + (layout.pp - 1) / (layout.pp * layout.vpp)),
                         minimum(in_flight, maximum(layout.num_microbatches, 1)))
    # an MoE model's dense layers come first: the first stage holds them (up to its layers)
    dense_layers = where(first, minimum(shape.moe_dense_layers, layers), 0) if shape.num_experts else layers
    per_dense, per_moe = (activation_bytes_per_layer(shape, layout, moe=False),
                          activation_bytes_per_layer(shape, layout, moe=bool(shape.num_experts)))
    activations = (per_dense * dense_layers + per_moe * (layers - dense_layers)) * microbatches
    # the last stage's MTP layers: a transformer layer's activations (an MoE model's MoE layer,
    # as megatron-core builds it) and their inputs each
    activations = activations + where(last, params.mtp_layers * (per_moe + mtp_input_bytes(shape, layout))
                                      * microbatches, 0.0)
    # the last stage: fp32 logits of the loss, split by tp (and cp) — the main model's and each
    # MTP layer's (each loss keeps its own softmax for the backward)
    logits = where(last, (1 + params.mtp_layers) * 4 * shape.seq_length / layout.cp * layout.micro_batch_size
                   * shape.vocab_size / layout.tp, 0.0)
    if layout.offload != "none":
        opts = 0.0  # optimizer states (and the update) live in CPU memory
    if layout.offload == "optimizer_and_params":
        weights = 0.0  # ZeRO-3 fetches each layer's parameters from the CPU when it runs
    if layout.sharding == "zero3":  # (and holds the layer it runs unsharded, offloaded or not)
        gathered, reduced = unsharded_bytes(layout, dense + expert, output / layout.tp)
        weights, grads = weights + gathered, grads + reduced
    states = weights + grads + opts
    other = ALLOWANCE_FIXED_GIB * GIB + ALLOWANCE_FRACTION * (states + activations + logits)
    return Memory(weights, grads, opts, activations, logits, other,
                  None if capacity_gib is None else capacity_gib * GIB,
                  name or ("first" if first else "last"))


def gradient_bytes(layout: Layout) -> int:
    """Bytes per gradient the data-parallel reduction moves. Megatron-LM reduces in fp32 where
    its main gradients are fp32 and the run is not fp16 (validate_args sets
    accumulate_allreduce_grads_in_fp32 for bf16, and so for fp8, which trains with --bf16; fp32
    runs' gradients are fp32), in 16 bits with fp16 or bf16 main gradients; torchtitan in fp32
    (its mixed_precision_reduce default); DeepSpeed and accelerate's FSDP in the 16-bit training
    dtype (their default communication dtype)."""
    record = framework_of(layout.framework)
    if record.megatron_core and layout.precision != "fp16" and layout.main_grads == "fp32":
        return 4
    return 4 if record.reduces_in_fp32 or layout.precision == "fp32" else 2


# Fully sharded data parallelism gathers a unit's parameters before it runs: FSDP2 (torchtitan,
# accelerate) and Megatron-FSDP prefetch the next unit's too, two units unsharded at once;
# DeepSpeed's ZeRO-3, as its own estimator counts (zero/stage3.py: 4 bytes of the largest layer),
# one. The backward holds one unit's unsharded gradients for the reduce-scatter.
FSDP_GATHERED_UNITS = 2
ZERO3_GATHERED_UNITS = 1
REDUCED_UNITS = 1


def unsharded_bytes(layout: Layout, layer_params: float, output_params: float) -> tuple[float, float]:
    """(parameters, gradients) bytes that fully sharded data parallelism holds unsharded on a rank
    beyond its shards: the gathered units' parameters in the 16-bit training dtype (4 bytes in
    fp32) and REDUCED_UNITS unit's gradients in the dtype they are reduced in
    (gradient_bytes: torchtitan's and Megatron's fp32, DeepSpeed's and accelerate's
    16 bits), a unit the largest the model wraps — a transformer layer (its tp and ep share) or
    the output layer."""
    unit = maximum(layer_params, output_params)
    param_bytes = 4 if layout.precision == "fp32" else 2
    units = ZERO3_GATHERED_UNITS if framework_of(layout.framework).deepspeed_engine else FSDP_GATHERED_UNITS
    return units * param_bytes * unit, REDUCED_UNITS * gradient_bytes(layout) * unit


def alternatives(shape: Shape, layout: Layout, capacity_gib: float,
                 gpus_per_node: int) -> list[tuple[str, Memory]]:
    """The cheapest single changes that reduce memory, each with its new estimate, best first
    (a larger tp only inside an NVLink domain of gpus_per_node GPUs)."""
    options: list[tuple[str, Layout]] = []
    if layout.recompute == "none":
        options.append(("selective recompute", replace(layout, recompute="selective")))
    if layout.recompute != "full":
        options.append(("full recompute", replace(layout, recompute="full")))
    if layout.micro_batch_size > 1:
        options.append((f"micro batch {layout.micro_batch_size // 2}",
                        replace(layout, micro_batch_size=layout.micro_batch_size // 2,
                                num_microbatches=layout.num_microbatches * 2)))
    if framework_of(layout.framework).sharding == "distributed_optimizer" and layout.sharding == "none" \
            and layout.dp > 1:
        options.append(("distributed optimizer", replace(layout, sharding="distributed_optimizer")))
    if layout.sharding in ("zero1", "zero2", "zero3") and layout.offload == "none":
        options.append(("CPU offload of the optimizer", replace(layout, offload="optimizer")))
    if layout.sharding.startswith("zero") and layout.sharding != "zero3" and layout.dp > 1:
        nxt = int(layout.sharding[-1]) + 1
        if nxt < 2 or layout.pp == 1:  # ZeRO-2/3 do not run with DeepSpeed's pipeline engine
            options.append((f"ZeRO stage {nxt}", replace(layout, sharding=f"zero{nxt}")))
    if layout.dp % 2 == 0 and shape.num_attention_heads % (2 * layout.tp) == 0 and \
            2 * layout.tp <= gpus_per_node and not framework_of(layout.framework).plain_deepspeed:
        options.append((f"tp {2 * layout.tp}", replace(layout, tp=2 * layout.tp, dp=layout.dp // 2,
                                                        sequence_parallel=True)))
    if layout.dp % 2 == 0 and shape.num_layers % (2 * layout.pp) == 0:
        options.append((f"pp {2 * layout.pp}", replace(layout, pp=2 * layout.pp, dp=layout.dp // 2,
                                                        num_microbatches=layout.num_microbatches * 2,
                                                        first_stage_layers=None, last_stage_layers=None)))
    current = estimate_memory(shape, layout, capacity_gib).total
    results = [(label, estimate_memory(shape, option, capacity_gib)) for label, option in options]
    return sorted(((label, m) for label, m in results if m.total < current),
                  key=lambda r: (not r[1].fits, r[1].total))


def deepspeed_estimator_bytes(total_params: int, gpus: int, stage: int,
                              largest_layer_params: int = 0) -> float:
    """DeepSpeed's own model-state estimators without offload (zero/stage_1_and_2.py and
    stage3.py): ZeRO-2 2Ψ + 18Ψ/G, ZeRO-3 4·largest layer + 18Ψ/G. A cross-check with its own
    accounting (fp32 gradients counted in the 18), not the breakdown above."""
    if stage == 2:
        return 2 * total_params + 18 * total_params / gpus
    if stage == 3:
        return 4 * largest_layer_params + 18 * total_params / gpus
    raise ValueError("DeepSpeed's estimators cover ZeRO stages 2 and 3")
