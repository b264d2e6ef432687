"""Oracle: what a layer keeps for its backward, as the estimate counts it, against what
megatron-core's own layers save (tests/oracle/activations.py measures the storages saved for the
backward of a small GPTModel forward on the CPU, per token and layer). The CPU runs the local,
unfused layers; the estimate counts the GPU's fused ones. Where the two differ, the test says
how: the unfused MoE expert keeps its activation's output and, separately, that output weighted
by the routing score (the fused weighted activation keeps one), and the unfused attention core
differs from the fused one, so the tests compare what an MLP width, a routed copy or an expert
width adds, not whole layers."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from generator.estimate.memory import Layout, activation_bytes_per_layer
from generator.estimate.params import Shape

from .conftest import require_oracle

pytestmark = pytest.mark.oracle
SCRIPT = Path(__file__).resolve().parent / "oracle" / "activations.py"
S, B, H = 128, 2, 256
DENSE = Shape(2, H, 8, 8, 1024, 512, S, bias=False, learned_positions=False, hidden_dropout=False,
              attention_dropout=False)
MOE = {"num_moe_experts": 8, "moe_token_dispatcher_type": "alltoall"}


@pytest.fixture(scope="module")
def measured() -> dict[str, float]:
    require_oracle("megatron.core")
    cases = {"dense f1024": {}, "dense f2048": {"ffn_hidden_size": 2048},
             "hidden dropout": {"hidden_dropout": 0.1}, "attention dropout": {"attention_dropout": 0.1},
             "top-2 f512": {**MOE, "moe_router_topk": 2, "moe_ffn_hidden_size": 512},
             "top-4 f512": {**MOE, "moe_router_topk": 4, "moe_ffn_hidden_size": 512},
             "top-2 f1024": {**MOE, "moe_router_topk": 2, "moe_ffn_hidden_size": 1024}}
    proc = subprocess.run([sys.executable, str(SCRIPT)], input=json.dumps(list(cases.values())),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = proc.stdout.strip().splitlines()[-1]
    results = json.loads(line.removeprefix("gen-launch-activations:"))
    return {name: r["bytes_per_token"] for name, r in zip(cases, results, strict=True)}


def counted(shape: Shape, moe: bool = False) -> float:
    """The estimate's bytes per token of one layer at the oracle's sizes (bf16, one rank)."""
    return activation_bytes_per_layer(shape, Layout(micro_batch_size=B, flash_attention=False), moe=moe) / (S * B)


def moe_shape(top_k: int, ffn: int) -> Shape:
    return replace(DENSE, num_experts=8, top_k=top_k, moe_ffn_hidden_size=ffn)


def test_a_wider_mlp_keeps_what_the_estimate_adds(measured) -> None:
    """A dense MLP keeps its first GEMM's output and its activation's output: 4 bytes per unit of
    FFN width and token, measured as counted."""
    assert measured["dense f2048"] - measured["dense f1024"] == pytest.approx(
        counted(replace(DENSE, ffn_hidden_size=2048)) - counted(DENSE)) == 4 * 1024


def test_each_routed_copy_keeps_its_input_and_the_experts_two_gemm_inputs(measured) -> None:
    """Two more routed copies of every token (top-4 against top-2) keep each its permuted
    hidden state (2h), its first GEMM's output (2f) and its activation's output (2f) — and on the
    unfused CPU path the score-weighted copy of that output too (2f more), which the GPU's fused
    weighted activation does not keep. The routing's own int64 indices and fp32 scores add a few
    bytes a copy."""
    f = 512
    added = measured["top-4 f512"] - measured["top-2 f512"]
    estimate = counted(moe_shape(4, f), moe=True) - counted(moe_shape(2, f), moe=True)
    assert estimate == 2 * (2 * H + 2 * f + 2 * f)
    assert added == pytest.approx(estimate + 2 * 2 * f, rel=0.01)


def test_a_wider_expert_keeps_what_the_estimate_adds_per_copy(measured) -> None:
    """Doubling the experts' FFN width from 512 adds, per routed copy, 4 bytes per unit of width
    counted (the GEMM output and the weighted activation), 6 on the unfused CPU path."""
    added = measured["top-2 f1024"] - measured["top-2 f512"]
    estimate = counted(moe_shape(2, 1024), moe=True) - counted(moe_shape(2, 512), moe=True)
    assert estimate == 2 * 4 * 512
    assert added == pytest.approx(estimate + 2 * 2 * 512, rel=0.01)  # + the unfused weighted copy


def test_dropout_keeps_its_masks_and_none_without_it(measured) -> None:
    """Dropout keeps a mask per element it drops: two of h after attention and MLP, one of a·s on
    the attention scores; at p = 0 PyTorch skips it and keeps none (the base measured here). The
    GPU's fused dropout keeps 1-byte masks (counted); the CPU's keeps the scaled mask in the
    tensor's dtype, 2 bytes."""
    hidden = counted(replace(DENSE, hidden_dropout=True)) - counted(DENSE)
    scores = counted(replace(DENSE, attention_dropout=True)) - counted(DENSE)
    assert (hidden, scores) == (2 * H, 8 * S)
    assert measured["hidden dropout"] - measured["dense f1024"] == 2 * hidden
    assert measured["attention dropout"] - measured["dense f1024"] == 2 * scores
