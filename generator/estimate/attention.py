"""The attention core (softmax(QKᵀ)·V) at its own speed: fused flash-attention kernels reach a
share of the peak that grows with the sequence length and differs by GPU and kernel, unlike the
linear GEMMs (performance.py's calibrated efficiency).

Data (published kernel benchmarks, TFLOP/s on the FLOPs a kernel computes: with a causal mask
half the scores): Shah et al. 2024, "FlashAttention-3", arXiv 2407.08608, Figures 5 and 6
(H100 80GB SXM5, BF16, head dim 128, batch × sequence = 16k tokens, 16 heads): forward with and
without the causal mask, backward without it, for cuDNN's fused attention (what Transformer
Engine runs on Hopper when it may choose) and FlashAttention-2 (the kernel without Hopper's
instructions).
- The causal backward is not in those figures: it is taken as the non-causal backward times the
  forward's causal / non-causal ratio at the same length (FlashAttention-4's Blackwell benchmark
  in Dao-AILab/flash-attention PR #2280 shows the two ratios close: 0.90 backward, 0.92 forward
  at 8k).
- A100 (FlashAttention-2): Dao 2023, "FlashAttention-2", arXiv 2307.08691, abstract: 50-73% of
  the A100's peak. Its curves are FlashAttention-2's H100 curves (the same kernels) scaled so
  their highest point, the non-causal forward at 16k, is 73% of the A100's peak.
- Beyond the measured lengths the figures are held at the ends (512 and 16k; FlashAttention-4's
  long-sequence runs in PR #2628 are flat to 40k); between them interpolated in log length.
Not modelled: head dims other than 128 (64 is slower, 256 faster), FP8 attention.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from generator.frameworks import framework_of
from generator.vectors import where

LENGTHS = (512, 1024, 2048, 4096, 8192, 16384)
H100_PEAK = 989.0
# TFLOP/s at each of LENGTHS: (forward causal, forward, backward)
FA3_PAPER_H100 = {
    "cudnn": ((315, 410, 484, 518, 529, 539), (497, 574, 617, 609, 600, 595), (305, 408, 465, 499, 518, 516)),
    "fa2": ((191, 260, 298, 319, 333, 335), (309, 350, 362, 368, 370, 370), (214, 260, 291, 310, 318, 322)),
}
FA2_A100_BEST = 0.73  # of the A100's peak (FlashAttention-2's abstract)
# the kernel each preset's GPU runs (gpus.yaml's attention column): name → (H100 curves, scale to
# a fraction of the GPU's own peak)
KERNELS = {
    "cudnn": ("cudnn", 1 / H100_PEAK),
    "fa2-h100": ("fa2", 1 / H100_PEAK),
    "fa2-a100": ("fa2", FA2_A100_BEST / max(FA3_PAPER_H100["fa2"][1])),
}
# The kernel a framework's attention runs: megatron-core through Transformer Engine takes the
# GPU preset's (cuDNN's fused attention on Hopper); DeepSpeed, FSDP and the Megatron-DeepSpeed
# forks call FlashAttention-2 (the flash-attn package, or PyTorch SDPA's flash backend).
FLASH_ATTENTION_2 = {"cudnn": "fa2-h100", "fa2-h100": "fa2-h100", "fa2-a100": "fa2-a100"}
# The share of its benchmark speed a flash kernel keeps inside a training step (other kernels'
# launches and memory traffic around it, the QKV layout, shorter tails): fitted on the published
# runs that use flash attention and Llama 3's long-context ratio
# (calibration.fit_attention_in_training; docs/estimates.md).
IN_TRAINING = 0.45
BACKWARD_FLOPS = 2.5  # a flash backward's matmuls: S again, dV, dP, dQ, dK (5) against the forward's 2


def kernel_for(framework: str, preset_kernel: str) -> str:
    own = framework_of(framework).attention_kernel == "preset"
    return preset_kernel if own else FLASH_ATTENTION_2[preset_kernel]


@cache
def fractions(kernel: str) -> dict[str, tuple[float, ...]]:
    """A kernel's forward (causal and not) and backward (causal and not) speed at LENGTHS as
    fractions of the GPU's bf16 peak."""
    series, scale = KERNELS[kernel]
    causal, forward, backward = FA3_PAPER_H100[series]
    return {"forward_causal": tuple(c * scale for c in causal), "forward": tuple(f * scale for f in forward),
            "backward": tuple(b * scale for b in backward),
            "backward_causal": tuple(b * c / f * scale
                                     for b, c, f in zip(backward, causal, forward, strict=True))}


XS = tuple(math.log2(x) for x in LENGTHS)


def at_length(length: Any, points: tuple[float, ...]) -> Any:
    """The figure at a sequence length (a number or an array): interpolated in log length
    between LENGTHS, held at the ends."""
    return _at_log_length(_log2(length), points)


def _log2(length: Any) -> Any:
    if hasattr(length, "shape"):
        import numpy  # deferred: numpy only for arrays (auto-plan), not on the CLI's path

        return numpy.log2(length)
    return math.log2(length)


def _at_log_length(x: Any, points: tuple[float, ...]) -> Any:
    if hasattr(x, "shape"):
        import numpy  # deferred: numpy only for arrays (auto-plan), not on the CLI's path

        return numpy.interp(x, XS, points)
    if x <= XS[0]:
        return points[0]
    for i in range(1, len(XS)):
        if x <= XS[i]:
            return points[i - 1] + (points[i] - points[i - 1]) * (x - XS[i - 1]) / (XS[i] - XS[i - 1])
    return points[-1]


def core_seconds(forward_flops: Any, kernel_length: Any, cp: Any, forwards: Any, kernel: str,
                 peak_tflops: float, in_training: float = IN_TRAINING) -> Any:
    """Seconds of the flash attention core for ``forward_flops`` computed forward FLOPs (the
    causal half of the scores): ``forwards`` forward passes (recompute runs it again) and one
    backward of BACKWARD_FLOPS times the work. Context parallelism (Transformer Engine's ring,
    load-balanced) splits a rank's work into cp steps of ``kernel_length`` = s/cp: one causal
    step on its own chunks, cp − 1 without a mask. The kernels keep ``in_training`` of their
    benchmark speed."""
    f, x = fractions(kernel), _log2(kernel_length)
    causal = 1 / cp
    forward_rate = causal / _at_log_length(x, f["forward_causal"]) + \
        (1 - causal) / _at_log_length(x, f["forward"])
    backward_rate = causal / _at_log_length(x, f["backward_causal"]) + \
        (1 - causal) / _at_log_length(x, f["backward"])
    seconds_per_peak = forward_flops / (peak_tflops * 1e12 * in_training)
    return seconds_per_peak * (forwards * forward_rate + BACKWARD_FLOPS * backward_rate)


def forward_passes(recompute: Any) -> Any:
    """How often the attention core runs forward per micro-batch: once, and again under full
    recompute (the whole layer) or selective recompute (megatron-core's default recompute
    module is the core attention)."""
    return where(recompute == "none", 1, 2)
