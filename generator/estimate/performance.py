"""FLOPs, step time, MFU/HFU and time to train.

FLOP convention (stated, as published MFUs are only comparable under one): Narayanan et al.
(SC21) and Korthikanti et al. — matrix multiplies only, full (non-causal) attention scores, the
logits layer included, forward + backward = 3 × forward. For GPT-3 shapes this is exactly
72·B·s·l·h²·(1 + s/(6h) + V/(12lh)); GQA and SwiGLU change the projection sizes; MoE counts the
top-k experts a token visits. Hardware FLOPs add what recompute runs again: a whole forward for
full recompute, the attention core (s/(6h) → s/(3h)) for selective.

Time: the GEMMs at the GPU's calibrated efficiency; the attention core, where a flash kernel runs
it, at that kernel's published speed by sequence length (attention.py) — a causal mask computes
half of the scores the FLOP convention counts.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from generator.estimate.attention import IN_TRAINING, core_seconds, forward_passes, kernel_for
from generator.estimate.memory import Layout, fp8_params, gradient_bytes, rank_params, state_bytes_per_param
from generator.estimate.params import Shape
from generator.frameworks import framework_of
from generator.values import value
from generator.vectors import maximum, minimum, where

# FP8 (Transformer Engine): the transformer layers' linear GEMMs run on the FP8 peak at this
# fraction of the efficiency bf16 GEMMs reach on theirs — fitted on a published FP8-against-bf16
# pair of the same layout (calibration.fit_fp8_gemm_efficiency: Fujii et al. 2024, Llama-3-70B on
# H100, Megatron-LM); the attention core, the logits and the memory-bound work stay bf16.
FP8_GEMM_EFFICIENCY = 0.88


@value
class Hardware:
    """A GPU preset's numbers the time model uses."""

    peak_tflops: float  # dense, for the training precision
    efficiency: float  # achievable fraction of peak for large GEMMs (calibrated; see presets)
    hbm_tbps: float  # memory bandwidth, TB/s (memory-bound elementwise and softmax work)
    intranode_gbps: float  # per GPU and direction, GB/s (NVLink)
    internode_gbps: float  # per GPU, GB/s (InfiniBand / RoCE)
    gpus_per_node: int  # the GPUs one NVLink domain joins (a node; GB200 NVL72's rack of trays)
    fp8_peak_tflops: float | None = None  # dense FP8 peak (None: no FP8 tensor cores)
    fp8_gemm_efficiency: float = FP8_GEMM_EFFICIENCY
    attention_kernel: str = "cudnn"  # the flash attention kernel's published speed (attention.KERNELS)
    attention_in_training: float = IN_TRAINING  # the share of that speed it keeps in a step
    # the domain spans several nodes (GB200 NVL72's trays): the scheduler places the job's nodes in
    # segments aligned to it (in_node)
    multi_node_domain: bool = False


@value
class Performance:
    """One optimizer step's FLOPs and time, by where the time goes."""

    model_flops: float  # per step, whole job
    hardware_flops: float
    step_time_s: float
    compute_s: float
    memory_s: float
    bubble_s: float
    tp_comm_s: float
    cp_comm_s: float
    dp_comm_s: float
    pp_comm_s: float  # pipeline point-to-point sends
    zero3_gather_s: float  # ZeRO-3 parameter all-gathers (exposed part)
    tokens_per_step: int
    gpus: int
    peak_tflops: float
    moe_comm_s: float = 0.0  # MoE token dispatch and combine among the ep ranks (all-to-all)
    attention_s: float = 0.0  # of compute_s: the flash attention core at its kernel's speed
    fp8_casts_s: float = 0.0  # of memory_s: quantizing the FP8 GEMMs' operands
    fp8_gemm_speedup: float | None = None  # FP8 linear GEMMs against bf16 (None: no FP8 GEMMs)
    moe_permute_s: float = 0.0  # of memory_s: reordering the MoE layers' tokens for their experts
    grad_accumulation_s: float = 0.0  # of memory_s: DeepSpeed adding each micro-batch's gradients up
    optimizer_s: float = 0.0  # the optimizer step after the last micro-batch (Adam over the rank's share)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s

    @property
    def tflops_per_gpu(self) -> float:
        """Achieved model TFLOP/s per GPU."""
        return self.model_flops / self.step_time_s / self.gpus / 1e12

    @property
    def mfu(self) -> float:
        return self.tflops_per_gpu / self.peak_tflops

    @property
    def hfu(self) -> float:
        return self.hardware_flops / self.step_time_s / self.gpus / 1e12 / self.peak_tflops


@lru_cache(maxsize=256)  # (the step time reads it up to three times per estimate)
def forward_flops_per_token(shape: Shape) -> tuple[float, float]:
    """(forward FLOPs per token for matmuls and logits, of which attention scores and values).
    The layers megatron-core builds, as Megatron-LM counts them (training.py
    num_floating_point_operations, the same in core_v0.16.1 and main) except that the attention
    core is counted whole, where Megatron-LM's recent releases halve it for the causal mask:
    - attention: QKV and output projections of heads × kv channels (wider or narrower than the
      hidden size where kv_channels says so); multi-latent attention's projections as
      attention_flops_per_layer says;
    - the routed experts' FFN (moe_ffn_hidden_size) times top-k plus the shared experts in an MoE
      layer, the dense FFN in a dense model's layers and an MoE model's first moe_dense_layers;
    - each multi-token prediction layer: a transformer layer like the main model's last (MoE
      where that is), its projection of the normed embedding and hidden state (2h → h), 3h for
      its norms (Megatron's count: one multiply-add per channel of the two input norms and the
      final one), and its own logits.
    Where Megatron-LM's figure is not what the model runs, the figure is Megatron-LM's (MFU is
    reported against it; uncounted_flops_per_token has the rest, for the time):
    - gpt-oss's gated quick-GELU (--quick-geglu) counts as an ungated MLP (2 GEMMs of the FFN
      width, its ffn factor follows --swiglu alone), though the model runs three;
    - sliding-window layers (window_size, window_attn_skip_freq) count full attention: the
      count has no window, so a sliding layer's core is counted as s keys a query, not the
      window's;
    - attention sinks (softmax_type learnable) add no matmul and are not counted."""
    h = shape.hidden_size
    projections, core = attention_flops_per_layer(shape)
    factor = 3 if shape.gated and not shape.quick_geglu else 2  # Megatron-LM: 3 only with --swiglu
    mlp = 2 * factor * h * ffn_widths(shape)
    attention_layers = shape.num_layers + shape.mtp_layers
    mtp = shape.mtp_layers * 2 * (3 * h + 2 * h * h)  # its norms and its projection
    logits = 2 * shape.vocab_size * h * (1 + shape.mtp_layers)  # the main model's and each MTP layer's
    return attention_layers * (projections + core) + mlp + mtp + logits, core * attention_layers


def attention_flops_per_layer(shape: Shape) -> tuple[float, float]:
    """(projections, core) forward FLOPs per token of one attention layer, the core whole
    (non-causal). Grouped-query attention: QKV 2·h·(q + 2kv) and the output projection 2·q·h,
    the core 4·s·q (QK^T and softmax·V over the query width q). Multi-latent attention as
    Megatron-LM counts it: the query through its latent (q_lora_rank × (h + heads × (qk +
    rope dims) + 1)) or projected directly (h × heads × (qk + rope dims)), the key/value latent
    (kv_lora_rank × (h + heads × (qk + v dims) + 1)) with the rotary key beside it (h × rope
    dims), and the output projection (heads × v dims × h) — the + 1s are Megatron's count of the
    latents' norms, one multiply-add a channel; the core scores queries and keys of qk + rope
    dims and sums values of v dims: 2·s·heads·(qk + rope + v dims)."""
    h, s = shape.hidden_size, shape.seq_length
    mla = shape.mla
    if mla is None:
        query, kv = shape.query_width, shape.kv_width
        return 2 * (h * (query + 2 * kv) + query * h), 4 * s * query
    heads = shape.num_attention_heads
    if mla.q_lora_rank is None:
        query = h * heads * mla.q_head_dim
    else:
        query = mla.q_lora_rank * (h + heads * mla.q_head_dim + 1)
    kv = mla.kv_lora_rank * (h + heads * (mla.qk_head_dim + mla.v_head_dim) + 1) + h * mla.qk_pos_emb_head_dim
    output = heads * mla.v_head_dim * h
    return 2 * (query + kv + output), 2 * s * heads * (mla.q_head_dim + mla.v_head_dim)


def last_layer_ffn(shape: Shape) -> int:
    """The FFN width a token passes through in the main model's last layer, which each MTP layer
    repeats (megatron-core builds the MTP layer's transformer layer as the last decoder layer):
    top-k routed experts and the shared experts where it is an MoE layer, else the dense FFN."""
    if shape.num_experts and shape.moe_dense_layers < shape.num_layers:
        return (shape.moe_ffn_hidden_size or shape.ffn_hidden_size) * shape.top_k + shape.shared_expert_size
    return shape.ffn_hidden_size


def ffn_widths(shape: Shape) -> int:
    """The FFN widths a token passes through, summed over the main model's layers and the MTP
    layers."""
    return mlp_widths(shape)[1] + shape.mtp_layers * last_layer_ffn(shape)


def uncounted_flops_per_token(shape: Shape) -> float:
    """Forward GEMM FLOPs per token the model runs that Megatron-LM's count (forward_flops_per_token)
    leaves out: the gate projection of gpt-oss's gated quick-GELU, 2·h per channel of FFN width
    in every layer (MTP layers too). The time counts them (gemm_flops_per_token, and the hardware
    FLOPs); the model FLOPs, and so MFU, do not."""
    if not shape.quick_geglu:
        return 0  # (an integer: the FLOPs of other models stay integers)
    return 2 * shape.hidden_size * ffn_widths(shape)


def step_flops(shape: Shape, global_batch: int, recompute: str) -> tuple[float, float]:
    """(model FLOPs, hardware FLOPs) of one optimizer step: the model FLOPs Megatron-LM's count
    (forward_flops_per_token, forward and backward), the hardware FLOPs what the GPUs run — the
    GEMMs that count leaves out too (uncounted_flops_per_token) and what recompute runs again.
    MTP layers run forward and backward like the others (and recompute with them: megatron-core
    checkpoints an MTP layer under full recompute)."""
    forward, core = forward_flops_per_token(shape)
    tokens = global_batch * shape.seq_length
    layers, attention_core = hardware_passes(recompute)
    run = forward - core + uncounted_flops_per_token(shape)
    return 3 * forward * tokens, (layers * run + attention_core * core) * tokens


def hardware_passes(recompute: str) -> tuple[int, int]:
    """How many forwards' worth of FLOPs a step runs, (of the GEMMs outside the attention core,
    of the attention core): forward and backward (3), a whole forward more under full recompute,
    and the attention core twice over under selective recompute (s/(6h) → s/(3h))."""
    core = where(recompute == "full", 4, where(recompute == "selective", 6, 3))
    return where(recompute == "full", 4, 3), core


def iteration_time(hardware_flops: float, gpus: int, tflops_per_gpu: float) -> float:
    """Seconds per step at an achieved TFLOP/s per GPU (as SC21 and MT-NLG report them)."""
    return hardware_flops / (gpus * tflops_per_gpu * 1e12)


# Bytes moved per element of s·b·h by the memory-bound (non-GEMM) work of one layer's forward
# pass: LayerNorms, residual adds, bias-GeLU and dropout (the replicated part, and the part tensor
# parallelism divides), and the attention scores' softmax and dropout per element of a·s²·b.
ELEMENTWISE_REPLICATED = 16
ELEMENTWISE_SPLIT = 24
SOFTMAX_BYTES = 8
HBM_EFFICIENCY = 0.8
GEMM_HALF_ROWS = 32
# Bytes moved per element an FP8 GEMM reads (the activation going in, the gradient coming back):
# read in bf16 (2), written in FP8 row-wise and column-wise (1 + 1: the transposed copy the
# backward GEMMs read). Delayed scaling takes its scale from the amax history and records the new
# amax within the cast; current (tensorwise) scaling reads the tensor once more for its amax first
# (+2), as torchao's row-wise scaling (torchtitan's rowwise) reads it for each row's amax; block
# scalings (blockwise, mxfp8) find each block's amax inside the cast kernel.
FP8_CAST_BYTES = {"delayed": 4, "tensorwise": 6, "rowwise": 6, "blockwise": 4, "mxfp8": 4}
# torch.compile (torchtitan.compile): how much faster a compiled model's compute and memory-bound
# work run — Inductor fuses the elementwise kernels into fewer passes and fewer launches, which the
# calibrated GEMM efficiency otherwise absorbs. Fitted on a published pair that differs by compile
# alone (calibration.fit_compile_speedup: the PyTorch blog's Llama-2-7B on A100 with FSDP and
# selective checkpointing, 57% MFU eager and 68% compiled); the blog reports 10-23% over sizes.
COMPILE_SPEEDUP = 1.2
# Fixed cost of one pipeline send (NCCL point-to-point latency across nodes); assumed, not fitted.
P2P_LATENCY_S = 20e-6


def gemm_rows_factor(shape: Shape, layout: Layout) -> float:
    """GEMMs over few rows (the tokens of one micro-batch on one GPU, b·s/cp) reach less of the
    peak: rows / (rows + GEMM_HALF_ROWS)."""
    rows = layout.micro_batch_size * shape.seq_length / layout.cp
    return rows / (rows + GEMM_HALF_ROWS)


def routed_expert_flops_per_token(shape: Shape) -> float:
    """Forward FLOPs per token of the routed experts' GEMMs, as the model runs them: top-k copies
    through two GEMMs of the expert width (three with a gated activation, gpt-oss's gated
    quick-GELU too) in every MoE layer and in each MTP layer where the last layer is one."""
    if not shape.num_experts:
        return 0.0
    moe_layers = shape.num_layers - shape.moe_dense_layers
    mtp = shape.mtp_layers if moe_layers else 0
    f = shape.moe_ffn_hidden_size or shape.ffn_hidden_size
    return 2 * (3 if shape.gated else 2) * shape.hidden_size * f * shape.top_k * (moe_layers + mtp)


def expert_gemm_rows(shape: Shape, layout: Layout) -> float:
    """Rows one local expert's GEMMs run per micro-batch, routing uniform: the tokens of the
    expert tensor × expert parallel group (etp · ep ranks of moe_tokens each) times top-k, spread
    over the experts."""
    return moe_tokens(shape, layout) * layout.etp * layout.ep * shape.top_k / shape.num_experts


def expert_gemm_factor(shape: Shape, layout: Layout, hw: Hardware) -> float:
    """The share of the large-GEMM speed the routed experts' GEMMs reach at their shapes: rows
    (expert_gemm_rows) at rows / (rows + GEMM_HALF_ROWS) like any GEMM, and the roofline of each
    GEMM (M rows × the hidden size × the expert width over etp): a GEMM that reads and writes
    more bytes per FLOP than the GPU's ridge point (its calibrated GEMM speed over the HBM
    bandwidth memory-bound kernels reach) runs at the bandwidth instead — small experts over few
    tokens, or an expert width split by etp. Operands are 2 bytes (1 in FP8 GEMMs, on the FP8
    peak). First GEMM (two widths when gated) and second GEMM weighted by their FLOPs; their
    backward GEMMs have the same three sizes."""
    f = (shape.moe_ffn_hidden_size or shape.ffn_hidden_size) / layout.etp
    h, m = shape.hidden_size, expert_gemm_rows(shape, layout)
    fp8 = fp8_gemms(layout, hw)
    speed = hw.peak_tflops * 1e12 * hw.efficiency * (fp8_gemm_speedup(hw) if fp8 else 1.0)
    ridge = speed / (hw.hbm_tbps * 1e12 * HBM_EFFICIENCY) * (1 if fp8 else 2)  # FLOPs per element moved

    def share(n: float, k: float) -> float:  # of an M×K by K×N GEMM: 2MNK FLOPs, MK + KN + MN elements
        return minimum(2 * m * n * k / (m * k + k * n + m * n) / ridge, 1.0)

    first = 2 * f if shape.gated else f
    roofline = (first + f) / (first / share(first, h) + f / share(h, f))
    return m / (m + GEMM_HALF_ROWS) * roofline


def slowest_stage_layers(shape: Shape, layout: Layout) -> float:
    return maximum(*layout.stage_layers(shape.num_layers))


def fp8_gemms(layout: Layout, hw: Hardware) -> bool:
    """Whether the linear GEMMs run in FP8 (an FP8 run on a GPU with FP8 tensor cores)."""
    return layout.precision == "fp8" and bool(hw.fp8_peak_tflops)


def fp8_gemm_speedup(hw: Hardware) -> float:
    """How much faster an FP8 linear GEMM runs than the same GEMM in bf16: the FP8 peak at its
    share of the bf16 efficiency, never slower than bf16 (where the data sheet gives FP8 the
    bf16 peak, as Gaudi 3's does, the GEMMs gain nothing)."""
    return max(1.0, hw.fp8_peak_tflops / hw.peak_tflops * hw.fp8_gemm_efficiency)


def gemm_flops_per_token(shape: Shape, layout: Layout, hw: Hardware) -> float:
    """Hardware FLOPs per token a step runs as GEMMs, in bf16-equivalents (an FP8 run's linear
    GEMMs count 1/speed-up of theirs): the linear layers and the logits, forward, backward (2×) and
    again forward under full recompute; the attention core too where no flash kernel runs it
    (unfused attention's batched GEMMs, with what recompute runs again of it: hardware_passes).
    The linear GEMMs are the ones the model runs: Megatron-LM's count and what it leaves out
    (uncounted_flops_per_token)."""
    forward, core = forward_flops_per_token(shape)
    logits = 2 * shape.vocab_size * shape.hidden_size * (1 + shape.mtp_layers)
    linear = forward - core - logits + uncounted_flops_per_token(shape)
    if fp8_gemms(layout, hw):  # the linear GEMMs in FP8, the logits in bf16
        linear = linear / fp8_gemm_speedup(hw)
    layers, attention_core = hardware_passes(layout.recompute)
    return layers * (linear + logits) + (0.0 if layout.flash_attention else attention_core * core)


def expert_gemm_flops_per_token(shape: Shape, layout: Layout, hw: Hardware) -> float:
    """Of gemm_flops_per_token, the routed experts' GEMMs (in the same bf16-equivalents and
    passes), which run at their own shapes' speed (expert_gemm_factor)."""
    routed = routed_expert_flops_per_token(shape)
    if fp8_gemms(layout, hw):
        routed = routed / fp8_gemm_speedup(hw)
    return hardware_passes(layout.recompute)[0] * routed


def flash_attention_seconds(shape: Shape, layout: Layout, hw: Hardware) -> float:
    """Per micro-batch and GPU, the slowest stage: the flash attention core at the speed of the
    kernel the framework runs on that GPU (attention.kernel_for, core_seconds) — the causal half
    of the scores of b·s/cp queries against s keys, the heads split over tp; nothing where the
    core runs unfused (its GEMMs are in the GEMM time)."""
    if not layout.flash_attention:
        return 0.0
    s = shape.seq_length
    core = attention_flops_per_layer(shape)[1]  # per token, whole
    computed = layout.micro_batch_size * s / layout.cp * core / layout.tp / 2
    kernel = kernel_for(layout.framework, hw.attention_kernel)
    per_layer = core_seconds(computed, s / layout.cp, layout.cp, forward_passes(layout.recompute), kernel,
                             hw.peak_tflops, hw.attention_in_training)
    return per_layer * slowest_stage_layers(shape, layout)


def mlp_widths(shape: Shape) -> tuple[int, int]:
    """Summed over the layers: (the MLP GEMM inputs a token makes, their FFN widths) — one input
    of the dense FFN's width in a dense layer; top-k routed experts' and each shared expert's in
    an MoE layer."""
    if not shape.num_experts:
        return shape.num_layers, shape.num_layers * shape.ffn_hidden_size
    k = shape.top_k
    moe_layers, dense = shape.num_layers - shape.moe_dense_layers, shape.moe_dense_layers
    inputs = moe_layers * (k + (1 if shape.shared_expert_size else 0)) + dense
    width = (shape.moe_ffn_hidden_size or shape.ffn_hidden_size) * k + shape.shared_expert_size
    return inputs, moe_layers * width + dense * shape.ffn_hidden_size


def fp8_cast_bytes(shape: Shape, layout: Layout) -> float:
    """Bytes per token and layer that quantizing the FP8 GEMMs' operands moves on one GPU: the
    QKV, projection and MLP inputs forward (again in full recompute's forward), their output
    gradients backward. The operands of the column-parallel GEMMs' inputs and the row-parallel
    GEMMs' output gradients are the layer's hidden state, quantized before the sequence-parallel
    gather (s/t rows per GPU, s without sequence parallelism); the others are split over tp."""
    h, t = shape.hidden_size, layout.tp
    query, kv = shape.query_width, shape.kv_width
    inputs, widths = mlp_widths(shape)
    copies, ffn = inputs / shape.num_layers, widths / shape.num_layers  # an average layer's
    hidden_rows = t if layout.sequence_parallel else 1
    forward = (h + h * copies) / hidden_rows + (query + ffn) / t  # QKV, fc1 | projection, fc2 inputs
    backward = (h + h * copies) / hidden_rows + (query + 2 * kv + (2 if shape.gated else 1) * ffn) / t
    passes = where(layout.recompute == "full", 2, 1)
    return FP8_CAST_BYTES[layout.fp8_recipe] * (passes * forward + backward)


def memory_bound_seconds(shape: Shape, layout: Layout, hw: Hardware) -> float:
    """Per micro-batch and GPU: elementwise and softmax traffic at HBM bandwidth. Flash attention
    never writes the s² scores; the passes are forward, backward (2×) and what recompute repeats.
    (An FP8 run's operand casts are fp8_cast_seconds and an MoE model's token reordering
    moe_permute_seconds, which the step adds to this.)"""
    s = shape.seq_length / layout.cp
    b, h, t = layout.micro_batch_size, shape.hidden_size, layout.tp
    replicated = ELEMENTWISE_REPLICATED / (t if layout.sequence_parallel else 1)
    elementwise = s * b * h * (replicated + ELEMENTWISE_SPLIT / t)
    scores = 0.0 if layout.flash_attention else \
        SOFTMAX_BYTES * shape.num_attention_heads / t * s * shape.seq_length / layout.cp * b
    passes = where(layout.recompute == "full", 4, 3)
    extra_scores = where(layout.recompute == "selective", scores, 0.0)
    per_layer = passes * (elementwise + scores) + extra_scores
    return hbm_seconds(per_layer * slowest_stage_layers(shape, layout), hw)


def hbm_seconds(moved_bytes: float, hw: Hardware) -> float:
    """Seconds to move bytes through HBM at the share of its bandwidth memory-bound kernels reach."""
    return moved_bytes / (hw.hbm_tbps * 1e12 * HBM_EFFICIENCY)


def fp8_cast_seconds(shape: Shape, layout: Layout, hw: Hardware) -> float:
    """Per micro-batch and GPU: quantizing the FP8 GEMMs' operands (fp8_cast_bytes) at HBM
    bandwidth; nothing without FP8 GEMMs."""
    if not fp8_gemms(layout, hw):
        return 0.0
    tokens = layout.micro_batch_size * shape.seq_length / layout.cp
    per_token = fp8_cast_bytes(shape, layout)
    return hbm_seconds(tokens * per_token * slowest_stage_layers(shape, layout), hw)


def estimate_performance(shape: Shape, layout: Layout, hw: Hardware, global_batch: int,
                         compile_speedup: float = COMPILE_SPEEDUP) -> Performance:
    """A step-time model: compute (the GEMMs at the calibrated efficiency, a flash attention core
    at its kernel's speed) plus memory-bound work, stretched by the pipeline bubble
    (p − 1)/(v·m); tensor-parallel all-reduces (exposed, but for what --tp-comm-overlap hides)
    and context-parallel K/V exchanges per layer (but for what the ring hides); the data-parallel
    gradient reduction overlapped with the backward pass except its last layer's share where the
    run's files turn the overlap on (Layout.overlap_grad_reduce), else exposed; the optimizer
    step after the last micro-batch. Every collective runs on the link its group's placement
    gives (NVLink inside a node, else the inter-node link; RANK_GROUPS)."""
    model, hardware = step_flops(shape, global_batch, layout.recompute)
    gpus = layout.tp * layout.pp * layout.cp * layout.dp
    m = maximum(layout.num_microbatches, 1)
    # every stage waits for the one with the most layers (uneven pipelines)
    balance = slowest_stage_layers(shape, layout) / (shape.num_layers / layout.pp)
    tokens = global_batch * shape.seq_length
    per_token = gemm_flops_per_token(shape, layout, hw)
    if shape.num_experts:  # the routed experts' GEMMs at their own shapes' speed
        experts = expert_gemm_flops_per_token(shape, layout, hw)
        per_token = (per_token - experts) / gemm_rows_factor(shape, layout) + \
            experts / expert_gemm_factor(shape, layout, hw)
    else:
        per_token = per_token / gemm_rows_factor(shape, layout)
    gemms = tokens * per_token / gpus * balance / (hw.peak_tflops * 1e12 * hw.efficiency)
    attention = flash_attention_seconds(shape, layout, hw) * m
    # a compiled model's compute and memory-bound work run compile_speedup times faster
    speed = where(layout.compiled, compile_speedup, 1.0)
    gemms, attention = gemms / speed, attention / speed
    compute = gemms + attention
    casts = fp8_cast_seconds(shape, layout, hw) * m / speed
    permute = moe_permute_seconds(shape, layout, hw) * m / speed
    accumulate = grad_accumulation_seconds(shape, layout, hw) * m / speed
    memory = memory_bound_seconds(shape, layout, hw) * m / speed + casts + permute + accumulate
    bubble = (compute + memory) * (layout.pp - 1) / (layout.vpp * m)
    # TP: 2 all-reduces forward and 2 backward per layer (2 more forward with full recompute),
    # each of b·s·h 16-bit values; a ring moves 2(t−1)/t of it per GPU.
    # (each collective's cost below is zero where its group has one rank)
    passes = where(layout.recompute == "full", 6, 4)
    volume = 2 * layout.micro_batch_size * shape.seq_length / layout.cp * shape.hidden_size
    per_layer = passes * 2 * (layout.tp - 1) / layout.tp * volume
    link = link_gbps(layout, "tp", hw)
    tp_comm = per_layer * slowest_stage_layers(shape, layout) * m / (link * 1e9)
    if layout.tp_comm_overlap:
        # Transformer Engine's userbuffers split each gather / scatter into tp chunks
        # pipelined with the neighbouring linear layer's GEMM (inside a node): the first chunk
        # stays exposed, the rest hides under the GEMMs (not the flash attention core)
        tp_comm = tp_comm - where(in_node(layout, "tp", hw),
                                  minimum(tp_comm * (1 - 1 / layout.tp), gemms), 0.0)
    # CP: each rank gathers the other ranks' K and V per layer (forward, again where recompute
    # reruns the core attention, and their gradients back), 2 · b · s/cp · kv-width 16-bit values
    # from each of the cp − 1 others. Transformer Engine's ring sends the next step's K and V
    # while a step's attention runs: what outlasts the cp − 1 steps it overlaps stays exposed.
    passes = where(layout.recompute == "none", 3, 4)
    kv = shape.kv_width / layout.tp
    volume = 2 * 2 * layout.micro_batch_size * shape.seq_length / layout.cp * kv * (layout.cp - 1)
    link = link_gbps(layout, "cp", hw)
    cp_comm = passes * volume * slowest_stage_layers(shape, layout) * m / (link * 1e9)
    cp_comm = maximum(cp_comm - attention * (layout.cp - 1) / layout.cp, 0.0)
    # each virtual stage sends its output forward and its input gradient back per micro-batch:
    # b·s/cp·h 16-bit values, split over the tp ranks (Megatron's scatter/gather), on the
    # inter-node link once the pipeline leaves the node (Narayanan et al. 2021, §4.1). Overlapped
    # (megatron-core's interleaved schedule), a send runs under the next chunk's compute: what
    # stays exposed is the pipeline's fill and drain, a send across each of the p − 1
    # boundaries each way, and whatever of a send outlasts a chunk's compute.
    volume = 2 * layout.micro_batch_size * shape.seq_length / layout.cp * shape.hidden_size / layout.tp
    link = link_gbps(layout, "pp", hw)
    send = volume / (link * 1e9) + P2P_LATENCY_S
    sends = 2 * m * layout.vpp
    fill_and_drain = 2 * (layout.pp - 1) * send + sends * maximum(send - (compute + memory) / sends, 0.0)
    interleaved = layout.overlap_p2p_comm & (layout.vpp > 1)
    pp_comm = where(layout.pp > 1, where(interleaved, fill_and_drain, sends * send), 0.0)
    # dense gradients are reduced over the data × context parallel ranks (the ranks of a
    # context-parallel group hold the same weights); an MoE model's routed experts among the
    # ranks holding the same experts (the expert data-parallel group), each group on its own link
    # (NVLink when all its ranks share a node). A ring all-reduce is a reduce-scatter and an
    # all-gather, each moving (n−1)/n of the buffer per GPU: of the gradients (in their reduce
    # dtype), then of the reduced gradients, or with the distributed optimizer of the updated
    # 16-bit parameters; ZeRO-3 only reduce-scatters here (its parameter gathers are below).
    stage_params, stage_experts = rank_params(shape, layout)
    share = (layout.dp * layout.cp - 1) / (layout.dp * layout.cp)
    expert_share = (layout.expert_dp - 1) / layout.expert_dp
    per_byte = share * stage_params / (link_gbps(layout, "dp_cp", hw) * 1e9) + \
        expert_share * stage_experts / (link_gbps(layout, "expert_dp", hw) * 1e9)
    grad_bytes = gradient_bytes(layout)
    gather_bytes = 0 if layout.sharding == "zero3" else \
        1 if fp8_params(layout.precision, layout.sharding) else \
        2 if layout.sharding == "distributed_optimizer" else grad_bytes
    reduce, gather = per_byte * grad_bytes, per_byte * gather_bytes
    # what the files overlap: the reduce-scatter (or all-reduce) with the backward pass still to
    # run (--overlap-grad-reduce, ZeRO's overlap_comm, FSDP); the distributed optimizer's parameter
    # all-gather with the next step's forward (--overlap-param-gather, written with it)
    forward_s, backward_s = compute / 3 / m, compute * 2 / 3 / m  # one micro-batch's, all chunks
    if layout.sharding == "distributed_optimizer":
        overlapped = exposed_data_parallel(reduce, backward_s, layout, shape.num_layers) + \
            exposed_data_parallel(gather, forward_s, layout, shape.num_layers)
    else:
        overlapped = exposed_data_parallel(reduce + gather, backward_s, layout, shape.num_layers)
    # DeepSpeed's ZeRO-2 and ZeRO-3 reduce every micro-batch's gradients into their partitions
    # (zero/stage_1_and_2.py reduce_ready_partitions_and_remove_grads with partition_gradients,
    # zero/stage3.py), each under its own micro-batch's backward with overlap_comm; ZeRO-1, Megatron
    # and FSDP (no_sync under accelerate's gradient accumulation) reduce once a step
    more = where(partitions_gradients_each_micro_batch(layout), m - 1, 0)
    overlapped = overlapped + more * exposed_data_parallel(reduce, backward_s, layout, shape.num_layers)
    dp_comm = where(layout.overlap_grad_reduce, overlapped, reduce + gather + more * reduce)
    zero3 = 0.0
    if layout.sharding == "zero3":  # hybrid sharding (or a one-node job) gathers within the node
        link = hw.intranode_gbps if layout.shard_dp else link_gbps(layout, "dp_cp", hw)
        gathers = 2 * m * share * stage_params * 2 / (link * 1e9)
        zero3 = maximum(gathers - compute, gathers / shape.num_layers)  # prefetched under compute
    moe_comm = moe_dispatch_seconds(shape, layout, hw) * m
    if layout.ep_comm_overlap:
        moe_comm = exposed_moe_dispatch(moe_comm, compute, layout)
    optimizer = optimizer_step_seconds(shape, layout, hw)
    step = compute + memory + bubble + tp_comm + cp_comm + dp_comm + pp_comm + zero3 + moe_comm + optimizer
    return Performance(model, hardware, step, compute, memory, bubble, tp_comm, cp_comm, dp_comm,
                       pp_comm, zero3, global_batch * shape.seq_length, gpus, hw.peak_tflops, moe_comm,
                       attention, casts, fp8_gemm_speedup(hw) if fp8_gemms(layout, hw) else None, permute,
                       accumulate, optimizer)


def runs_deepspeed(layout: Layout) -> bool:
    """Whether DeepSpeed's engine trains the run (plain DeepSpeed and Megatron-DeepSpeed alike)."""
    return framework_of(layout.framework).deepspeed_engine


def partitions_gradients_each_micro_batch(layout: Layout) -> bool:
    """Whether the run reduces its gradients after every micro-batch, not once a step: DeepSpeed's
    ZeRO-2 and ZeRO-3."""
    return runs_deepspeed(layout) and layout.sharding in ("zero2", "zero3")


def moe_dispatch_seconds(shape: Shape, layout: Layout, hw: Hardware) -> float:
    """Per micro-batch: an MoE layer's dispatch and combine, forward and backward (and once more
    forward with full recompute), exposed (exposed_moe_dispatch: what parallelism.ep_comm_overlap hides). The
    tokens of a rank are b·s/cp, split over tp with sequence parallelism; each moves its hidden
    state (16-bit) by dispatcher:
    - alltoall sends one copy per (token, expert) pair to its top-k experts among the ep ranks,
      keeping 1/ep;
    - flex (DeepEP, megatron-core's default flex backend) sends one copy per destination rank,
      however many of the token's experts that rank holds; across nodes one copy per
      destination node over the inter-node link, which NVLink forwards to the ranks there
      (DeepEP's README; DeepSeek-V3 report §3.2.2), the two links working at once;
    - allgather gathers every token of the expert tensor × expert parallel group and
      reduce-scatters the results back, of which the tp part is the sequence-parallel gather
      the tensor-parallel cost already counts.
    Routing is taken as uniform over the experts."""
    if not shape.num_experts:
        return 0.0
    k, h = shape.top_k, shape.hidden_size
    per_copy = 2 * moe_tokens(shape, layout) * h  # bytes: every token once
    alltoall = per_copy * k * (layout.ep - 1) / layout.ep / (link_gbps(layout, "ep", hw) * 1e9)
    allgather = per_copy * (layout.etp * layout.ep - layout.etp) / (link_gbps(layout, "tp_ep", hw) * 1e9)
    ranks = groups_holding(layout.ep, shape.num_experts, k) * (layout.ep - 1) / layout.ep
    nodes = -(-layout.etp * layout.ep // hw.gpus_per_node)  # the nodes an ep group spans
    remote_nodes = groups_holding(nodes, shape.num_experts, k) * (nodes - 1) / nodes
    nvlink = per_copy * ranks / (hw.intranode_gbps * 1e9)
    flex = where(in_node(layout, "ep", hw), nvlink,
                 maximum(nvlink, per_copy * remote_nodes / (hw.internode_gbps * 1e9)))
    seconds = where(layout.moe_dispatcher == "allgather", allgather,
                    where(layout.moe_dispatcher == "flex", flex, alltoall))
    exchanges = where(layout.recompute == "full", 6, 4)
    return exchanges * seconds * moe_stage_layers(shape, layout)


def exposed_moe_dispatch(dispatch: float, compute: float, layout: Layout) -> float:
    """What stays of a step's MoE dispatch and combine with --overlap-moe-expert-parallel-comm:
    megatron-core's combined 1F1B schedule runs one chunk's forward beside another's backward
    and each one's all-to-all under the other's compute (the DeepSeek-V3 report's DualPipe
    overlap, §3.2.1). Only the steady state pairs chunks: the warmup's forward-only chunks and
    the cooldown's backward-only ones, (p − 1)·2 + (v − 1)·p of the m·v chunks on the first
    rank (megatron-core's interleaved schedule; one without a pipeline), keep theirs exposed;
    in the steady state what outlasts the paired compute does."""
    chunks = layout.num_microbatches * layout.vpp
    alone = where(layout.pp > 1, (layout.pp - 1) * 2 + (layout.vpp - 1) * layout.pp, 1)
    unpaired = minimum(alone / maximum(chunks, 1), 1.0)
    return dispatch * unpaired + maximum(dispatch - compute, 0.0) * (1 - unpaired)


def moe_tokens(shape: Shape, layout: Layout) -> float:
    """The tokens an MoE layer routes on one rank per micro-batch: b·s/cp, split over tp with
    sequence parallelism."""
    tokens = layout.micro_batch_size * shape.seq_length / layout.cp
    return tokens / layout.tp if layout.sequence_parallel else tokens


def moe_stage_layers(shape: Shape, layout: Layout) -> float:
    """The MoE layers of the slowest stage (the dense first layers spread like the rest)."""
    moe = shape.num_layers - shape.moe_dense_layers
    return slowest_stage_layers(shape, layout) * moe / shape.num_layers


def moe_permute_rows(shape: Shape, layout: Layout) -> float:
    """Rows of h (16-bit) an MoE layer reads and writes per routed token forward, reordering tokens
    for the experts and back (megatron-core's token dispatchers), each move reading and writing
    every row it touches:
    - alltoall: permute into top-k copies (k read, k written), sort the received copies by local
      expert and back (sort_chunks_by_idxs, where a rank holds more than one expert: 4k), and
      unpermute, the k results summed into the token (k read, 1 written);
    - flex (DeepEP): the rows arriving from the ranks a token reaches expanded into its local
      experts' copies and summed back (2 × (ranks + k));
    - allgather: permute and unpermute as alltoall's, no sort.
    The backward moves the gradients the same way."""
    k = shape.top_k
    sort = where(shape.num_experts / layout.ep > 1, 4 * k, 0)
    ranks = groups_holding(layout.ep, shape.num_experts, k)
    return where(layout.moe_dispatcher == "flex", 2 * (ranks + k),
                 where(layout.moe_dispatcher == "allgather", 0, sort) + 2 * k + k + 1)


def optimizer_step_seconds(shape: Shape, layout: Layout, hw: Hardware) -> float:
    """The optimizer step once the last micro-batch is done, at HBM bandwidth: Adam reads and
    writes the optimizer state the rank holds (fp32 master weights and moments, its share under
    the distributed optimizer or ZeRO), reads the gradients (the norm for clipping, then the
    update) and zeroes them for the next step, and writes the 16-bit weights — per parameter the
    rank holds, 2 × its optimizer bytes + 2 × its gradient bytes + its weight bytes
    (memory.state_bytes_per_param, the bytes the memory estimate counts). With ZeRO-Offload the
    update runs on the CPU: not modelled (nothing here)."""
    if layout.offload != "none":
        return 0.0
    kept = (layout.optimizer_states, layout.main_grads)
    dense, experts = rank_params(shape, layout)
    moved = 0.0
    for params, shards in ((dense, layout.state_shards), (experts, layout.expert_dp)):
        weight, grad, optimizer = state_bytes_per_param(layout.precision, layout.sharding, shards, *kept)
        moved = moved + params * (2 * optimizer + 2 * grad + weight)
    return hbm_seconds(moved, hw)


def grad_accumulation_seconds(shape: Shape, layout: Layout, hw: Hardware) -> float:
    """Per micro-batch and GPU: DeepSpeed (and Megatron-DeepSpeed) adding the micro-batch's
    gradients to the ones before, in a pass of its own over the parameters the rank holds: the
    new gradient read, the accumulation buffer read and written — in the training dtype by
    default (autograd's in-place add, or its BF16_Optimizer's bf16 buffers: 6 bytes a parameter
    in bf16), in fp32 with data_types.grad_accum_dtype fp32 (10; the BF16_Optimizer's fp32 copies,
    runtime/bf16_optimizer.py) — at HBM bandwidth. Nothing for Megatron-LM, which accumulates into
    its main gradients inside the weight-gradient GEMMs (--gradient-accumulation-fusion, on by
    default), nor FSDP, nor with ZeRO-2/3, which reduce each micro-batch's gradients into their
    partitions instead (the data-parallel time counts those reductions)."""
    if not runs_deepspeed(layout) or partitions_gradients_each_micro_batch(layout):
        return 0.0
    dense, experts = rank_params(shape, layout)
    _, grad, _ = state_bytes_per_param(layout.precision, layout.sharding, 1)  # ZeRO-0/1: the whole gradient
    buffer = 4 if layout.grad_accum_dtype == "fp32" else grad
    return hbm_seconds((dense + experts) * (grad + 2 * buffer), hw)


def moe_permute_seconds(shape: Shape, layout: Layout, hw: Hardware) -> float:
    """Per micro-batch and GPU: the MoE layers' token reordering (moe_permute_rows) at HBM
    bandwidth, forward, backward, and forward again under full recompute; nothing in a dense
    model."""
    if not shape.num_experts:
        return 0.0
    passes = where(layout.recompute == "full", 3, 2)
    moved = 2 * shape.hidden_size * moe_permute_rows(shape, layout) * moe_tokens(shape, layout)
    return hbm_seconds(passes * moved * moe_stage_layers(shape, layout), hw)


def groups_holding(groups: int, experts: int, k: int) -> float:
    """Of ``groups`` equal groups of the experts (ranks, nodes), how many hold at least one of a
    token's k distinct experts, routed uniformly: groups × (1 − P(a group holds none)), the
    product over the k picks of (experts outside the group still unpicked) / (experts left)."""
    outside = experts - experts / groups
    none = 1.0
    for i in range(k):
        none = none * maximum(outside - i, 0.0) / (experts - i)
    return groups * (1 - none)


def exposed_data_parallel(traffic, one_pass, layout: Layout, num_layers: int):
    """What of an overlapped data-parallel collective stays out from under the compute (one_pass:
    one micro-batch's backward, or forward, through all of a stage's chunks). megatron-core
    starts a model chunk's gradient reduction once its last micro-batch has passed it backward
    (and gathers a chunk's parameters ahead of its first forward), one chunk after another on the
    link. Without interleaving the reduction hides under the last micro-batch's backward. With vpp
    chunks the interleaved schedule ends on each chunk's last pp micro-batches in turn, so after
    the first chunk's reduction starts (vpp − 1) × pp chunk passes remain to hide the rest, and
    the last chunk's own share hides only under its own pass: the larger of the two stays out, and
    at least one layer's share (the last bucket)."""
    vpp = layout.vpp
    window = ((vpp - 1) * layout.pp + 1) * one_pass / vpp
    return maximum(maximum(traffic - window, (traffic - one_pass) / vpp), traffic / num_layers)


# Each communication group as (stride, size): its ranks lie stride apart in megatron-core's rank
# order (initialize_model_parallel's default order tp-cp-ep-dp-pp: tensor-parallel ranks adjacent,
# then context, data and pipeline; experts on their own grid etp-ep-edp-pp), which the
# Megatron-DeepSpeed forks (tp-dp-pp), DeepSpeed and FSDP's device meshes (tp innermost) share.
RANK_GROUPS: dict[str, Callable[[Layout], tuple[int, int]]] = {
    "tp": lambda x: (1, x.tp),
    "cp": lambda x: (x.tp, x.cp),
    "dp_cp": lambda x: (x.tp, x.cp * x.dp),
    "pp": lambda x: (x.tp * x.cp * x.dp, x.pp),
    "ep": lambda x: (x.etp, x.ep),
    "tp_ep": lambda x: (1, x.etp * x.ep),
    "expert_dp": lambda x: (x.etp * x.ep, x.expert_dp),
}


def in_node(layout: Layout, group: str, hw: Hardware) -> bool:
    """Whether every group of that kind lies inside one NVLink domain. The groups tile the ranks
    in blocks of stride × size: inside a node, all of them do when a block divides the node or
    the whole job fits in one; otherwise a node boundary falls inside some block, whose group
    sets the pace. A domain of several nodes (GB200 NVL72's 18 trays) is filled in segments of
    whole blocks — Slurm's block topology with --segment, as NVIDIA's NVL72 recipes place 16
    trays (64 GPUs) a rack — so a block up to the domain's size stays inside it."""
    stride, size = RANK_GROUPS[group](layout)
    block, domain = stride * size, hw.gpus_per_node
    inside = where(hw.multi_node_domain, block <= domain, domain % block == 0)
    return (size == 1) | inside | (layout.tp * layout.cp * layout.dp * layout.pp <= domain)


def link_gbps(layout: Layout, group: str, hw: Hardware) -> float:
    """The per-GPU bandwidth a group's collectives run at: NVLink inside a node, else the
    inter-node link."""
    return where(in_node(layout, group, hw), hw.intranode_gbps, hw.internode_gbps)
