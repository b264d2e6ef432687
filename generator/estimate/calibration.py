"""Published training runs the step-time model is calibrated and checked against, per GPU
generation: each run's efficiency constant is fitted on the others of its generation (one
constant for all, no per-row tuning), and the leave-one-out errors are the uncertainty band an
estimate reports (presets' ``uncertainty``; docs/estimates.md shows the table).

Sources (cited per row; papers and one vendor blog post, see issue 17 for the sources that
judge the model and are not used here):
- SC21 Table 1: Narayanan et al. 2021, arXiv 2104.04473 (weak scaling on A100-80GB, seq 2048,
  V 51200, fp16, full recompute; heads, t, p, micro batch, interleaving and the data-parallel
  implementation from the paper's examples/sc21/run_table_1.sh: PyTorch's DDP, which overlaps the
  gradient all-reduce with the backward pass, up to the 18B model, Megatron's local DDP, which
  reduces after it, from the 39B model on).
- Korthikanti et al. 2022, arXiv 2205.05198, Table 5 ("present work": sequence parallelism and
  selective recompute, A100-80GB, fp16 per the paper's setup) with the layouts of its Table 3
  configurations (t 8; p 1 / 8 / 35 / 64; v 1 / 3 / 3 / 1; micro batch 4 / 1 / 1 / 1; no data
  parallelism). Checked, not fitted: the same table's full-recompute column (the same layouts
  without sequence parallelism) and §6.3's 530B run with 8-way data parallelism on 2240 GPUs
  (39.15 s, the batch 8 × 280; the gradient all-reduce not overlapped, the paper says).
- MT-NLG 530B: Smith et al. 2022, arXiv 2201.11990 §2.4 (t 8, p 35, batch 1920, seq 2048, A100,
  DeepSpeed's pipeline engine, which reduces the gradients after the last micro-batch, in bf16
  with the BF16_Optimizer DeepSpeed added for it, which accumulated the gradients in fp32): checked,
  not fitted (the engine is not the one the model describes; it is over-predicted by 14-19%,
  where the same model in Megatron's own schedule, Korthikanti's 530B runs, is not).
- Nemotron-4 340B: NVIDIA 2024, Nemotron-4 340B Technical Report, Table 2 (H100, t 8, p 12, dp
  16 / 32 / 64, batch 768 / 1536 / 2304 at seq 4096, distributed optimizer). The report does not
  state the interleaving (read as none), micro batch (1) or recompute (none).
- Nemotron-4 15B: Parmar et al. 2024, arXiv 2402.16819, Table 2 (384 DGX H100 nodes, t 8 with
  data parallelism and the distributed optimizer; dp 96 / 192 / 288 on 768 / 1536 / 2304 GPUs,
  batch 384 / 768 / 1152 at seq 4096; iteration 0.57 / 0.58 / 0.64 s, MFU 34.3 / 33.3 / 30.5%:
  a test holds the two columns to each other). Not stated: micro batch (read as 1), recompute
  (none), sequence parallelism (on). At micro batch 2 the model would predict the runs 12-25%
  too fast; the largest run's 10% slowdown over the others (the same work per GPU) is not in the
  model (a network effect at 288 nodes), so it is the largest H100 error.
  The two Nemotron-4 models fit the H100's efficiency together (H100 and H200 are one
  generation: the same GEMM peak).
- Llama-3-70B continued pre-training with Megatron-LM on H100: Fujii, Nakamura and Yokota 2024,
  "Balancing Speed and Stability: The Trade-offs of FP8 vs. BF16 Training in LLMs", arXiv
  2411.08719 (abstract): 415 TFLOP/s per GPU in bf16, up to 570 with FP8 (Transformer Engine's
  delayed scaling, --fp8-format hybrid) — Megatron-LM's --log-throughput figure, model FLOPs
  in this module's convention. The layout is the first author's launch scripts for those runs
  (github.com/okoge-kaz/Megatron-LM, scripts/tsubame/Llama-3-70b/llama-3-70b-tp4-pp8-exp4.sh
  and llama-3-70b-tp4-pp8-exp6-fp8-hybrid.sh, identical but for the FP8 flag): TSUBAME 4.0's
  4-GPU H100 nodes, 16 of them; t 4, p 8, micro batch 1, batch 1024 at seq 8192, sequence
  parallelism, selective recompute, the distributed optimizer, flash attention. The bf16 run is
  fitted; the FP8 run fits the FP8 GEMM efficiency (the ratio of the two), so it is not fitted
  for the efficiency.
- Megatron-LM's README ("Training Speed and Scalability" and its images/model_table.png,
  Megatron-Core r0.8.0, July 2024): GPT models of 1.7B to 462B parameters on 48 to 6144 H100s,
  vocabulary 131,072, seq 4096, dp 48, with the data-, tensor- and pipeline-parallel overlaps
  on, per-GPU model TFLOP/s (Megatron-LM's count, this module's convention). The README does
  not state the micro batch or the interleaving, so these runs are checked as brackets: each
  published figure must lie within the model's figures over the settings the README leaves
  open (readme_brackets), not fitted.
- Llama-2-7B with PyTorch FSDP: Team PyTorch at IBM and at Meta, "Maximizing training
  throughput using PyTorch FSDP" (PyTorch blog, 2024): 3,700 tokens/s per GPU on 128 A100s,
  MFU = HFU = 57% (so no recompute). Checked, not fitted: the blog's run is one FSDP data point;
  read as full sharding, micro batch 2, seq 4096 (hybrid sharding or micro batch 1-4 move the
  estimate by under 2%). Its sequel, "Maximizing Training Throughput Using PyTorch FSDP and
  Torch.compile" (PyTorch blog, 2024), ran the same 7B recipe compiled at 68% MFU against 57%:
  the one pair that fits the compile speed-up (fit_compile_speedup), used for nothing else.
- Llama 3 405B: Llama Team, Meta 2024, "The Llama 3 Herd of Models", arXiv 2407.21783, Table 4
  (H100, 16M tokens a batch, t 8, p 16): 430 TFLOP/s per GPU at seq 8192 on 8,192 GPUs (dp 64)
  and 380 at seq 131,072 on 16,384 GPUs (cp 16, dp 4) — both 32 micro-batches of one sequence
  per pipeline, 64 data × context parallel ranks, so their ratio, 0.884, is the cost of the long
  sequence (Meta's own framework; the interleaving is not stated and moves the model's ratio by
  under 2% over 1-8). Read with the FLOP count of this module (the whole square of scores, as
  Megatron-LM's and NeMo's throughput of the time counted it; with the causal half counted the
  ratio would be 1.19 in this count). Used for attention.IN_TRAINING only
  (fit_attention_in_training), not for the efficiency.
- MLPerf Training v5.0 (MLCommons, 2025; github.com/mlcommons/training_results_v5.0), closed
  division, llama31_405b: Llama 3.1 405B pre-training at seq 8192 with NeMo on megatron-core, FP8
  (Transformer Engine's delayed scaling, E4M3, FP8 parameter gathers), no recompute, sequence
  parallelism, the distributed optimizer with both data-parallel overlaps, --tp-comm-overlap,
  micro batch 1, the embedding and the loss counted in the pipeline split (ASYM_PP_EMBED,
  ASYM_PP_LOSS: 15 layers on the first and the last stage), CUDA graphs on GB200. The layout is
  each submission's config_<system>_<nodes>x<gpus>x<minibs>xtp…pp…cp….sh (MINIBS, the global
  batch over dp, and the logs' global_batch_size agree); the step time is the median of the
  train_step_time the result_*.txt logs print for every step of the submission's runs. GB200
  (NVIDIA's tyche and IBM/CoreWeave's carina clusters, NVL72 racks of 4-GPU trays: tp and cp
  stay on NVLink, and so do the data × context groups' blocks of 64 ranks, the racks being filled
  in segments of 16 trays: performance.in_node) fits the B200/GB200 generation; the
  H100 runs (NVIDIA's eos, DGX H100) and Nebius's H200 runs are checked against the H100
  generation, not fitted (runs the model has not seen: the FP8 constant comes from the Fujii
  pair).
- MLPerf Training v4.1 (MLCommons, 2024; github.com/mlcommons/training_results_v4.1), gpt3:
  GPT-3 175B (96 layers, h 12288, 96 heads, seq 2048, the reference's 50,257-token vocabulary)
  with NeMo, FP8 (delayed scaling, hybrid format), t 4, p 8, micro batch 2, no recompute,
  sequence parallelism, the distributed optimizer, --tp-comm-overlap; the interleaving and
  MINIBS from each config (INTERLEAVED_PIPELINE), the step time the median of the logs'
  "train_step_timing in s". NVIDIA's B200 preview (8 HGX B200 nodes) is checked against the
  B200/GB200 generation (a second model there, not fitted), NVIDIA's (eos) and Oracle's H100
  runs against the H100 generation.
- MLPerf Training v5.1 (github.com/mlcommons/training_results_v5.1), llama31_405b: the
  University of Florida's runs on 32 and 56 DGX B200 nodes with NVIDIA's config
  (config_DGXB200_64x8x144xtp4pp8cp2_cg.sh, nodes as run: MINIBS 144 × dp; FP8 with current
  scaling, FP8_RECIPE=tensorwise; otherwise as the v5.0 runs), checked against B200/GB200.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from functools import cache

from generator import presets
from generator.estimate.attention import IN_TRAINING
from generator.estimate.memory import Layout, estimate_memory
from generator.estimate.params import Shape
from generator.estimate.performance import FP8_GEMM_EFFICIENCY, estimate_performance, step_flops
from generator.estimate.plan import hardware_of
from generator.values import value

# run_table_1.sh's DDP=torch (the gradient all-reduce overlapped) up to this size (B), DDP=local after
SC21_OVERLAPPED_DDP_UP_TO_B = 18.4
# params (B), heads, hidden, layers, t, p, GPUs, batch, micro batch, vpp, achieved TFLOP/s per GPU
SC21_TABLE1 = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 16, 1, 137),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 16, 1, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 16, 1, 142),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 8, 1, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 4, 1, 138),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 2, 3, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 2, 2, 148),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 1, 2, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 1, 3, 163),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 1, 1, 163),
]
# Korthikanti Table 5 (present work): name, hidden, heads, layers, t, p, v, GPUs, batch, micro,
# iteration seconds
KORTHIKANTI_TABLE5 = [
    ("22B", 6144, 64, 48, 8, 1, 1, 8, 4, 4, 1.10),
    ("175B", 12288, 96, 96, 8, 8, 3, 64, 64, 1, 13.75),
    ("530B", 20480, 128, 105, 8, 35, 3, 280, 280, 1, 37.83),
    ("1T", 25600, 160, 128, 8, 64, 1, 512, 512, 1, 71.49),
]
# Korthikanti Table 5's full-recompute column (no sequence parallelism): name, iteration seconds
KORTHIKANTI_FULL_RECOMPUTE = {"22B": 1.42, "175B": 18.13, "530B": 49.05, "1T": 94.42}
# Korthikanti §6.3: the 530B present-work run with 8-way data parallelism: GPUs, iteration seconds
KORTHIKANTI_530B_DP8 = (2240, 39.15)
# MT-NLG 530B (§2.4): GPUs, iteration seconds
MT_NLG = [(2240, 60.1), (2800, 50.2), (3360, 44.4)]
# Nemotron-4 340B (Table 2): dp, GPUs, batch, iteration seconds
NEMOTRON4_340B = [(16, 1536, 768, 10.3), (32, 3072, 1536, 10.3), (64, 6144, 2304, 8.0)]
# Nemotron-4 15B (Table 2): dp, GPUs, batch, iteration seconds
NEMOTRON4_15B = [(96, 768, 384, 0.57), (192, 1536, 768, 0.58), (288, 2304, 1152, 0.64)]
# Llama-3-70B (Fujii et al. 2024): model TFLOP/s per GPU by precision
FUJII_LLAMA3_70B = {"bf16": 415, "fp8": 570}
# Megatron-LM README (r0.8.0, H100): size, heads, hidden, layers, t, p, GPUs, batch, TFLOP/s per GPU
MEGATRON_README_H100 = [
    ("1.7B", 16, 2048, 24, 1, 1, 48, 192, 408.8), ("7.1B", 32, 4096, 30, 2, 1, 96, 192, 465.9),
    ("16B", 48, 6144, 32, 4, 1, 192, 192, 489.1), ("32B", 56, 7168, 48, 8, 1, 384, 192, 459.6),
    ("70B", 64, 8192, 84, 8, 2, 768, 384, 419.7), ("119B", 80, 10240, 92, 8, 4, 1536, 768, 420.5),
    ("177B", 96, 12288, 96, 8, 6, 2304, 1152, 432.8), ("314B", 128, 16384, 96, 8, 8, 3072, 1536, 474.4),
    ("462B", 144, 18432, 112, 8, 16, 6144, 3072, 459.9),
]
# Llama-2-7B with FSDP (PyTorch blog): GPUs, tokens per second per GPU
FSDP_LLAMA2_7B = (128, 3700)
# The same 7B model and FSDP recipe compiled: Team PyTorch at IBM and at Meta, "Maximizing Training
# Throughput Using PyTorch FSDP and Torch.compile" (PyTorch blog, 2024): 57% MFU eager, 68% with
# torch.compile (A100); the compile speed-up is their ratio (fit_compile_speedup)
COMPILE_PAIR_MFU = (0.57, 0.68)
# Llama 3 405B (Table 4): GPUs, cp, dp, seq, TFLOP/s per GPU (t 8, p 16, 16M tokens a batch)
LLAMA3_405B_TABLE4 = [(8192, 1, 64, 8192, 430), (16384, 16, 4, 131072, 380)]
LLAMA3_405B_VPP = 2  # not stated; the ratio moves under 2% over 1-8
# MLPerf Training, llama31_405b: round, submitter and system (results/<system>), GPU preset, GPUs
# a node, GPUs, t, p, cp, vpp, global batch, median train_step_time (s), FP8 recipe
MLPERF_LLAMA31_405B = [
    ("v5.0", "NVIDIA eos-dfw_n64", "h100-80gb", 8, 512, 8, 8, 2, 8, 1152, 55.134, "delayed"),
    ("v5.0", "NVIDIA eos-dfw_n256", "h100-80gb", 8, 2048, 8, 8, 2, 8, 1152, 14.220, "delayed"),
    ("v5.0", "NVIDIA eos-dfw_n304", "h100-80gb", 8, 2432, 8, 8, 2, 8, 1216, 12.729, "delayed"),
    ("v5.0", "NVIDIA eos-dfw_n320", "h100-80gb", 8, 2560, 8, 8, 2, 8, 1120, 11.174, "delayed"),
    ("v5.0", "NVIDIA eos-dfw_n1024", "h100-80gb", 8, 8192, 8, 8, 2, 8, 1536, 5.180, "delayed"),
    ("v5.0", "Nebius 8xH200_n64", "h200-141gb", 8, 512, 4, 8, 2, 8, 1152, 50.016, "delayed"),
    ("v5.0", "Nebius 8xH200_n128", "h200-141gb", 8, 1024, 4, 8, 2, 8, 1152, 25.356, "delayed"),
    ("v5.0", "NVIDIA tyche_ngpu256", "gb200", 4, 256, 4, 8, 2, 8, 448, 19.144, "delayed"),
    ("v5.0", "NVIDIA tyche_ngpu512", "gb200", 4, 512, 4, 8, 2, 8, 896, 19.474, "delayed"),
    ("v5.0", "IBM+CoreWeave carina_ngpu512", "gb200", 4, 512, 4, 8, 2, 8, 896, 19.314, "delayed"),
    ("v5.0", "IBM+CoreWeave carina_ngpu1024", "gb200", 4, 1024, 4, 8, 2, 8, 768, 8.448, "delayed"),
    ("v5.0", "IBM+CoreWeave carina_ngpu1536", "gb200", 4, 1536, 4, 8, 2, 8, 1152, 8.505, "delayed"),
    ("v5.0", "IBM+CoreWeave carina_ngpu2048", "gb200", 4, 2048, 4, 8, 2, 8, 1280, 7.164, "delayed"),
    ("v5.0", "IBM+CoreWeave carina_ngpu2496", "gb200", 4, 2496, 4, 8, 2, 8, 1248, 5.827, "delayed"),
    ("v5.1", "University-of-Florida hpg.dgxb200x8.n32", "b200", 8, 256, 4, 8, 2, 8, 576, 27.665,
     "tensorwise"),
    ("v5.1", "University-of-Florida hpg.dgxb200x8.n56", "b200", 8, 448, 4, 8, 2, 8, 1008, 27.958,
     "tensorwise"),
]
# MLPerf Training v4.1, gpt3 (t 4, p 8, micro batch 2): submitter and system, GPU preset, GPUs,
# vpp, global batch, median train step (s)
MLPERF_V41_GPT3 = [
    ("NVIDIA b200_n8_preview", "b200", 64, 6, 2048, 36.233),
    ("NVIDIA eos_n32", "h100-80gb", 256, 6, 2048, 18.378),
    ("NVIDIA eos_n64", "h100-80gb", 512, 6, 2048, 9.500),
    ("Oracle 1536xBM.GPU.H100.8", "h100-80gb", 1536, 4, 3072, 5.167),
    ("Oracle 3072xBM.GPU.H100.8", "h100-80gb", 3072, 4, 3072, 3.064),
]
A100 = "a100-80gb"
H100 = "h100-80gb"
GB200 = "gb200"
# GPU presets of one generation (the same GEMM peak per clock; memory, bandwidth and, for GB200,
# the clock differ and stay each preset's): their runs are fitted and checked together, under
# the generation's first preset, whose efficiency and band the others take
GENERATION = {"a100-40gb": A100, "h200-141gb": H100, "b200": GB200}


def llama31_405b_shape(seq: int, vocab: int = 128256) -> Shape:
    """Llama 3.1 405B: 126 layers, h 16384, 128 heads, 8 KV groups, SwiGLU FFN 53248, RMSNorm,
    RoPE, no biases, untied embeddings (vocab: 128,256, or Megatron's padding of it)."""
    return Shape(126, 16384, 128, 8, 53248, vocab, seq, gated=True, rmsnorm=True, bias=False,
                 learned_positions=False, tie_embeddings=False)


@value
class Run:
    """One published run: the model, the layout, the GPU preset and the measured step time."""

    name: str
    source: str
    gpu: str
    shape: Shape
    layout: Layout
    global_batch: int
    step_time_s: float
    fitted: bool = True  # False: checked only (what the model does not describe)
    gpus_per_node: int = 8

    @property
    def gpus(self) -> int:
        return self.layout.tp * self.layout.pp * self.layout.cp * self.layout.dp

    @property
    def generation(self) -> str:
        return GENERATION.get(self.gpu, self.gpu)


@value
class Row:
    """One published run with its leave-one-out prediction."""

    run: Run
    predicted_s: float  # with the efficiency fitted on the other runs of its generation
    efficiency: float

    @property
    def error(self) -> float:
        """Throughput error: predicted / published − 1 (positive: the model is too fast)."""
        return self.run.step_time_s / self.predicted_s - 1

    @property
    def published_tflops(self) -> float:
        return _hardware_tflops(self.run, self.run.step_time_s)

    @property
    def predicted_tflops(self) -> float:
        return _hardware_tflops(self.run, self.predicted_s)


def sc21_shape(heads: int, hidden: int, layers: int) -> Shape:
    return Shape(layers, hidden, heads, heads, 4 * hidden, 51200, 2048)


def _layout(t: int, p: int, v: int, gpus: int, batch: int, micro: int, cp: int = 1, **settings) -> Layout:
    dp = gpus // (t * p * cp)
    return Layout(tp=t, pp=p, cp=cp, vpp=v, dp=dp, micro_batch_size=micro,
                  num_microbatches=batch // (micro * dp),
                  **{"precision": "fp16", "flash_attention": False, **settings})


def runs() -> list[Run]:
    """Every published run, in table order."""
    out = []
    for params_b, heads, hidden, layers, t, p, gpus, batch, micro, vpp, tflops in SC21_TABLE1:
        shape = sc21_shape(heads, hidden, layers)
        hardware = step_flops(shape, batch, "full")[1]
        layout = _layout(t, p, vpp, gpus, batch, micro, recompute="full",
                         overlap_grad_reduce=params_b <= SC21_OVERLAPPED_DDP_UP_TO_B)
        out.append(Run(f"SC21 {params_b:g}B on {gpus}", "Narayanan et al. 2021, Table 1", A100, shape,
                       layout, batch, hardware / (gpus * tflops * 1e12)))
    for name, hidden, heads, layers, t, p, v, gpus, batch, micro, seconds in KORTHIKANTI_TABLE5:
        out.append(Run(f"Korthikanti {name} on {gpus}", "Korthikanti et al. 2022, Table 5", A100,
                       sc21_shape(heads, hidden, layers),
                       _layout(t, p, v, gpus, batch, micro, recompute="selective", sequence_parallel=True),
                       batch, seconds))
    for name, hidden, heads, layers, t, p, v, gpus, batch, micro, _ in KORTHIKANTI_TABLE5:
        out.append(Run(f"Korthikanti {name} full recompute on {gpus}", "Korthikanti et al. 2022, Table 5",
                       A100, sc21_shape(heads, hidden, layers),
                       _layout(t, p, v, gpus, batch, micro, recompute="full"), batch,
                       KORTHIKANTI_FULL_RECOMPUTE[name], fitted=False))
    name, hidden, heads, layers, t, p, v, gpus, batch, micro, _ = KORTHIKANTI_TABLE5[2]
    dp_gpus, seconds = KORTHIKANTI_530B_DP8
    dp_batch = batch * dp_gpus // gpus
    out.append(Run(f"Korthikanti {name} on {dp_gpus}", "Korthikanti et al. 2022, §6.3", A100,
                   sc21_shape(heads, hidden, layers),
                   _layout(t, p, v, dp_gpus, dp_batch, micro, recompute="selective", sequence_parallel=True,
                           overlap_grad_reduce=False),
                   dp_batch, seconds, fitted=False))
    shape = Shape(105, 20480, 128, 128, 4 * 20480, 50272, 2048)
    for gpus, seconds in MT_NLG:
        out.append(Run(f"MT-NLG 530B on {gpus}", "Smith et al. 2022, §2.4", A100, shape,
                       _layout(8, 35, 1, gpus, 1920, 1, recompute="full", sharding="zero1",
                               framework="megatron-deepspeed", precision="bf16", overlap_grad_reduce=False,
                               grad_accum_dtype="fp32"),
                       1920, seconds, fitted=False))
    # 96 layers, h 18432, 96 heads, 8 KV groups, FFN 73728 (squared ReLU), no biases, RoPE,
    # untied embeddings, V 256,000: 341.0B parameters (the report: 9.4B embedding + 331.6B)
    shape = Shape(96, 18432, 96, 8, 73728, 256000, 4096, bias=False, learned_positions=False,
                  tie_embeddings=False)
    for _dp, gpus, batch, seconds in NEMOTRON4_340B:  # dp = GPUs / 96 (a test checks it)
        out.append(Run(f"Nemotron-4 340B on {gpus}", "NVIDIA 2024, Nemotron-4 340B report, Table 2", H100,
                       shape, _layout(8, 12, 1, gpus, batch, 1, recompute="none", sequence_parallel=True,
                                      sharding="distributed_optimizer", precision="bf16",
                                      flash_attention=True),
                       batch, seconds))
    # 32 layers, h 6144, 48 heads, 8 KV groups, FFN 24576 (squared ReLU), no biases, RoPE,
    # untied embeddings, V 256,000: 15.6B parameters (the report: 3.2B embedding + 12.5B)
    shape = Shape(32, 6144, 48, 8, 24576, 256000, 4096, bias=False, learned_positions=False,
                  tie_embeddings=False)
    for _dp, gpus, batch, seconds in NEMOTRON4_15B:  # dp = GPUs / 8
        layout = _layout(8, 1, 1, gpus, batch, 1, recompute="none", sequence_parallel=True,
                         sharding="distributed_optimizer", precision="bf16", flash_attention=True)
        out.append(Run(f"Nemotron-4 15B on {gpus}", "Parmar et al. 2024, Nemotron-4 15B report, Table 2",
                       H100, shape, layout, batch, seconds))
    # Llama-3-70B: 80 layers, h 8192, 64 heads, 8 KV groups, SwiGLU FFN 28672, RMSNorm, RoPE, no
    # biases, untied embeddings, V 128,256 padded to 128,512 (a multiple of 128 × t)
    shape = Shape(80, 8192, 64, 8, 28672, 128512, 8192, gated=True, rmsnorm=True, bias=False,
                  learned_positions=False, tie_embeddings=False)
    for precision, tflops in FUJII_LLAMA3_70B.items():
        layout = _layout(4, 8, 1, 64, 1024, 1, recompute="selective", sequence_parallel=True,
                         sharding="distributed_optimizer", precision=precision, flash_attention=True)
        out.append(Run(f"Llama-3-70B {precision} on 64", "Fujii et al. 2024, FP8 vs. BF16 (abstract)", H100,
                       shape, layout, 1024, step_flops(shape, 1024, "selective")[0] / (64 * tflops * 1e12),
                       fitted=precision == "bf16", gpus_per_node=4))
    # Llama-2-7B: 32 layers, h 4096, 32 heads (no GQA), SwiGLU FFN 11008, RMSNorm, RoPE, no
    # biases, untied embeddings, V 32,000
    shape = Shape(32, 4096, 32, 32, 11008, 32000, 4096, gated=True, rmsnorm=True, bias=False,
                  learned_positions=False, tie_embeddings=False)
    gpus, tokens_per_gpu = FSDP_LLAMA2_7B
    micro = 2
    out.append(Run(f"Llama-2-7B FSDP on {gpus}", "PyTorch blog (IBM, Meta) 2024, FSDP throughput", A100,
                   shape, _layout(1, 1, 1, gpus, micro * gpus, micro, recompute="none", sharding="zero3",
                                  framework="fsdp", precision="bf16", flash_attention=True),
                   micro * gpus, micro * gpus * shape.seq_length / (tokens_per_gpu * gpus), fitted=False))
    for round_, system, gpu, per_node, gpus, t, p, cp, vpp, batch, seconds, recipe in MLPERF_LLAMA31_405B:
        layout = _mlperf_layout(t, p, cp, vpp, gpus, batch, 1, fp8_recipe=recipe, first_stage_layers=15,
                                last_stage_layers=15)
        out.append(Run(f"MLPerf 405B {system}", f"MLPerf Training {round_}, llama31_405b", gpu,
                       llama31_405b_shape(8192, padded_vocab(128256, t)), layout, batch, seconds,
                       fitted=gpu == GB200, gpus_per_node=per_node))
    for system, gpu, gpus, vpp, batch, seconds in MLPERF_V41_GPT3:
        out.append(Run(f"MLPerf GPT-3 {system}", "MLPerf Training v4.1, gpt3", gpu,
                       Shape(96, 12288, 96, 96, 4 * 12288, padded_vocab(50257, 4), 2048),
                       _mlperf_layout(4, 8, 1, vpp, gpus, batch, 2), batch, seconds, fitted=False))
    return out


def _mlperf_layout(t: int, p: int, cp: int, vpp: int, gpus: int, batch: int, micro: int,
                   **settings) -> Layout:
    """NVIDIA's MLPerf NeMo recipes: FP8 with flash attention and without recompute, sequence
    parallelism, the distributed optimizer, --tp-comm-overlap and the interleaved pipeline's
    overlapped sends."""
    return _layout(t, p, vpp, gpus, batch, micro, cp, precision="fp8", flash_attention=True,
                   sequence_parallel=True, sharding="distributed_optimizer", tp_comm_overlap=True,
                   overlap_p2p_comm=True, **settings)


def padded_vocab(vocab: int, tp: int) -> int:
    """Megatron's (and NeMo's) vocabulary padding: a multiple of 128 × t."""
    return -(-vocab // (128 * tp)) * 128 * tp


def predict(run: Run, efficiency: float, fp8_gemm_efficiency: float = FP8_GEMM_EFFICIENCY,
            attention_in_training: float = IN_TRAINING) -> float:
    hw = replace(hardware_of(presets.gpus()[run.gpu], run.layout.precision, run.gpus_per_node),
                 efficiency=efficiency, fp8_gemm_efficiency=fp8_gemm_efficiency,
                 attention_in_training=attention_in_training)
    return estimate_performance(run.shape, run.layout, hw, run.global_batch).step_time_s


def _hardware_tflops(run: Run, seconds: float) -> float:
    return step_flops(run.shape, run.global_batch, run.layout.recompute)[1] / seconds / run.gpus / 1e12


def fit_efficiency(fitted: list[Run], attention_in_training: float = IN_TRAINING) -> float:
    """The one constant that makes the runs' log throughput errors sum to zero (bisection: the
    predicted time falls as the efficiency rises)."""
    low, high = 0.2, 1.0
    for _ in range(40):
        middle = (low + high) / 2
        if sum(math.log(r.step_time_s / predict(r, middle, attention_in_training=attention_in_training))
               for r in fitted) > 0:
            high = middle  # published slower than predicted: lower the efficiency
        else:
            low = middle
    return (low + high) / 2


@cache
def generation_efficiency(gpu: str, attention_in_training: float = IN_TRAINING) -> float:
    """The efficiency fitted on all the fitted runs of a generation (cached: the fits of the
    attention share and the FP8 constant, and the docs, ask for it again)."""
    return fit_efficiency([r for r in runs() if r.generation == gpu and r.fitted], attention_in_training)


ATTENTION_GRID = [x / 100 for x in range(30, 85, 5)]


def attention_errors(attention_in_training: float) -> list[float]:
    """The log throughput errors of the runs with flash attention, with each generation's
    efficiency fitted on its fitted runs at that share (the FP8 run aside: it fits its own
    constant)."""
    return [math.log(r.step_time_s / predict(r, generation_efficiency(r.generation, attention_in_training),
                                             attention_in_training=attention_in_training))
            for r in runs() if r.layout.flash_attention and r.layout.precision != "fp8"]


def long_context_ratio(attention_in_training: float, vpp: int = LLAMA3_405B_VPP) -> tuple[float, float]:
    """(published, predicted) per-GPU throughput of Llama 3 405B at seq 131,072 over seq 8192
    (Table 4), at the H100's efficiency fitted with that attention share."""
    hw = replace(hardware_of(presets.gpus()[H100], "bf16", 8),
                 efficiency=generation_efficiency(H100, attention_in_training),
                 attention_in_training=attention_in_training)
    figures = []
    for _gpus, cp, dp, seq, tflops in LLAMA3_405B_TABLE4:
        shape = llama31_405b_shape(seq)
        batch = 16 * 2**20 // seq
        layout = Layout(tp=8, pp=16, cp=cp, dp=dp, vpp=vpp, num_microbatches=batch // dp,
                        sequence_parallel=True, sharding="distributed_optimizer", overlap_p2p_comm=True)
        figures.append((tflops, estimate_performance(shape, layout, hw, batch).tflops_per_gpu))
    (short, short_model), (long, long_model) = figures
    return long / short, long_model / short_model


def attention_fit_error(attention_in_training: float) -> float:
    """What fit_attention_in_training minimizes: the squared log throughput errors of the runs
    with flash attention (4k-8k tokens) and the squared log error of Llama 3's long-context
    ratio (the one published long run with its layout)."""
    published, predicted = long_context_ratio(attention_in_training)
    return sum(e * e for e in attention_errors(attention_in_training)) + math.log(predicted / published) ** 2


def fit_attention_in_training() -> float:
    """attention.IN_TRAINING: the point of ATTENTION_GRID with the least attention_fit_error."""
    return min(ATTENTION_GRID, key=attention_fit_error)


def fp8_pair() -> tuple[Run, Run]:
    """The published bf16 and FP8 runs of one layout (Fujii et al. 2024)."""
    by_name = {r.name: r for r in runs()}
    return by_name["Llama-3-70B bf16 on 64"], by_name["Llama-3-70B fp8 on 64"]


def fit_fp8_gemm_efficiency() -> float:
    """The FP8 GEMM efficiency (performance.FP8_GEMM_EFFICIENCY) that predicts the published
    FP8-over-bf16 speed-up of the pair, with the H100's fitted efficiency (bisection: the FP8
    run's predicted time falls as it rises)."""
    bf16, fp8 = fp8_pair()
    efficiency = generation_efficiency(H100)
    published = bf16.step_time_s / fp8.step_time_s
    bf16_s = predict(bf16, efficiency)
    low, high = 0.3, 1.0
    for _ in range(40):
        middle = (low + high) / 2
        if bf16_s / predict(fp8, efficiency, middle) > published:
            high = middle
        else:
            low = middle
    return (low + high) / 2


def fit_compile_speedup() -> float:
    """The compile speed-up (performance.COMPILE_SPEEDUP) that predicts the published compiled
    over eager step time of the FSDP Llama-2-7B run (the MFU ratio: the same FLOPs a step), with
    the A100's fitted efficiency (bisection: the compiled step shortens as it rises)."""
    run = next(r for r in runs() if r.name.startswith("Llama-2-7B FSDP"))
    eager_mfu, compiled_mfu = COMPILE_PAIR_MFU
    hw = replace(hardware_of(presets.gpus()[run.gpu], run.layout.precision, run.gpus_per_node),
                 efficiency=generation_efficiency(A100))
    eager = estimate_performance(run.shape, run.layout, hw, run.global_batch).step_time_s
    compiled = replace(run.layout, compiled=True)
    low, high = 1.0, 2.0
    for _ in range(40):
        middle = (low + high) / 2
        step = estimate_performance(run.shape, compiled, hw, run.global_batch, middle).step_time_s
        if eager / step > compiled_mfu / eager_mfu:
            high = middle
        else:
            low = middle
    return (low + high) / 2


def leave_one_out(gpu: str = A100) -> list[Row]:
    """Each run of a generation predicted with the efficiency fitted on the other fitted runs
    (a run that is only checked, with the fit on all of them; where a generation has no fitted
    runs, with its preset's assumed efficiency)."""
    of_gpu = [r for r in runs() if r.generation == gpu]
    fitted = [r for r in of_gpu if r.fitted]
    rows = []
    for run in of_gpu:
        others = [r for r in fitted if r is not run]
        efficiency = fit_efficiency(others) if others else presets.gpus()[gpu]["efficiency"]
        rows.append(Row(run, predict(run, efficiency), efficiency))
    return rows


@value
class Bracket:
    """A published run whose settings are partly unstated: the model's slowest and fastest
    figures over the settings left open, and the published one."""

    name: str
    shape: Shape
    published_tflops: float
    low: tuple[float, int, int]  # (model TFLOP/s per GPU, micro batch, vpp)
    high: tuple[float, int, int]


def readme_shape(heads: int, hidden: int, layers: int) -> Shape:
    """The README's GPT models: 4h MLP, GeLU, LayerNorm, biases, learned positions and untied
    embeddings (their parameter counts say so), vocabulary 131,072, seq 4096."""
    return Shape(layers, hidden, heads, heads, 4 * hidden, 131072, 4096, tie_embeddings=False)


def readme_brackets() -> list[Bracket]:
    """Megatron-LM's README runs on H100 with the preset's efficiency, over what the README
    leaves open: micro batch 1, 2 or 4 (dividing a data-parallel rank's share of the batch),
    interleaving 1 or any divisor of a stage's layers (micro-batches a multiple of p), no
    recompute, the distributed optimizer (--overlap-param-gather needs it), sequence
    parallelism with t > 1, --tp-comm-overlap; only layouts that fit 80 GB."""
    gpu = presets.gpus()[H100]
    hw = hardware_of(gpu, "bf16", 8)
    out = []
    for name, heads, hidden, layers, t, p, gpus, batch, tflops in MEGATRON_README_H100:
        shape = readme_shape(heads, hidden, layers)
        dp = gpus // (t * p)
        figures = []
        for micro in (1, 2, 4):
            m, rest = divmod(batch // dp, micro)
            per_stage = layers // p
            interleaved = [v for v in range(2, per_stage + 1) if per_stage % v == 0] \
                if p > 1 and m % p == 0 else []
            for vpp in [1, *interleaved]:
                layout = Layout(tp=t, pp=p, vpp=vpp, dp=dp, micro_batch_size=micro, num_microbatches=m,
                                sequence_parallel=t > 1, sharding="distributed_optimizer",
                                tp_comm_overlap=True, overlap_p2p_comm=True)
                if rest or not estimate_memory(shape, layout, gpu["memory_gib"]).fits:
                    continue
                figures.append((estimate_performance(shape, layout, hw, batch).tflops_per_gpu, micro, vpp))
        out.append(Bracket(f"Megatron-LM README {name} on {gpus}", shape, tflops, min(figures), max(figures)))
    return out


def generations() -> list[str]:
    """The generations with published runs (their first presets), in table order."""
    return list(dict.fromkeys(r.generation for r in runs()))


def median_abs_error(rows: list[Row]) -> float:
    return statistics.median(abs(r.error) for r in rows)


def band(rows: list[Row]) -> float:
    """The uncertainty an estimate reports: the largest leave-one-out throughput error of the
    fitted runs (rounded up to a whole percent)."""
    return math.ceil(100 * max(abs(r.error) for r in rows if r.run.fitted)) / 100


def models(rows: list[Row]) -> int:
    """How many models (layers × hidden size) the fitted runs train."""
    return len({(r.run.shape.num_layers, r.run.shape.hidden_size) for r in rows if r.run.fitted})


@cache
def uncertainty(generation: str) -> float:
    """A generation's band (gpus.yaml's uncertainty): its own where its fitted runs train several
    models; where they all train one (a single workload at several scales cannot show how the
    error moves from model to model), at least the widest band of the generations fitted on
    several models."""
    rows = leave_one_out(generation)
    if models(rows) > 1:
        return band(rows)
    others = (leave_one_out(g) for g in generations() if g != generation)
    return max([band(rows), *(band(other) for other in others if models(other) > 1)])
