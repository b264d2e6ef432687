"""Estimates against published numbers (SC21 Table 1, the releases' parameter counts), and their place in
explain, plan.json and generate."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from generator import presets
from generator.cli import app
from generator.estimate.calibration import sc21_shape
from generator.estimate.memory import (
    GIB,
    Layout,
    deepspeed_estimator_bytes,
    estimate_memory,
    stage_memory,
    state_bytes_per_param,
)
from generator.estimate.params import Shape, count_params
from generator.estimate.performance import (
    FP8_GEMM_EFFICIENCY,
    Hardware,
    estimate_performance,
    fp8_gemm_speedup,
    iteration_time,
    step_flops,
)
from generator.estimate.plan import hardware_of
from generator.run import load_spec
from generator.spec.model import model_from

from .conftest import SAMPLES
from .helpers import BASE, plan_of, spec_dict

runner = CliRunner()
# Korthikanti et al. 2022, Fig. 1 configurations (s 2048, V 51200): model, h, heads, layers, t, p, v,
# micro batch; first-stage activation GiB with TP only and with TP + SP + selective recompute.
FIG1 = [("22B", 6144, 64, 48, 8, 1, 1, 4, 59.25, 9.56),
        ("175B", 12288, 96, 96, 8, 8, 3, 1, 66.84, 12.35),
        ("530B", 20480, 128, 105, 8, 35, 3, 1, 114.02, 23.08),
        ("1T", 25600, 160, 128, 8, 64, 1, 1, 131.25, 26.56)]
# Fig. 7: activation memory as % of the TP-only baseline: SP, selective, both, full recompute
FIG7 = {"22B": (66.84, 49.42, 16.18, 7.64), "175B": (62.04, 56.53, 18.49, 8.71),
        "530B": (58.31, 62.04, 20.27, 9.42), "1T": (58.31, 62.04, 20.27, 9.42)}


def activations(row, **changes) -> float:
    _, h, a, layers, t, p, v, mbs, *_ = row
    layout = Layout(tp=t, pp=p, vpp=v, micro_batch_size=mbs, num_microbatches=64,
                    flash_attention=False, **changes)
    shape = Shape(layers, h, a, a, 4 * h, 51200, 2048)
    return stage_memory(shape, layout, 80, layers / p, p, first=True, last=False).activations / GIB


@pytest.mark.parametrize("row", FIG1, ids=[r[0] for r in FIG1])
def test_korthikanti_fig1_activations(row) -> None:
    tp_only, both = row[-2], row[-1]
    assert activations(row) == pytest.approx(tp_only, rel=0.01)
    assert activations(row, sequence_parallel=True, recompute="selective") == pytest.approx(both, rel=0.01)


@pytest.mark.parametrize("row", FIG1, ids=[r[0] for r in FIG1])
def test_korthikanti_fig7_percentages(row) -> None:
    base = activations(row)
    got = (activations(row, sequence_parallel=True), activations(row, recompute="selective"),
           activations(row, sequence_parallel=True, recompute="selective"), activations(row, recompute="full"))
    for value, published in zip(got, FIG7[row[0]], strict=True):
        assert 100 * value / base == pytest.approx(published, abs=0.2)


def test_zero_paper_fig1() -> None:
    """7.5B parameters on 64 data-parallel GPUs: 120, 31.4, 16.6, 1.9 GB per GPU."""
    psi = 7.5e9
    got = [sum(state_bytes_per_param("bf16", f"zero{s}", 64)) * psi / 1e9 for s in range(4)]
    assert [round(g, 1) for g in got] == [120.0, 31.4, 16.6, 1.9]


@pytest.mark.parametrize(("precision", "plain", "distributed"),
                         [("fp16", 20, (4, 16)), ("bf16", 18, (6, 12)), ("fp32", 16, (8, 8))])
def test_megatron_distributed_optimizer_bytes(precision: str, plain: int, distributed: tuple) -> None:
    for d in (1, 8, 64):
        assert sum(state_bytes_per_param(precision, "none", d)) == plain
        assert sum(state_bytes_per_param(precision, "distributed_optimizer", d)) == \
            pytest.approx(distributed[0] + distributed[1] / d)


def test_deepspeed_estimators() -> None:
    """t5-3b (2851M parameters, largest layer 32M) on 8 GPUs: ZeRO-2 11.28 GiB, ZeRO-3 6.09 GiB."""
    assert deepspeed_estimator_bytes(2851_000_000, 8, 2) / GIB == pytest.approx(11.28, abs=0.01)
    assert deepspeed_estimator_bytes(2851_000_000, 8, 3, 32_000_000) / GIB == pytest.approx(6.09, abs=0.01)


# Korthikanti Table 5: the MFU and HFU the paper reports for its present-work iteration times
TABLE5_UTILIZATION = {"22B": (41.5, 43.7), "175B": (51.4, 52.8), "530B": (56.0, 57.0), "1T": (56.3, 57.0)}


@pytest.mark.parametrize("name", TABLE5_UTILIZATION)
def test_korthikanti_table5_mfu_hfu(name) -> None:
    from generator.estimate.calibration import KORTHIKANTI_TABLE5

    (_, h, a, layers, *_, gpus, batch, _, seconds), = [r for r in KORTHIKANTI_TABLE5 if r[0] == name]
    mfu, hfu = TABLE5_UTILIZATION[name]
    model, hardware = step_flops(Shape(layers, h, a, a, 4 * h, 51200, 2048), batch, "selective")
    assert 100 * model / seconds / gpus / 312e12 == pytest.approx(mfu, abs=0.5)
    assert 100 * hardware / seconds / gpus / 312e12 == pytest.approx(hfu, abs=0.5)


# Korthikanti et al. 2022, Table 4: one transformer layer of the 22B model (t 8, micro batch 4,
# seq 2048, A100), forward + backward in ms, by (recompute, sequence parallelism)
KORTHIKANTI_TABLE4_MS = {("none", False): 19.6, ("none", True): 19.0, ("full", False): 27.2,
                         ("selective", False): 20.9, ("selective", True): 20.3}


def test_one_layers_time_by_recompute_and_sequence_parallelism_is_korthikantis_table4() -> None:
    """Not fitted (the step times of Table 5 are): the model's time for one layer of the 22B — its
    GEMMs, memory-bound work and tensor-parallel collectives per micro-batch over the 48 layers,
    without the logits (vocabulary 0) — lies within 10% of Table 4's, and what recompute and
    sequence parallelism cost or save against the plain layer within 4 points of the measured
    ratios (full recompute 1.39, selective 1.07, sequence parallelism 0.97, both 1.04)."""
    from generator.estimate.calibration import A100, _layout, generation_efficiency

    hw = replace(hardware_of(presets.gpus()[A100], "fp16", 8), efficiency=generation_efficiency(A100))
    shape = replace(sc21_shape(64, 6144, 48), vocab_size=0)
    layer_ms = {}
    for (recompute, sequence_parallel), published in KORTHIKANTI_TABLE4_MS.items():
        layout = _layout(8, 1, 1, 8, 4, 4, recompute=recompute, sequence_parallel=sequence_parallel)
        p = estimate_performance(shape, layout, hw, 4)
        layer_ms[recompute, sequence_parallel] = ms = (p.compute_s + p.memory_s + p.tp_comm_s) / 48 * 1e3
        assert ms == pytest.approx(published, rel=0.10), (recompute, sequence_parallel, ms)
    plain, published_plain = layer_ms["none", False], KORTHIKANTI_TABLE4_MS["none", False]
    for key, ms in layer_ms.items():
        assert ms / plain == pytest.approx(KORTHIKANTI_TABLE4_MS[key] / published_plain, abs=0.04), key


SC21_ITERATION = [3.5, 3.7, 3.7, 9.4, 14.5, 16.1, 24.8, 37.6, 54.1, 102.6]


def test_sc21_table1_iteration_times() -> None:
    from generator.estimate.calibration import SC21_TABLE1

    for row, published in zip(SC21_TABLE1, SC21_ITERATION, strict=True):
        _, heads, hidden, layers, _, _, gpus, batch, _, _, tflops = row
        _, hardware = step_flops(sc21_shape(heads, hidden, layers), batch, "full")
        assert iteration_time(hardware, gpus, tflops) == pytest.approx(published, rel=0.03)


@pytest.mark.parametrize(("gpus", "seconds", "tflops"), [(2240, 60.1, 126), (2800, 50.2, 121), (3360, 44.4, 113)])
def test_mt_nlg_throughput_from_iteration_time(gpus: int, seconds: float, tflops: float) -> None:
    shape = Shape(105, 20480, 128, 128, 4 * 20480, 50272, 2048)
    _, hardware = step_flops(shape, 1920, "full")
    assert hardware / seconds / gpus / 1e12 == pytest.approx(tflops, rel=0.01)


# every published run's leave-one-out throughput error, with its tolerance: the fitted A100 runs
# within 11% each (median 5%); checked, not fitted: Korthikanti's full-recompute column and 530B
# run on 2240 GPUs within 12% (the model is slowest on the largest models, both columns alike),
# MT-NLG (DeepSpeed's pipeline engine) 10-25% fast, the FSDP Llama-2-7B run (the one FSDP data
# point) within 10%
CHECKED_A100 = {"Korthikanti 22B full recompute on 8": (-0.05, 0.05),
                "Korthikanti 175B full recompute on 64": (-0.08, 0.0),
                "Korthikanti 530B full recompute on 280": (-0.12, -0.05),
                "Korthikanti 1T full recompute on 512": (-0.14, -0.08),
                "Korthikanti 530B on 2240": (-0.06, 0.0),
                "MT-NLG 530B on 2240": (0.10, 0.25), "MT-NLG 530B on 2800": (0.10, 0.25),
                "MT-NLG 530B on 3360": (0.10, 0.25), "Llama-2-7B FSDP on 128": (-0.10, 0.10)}


def test_published_runs_are_predicted_from_the_others_within_their_tolerance() -> None:
    from generator.estimate.calibration import leave_one_out, median_abs_error

    rows = leave_one_out()
    fitted = [r for r in rows if r.run.fitted]
    assert len(fitted) == 14 and len(rows) == 23
    for row in fitted:
        assert abs(row.error) <= 0.11, (row.run.name, row.error)
    assert median_abs_error(fitted) <= 0.05
    checked = {r.run.name: r.error for r in rows if not r.run.fitted}
    assert sorted(checked) == sorted(CHECKED_A100)
    for name, error in checked.items():
        low, high = CHECKED_A100[name]
        assert low <= error <= high, (name, error)


def test_runs_not_used_for_calibration_are_within_the_issues_bounds_on_every_generation() -> None:
    """Issue 17's measure: on every GPU generation with published runs, the runs checked and not
    fitted (their generation's efficiency and the FP8 constant come from other runs) are
    predicted within 10% at the median and 25% at worst."""
    from generator.estimate.calibration import generations, leave_one_out, median_abs_error

    for generation in generations():
        checked = [r for r in leave_one_out(generation) if not r.run.fitted]
        assert len(checked) >= 3, generation
        assert median_abs_error(checked) <= 0.10, generation
        assert max(abs(r.error) for r in checked) <= 0.25, generation


def test_korthikanti_full_recompute_column_and_data_parallel_run_are_the_papers() -> None:
    """Table 5's full-recompute times against the present-work ones give the throughput increase
    the table prints beside them (29.0, 31.8, 29.7, 32.1%); §6.3's 530B run on 2240 GPUs (8 data-
    parallel replicas, the batch 8 × 280) gives the 54.2% MFU the paper (and its abstract) states."""
    from generator.estimate.calibration import (
        KORTHIKANTI_530B_DP8,
        KORTHIKANTI_FULL_RECOMPUTE,
        KORTHIKANTI_TABLE5,
        runs,
    )

    increase = {"22B": 29.0, "175B": 31.8, "530B": 29.7, "1T": 32.1}
    for name, *_, seconds in KORTHIKANTI_TABLE5:
        assert 100 * (KORTHIKANTI_FULL_RECOMPUTE[name] / seconds - 1) == pytest.approx(increase[name], abs=0.1)
    (run,) = [r for r in runs() if r.name == "Korthikanti 530B on 2240"]
    assert (run.gpus, run.step_time_s, run.global_batch, run.layout.dp) == (*KORTHIKANTI_530B_DP8, 2240, 8)
    model, _ = step_flops(run.shape, run.global_batch, "selective")
    assert 100 * model / run.step_time_s / run.gpus / 312e12 == pytest.approx(54.2, abs=0.1)
    assert not run.layout.overlap_grad_reduce


def test_sc21_rows_reduce_gradients_as_their_scripts_data_parallel_implementation_does() -> None:
    """run_table_1.sh: DDP=torch (overlapped with the backward pass) for 1.7B-18.4B, DDP=local
    (after it) from 39.1B on; MT-NLG's pipeline engine reduces after the last micro-batch."""
    from generator.estimate.calibration import runs

    overlapped = {r.name: r.layout.overlap_grad_reduce for r in runs() if r.name.startswith(("SC21", "MT-NLG"))}
    assert [name for name, on in overlapped.items() if on] == \
        ["SC21 1.7B on 32", "SC21 3.6B on 64", "SC21 7.5B on 128", "SC21 18.4B on 256"]


def test_the_fsdp_run_is_the_blogs_throughput_and_model() -> None:
    """The FSDP row is the blog's 3,700 tokens/s per GPU on 128 A100s with the Llama-2-7B built
    (6.74B parameters, as meta-llama/Llama-2-7b-hf), no recompute (its MFU equals its HFU)."""
    from generator.estimate.calibration import runs

    (run,) = [r for r in runs() if "FSDP" in r.name]
    tokens = run.global_batch * run.shape.seq_length
    assert tokens / run.step_time_s / run.gpus == pytest.approx(3700)
    assert count_params(run.shape).total == 6738415616
    assert (run.layout.framework, run.layout.sharding, run.layout.recompute) == ("fsdp", "zero3", "none")


def test_every_published_run_fits_the_gpu_it_ran_on() -> None:
    """Runs that ran are never reported as not fitting: each published run's layout (SC21's
    fp16 runs without a sharded optimizer, Korthikanti's, MT-NLG's ZeRO-1, both Nemotron-4
    models' distributed optimizer without recompute) fits its GPU's memory by the estimate."""
    from generator.estimate.calibration import runs

    for run in runs():
        capacity = presets.gpus()[run.gpu]["memory_gib"]
        memory = estimate_memory(run.shape, run.layout, capacity)
        assert memory.fits, (run.name, memory.total / GIB, capacity)


def test_nemotron4_340b_rows_are_the_reports_model_and_layout() -> None:
    """The Nemotron-4 340B report's Table 2 (H100, t 8 × p 12): the model built is 341.0B
    parameters (9.4B embedding + 331.6B, as the report counts them), each row's dp is GPUs / 96."""
    from generator.estimate.calibration import H100, NEMOTRON4_340B, leave_one_out

    rows = [r for r in leave_one_out(H100) if "340B" in r.run.name]
    assert [r.run.layout.dp for r in rows] == [dp for dp, *_ in NEMOTRON4_340B]
    params = count_params(rows[0].run.shape)
    assert params.total / 1e9 == pytest.approx(341.0, abs=0.1)
    assert params.embedding * 2 / 1e9 == pytest.approx(9.4, abs=0.05)


# Nemotron-4 15B report, Table 2: the MFU column beside the iteration times (989 TFLOP/s peak)
NEMOTRON4_15B_MFU = [34.3, 33.3, 30.5]


def test_nemotron4_15b_rows_are_the_reports_model_layout_and_mfu() -> None:
    """The 15B report's Table 2 rows: the model built is 15.6B parameters (3.2B embedding +
    12.5B non-embedding, as the report counts them), dp = GPUs / 8, and each row's iteration time
    gives the MFU the report prints beside it (to the rounding of a two-digit time)."""
    from generator.estimate.calibration import H100, NEMOTRON4_15B, leave_one_out

    rows = [r for r in leave_one_out(H100) if "15B" in r.run.name]
    assert [r.run.layout.dp for r in rows] == [dp for dp, *_ in NEMOTRON4_15B]
    params = count_params(rows[0].run.shape)
    assert params.embedding * 2 / 1e9 == pytest.approx(3.15, abs=0.01)
    assert (params.total - params.embedding * 2) / 1e9 == pytest.approx(12.5, abs=0.05)
    for row, mfu in zip(rows, NEMOTRON4_15B_MFU, strict=True):
        model, _ = step_flops(row.run.shape, row.run.global_batch, "none")
        assert 100 * model / row.run.step_time_s / row.run.gpus / 989e12 == pytest.approx(mfu, abs=0.5)


def test_h100_runs_are_predicted_from_the_others_within_their_tolerance() -> None:
    """Three models fit the H100's efficiency (both Nemotron-4 reports and Fujii et al.'s bf16
    Llama-3-70B): each of the seven runs predicted with the constant fitted on the other six
    within 17% (the largest, the Llama-3-70B run, +16%: selective recompute reruns only the flash
    forward, and the run is slower than that; the 15B on 288 nodes +6%: its slowdown there is not
    modelled); median 5%. The FP8 run is checked with the fit on all seven (it
    sets the FP8 GEMM efficiency, not this constant)."""
    from generator.estimate.calibration import H100, leave_one_out, median_abs_error

    rows = leave_one_out(H100)
    fitted = [r for r in rows if r.run.fitted]
    assert len(fitted) == 7 and [r.run.name for r in rows if not r.run.fitted][0] == "Llama-3-70B fp8 on 64"
    for row in rows:
        assert abs(row.error) <= 0.17, (row.run.name, row.error)
    assert median_abs_error(fitted) <= 0.055


def test_mlperf_runs_the_model_has_not_seen_are_within_their_tolerance() -> None:
    """MLPerf Training's FP8 runs on H100, H200 and B200 are checked, not fitted: their
    generations' efficiency and the FP8 constant come from other runs. v5.0's Llama 3.1 405B on
    NVIDIA's H100s (512 to 8192 GPUs) within 5% each (median under 2%); v4.1's GPT-3 175B on
    NVIDIA's and Oracle's H100s (256 to 3072 GPUs) within 10%; Nebius's two H200 405B runs (t 4)
    are faster than predicted, by 9-12% (the model gives H200 only its memory bandwidth over H100,
    and these runs also use t 4 where the H100 ones use t 8: which of the two it misses, the data
    cannot tell);
    on B200, the generation GB200's 405B runs fit, NVIDIA's GPT-3 run (a second model) and the
    University of Florida's two 405B runs (v5.1: HGX B200 nodes of 8, current scaling) within 5%.
    Over the eleven H100 and H200 runs the median error is under 5% and the largest under 12%."""
    from generator.estimate.calibration import GB200, H100, leave_one_out, median_abs_error

    rows = [r for r in leave_one_out(H100) if r.run.name.startswith("MLPerf")]
    assert len(rows) == 11 and not any(r.run.fitted for r in rows)
    for row in rows:
        if row.run.gpu == "h200-141gb":
            low, high = -0.12, -0.09
        else:
            low, high = (-0.05, 0.05) if "405B" in row.run.name else (-0.10, 0.10)
        assert low <= row.error <= high, (row.run.name, row.error)
    assert sorted(abs(r.error) for r in rows if "405B" in r.run.name and r.run.gpu == "h100-80gb")[2] <= 0.02
    assert median_abs_error(rows) <= 0.05
    b200 = [r for r in leave_one_out(GB200) if not r.run.fitted]
    assert len(b200) == 3 and all(r.run.gpu == "b200" for r in b200)
    for row in b200:
        assert abs(row.error) <= 0.05, (row.run.name, row.error)


# MINIBS of each v4.1 GPT-3 config_DGX<system>_<nodes>x8x<minibs>x4x8_mbs2….sh
MLPERF_GPT3_MINIBS = {"b200_n8_preview": 1024, "eos_n32": 256, "eos_n64": 128, "1536xBM.GPU.H100.8": 64,
                      "3072xBM.GPU.H100.8": 32}


def test_mlperf_gpt3_rows_are_the_submissions_layouts_and_model() -> None:
    """The GPT-3 rows: t 4 × p 8 with dp = GPUs / 32, the global batch MINIBS × dp in micro-batches
    of 2, FP8 without recompute; the model built is GPT-3 175B (174.6B parameters with tied
    embeddings and learned positions, the vocabulary padded to a multiple of 128 × t)."""
    from generator.estimate.calibration import MLPERF_V41_GPT3, runs

    rows = [r for r in runs() if r.name.startswith("MLPerf GPT-3")]
    assert len(rows) == len(MLPERF_V41_GPT3) == len(MLPERF_GPT3_MINIBS)
    for run, (system, *_) in zip(rows, MLPERF_V41_GPT3, strict=True):
        layout = run.layout
        assert (layout.tp, layout.pp, layout.dp) == (4, 8, run.gpus // 32)
        assert run.global_batch == MLPERF_GPT3_MINIBS[system.split()[-1]] * layout.dp
        assert layout.micro_batch_size * layout.num_microbatches * layout.dp == run.global_batch
        assert (layout.precision, layout.recompute, run.shape.vocab_size) == ("fp8", "none", 50688)
    assert count_params(rows[0].shape).total / 1e9 == pytest.approx(174.6, abs=0.05)


# the MINIBS (global batch / dp) of each submission's config_<system>_<nodes>x<gpus>x<minibs>x….sh
MLPERF_MINIBS = {"eos-dfw_n64": 288, "eos-dfw_n256": 72, "eos-dfw_n304": 64, "eos-dfw_n320": 56,
                 "eos-dfw_n1024": 24, "8xH200_n64": 144, "8xH200_n128": 72, "tyche_ngpu256": 112,
                 "tyche_ngpu512": 112, "carina_ngpu512": 112, "carina_ngpu1024": 48, "carina_ngpu1536": 48,
                 "carina_ngpu2048": 40, "carina_ngpu2496": 32, "hpg.dgxb200x8.n32": 144,
                 "hpg.dgxb200x8.n56": 144}


def test_mlperf_rows_are_the_submissions_layouts_and_model() -> None:
    """Each MLPerf row's layout is its submission's config: GPUs = nodes × GPUs a node (the
    system's name), dp = GPUs / (t × p × cp), the global batch MINIBS × dp; the model built is
    Llama 3.1 405B (405.85B parameters with the unpadded vocabulary), with the embedding and the
    loss counted in the pipeline split: 15 layers on the first and the last of 8 stages."""
    from generator.estimate.calibration import MLPERF_LLAMA31_405B, llama31_405b_shape, runs

    rows = [r for r in runs() if r.name.startswith("MLPerf 405B")]
    assert len(rows) == len(MLPERF_LLAMA31_405B) == len(MLPERF_MINIBS)
    for run, (_round, system, *_, batch, _seconds, recipe) in zip(rows, MLPERF_LLAMA31_405B, strict=True):
        layout, name = run.layout, system.split()[-1]
        nodes = int(re.search(r"n(?:gpu)?(\d+)$", name).group(1))  # ngpuN counts GPUs, nN nodes
        assert run.gpus == (nodes if "ngpu" in name else nodes * run.gpus_per_node)
        assert layout.dp == run.gpus // (layout.tp * layout.pp * layout.cp)
        assert batch == run.global_batch == MLPERF_MINIBS[name] * layout.dp
        assert layout.num_microbatches * layout.dp == batch and layout.micro_batch_size == 1
        assert (layout.precision, layout.fp8_recipe, layout.recompute) == ("fp8", recipe, "none")
        assert layout.stage_layers(126) == (15, 16, 15)
        assert run.shape.vocab_size == -(-128256 // (128 * layout.tp)) * 128 * layout.tp  # padded
    assert count_params(llama31_405b_shape(8192)).total / 1e9 == pytest.approx(405.85, abs=0.01)


def test_gb200_runs_are_predicted_from_the_others_within_their_tolerance() -> None:
    """Seven GB200 runs of two clusters (256 to 2496 GPUs) fit the B200/GB200 generation's
    efficiency: each predicted with the constant fitted on the other six within 2.5% (median
    about 1%; their data-parallel groups of up to 64 ranks on NVLink, the racks filled in
    segments). They all train one model, so the band the presets report is the widest of the
    generations fitted on several models (the H100's), not their 3%."""
    from generator.estimate.calibration import (
        GB200,
        H100,
        band,
        leave_one_out,
        median_abs_error,
        models,
        uncertainty,
    )

    rows = [r for r in leave_one_out(GB200) if r.run.fitted]
    assert len(rows) == 7
    for row in rows:
        assert abs(row.error) <= 0.025, (row.run.name, row.error)
    assert median_abs_error(rows) <= 0.012
    assert models(rows) == 1 and band(rows) == 0.03
    assert uncertainty(GB200) == band(leave_one_out(H100)) == 0.17


# Megatron-LM's own FLOPs per step as the authors' fork computed them (okoge-kaz/Megatron-LM,
# megatron/training/training.py num_floating_point_operations, the figure --log-throughput
# prints): 12·B·s·L·h²·((1 + g/a + s/h)·(a·d/h) + (f/h)·k·(3/2 with SwiGLU) + V/(2·L·h)), full
# (non-causal) attention as in step_flops (later Megatron-LM releases halve the attention core
# for the causal mask); here a·d = h, k = 1
def _megatron_flops(batch: int, s: int, layers: int, h: int, heads: int, groups: int, ffn: int,
                    vocab: int) -> float:
    return 12 * batch * s * layers * h * h * ((1 + groups / heads + s / h) + ffn / h * 1.5
                                              + vocab / (2 * layers * h))


def test_the_llama3_70b_pair_is_the_papers_throughput_and_the_scripts_layout() -> None:
    """Fujii et al. 2024's Llama-3-70B runs: the published TFLOP/s/GPU are Megatron-LM's model
    FLOPs (the same count as step_flops, computed here Megatron's way), the scripts' layout
    (t 4, p 8 on 64 H100s in 4-GPU nodes: dp 2, 512 micro-batches of 1), the model built
    70.6B parameters, and the layout fits an 80 GB H100."""
    from generator.estimate.calibration import FUJII_LLAMA3_70B, fp8_pair

    bf16, fp8 = fp8_pair()
    megatron = _megatron_flops(1024, 8192, 80, 8192, 64, 8, 28672, 128512)
    for run, precision in ((bf16, "bf16"), (fp8, "fp8")):
        assert step_flops(run.shape, 1024, "selective")[0] == pytest.approx(megatron, rel=1e-9)
        assert megatron / run.step_time_s / 64 / 1e12 == pytest.approx(FUJII_LLAMA3_70B[precision])
        layout = run.layout
        assert (layout.tp, layout.pp, layout.dp, layout.micro_batch_size, layout.num_microbatches) == \
            (4, 8, 2, 1, 512)
        assert (layout.precision, layout.fp8_recipe, run.gpus_per_node) == (precision, "delayed", 4)
    assert count_params(bf16.shape).total / 1e9 == pytest.approx(70.6, abs=0.05)


def test_the_fp8_gemm_efficiency_is_fitted_on_the_published_pair() -> None:
    """performance.FP8_GEMM_EFFICIENCY is the fit on Fujii et al.'s bf16/FP8 pair (to 0.005),
    and with it the model predicts the pair's FP8 speed-up, 570/415 = 1.37×, within 1% — where
    the former fixed 1.4× GEMM gain predicted 1.28×. An H100's FP8 GEMMs then run 1.76× its bf16
    ones."""
    from generator.estimate.calibration import (
        H100,
        fit_efficiency,
        fit_fp8_gemm_efficiency,
        fp8_pair,
        predict,
        runs,
    )

    assert pytest.approx(fit_fp8_gemm_efficiency(), abs=0.005) == FP8_GEMM_EFFICIENCY
    efficiency = fit_efficiency([r for r in runs() if r.gpu == H100 and r.fitted])
    bf16, fp8 = fp8_pair()
    predicted = predict(bf16, efficiency) / predict(fp8, efficiency)
    assert predicted == pytest.approx(570 / 415, rel=0.01)
    assert fp8_gemm_speedup(Hardware(989, 0.62, 3.35, 450, 50, 8, 1979)) == pytest.approx(1.76, abs=0.01)


def test_megatron_readme_h100_runs_lie_within_the_models_figures_for_their_unstated_settings() -> None:
    """Megatron-LM's README table (r0.8.0, nine GPT models on 48-6144 H100s) does not state the
    micro batch or the interleaving: each published per-GPU TFLOP/s lies between the model's
    slowest and fastest figure over those settings (at the H100 preset's efficiency), the
    models built are the table's sizes, and at micro batch 1 without interleaving the model is
    never faster than the run (NVIDIA's tuned settings can only be as fast or faster). The
    brackets hold the H100 efficiency between 0.58 and 0.62 (0.57 or 0.63 fails a row)."""
    from generator.estimate.calibration import MEGATRON_README_H100, readme_brackets

    brackets = readme_brackets()
    assert len(brackets) == len(MEGATRON_README_H100) == 9
    for bracket, row in zip(brackets, MEGATRON_README_H100, strict=True):
        assert bracket.low[0] <= bracket.published_tflops <= bracket.high[0], bracket
        assert count_params(bracket.shape).total / 1e9 == pytest.approx(float(row[0][:-1]), rel=0.05)
    for bracket in brackets[:4]:  # no pipeline: micro batch 1 is the slowest
        assert bracket.low[1:] == (1, 1) and bracket.low[0] <= bracket.published_tflops


@pytest.mark.parametrize(("gpu", "same"), [("a100-80gb", ("a100-40gb", "a100-80gb")),
                                           ("h100-80gb", ("h100-80gb", "h100-nvl-94gb", "h200-141gb")),
                                           ("gb200", ("b200", "gb200", "b300", "gb300"))])
def test_the_presets_hold_each_generations_fit_and_its_band(gpu: str, same: tuple[str, ...]) -> None:
    """gpus.yaml's efficiency of a calibrated generation is the constant fitted on all its runs
    (to 0.005), its uncertainty the generation's band (calibration.uncertainty); presets without
    published runs of their generation have none."""
    from generator.estimate.calibration import fit_efficiency, runs, uncertainty

    fit = fit_efficiency([r for r in runs() if r.fitted and r.generation == gpu])
    for name in same:
        assert presets.gpus()[name]["efficiency"] == pytest.approx(fit, abs=0.005)
        assert presets.gpus()[name]["uncertainty"] == uncertainty(gpu)
    for name in ("mi300x", "mi325x", "gaudi3", "ascend-910b"):
        assert presets.gpus()[name].get("uncertainty") is None


def test_an_estimate_reports_its_band(tmp_path: Path) -> None:
    a100 = plan_of(tmp_path, spec_dict(cluster={"nodes": 2, "gpus_per_node": 8, "gpu": "a100-80gb"}), "a.yaml")
    h100 = plan_of(tmp_path, spec_dict(), "h.yaml")
    mi300x = plan_of(tmp_path, spec_dict(cluster={"nodes": 2, "gpus_per_node": 8, "gpu": "mi300x"}), "m.yaml")
    assert a100.estimate().to_json()["performance"]["uncertainty"] == 0.11
    assert h100.estimate().to_json()["performance"]["uncertainty"] == 0.17
    assert mi300x.estimate().to_json()["performance"]["uncertainty"] is None
    result = CliRunner().invoke(app, ["explain", str(tmp_path / "m.yaml")])
    assert "throughput uncertainty unknown: no published mi300x runs" in result.output
    result = CliRunner().invoke(app, ["explain", str(tmp_path / "a.yaml")])
    assert "throughput ±11%" in result.output
    result = CliRunner().invoke(app, ["explain", str(tmp_path / "h.yaml")])
    assert "throughput ±17%" in result.output
    b200 = plan_of(tmp_path, spec_dict(cluster={"nodes": 2, "gpus_per_node": 8, "gpu": "b200"}), "b.yaml")
    assert b200.estimate().to_json()["performance"]["uncertainty"] == 0.17  # GB200's runs: one model
    result = CliRunner().invoke(app, ["explain", str(tmp_path / "b.yaml")])
    assert "throughput ±17% (the calibration band of this GPU's generation" in result.output


def test_sc21_parameter_column() -> None:
    from generator.estimate.calibration import SC21_TABLE1

    for params_b, heads, hidden, layers, *_ in SC21_TABLE1:
        assert count_params(sc21_shape(heads, hidden, layers)).total / 1e9 == pytest.approx(params_b, abs=0.06)


# the released checkpoints' counts, independent of models.yaml (safetensors totals on the Hub)
RELEASED = {"llama2-7b": 6_738_415_616, "llama2-13b": 13_015_864_320, "llama2-70b": 68_976_648_192,
            "llama3-8b": 8_030_261_248, "llama3-70b": 70_553_706_496, "llama3.1-8b": 8_030_261_248,
            "llama3.1-70b": 70_553_706_496, "llama3.1-405b": 405_853_388_800,
            "llama3.2-1b": 1_235_814_400, "llama3.2-3b": 3_212_749_824, "mistral-7b": 7_241_732_096,
            "mixtral-8x7b": 46_702_792_704, "mixtral-8x22b": 140_620_634_112,
            "qwen2.5-7b": 7_615_616_512, "qwen2.5-14b": 14_770_033_664, "qwen2.5-32b": 32_763_876_352,
            "qwen2.5-72b": 72_706_203_648, "bloom-176b": 176_247_271_424, "gpt-neox-20b": 20_554_567_680,
            # the safetensors totals of the checkpoints (DeepSeek-V3: the report's 671B without MTP)
            "deepseek-v2-lite": 15_706_484_224, "qwen3-8b": 8_190_735_360, "qwen3-32b": 32_762_123_264,
            "qwen3-30b-a3b": 30_532_122_624, "qwen3-235b-a22b": 235_093_634_560,
            "gpt-oss-20b": 20_914_757_184, "gpt-oss-120b": 116_829_156_672}


@pytest.mark.parametrize("name", sorted(presets.models()))
def test_preset_parameter_counts_are_the_published_ones(name: str) -> None:
    """Every preset's count (vocabulary as released) is its release's, to the parameter; GPT-3
    (no checkpoint) within the paper's rounding and its d_model 5140 for 13B."""
    published = presets.models()[name]["published"]
    params = count_params(Shape.of(model_from({"preset": name})))
    assert params.vocab_padding == 0 and params.published == params.main
    if published.get("exact", True):
        assert params.main == published["params"] == RELEASED[name]
    else:
        assert params.main == pytest.approx(published["params"], rel=published.get("tolerance", 0.005))


def test_deepseek_v3_counts_its_mtp_layer_apart() -> None:
    """DeepSeek-V3 as Megatron builds it (the meta-device oracle gives the same figures): the
    main model's 671,026,404,352 parameters (the report's 671B) and one MTP layer of
    11,610,067,968 sharing the embedding and the output head (the report's 14B MTP module holds
    its own copies of those: 1,853,358,080 more)."""
    params = count_params(Shape.of(model_from({"preset": "deepseek-v3"})))
    assert params.main == 671_026_404_352
    assert params.mtp_layers == 1 and params.mtp == 11_610_067_968
    assert params.total == 682_636_472_320
    assert params.embedding + params.output == 1_853_358_080


@pytest.mark.parametrize(("name", "framework", "tp", "padded"), [
    ("llama3-8b", "megatron-lm", 8, 129024), ("llama3-8b", "megatron-lm", 1, 128256),
    ("gpt3-175b", "megatron-lm", 8, 51200), ("gpt3-175b", "megatron-lm", 1, 50304),
    ("qwen2.5-7b", "megatron-lm", 4, 152064), ("llama3-8b", "fsdp", 1, 128256)])
def test_the_estimate_counts_the_padded_vocabulary_megatron_builds(name, framework, tp, padded,
                                                                   tmp_path: Path) -> None:
    """Megatron rounds the vocabulary up to 128 × tp; the padding rows are parameters of the run
    (embedding and, untied, output layer), reported apart from the published count."""
    data = spec_dict(framework=framework, model={"preset": name, "num_layers": None, "hidden_size": None,
                                                 "num_attention_heads": None, "vocab_size": None,
                                                 "seq_length": None},
                     parallelism={"tp": tp, "pp": 1}, cluster={"allow_oversize": True})
    if framework == "fsdp":
        data["launch"] = {"launcher": "accelerate"}
    plan = plan_of(tmp_path, data)
    m = plan.model
    assert plan.padded_vocab_size == padded
    rows = (padded - m.vocab_size) * m.hidden_size * (1 if m.tie_embeddings else 2)
    assert plan.estimate().params == count_params(Shape.of(m)).total + rows
    assert plan.to_json()["model"]["padded_vocab_size"] == padded


PLAIN_SAMPLES = [s for s in SAMPLES if "sweep" not in load_spec(s).doc.data]  # a sweep explains as its index


@pytest.mark.parametrize("sample", PLAIN_SAMPLES, ids=[s.stem for s in PLAIN_SAMPLES])
def test_explain_shows_estimates_for_every_sample(sample: Path) -> None:
    text = runner.invoke(app, ["explain", str(sample)]).stdout
    assert "Memory per GPU" in text and "total" in text  # (the most loaded stage named with pp > 1)
    payload = json.loads(runner.invoke(app, ["explain", str(sample), "--format", "json"]).stdout)
    memory_keys = {"weights_gib", "gradients_gib", "optimizer_gib", "activations_gib", "other_gib",
                   "total_gib", "capacity_gib", "fits"}
    for plan in payload.get("stages", [payload]):  # a staged sample has one plan per stage
        assert memory_keys <= set(plan["memory"])
        if load_spec(sample).cluster.gpu != "cpu":
            assert ": fits" in text or "DOES NOT FIT" in text
            assert {"flops_per_step", "step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu",
                    "train_days", "gpu_hours"} <= set(plan["performance"])
            assert 0 < plan["performance"]["mfu"] < 1


def test_far_beyond_memory_is_refused_unless_allowed(tmp_path: Path) -> None:
    """GL024: GPT-3 175B on 8 A100s with tp 8 only is several times the GPU's memory; nothing is
    written unless cluster.allow_oversize says the run is known to fit."""
    data = spec_dict(cluster={"nodes": 1, "gpus_per_node": 8, "gpu": "a100-80gb"},
                     model={"preset": "gpt3-175b", "num_layers": None, "hidden_size": None,
                            "num_attention_heads": None, "vocab_size": None, "seq_length": None},
                     parallelism={"tp": 8, "pp": 1}, batch={"micro_batch_size": 1, "gradient_accumulation_steps": 8})
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(data))
    refused = runner.invoke(app, ["generate", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "a")])
    assert refused.exit_code == 2 and "GL024 estimated" in refused.stderr and not (tmp_path / "a").exists()
    assert "× the 80 GiB of the GPU; nothing written (cluster.allow_oversize: true writes it anyway)" in \
        refused.stderr
    assert "spec.yaml:" in refused.stderr.splitlines()[0]


def test_not_fitting_warns_and_strict_fails(tmp_path: Path) -> None:
    # GPT-3 175B on 8 A100s with tp 8 only: 175B / 8 × 18 bytes alone exceed 80 GiB
    data = spec_dict(cluster={"nodes": 1, "gpus_per_node": 8, "gpu": "a100-80gb", "allow_oversize": True},
                     model={"preset": "gpt3-175b", "num_layers": None, "hidden_size": None,
                            "num_attention_heads": None, "vocab_size": None, "seq_length": None},
                     parallelism={"tp": 8, "pp": 1}, batch={"micro_batch_size": 1, "gradient_accumulation_steps": 8})
    plan = plan_of(tmp_path, data)
    assert [w.code for w in plan.warnings] == ["GL020"]
    assert "exceeds the 80 GiB of the GPU; largest: " in plan.warnings[0].message
    assert "; try " in plan.warnings[0].message
    assert plan.estimate().memory.fits is False and plan.estimate().alternatives
    spec = tmp_path / "spec.yaml"
    lax = runner.invoke(app, ["generate", str(spec), "--out", str(tmp_path / "a")])
    assert lax.exit_code == 0 and "warning: " in lax.stderr and "GL020" in lax.stderr
    strict = runner.invoke(app, ["generate", str(spec), "--strict", "--out", str(tmp_path / "b")])
    assert strict.exit_code == 1 and not (tmp_path / "b").exists()


def test_fewer_microbatches_than_stages_hold_fewer() -> None:
    shape = Shape(32, 4096, 32, 32, 16384, 32000, 2048)
    full = estimate_memory(shape, Layout(pp=4, num_microbatches=8), 80).activations
    short = estimate_memory(shape, Layout(pp=4, num_microbatches=2), 80).activations
    assert short == pytest.approx(full / 2)


def test_zero3_and_distributed_optimizer_reduce_states() -> None:
    shape = Shape(32, 4096, 32, 32, 16384, 32000, 2048)
    plain = estimate_memory(shape, Layout(dp=8, framework="deepspeed", sharding="zero0"), 80)
    zero3 = estimate_memory(shape, Layout(dp=8, framework="deepspeed", sharding="zero3"), 80)
    assert zero3.optimizer == pytest.approx(plain.optimizer / 8)
    # beyond its shards, the layer it runs: 2 bytes of its parameters and 2 of its gradients
    layer = 12 * 4096**2 + 13 * 4096  # a GPT layer: QKV, projection, 4h MLP, their biases, two norms
    assert zero3.weights == pytest.approx(plain.weights / 8 + 2 * layer)
    assert zero3.gradients == pytest.approx(plain.gradients / 8 + 2 * layer)


def test_last_stage_can_be_the_most_loaded() -> None:
    """A 128k vocabulary: the last stage's output layer and fp32 logits outweigh the first."""
    shape = Shape(32, 4096, 32, 8, 14336, 128256, 8192, gated=True, rmsnorm=True, bias=False,
                  learned_positions=False, tie_embeddings=False)
    memory = estimate_memory(shape, Layout(pp=4, dp=1, micro_batch_size=4, num_microbatches=1,
                                           recompute="full"), 80)
    assert memory.stage == "last" and memory.logits > 0


def test_cpu_offload_moves_states_off_the_gpu(tmp_path: Path) -> None:
    data = spec_dict(framework="deepspeed", parallelism={"tp": 1, "pp": 1, "zero_stage": 3,
                                                          "zero_offload": "optimizer_and_params"},
                     batch={"micro_batch_size": 1, "gradient_accumulation_steps": 1})
    offloaded = plan_of(tmp_path, data).estimate().memory
    data["parallelism"]["zero_offload"] = "none"
    on_gpu = plan_of(tmp_path, data, "b.yaml").estimate().memory
    assert offloaded.optimizer == 0 and on_gpu.optimizer > 0
    assert offloaded.weights < on_gpu.weights  # (the unit it runs only, gathered from the CPU)
    assert offloaded.total < on_gpu.total


def _optimizer_gib(tmp_path: Path, name: str, **sections) -> float:
    plan = plan_of(tmp_path, spec_dict(**sections), f"{name}.yaml")
    return plan.estimate().memory.optimizer / 2**30


def test_the_distributed_optimizer_is_sharded_over_data_and_context_parallel_ranks(tmp_path: Path) -> None:
    """megatron-core shards the distributed optimizer over its data-parallel group with context
    parallelism (dp × cp ranks): moving ranks from dp to cp leaves each GPU's share unchanged,
    and without the distributed optimizer every rank keeps all of its parameters' state."""
    layout = {"tp": 2, "pp": 1, "distributed_optimizer": True}
    cluster = {"nodes": 2, "gpus_per_node": 8, "gpu": "h100-80gb"}  # 16 GPUs: dp 8, or dp 4 × cp 2
    dp_only = _optimizer_gib(tmp_path, "dp", cluster=cluster, parallelism={**layout, "cp": 1})
    with_cp = _optimizer_gib(tmp_path, "cp", cluster=cluster, parallelism={**layout, "cp": 2})
    assert with_cp == pytest.approx(dp_only)
    plain = _optimizer_gib(tmp_path, "plain", cluster=cluster,
                           parallelism={**layout, "cp": 2, "distributed_optimizer": False})
    assert plain == pytest.approx(8 * dp_only)


def test_expert_optimizer_state_is_sharded_over_the_expert_data_parallel_ranks(tmp_path: Path) -> None:
    """An MoE model's routed experts are replicated over the expert data-parallel ranks
    (world / (etp × ep × pp)), not the dense dp: with 64 GPUs, tp 2, ep 8, etp 1 the dense state
    is split 32 ways and the experts' 8 ways (megatron-core's expert data-parallel group)."""
    model = {"num_layers": 8, "hidden_size": 1024, "num_attention_heads": 16, "vocab_size": 32000,
             "seq_length": 2048, "num_experts": 8, "moe_top_k": 2, "ffn_hidden_size": 4096}
    plan = plan_of(tmp_path, spec_dict(
        model=model, cluster={"nodes": 8, "gpus_per_node": 8, "gpu": "h100-80gb"},
        parallelism={"tp": 2, "pp": 1, "ep": 8, "etp": 1, "distributed_optimizer": True},
        batch={"micro_batch_size": 1, "gradient_accumulation_steps": None, "global_batch_size": 64}))
    assert (plan.dp, plan.expert_dp) == (32, 8)
    from generator.estimate.plan import shape_of

    params = count_params(shape_of(plan))
    dense = (params.layers_tp + params.embedding + params.output + params.final_norm) / 2  # tp 2
    experts = params.layers_experts / 8
    assert plan.estimate().memory.optimizer == pytest.approx(12 * (dense / 32 + experts / 8), rel=0.02)


def test_the_experts_gradient_reduction_is_divided_by_expert_parallelism(tmp_path: Path) -> None:
    """Each GPU reduces only the experts it holds (1/ep of them) among its expert data-parallel
    ranks: more expert parallelism means less data-parallel traffic (before, layouts differing
    only in ep tied)."""
    model = {"num_layers": 8, "hidden_size": 2048, "num_attention_heads": 16, "vocab_size": 32000,
             "seq_length": 2048, "num_experts": 16, "moe_top_k": 2, "ffn_hidden_size": 8192}

    def dp_comm(ep: int) -> float:
        plan = plan_of(tmp_path, spec_dict(
            model=model, cluster={"nodes": 8, "gpus_per_node": 8, "gpu": "h100-80gb"},
            parallelism={"tp": 1, "pp": 1, "ep": ep, "distributed_optimizer": True},
            batch={"micro_batch_size": 1, "gradient_accumulation_steps": None, "global_batch_size": 64}),
            f"ep{ep}.yaml")
        return plan.estimate().performance.dp_comm_s

    assert dp_comm(8) < dp_comm(4) < dp_comm(2)


def test_a_stage_that_holds_the_embedding_or_loss_builds_one_layer_fewer(tmp_path: Path) -> None:
    """Llama-3.1-405B's 126 layers on pp 8 × vpp 8 with the embedding and the loss counted in the
    split (Megatron: 128 / 8 = 16 per stage): the first and the last stage hold 15 transformer
    layers, the others 16 — a legal layout, estimated as Megatron builds it."""
    from generator.estimate.plan import layout_of

    plan = plan_of(tmp_path, spec_dict(
        model={"preset": "llama3.1-405b", "num_layers": None, "hidden_size": None, "num_attention_heads": None,
               "vocab_size": None, "seq_length": None},
        cluster={"nodes": 128, "gpus_per_node": 8, "gpu": "h100-80gb", "allow_oversize": True},
        parallelism={"tp": 8, "pp": 8, "vpp": 8, "sequence_parallel": True, "distributed_optimizer": True,
                     "account_for_embedding_in_pipeline_split": True, "account_for_loss_in_pipeline_split": True},
        batch={"micro_batch_size": 1, "gradient_accumulation_steps": None, "global_batch_size": 2048}))
    assert layout_of(plan).stage_layers(126) == (15, 16, 15)


def test_bf16_optimizer_states_and_main_grads_are_counted_in_two_bytes(tmp_path: Path) -> None:
    """NeMo's 340B recipe keeps the moments and the main gradients in bf16 (Megatron's
    precision-aware optimizer): 2 bytes each instead of 4, the fp32 master weights kept, so the
    distributed optimizer's 12/d becomes 8/d and the gradients 4 → 2."""
    base = {"parallelism": {"tp": 2, "pp": 1, "distributed_optimizer": True}}

    def memory(**training):
        name = "-".join(f"{k}{v}" for k, v in training.items()) or "fp32"
        return plan_of(tmp_path, spec_dict(**base, training=training), f"{name}.yaml").estimate().memory

    plain, states, both = memory(), memory(optimizer_states="bf16"), \
        memory(optimizer_states="bf16", main_grads="bf16")
    assert states.optimizer == pytest.approx(plain.optimizer * 8 / 12)
    assert both.gradients == pytest.approx(plain.gradients / 2) and states.gradients == plain.gradients
    assert state_bytes_per_param("bf16", "distributed_optimizer", 8, "bf16", "bf16") == (2.0, 2.0, 1.0)


def test_moe_dispatch_is_an_all_to_all_among_the_expert_parallel_ranks(tmp_path: Path) -> None:
    """Each MoE layer sends every token's hidden state to its top-k experts and back, forward and
    backward: b·s/cp (÷ tp with sequence parallelism) × k × h × 2 bytes × (ep−1)/ep, four times,
    per MoE layer and micro-batch; none for a dense model or without expert parallelism, more with
    a larger top-k, and slower once etp × ep leaves the node."""
    from generator.estimate.performance import Hardware, moe_dispatch_seconds
    from generator.estimate.plan import layout_of, shape_of

    model = {"num_layers": 8, "hidden_size": 2048, "num_attention_heads": 16, "vocab_size": 32000,
             "seq_length": 4096, "num_experts": 16, "moe_top_k": 2, "ffn_hidden_size": 8192}
    plan = plan_of(tmp_path, spec_dict(
        model=model, cluster={"nodes": 4, "gpus_per_node": 8, "gpu": "h100-80gb"},
        parallelism={"tp": 1, "pp": 1, "ep": 8, "distributed_optimizer": True},
        batch={"micro_batch_size": 1, "gradient_accumulation_steps": None, "global_batch_size": 32}))
    shape, layout = shape_of(plan), layout_of(plan)
    hw = Hardware(989, 0.6, 3.35, 450, 50, 8)
    expected = 4 * 2 * 4096 * 2 * 2048 * 7 / 8 * 8 / 450e9
    assert moe_dispatch_seconds(shape, layout, hw) == pytest.approx(expected)
    assert moe_dispatch_seconds(replace(shape, top_k=4), layout, hw) == pytest.approx(2 * expected)
    assert moe_dispatch_seconds(shape, replace(layout, ep=1), hw) == 0.0
    # the expert-parallel group is etp × ep ranks wide: 16 leave the node of 8
    assert moe_dispatch_seconds(shape, replace(layout, etp=2), hw) == pytest.approx(expected * 450 / 50)
    assert moe_dispatch_seconds(shape, replace(layout, tp=2), hw) == pytest.approx(expected)
    assert plan.estimate().performance.moe_comm_s == pytest.approx(expected * plan.gradient_accumulation_steps)
    # the all-gather dispatcher gathers all b·s tokens of the etp × ep group (and reduce-scatters
    # back): ep / top-k = 4 times the all-to-all's volume here, whatever the top-k
    assert layout.moe_dispatcher == "alltoall"
    gathered = replace(layout, moe_dispatcher="allgather")
    assert moe_dispatch_seconds(shape, gathered, hw) == pytest.approx(4 * expected)
    assert moe_dispatch_seconds(replace(shape, top_k=4), gathered, hw) == pytest.approx(4 * expected)
    chosen = plan_of(tmp_path, spec_dict(
        model={**model, "moe_token_dispatcher": "allgather"}, cluster={"nodes": 4, "gpus_per_node": 8, "gpu": "h100-80gb"},
        parallelism={"tp": 1, "pp": 1, "ep": 8, "distributed_optimizer": True},
        batch={"micro_batch_size": 1, "gradient_accumulation_steps": None, "global_batch_size": 32}), "ag.yaml")
    assert layout_of(chosen).moe_dispatcher == "allgather"
    assert chosen.estimate().performance.moe_comm_s == pytest.approx(4 * expected * plan.gradient_accumulation_steps)


def test_the_flex_dispatcher_sends_a_token_once_per_rank_and_once_per_node() -> None:
    """DeepEP (flex) sends a token once to each rank holding any of its experts, and across
    nodes once to each node, over the inter-node link (NVLink forwards it there). Qwen3-235B's
    routing (128 experts, top 8) over ep 32 on 4 nodes: of the 8 copies an all-to-all sends
    (7.75 leaving the rank), the token reaches 3.6 nodes on average, 2.72 of them remote
    (4 · (1 − C(96,8)/C(128,8)) · 3/4), so 0.35 of the all-to-all's inter-node volume; with one
    expert per rank (Mixtral's 8 over ep 8) there is nothing to share and flex moves what the
    all-to-all does."""
    from math import comb

    from generator.estimate.performance import Hardware, groups_holding, moe_dispatch_seconds

    hw = Hardware(989, 0.6, 3.35, 450, 50, 8)
    shape = Shape(94, 4096, 64, 4, 12288, 151936, 4096, gated=True, num_experts=128, top_k=8, kv_channels=128,
                  moe_ffn_hidden_size=1536)
    remote = 4 * (1 - comb(96, 8) / comb(128, 8)) * 3 / 4
    assert groups_holding(4, 128, 8) * 3 / 4 == pytest.approx(remote) and remote == pytest.approx(2.72, abs=0.005)
    across = Layout(tp=2, pp=8, ep=32, dp=16, sequence_parallel=True)  # ep 32: 4 nodes
    alltoall, flex = (moe_dispatch_seconds(shape, replace(across, moe_dispatcher=d), hw) for d in ("alltoall", "flex"))
    assert flex / alltoall == pytest.approx(remote / (8 * 31 / 32))
    inside = replace(across, ep=8, dp=4, pp=32)  # one node: NVLink, one copy per rank
    alltoall, flex = (moe_dispatch_seconds(shape, replace(inside, moe_dispatcher=d), hw) for d in ("alltoall", "flex"))
    assert flex / alltoall == pytest.approx(groups_holding(8, 128, 8) * 7 / 8 / (8 * 7 / 8)) and flex < alltoall
    mixtral = Shape(32, 4096, 32, 8, 14336, 32000, 4096, gated=True, num_experts=8, top_k=2)
    one_each = Layout(tp=1, ep=8, dp=8)
    assert groups_holding(8, 8, 2) == pytest.approx(2.0)
    assert moe_dispatch_seconds(mixtral, replace(one_each, moe_dispatcher="flex"), hw) == \
        pytest.approx(moe_dispatch_seconds(mixtral, one_each, hw))


def test_moe_tokens_are_reordered_for_their_experts_at_hbm_bandwidth(tmp_path: Path) -> None:
    """megatron-core's all-to-all dispatcher permutes a token into its top-k copies (k rows read,
    k written), sorts the received copies by local expert and back (4k, where a rank holds more
    than one expert) and unpermutes (k read, 1 written): 57 rows of h for Qwen3-235B's top 8 of
    128 over ep 8, 25 where each rank holds one expert (and for the all-gather dispatcher);
    DeepEP expands the rows arriving from the ranks a token reaches (2 × (ranks + k)). Forward
    and backward (and a recompute forward) at HBM bandwidth; nothing in a dense model. For the
    fine-grained MoE it is about a quarter of the experts' GEMM time, for Mixtral's two wide
    experts a few percent."""
    from generator.estimate.performance import (
        HBM_EFFICIENCY,
        Hardware,
        estimate_performance,
        groups_holding,
        memory_bound_seconds,
        moe_permute_rows,
        moe_permute_seconds,
    )

    hw = Hardware(989, 0.62, 3.35, 450, 50, 8)
    qwen = Shape(94, 4096, 64, 4, 12288, 151936, 4096, gated=True, num_experts=128, top_k=8, kv_channels=128,
                 moe_ffn_hidden_size=1536)
    layout = Layout(tp=1, pp=1, ep=8, dp=8)
    assert moe_permute_rows(qwen, layout) == 57
    assert moe_permute_rows(qwen, replace(layout, moe_dispatcher="allgather")) == 25
    assert moe_permute_rows(qwen, replace(layout, moe_dispatcher="flex")) == \
        pytest.approx(2 * (groups_holding(8, 128, 8) + 8))
    assert moe_permute_rows(replace(qwen, num_experts=8, top_k=2), layout) == 2 * 2 + 2 + 1  # one expert a rank
    seconds = 2 * 57 * 2 * 4096 * 4096 * 94 / (3.35e12 * HBM_EFFICIENCY)  # fwd + bwd, 4096 tokens
    assert moe_permute_seconds(qwen, layout, hw) == pytest.approx(seconds)
    assert moe_permute_seconds(qwen, replace(layout, recompute="full"), hw) == pytest.approx(seconds * 3 / 2)
    assert moe_permute_seconds(replace(qwen, num_experts=None), layout, hw) == 0
    experts_gemm = 3 * 2 * 3 * 4096 * 1536 * 8 * 4096 * 94 / (989e12 * 0.62)  # routed experts' GEMMs
    assert 0.2 < seconds / experts_gemm < 0.3
    p = estimate_performance(qwen, layout, hw, 8)
    assert p.moe_permute_s == pytest.approx(seconds)
    assert p.memory_s == pytest.approx(memory_bound_seconds(qwen, layout, hw) + seconds)
    mixtral = Shape(32, 4096, 32, 8, 14336, 32000, 4096, gated=True, num_experts=8, top_k=2)
    mixtral_gemm = 3 * 2 * 3 * 4096 * 14336 * 2 * 4096 * 32 / (989e12 * 0.62)
    assert moe_permute_seconds(mixtral, layout, hw) / mixtral_gemm < 0.05
    data = spec_dict(model={"preset": "mixtral-8x7b"}, parallelism={"tp": 1, "pp": 1, "ep": 8})
    performance = plan_of(tmp_path, data, "moe.yaml").estimate().to_json()["performance"]
    assert performance["step_breakdown_s"]["of_memory_bound_moe_permute"] > 0


def test_the_optimizer_step_moves_the_ranks_state_once_at_hbm_bandwidth(tmp_path: Path) -> None:
    """After the last micro-batch Adam reads and writes the optimizer state the rank holds, reads
    and zeroes the gradients and writes the weights: 2 × 12 + 2 × 4 + 2 = 34 bytes per parameter
    in bf16 (fp32 main grads), 13 with the distributed optimizer over 8 ranks (the state an eighth),
    2 × 12 / 8 + 2 × 2 / 8 + 2 / 8 under ZeRO-3 over 8; nothing with the update on the CPU
    (ZeRO-Offload). Was: no optimizer time (Korthikanti's 22B on one micro-batch, whose step is 11%
    more than its 48 layers, was predicted 7% fast)."""
    from generator.estimate.performance import HBM_EFFICIENCY, optimizer_step_seconds

    hw = Hardware(989, 0.62, 3.35, 450, 50, 8)
    shape = Shape(32, 4096, 32, 8, 14336, 128256, 4096, gated=True, rmsnorm=True, bias=False,
                  learned_positions=False, tie_embeddings=False)
    params = count_params(shape).total

    def seconds(bytes_per_param: float, ranks: int = 1) -> float:
        return params / ranks * bytes_per_param / (3.35e12 * HBM_EFFICIENCY)

    layout = Layout(tp=2, dp=8)
    assert optimizer_step_seconds(shape, layout, hw) == pytest.approx(seconds(34, 2))
    assert optimizer_step_seconds(shape, replace(layout, sharding="distributed_optimizer"), hw) == \
        pytest.approx(seconds(13, 2))
    zero3 = Layout(dp=8, sharding="zero3", framework="deepspeed")
    assert optimizer_step_seconds(shape, zero3, hw) == pytest.approx(seconds((24 + 4 + 2) / 8))
    assert optimizer_step_seconds(shape, replace(zero3, offload="optimizer"), hw) == 0
    p = estimate_performance(shape, layout, hw, 64)
    assert p.optimizer_s == pytest.approx(seconds(34, 2))
    assert p.step_time_s == pytest.approx(p.compute_s + p.memory_s + p.bubble_s + p.tp_comm_s + p.cp_comm_s
                                          + p.dp_comm_s + p.pp_comm_s + p.zero3_gather_s + p.moe_comm_s
                                          + p.optimizer_s)
    estimate = plan_of(tmp_path, spec_dict(), "o.yaml").estimate()
    assert estimate.performance.optimizer_s > 0
    assert estimate.to_json()["performance"]["step_breakdown_s"]["optimizer_step"] == \
        round(estimate.performance.optimizer_s, 3)


def test_deepspeed_adds_each_micro_batchs_gradients_outside_the_gemms() -> None:
    """DeepSpeed accumulates a micro-batch's gradients with a separate pass over the rank's
    parameters — the new gradient read, the accumulation buffer read and written: 6 bytes in bf16
    or fp16 by default (its grad_accum_dtype is the training dtype), 10 with fp32 accumulation
    (MT-NLG's BF16_Optimizer) — every micro-batch, in the memory-bound time; Megatron-LM fuses it
    into the weight-gradient GEMMs (nothing), and ZeRO-2/3 reduce each micro-batch's gradients
    into their partitions instead (nothing here: the data-parallel time counts those). Was: none,
    so MT-NLG's 240 micro-batches of 1.9B parameters a GPU lost 2.8 s a step to nothing."""
    from generator.estimate.performance import HBM_EFFICIENCY, grad_accumulation_seconds, memory_bound_seconds

    hw = Hardware(312, 0.63, 2.039, 300, 25, 8)
    shape = sc21_shape(128, 20480, 105)
    layout = Layout(tp=8, pp=35, dp=8, num_microbatches=240, recompute="full", sharding="zero1",
                    framework="megatron-deepspeed", overlap_grad_reduce=False, grad_accum_dtype="fp32")
    per_gpu = count_params(shape).total / 280
    bf16 = per_gpu * 10 / (2.039e12 * HBM_EFFICIENCY)
    assert grad_accumulation_seconds(shape, layout, hw) == pytest.approx(bf16)
    assert grad_accumulation_seconds(shape, replace(layout, grad_accum_dtype=None), hw) == \
        pytest.approx(bf16 * 6 / 10)
    assert grad_accumulation_seconds(shape, replace(layout, grad_accum_dtype=None, precision="fp16"), hw) == \
        pytest.approx(bf16 * 6 / 10)
    assert grad_accumulation_seconds(shape, replace(layout, framework="megatron-lm", sharding="none"), hw) == 0
    assert grad_accumulation_seconds(shape, replace(layout, pp=1, sharding="zero2"), hw) == 0
    p = estimate_performance(shape, layout, hw, 1920)
    assert p.grad_accumulation_s == pytest.approx(240 * bf16)
    assert 2.5 < p.grad_accumulation_s < 3.0
    assert p.memory_s == pytest.approx(240 * (memory_bound_seconds(shape, layout, hw) + bf16))


def test_deepspeed_zero2_and_zero3_reduce_every_micro_batchs_gradients() -> None:
    """DeepSpeed's ZeRO-2 and ZeRO-3 reduce-scatter each micro-batch's gradients into their
    partitions (stage_1_and_2.py reduces when partition_gradients, not only at the accumulation
    boundary; stage3.py likewise); ZeRO-1 and FSDP reduce once a step. On 16 GPUs over two nodes,
    4 micro-batches, without overlap: ZeRO-2 moves its gradients 4 times and gathers the updated
    parameters once, ZeRO-1 reduces and gathers once, FSDP reduce-scatters once. With overlap_comm
    each further micro-batch's reduction hides under its own backward but for what outlasts it.
    Was: once a step for every sharding."""
    from generator.estimate.performance import exposed_data_parallel

    hw = Hardware(989, 0.62, 3.35, 450, 50, 8)
    shape = Shape(32, 4096, 32, 8, 14336, 128256, 4096, gated=True, rmsnorm=True, bias=False,
                  learned_positions=False, tie_embeddings=False)
    once = 15 / 16 * count_params(shape).total * 2 / 50e9  # one ring pass of 16-bit gradients, 16 ranks
    zero2 = Layout(dp=16, num_microbatches=4, sharding="zero2", framework="deepspeed", overlap_grad_reduce=False)

    def dp_comm(layout: Layout) -> float:
        return estimate_performance(shape, layout, hw, 64).dp_comm_s

    assert dp_comm(zero2) == pytest.approx(5 * once)
    assert dp_comm(replace(zero2, sharding="zero1")) == pytest.approx(2 * once)
    assert dp_comm(replace(zero2, sharding="zero3", framework="fsdp")) == pytest.approx(once)
    assert dp_comm(replace(zero2, sharding="zero3")) == pytest.approx(4 * once)
    overlapped = replace(zero2, overlap_grad_reduce=True)
    p = estimate_performance(shape, overlapped, hw, 64)
    backward = p.compute_s * 2 / 3 / 4
    assert p.dp_comm_s == pytest.approx(exposed_data_parallel(2 * once, backward, overlapped, 32)
                                        + 3 * exposed_data_parallel(once, backward, overlapped, 32))


def test_a_data_parallel_group_inside_one_node_communicates_over_nvlink(tmp_path: Path) -> None:
    """FSDP on one node of 8 H100s gathers and reduces over NVLink (450 GB/s), not the inter-node
    link (50 GB/s): without hybrid sharding the one-node job was costed as if it left the node."""
    fsdp = {"framework": "fsdp", "parallelism": {"tp": 1, "pp": 1, "zero_stage": 3},
            "batch": {"micro_batch_size": 1, "gradient_accumulation_steps": None, "global_batch_size": 64}}

    def performance(nodes: int):
        data = spec_dict(**fsdp, cluster={"nodes": nodes, "gpus_per_node": 8, "gpu": "h100-80gb"})
        return plan_of(tmp_path, data, f"n{nodes}.yaml").estimate().performance

    one, two = performance(1), performance(2)
    hybrid = plan_of(tmp_path, spec_dict(**{**fsdp, "parallelism": {**fsdp["parallelism"], "hybrid_shard": True}},
                                         cluster={"nodes": 1, "gpus_per_node": 8, "gpu": "h100-80gb"}),
                     "hybrid.yaml").estimate().performance
    assert one.zero3_gather_s == pytest.approx(hybrid.zero3_gather_s)  # the same NVLink gathers
    assert one.zero3_gather_s < two.zero3_gather_s / 4


def test_pipeline_sends_and_the_gradient_reduction_use_their_groups_links() -> None:
    """Pipeline neighbours are tp·cp·dp ranks apart: with tp 1 and dp 8 each send leaves the node
    (50 GB/s; the estimate counted tp·cp·pp = 2 ranks and kept it on NVLink), with tp 2 and dp 2
    it stays (450 GB/s). The dense gradients are reduced over the dp × cp ranks ((dc − 1)/dc of
    them, in fp32 as Megatron reduces a bf16 run's): dp 2 × cp 2 reduces as dp 4 does."""
    from generator.estimate.memory import Layout
    from generator.estimate.performance import P2P_LATENCY_S, Hardware, estimate_performance

    shape = Shape(8, 4096, 32, 8, 14336, 128256, 8192)
    hw = Hardware(989, 0.6, 3.35, 450, 50, 8)

    def per_send(layout: Layout) -> float:
        sends = 2 * layout.num_microbatches * layout.vpp
        return estimate_performance(shape, layout, hw, 64).pp_comm_s / sends - P2P_LATENCY_S

    activations = 2 * 8192 * 4096  # bytes of one micro-batch's b·s·h 16-bit values
    assert per_send(Layout(tp=1, pp=2, dp=8, num_microbatches=8)) == pytest.approx(activations / 50e9)
    assert per_send(Layout(tp=2, pp=2, dp=2, num_microbatches=16)) == pytest.approx(activations / 2 / 450e9)

    params = count_params(shape).total
    plain = estimate_performance(shape, Layout(tp=8, dp=4, overlap_grad_reduce=False), hw, 64)
    context = estimate_performance(shape, Layout(tp=8, dp=2, cp=2, overlap_grad_reduce=False), hw, 64)
    assert plain.dp_comm_s == pytest.approx(2 * 4 * 3 / 4 * params / 8 / 50e9)
    assert context.dp_comm_s == pytest.approx(plain.dp_comm_s)


def test_tp_comm_overlap_hides_all_but_one_chunk_of_the_tensor_parallel_traffic(tmp_path: Path) -> None:
    """parallelism.tp_comm_overlap (--tp-comm-overlap): the tensor-parallel gathers and scatters
    are pipelined with the linear GEMMs in tp chunks, so 1/tp of them stays exposed; the
    rendered arguments carry the flag, and without it (or with a tp group across nodes,
    where the userbuffers cannot run) the traffic is fully exposed."""
    from generator.estimate.performance import Hardware, estimate_performance
    from generator.estimate.plan import layout_of, shape_of

    data = spec_dict(cluster={"nodes": 4, "gpus_per_node": 8, "gpu": "h100-80gb"},
                     parallelism={"tp": 8, "pp": 1, "sequence_parallel": True, "distributed_optimizer": True},
                     batch={"micro_batch_size": 1, "gradient_accumulation_steps": None, "global_batch_size": 64})
    data["model"] = {"preset": "llama3-8b"}  # GEMMs long enough to hide all but the first chunk
    plain = plan_of(tmp_path, data, "plain.yaml")
    overlapped = plan_of(tmp_path, {**data, "parallelism": {**data["parallelism"], "tp_comm_overlap": True}},
                         "overlap.yaml")
    from generator.render import render

    assert "--tp-comm-overlap" in render(overlapped, "megatron") and "--tp-comm-overlap" not in render(plain, "megatron")
    exposed, hidden = plain.estimate().performance, overlapped.estimate().performance
    assert hidden.tp_comm_s == pytest.approx(exposed.tp_comm_s / 8)
    assert hidden.step_time_s == pytest.approx(exposed.step_time_s - exposed.tp_comm_s * 7 / 8)
    # 16 GPUs of tp across two 8-GPU nodes: no userbuffers, nothing hidden
    layout, shape = layout_of(overlapped), shape_of(overlapped)
    across = Hardware(989, 0.6, 3.35, 450, 50, 4)
    assert estimate_performance(shape, layout, across, 64).tp_comm_s == \
        pytest.approx(estimate_performance(shape, replace(layout, tp_comm_overlap=False), across, 64).tp_comm_s)


def test_gradients_are_reduced_with_one_data_parallel_rank_too() -> None:
    """dp 1 is no reason for no gradient reduction: with cp 2 the two context-parallel ranks hold
    the same weights and all-reduce their gradients (megatron-core's dp × cp group; fp32 ones in a
    bf16 run), and an MoE
    model's experts are reduced over the expert data-parallel ranks (tp 8, etp 1, ep 2: 4 of
    them) whatever dp is; a dense tp-only layout has nothing to reduce."""
    from generator.estimate.memory import Layout
    from generator.estimate.performance import Hardware, estimate_performance

    hw = Hardware(989, 0.6, 3.35, 450, 50, 8)
    dense = Shape(8, 4096, 32, 8, 14336, 128256, 8192)
    params = count_params(dense).total
    context = estimate_performance(dense, Layout(tp=4, cp=2, dp=1, overlap_grad_reduce=False), hw, 8)
    assert context.dp_comm_s == pytest.approx(2 * 4 * (1 / 2) * params / 4 / 450e9)
    assert estimate_performance(dense, Layout(tp=8, dp=1), hw, 8).dp_comm_s == 0.0
    moe = Shape(8, 4096, 32, 8, 14336, 128256, 8192, num_experts=8)
    experts = count_params(moe).layers_experts
    layout = Layout(tp=8, etp=1, ep=2, dp=1, overlap_grad_reduce=False)
    assert layout.expert_dp == 4
    assert estimate_performance(moe, layout, hw, 8).dp_comm_s == pytest.approx(
        2 * 4 * (3 / 4) * experts / 2 / 450e9)


def test_the_gradient_reduction_moves_megatrons_reduce_dtype_and_hides_what_the_files_overlap() -> None:
    """Bytes per parameter on the data-parallel link, nothing overlapped: Megatron-LM reduces a
    bf16 run's gradients in fp32 (all-reduce 2 × 4), an fp16 run's or bf16 main grads' in 16 bits
    (2 × 2); the distributed optimizer reduce-scatters them and all-gathers the 16-bit parameters
    (4 + 2); DeepSpeed ZeRO moves 16-bit gradients (2 × 2). Overlapped, the parameter gather of
    the distributed optimizer also hides under the next step's first forward (the reduce under
    the last backward): less stays exposed than of an all-reduce of the same gradients."""
    from generator.estimate.memory import Layout
    from generator.estimate.performance import Hardware, estimate_performance

    shape = Shape(8, 4096, 32, 8, 14336, 128256, 8192)
    hw = Hardware(989, 0.6, 3.35, 450, 50, 8)
    per_byte = 3 / 4 * count_params(shape).total / 8 / 50e9  # tp 8 × dp 4: one byte a parameter

    def dp(**settings) -> float:
        layout = Layout(tp=8, dp=4, num_microbatches=4, **settings)
        return estimate_performance(shape, layout, hw, 16).dp_comm_s

    exposed = {"overlap_grad_reduce": False}
    assert dp(**exposed) == pytest.approx(8 * per_byte)
    assert dp(precision="fp16", **exposed) == pytest.approx(4 * per_byte)
    assert dp(main_grads="bf16", **exposed) == pytest.approx(4 * per_byte)
    assert dp(sharding="distributed_optimizer", **exposed) == pytest.approx(6 * per_byte)
    assert dp(sharding="zero1", framework="megatron-deepspeed", **exposed) == pytest.approx(4 * per_byte)
    assert dp(sharding="distributed_optimizer") < dp(sharding="distributed_optimizer", **exposed)
    # both hide under this layout's compute but for one layer's share (8 layers): 6 bytes / 8
    assert dp(sharding="distributed_optimizer") == pytest.approx(6 * per_byte / 8)
    assert dp(sharding="distributed_optimizer") < dp()


def test_an_interleaved_stage_hides_its_gradient_reduction_under_the_chunks_still_to_run() -> None:
    """megatron-core reduces a model chunk's gradients once its last micro-batch has passed it
    backward: with vpp chunks the schedule ends on each chunk's last pp micro-batches in turn, so
    (vpp − 1) × pp chunk passes after the first chunk's start remain to hide the reduction, where
    without interleaving one micro-batch's backward does. By hand with a 1 s reduction and 0.1 s
    backward per micro-batch: vpp 1 leaves 0.9 s out; pp 8 × vpp 8 a window of 57 chunk passes
    (0.7125 s) leaves 0.2875 s; a short reduction leaves the last chunk's own share beyond its
    pass, (1 − 0.5) / 8 s, or one layer's share (the last bucket). In a whole step: MLPerf's GB200
    layout (t 4, p 8, cp 2, vpp 8) exposes under a third of what it would without interleaving."""
    from generator.estimate.calibration import MLPERF_LLAMA31_405B, runs
    from generator.estimate.memory import Layout
    from generator.estimate.performance import estimate_performance, exposed_data_parallel
    from generator.estimate.plan import hardware_of

    assert exposed_data_parallel(1.0, 0.1, Layout(pp=8), 126) == pytest.approx(0.9)
    assert exposed_data_parallel(1.0, 0.1, Layout(pp=8, vpp=8), 126) == pytest.approx(1.0 - 57 * 0.1 / 8)
    assert exposed_data_parallel(1.0, 4.0, Layout(pp=8, vpp=8), 126) == pytest.approx(1 / 126)
    assert exposed_data_parallel(1.0, 0.5, Layout(pp=2, vpp=8), 126) == pytest.approx(0.5 / 8)

    (run,) = [r for r in runs() if r.name == f"MLPerf 405B {MLPERF_LLAMA31_405B[13][1]}"]
    hw = hardware_of(presets.gpus()[run.gpu], "fp8", run.gpus_per_node)
    interleaved = estimate_performance(run.shape, run.layout, hw, run.global_batch)
    flat = estimate_performance(run.shape, replace(run.layout, vpp=1), hw, run.global_batch)
    assert interleaved.dp_comm_s < flat.dp_comm_s / 3


def test_interleaved_pipeline_sends_are_hidden_where_megatron_core_overlaps_them(tmp_path: Path) -> None:
    """megatron-core overlaps an interleaved schedule's sends with the chunks' compute (its
    default in every release): only the fill and drain, one send across each of the p − 1
    boundaries each way, stays exposed; without interleaving, or in the Megatron-DeepSpeed forks
    (no overlap written), every one of a stage's 2·m·v sends is."""
    from generator.estimate.memory import Layout
    from generator.estimate.performance import P2P_LATENCY_S, Hardware, estimate_performance
    from generator.estimate.plan import layout_of

    shape = Shape(32, 4096, 32, 8, 14336, 128256, 8192)
    hw = Hardware(989, 0.6, 3.35, 450, 50, 8)
    send = 2 * 8192 * 4096 / 50e9 + P2P_LATENCY_S  # across nodes: tp 1, dp 8

    def pp_comm(**settings) -> float:
        return estimate_performance(shape, Layout(tp=1, pp=4, dp=8, num_microbatches=16, **settings), hw, 128).pp_comm_s

    assert pp_comm(vpp=2, overlap_p2p_comm=True) == pytest.approx(2 * 3 * send)
    assert pp_comm(vpp=2) == pytest.approx(2 * 16 * 2 * send)
    assert pp_comm(vpp=1, overlap_p2p_comm=True) == pytest.approx(2 * 16 * send)
    data = spec_dict(parallelism={"tp": 2, "pp": 2, "vpp": 2})
    assert layout_of(plan_of(tmp_path, data, "lm.yaml")).overlap_p2p_comm is True
    fork = spec_dict(framework="megatron-deepspeed", megatron={"fork": "microsoft"},
                     parallelism={"tp": 2, "pp": 2, "zero_stage": 1})
    assert layout_of(plan_of(tmp_path, fork, "fork.yaml")).overlap_p2p_comm is False


def test_gb200_tensor_parallel_groups_across_trays_stay_on_nvlink(tmp_path: Path) -> None:
    """A GB200 NVL72 rack joins 18 trays of 4 GPUs (the Slurm nodes) on one NVLink fabric: tp 8
    over two trays runs its collectives at NVLink speed, as it would inside one 8-GPU node, not
    at the inter-node link's 50 GB/s; a B200 node of 8 and an 8-GPU tp group inside it agree."""
    from generator.estimate.performance import estimate_performance
    from generator.estimate.plan import hardware_of, layout_of, nvlink_gpus, shape_of

    gb200 = presets.gpus()["gb200"]
    assert nvlink_gpus(gb200, 4) == 72 and hardware_of(gb200, "bf16", 4).gpus_per_node == 72
    assert nvlink_gpus(presets.gpus()["b200"], 8) == 8
    spec = spec_dict(cluster={"nodes": 4, "gpus_per_node": 4, "gpu": "gb200"}, parallelism={"tp": 8, "pp": 1},
                     model={"num_layers": 8, "hidden_size": 8192, "num_attention_heads": 64,
                            "vocab_size": 32000, "seq_length": 4096})
    plan = plan_of(tmp_path, spec)
    across_trays = plan.estimate().performance
    shape, layout = shape_of(plan), layout_of(plan)
    as_nodes = estimate_performance(shape, layout, replace(hardware_of(gb200, "bf16", 4), gpus_per_node=4),
                                    plan.global_batch_size)
    as_one_node = estimate_performance(shape, layout, replace(hardware_of(gb200, "bf16", 4), gpus_per_node=8),
                                       plan.global_batch_size)
    assert across_trays.tp_comm_s == pytest.approx(as_one_node.tp_comm_s)
    assert across_trays.tp_comm_s < as_nodes.tp_comm_s / 10


def test_an_expert_parallel_group_inside_an_nvl72_rack_dispatches_over_nvlink() -> None:
    """GB200 with ep 32 (etp 1) on 32 trays: each ep group's 32 ranks (8 trays) lie inside one
    rack, which the job fills in segments of whole groups, so the all-to-all runs at NVLink speed
    (not on the 50 GB/s inter-node link, which made such runs look 3× slower); inside an 8-GPU
    node the groups still tile the node (a block of 6 ranks crosses nodes)."""
    from generator.estimate.performance import Hardware, in_node, moe_dispatch_seconds
    from generator.estimate.plan import hardware_of

    gb200 = hardware_of(presets.gpus()["gb200"], "bf16", 4)
    assert gb200.multi_node_domain and gb200.gpus_per_node == 72
    shape = replace(_deepseek_v3(), num_layers=8, moe_dense_layers=0)
    layout = Layout(tp=1, pp=1, ep=32, etp=1, dp=128, moe_dispatcher="alltoall")
    assert in_node(layout, "ep", gb200) and not in_node(layout, "expert_dp", gb200)
    rack = moe_dispatch_seconds(shape, layout, gb200)
    trays = moe_dispatch_seconds(shape, layout, replace(gb200, gpus_per_node=4, multi_node_domain=False))
    assert rack * 8 < trays
    h100 = Hardware(989, 0.62, 3.35, 450, 50, 8)
    assert not in_node(Layout(tp=2, cp=3, dp=4), "dp_cp", h100)  # blocks of 24 ranks on 8-GPU nodes
    assert not in_node(Layout(tp=6, dp=4), "tp", h100) and in_node(Layout(tp=4, dp=4), "tp", h100)


def _deepseek_v3(**changes) -> Shape:
    return replace(Shape.of(model_from({"preset": "deepseek-v3"})), **changes)


def test_the_last_stage_holds_the_mtp_layer_and_the_embedding_it_reads() -> None:
    """megatron-core builds the MTP block on the last pipeline stage, with the embedding its
    shifted tokens go through: DeepSeek-V3 at pp 8, tp 2, ep 8 (etp 1), the last stage holds, beyond
    a middle stage's layers, the output layer and final norm (926,679,040 + 7,168), the MTP
    layer's 335,778,816 dense parameters and that embedding (926,679,040), all over tp, and its
    256 routed experts' 11,274,289,152 over ep — 2,503,858,176 parameters, 2 bytes each in bf16;
    and one micro-batch of the MTP layer's activations (its transformer layer and its 8·s·b·h of
    norm and projection inputs) with a second set of fp32 logits."""
    shape = _deepseek_v3()
    layout = Layout(tp=2, pp=8, ep=8, etp=1, dp=8, num_microbatches=16, sharding="distributed_optimizer")
    layers = 61 / 8
    last = stage_memory(shape, layout, 141, layers, 1, first=False, last=True)
    middle = stage_memory(shape, layout, 141, layers, 1, first=False, last=False)
    assert last.weights - middle.weights == 2 * 2_503_858_176
    plain = stage_memory(_deepseek_v3(mtp_layers=0), layout, 141, layers, 1, first=False, last=True)
    assert last.weights - plain.weights == 2 * ((335_778_816 + 926_679_040) / 2 + 11_274_289_152 / 8)
    s, h = 4096, 7168
    per_layer = middle.activations / layers
    assert last.activations - middle.activations == pytest.approx(per_layer + 8 * s * h)
    assert last.logits == 2 * plain.logits == 2 * 4 * s * 129280 / 2


def test_an_mla_layer_keeps_its_latents_and_its_wider_heads() -> None:
    """DeepSeek-V3's MLA layer keeps, beyond Korthikanti's 8·s·b·h of Q, K, V and projection
    input of width h, its up-projected heads (128 × (192 + 128) channels, 4 bytes a channel in
    all: 22.86·s·b·h) and its two latents (1536 + 512 channels, norm and up projection inputs,
    2 + 2 bytes: 1.14·s·b·h): 16·s·b·h more than an attention layer of its hidden size whose
    heads are that wide; with tp 8 the heads split and the latents do not, 3·s·b·h more. Without
    a query latent (DeepSeek-V2-Lite: 16 heads, kv latent 512, h 2048) 1 + 10 against 8: 3·s·b·h
    more. Full recompute keeps the layer input alike."""
    from generator.estimate.memory import activation_bytes_per_layer

    mla = _deepseek_v3()
    mha = replace(mla, mla=None)
    s, h = 4096, 7168
    for tp, more in ((1, 16), (8, 3)):
        layout = Layout(tp=tp)
        got = activation_bytes_per_layer(mla, layout) - activation_bytes_per_layer(mha, layout)
        assert got == pytest.approx(more * s * h), tp
    full = Layout(tp=8, recompute="full")
    assert activation_bytes_per_layer(mla, full) == activation_bytes_per_layer(mha, full) == 2 * s * h
    lite = Shape.of(model_from({"preset": "deepseek-v2-lite"}))
    got = activation_bytes_per_layer(lite, Layout()) - activation_bytes_per_layer(replace(lite, mla=None), Layout())
    assert got == pytest.approx(3 * 4096 * 2048)


def test_mla_and_mtp_flops_are_counted_as_megatron_counts_them() -> None:
    """DeepSeek-V3's forward FLOPs per token, written out (the oracle test holds them to
    Megatron-LM's own count): an MLA layer's projections 2 × (1536 × (7168 + 128 × 192 + 1) +
    512 × (7168 + 128 × 256 + 1) + 7168 × 64 + 128 × 128 × 7168) and core 2 × 4096 × 128 × 320;
    the MTP layer adds such a layer, an MoE MLP (8 routed + 1 shared experts of 2048), its
    projection and norms 2 × (3h + 2h²) and a second logits layer."""
    from generator.estimate.performance import forward_flops_per_token

    h, s, vocab = 7168, 4096, 129280
    projections = 2 * (1536 * (h + 128 * 192 + 1) + 512 * (h + 128 * 256 + 1) + h * 64 + 128 * 128 * h)
    core = 2 * s * 128 * 320
    moe_mlp = 2 * 3 * h * 2048 * 9
    dense_mlp = 2 * 3 * h * 18432
    forward = 62 * (projections + core) + 59 * moe_mlp + 3 * dense_mlp + 2 * (3 * h + 2 * h * h) + 2 * 2 * vocab * h
    assert forward_flops_per_token(_deepseek_v3()) == (forward, 62 * core)


def test_gpt_oss_flops_count_its_gated_mlp_as_megatron_does_and_the_time_runs_it_whole() -> None:
    """Megatron-LM counts gpt-oss's gated quick-GELU as an ungated MLP (its count's ffn factor
    follows --swiglu alone): the model FLOPs are those of the ungated model; the hardware FLOPs
    add the gate projection the model runs, 2·h·f per token and layer for each of the top 4
    experts, forward and backward."""
    from generator.estimate.performance import forward_flops_per_token

    shape = Shape.of(model_from({"preset": "gpt-oss-20b"}))
    assert shape.gated and shape.quick_geglu
    ungated = replace(shape, gated=False, quick_geglu=False)
    assert shape.top_k == 4 and forward_flops_per_token(shape) == forward_flops_per_token(ungated)
    model, hardware = step_flops(shape, 8, "none")
    _, ungated_hardware = step_flops(ungated, 8, "none")
    assert model == ungated_hardware
    assert hardware - model == 3 * 2 * 2880 * 2880 * 4 * 24 * 8 * 4096


def test_h100_nvl_cards_reduce_over_pcie_and_blackwell_ultra_holds_more(tmp_path: Path) -> None:
    """H100 NVL (PCIe cards; NVLink bridges join only pairs): a tensor-parallel group of 8 runs
    its all-reduces on PCIe Gen5 x16 (64 GB/s a direction against the SXM's 450), at 835 dense
    BF16 TFLOP/s; B300 keeps B200's dense peaks with 288 GB (268 GiB) and 800 Gb/s per GPU."""
    sxm = plan_of(tmp_path, spec_dict(parallelism={"tp": 8, "pp": 1}), "sxm.yaml").estimate().performance
    nvl = plan_of(tmp_path, spec_dict(parallelism={"tp": 8, "pp": 1},
                                      cluster={"nodes": 2, "gpus_per_node": 8, "gpu": "h100-nvl-94gb"}),
                  "nvl.yaml").estimate().performance
    assert nvl.tp_comm_s == pytest.approx(sxm.tp_comm_s * 450 / 64)
    assert nvl.peak_tflops == 835 and nvl.step_time_s > sxm.step_time_s
    b300, b200 = presets.gpus()["b300"], presets.gpus()["b200"]
    assert (b300["bf16_tflops"], b300["fp8_tflops"]) == (b200["bf16_tflops"], b200["fp8_tflops"])
    assert b300["memory_gib"] == round(288e9 / 2**30) and b300["internode_gbps"] == 800 / 8


def test_deepseek_v3_trains_at_its_reports_speed_with_the_all_to_all_under_the_compute(tmp_path: Path) -> None:
    """The DeepSeek-V3 report (arXiv 2412.19437): 180K H800 GPU-hours per trillion tokens of
    pre-training (1,543 tokens a second per GPU) on 2,048 H800 (NVLink 400 GB/s, InfiniBand 50
    GB/s per GPU): pp 16, ep 64 over 8 nodes, no tp, ZeRO-1 data parallelism, FP8, 4,096-token
    sequences, 15,360 a step, DeepEP, its all-to-all overlapped with the computation (DualPipe,
    §3.2). Said as megatron-core would run it (two virtual stages a rank, 16,384 sequences so the
    interleaved schedule's micro-batches divide, --overlap-moe-expert-parallel-comm), the estimate
    is within 10% of the report — checked, not fitted; without the overlap it is 27% too slow."""
    data = spec_dict(name="dsv3", cluster={"nodes": 256, "gpus_per_node": 8, "gpu": "h800", "allow_oversize": True},
                     model={k: None for k in BASE["model"]} | {
                         "preset": "deepseek-v3", "moe_grouped_gemm": True, "moe_token_dispatcher": "flex",
                         "moe_flex_dispatcher_backend": "deepep"},
                     parallelism={"tp": 1, "pp": 16, "ep": 64, "etp": 1, "distributed_optimizer": True,
                                  "pipeline_layout": "E|(tt|)*30,tmL", "ep_comm_overlap": True},
                     batch={"micro_batch_size": 1, "gradient_accumulation_steps": None, "global_batch_size": 16384},
                     training={"precision": "fp8", "recompute": "selective",
                               "recompute_modules": ["layernorm", "mla_up_proj"], "optimizer_states": "bf16"})
    reported = 1e12 / (180e3 * 3600)
    overlapped = plan_of(tmp_path, data, "overlap.yaml").estimate().performance
    data["parallelism"]["ep_comm_overlap"] = False
    exposed = plan_of(tmp_path, data, "exposed.yaml").estimate().performance
    per_gpu = {name: p.tokens_per_step / p.step_time_s / p.gpus for name, p in
               (("overlapped", overlapped), ("exposed", exposed))}
    assert per_gpu["overlapped"] == pytest.approx(reported, rel=0.10), per_gpu
    assert per_gpu["exposed"] < 0.8 * reported
    # what stays exposed: the unpaired chunks of the warmup and cooldown, (16 − 1)·2 + 16 of 256
    assert overlapped.moe_comm_s == pytest.approx(exposed.moe_comm_s * 46 / 256)
    # memory with the report's recompute (RMSNorm, MLA up-projections) and BF16 moments: within 10%
    # of the 80 GB it ran in (DeepSeek's framework also caches the SwiGLU's and the attention output
    # projection's inputs in FP8, which megatron-core does not)
    memory = plan_of(tmp_path, data, "memory.yaml").estimate().memory
    assert memory.capacity < memory.total < 1.1 * memory.capacity


def test_module_recompute_drops_what_each_module_keeps() -> None:
    """DeepSeek-V3 at tp 2 with sequence parallelism, a micro-batch of one 4,096-token sequence:
    an MoE layer's routed copies keep 2h + 4f (gated) + 2f bytes each (f 2048, top 8) for the
    rank's 2,048 tokens; `layernorm` drops the two norms' outputs (4 bytes a channel), `mla_up_proj`
    the up-projected queries, keys (192 dims a head) and values (128), split over tp, `moe_act`
    the experts' activation outputs, `moe` the whole MoE part; without modules selective
    recompute keeps everything but the attention core (flash: nothing to drop)."""
    from generator.estimate.memory import activation_bytes_per_layer

    shape = _deepseek_v3()
    base = Layout(tp=2, sequence_parallel=True, recompute="selective", micro_batch_size=1)
    tokens, h, f = 4096 / 2, 7168, 2048

    def dropped(*modules: str, moe: bool = True) -> float:
        kept = activation_bytes_per_layer(shape, replace(base, recompute_modules=modules), moe=moe)
        return activation_bytes_per_layer(shape, base, moe=moe) - kept

    routed = 8 * (2 * h + 2 * 2 * f + 2 * f) * tokens
    shared = (2 * 2 * f + 2 * f) * tokens  # one shared expert of 2048, tp-split over the gathered sequence
    router = 8 * 256 * tokens
    full_moe = activation_bytes_per_layer(shape, base, moe=True) - activation_bytes_per_layer(shape, base)
    assert full_moe == pytest.approx(routed + shared + router - 4 * 18432 * tokens)  # less the dense MLP
    assert dropped("core_attn") == 0
    assert dropped("layernorm") == pytest.approx(4 * h * tokens)
    assert dropped("mla_up_proj") == pytest.approx(2 * 128 * (2 * 192 + 128) * tokens)
    assert dropped("moe_act") == pytest.approx(8 * 2 * f * tokens)
    assert dropped("moe") == pytest.approx(routed + shared + router)
    assert dropped("mlp", moe=False) == pytest.approx(4 * 18432 * tokens)
    assert dropped("layernorm", "mla_up_proj", "moe_act") == pytest.approx(
        dropped("layernorm") + dropped("mla_up_proj") + dropped("moe_act"))


def test_the_band_widens_by_the_share_of_the_step_no_published_run_calibrates(tmp_path: Path) -> None:
    """The throughput band is the GPU generation's (leave-one-out on published dense runs) plus
    the share of the step in what those runs do not calibrate, each part taken as possibly off by
    its whole: an MoE model's dispatch, combine and token reordering; the attention core at calls
    longer than its kernel curves reach (16,384 tokens). explain names each part and its share; a
    dense run at 8K keeps the generation's band."""
    dense = plan_of(tmp_path, spec_dict(), "dense.yaml").estimate()
    assert dense.uncertainty == 0.17 and dense.widened_by == ()
    moe = plan_of(tmp_path, spec_dict(model={k: None for k in BASE["model"]} | {"preset": "mixtral-8x7b"},
                                      cluster={"nodes": 2, "gpus_per_node": 8, "gpu": "h100-80gb", "allow_oversize": True},
                                      parallelism={"tp": 1, "pp": 1, "ep": 8}), "moe.yaml").estimate()
    p = moe.performance
    share = (p.moe_comm_s + p.moe_permute_s) / p.step_time_s
    assert moe.widened_by == (("moe_dispatch", pytest.approx(share)),) and share > 0.01
    assert moe.uncertainty == math.ceil(100 * (0.17 + share)) / 100
    assert moe.to_json()["performance"]["uncertainty_widened_by"] == {"moe_dispatch": round(share, 3)}
    long = plan_of(tmp_path, spec_dict(model={"seq_length": 65536}, parallelism={"tp": 2, "pp": 2, "cp": 2},
                                       batch={"micro_batch_size": 1, "gradient_accumulation_steps": 8}),
                   "long.yaml").estimate()
    attention = long.performance.attention_s / long.performance.step_time_s
    assert long.widened_by == (("attention_beyond_calibrated_lengths", pytest.approx(attention)),)
    said = CliRunner().invoke(app, ["explain", str(tmp_path / "moe.yaml")]).output
    assert f"throughput ±{moe.uncertainty:.0%} (the calibration band of this GPU's generation, ±17%" in said
    assert f"widened by the share of the step no published run calibrates: {share:.0%} MoE dispatch" in said


def test_expert_gemms_run_at_the_speed_of_their_shapes() -> None:
    """The routed experts' GEMMs: DeepSeek-V3's (8,192 rows an expert at ep 64, 7168 × 2048)
    reach the large-GEMM speed; Qwen3-30B-A3B's 768-wide experts split over etp 8 (96 columns)
    with 256 rows an expert move more bytes per FLOP than an H100's ridge point and run at HBM
    speed; fewer rows (a smaller micro-batch) are slower, never faster."""
    from generator.estimate.performance import Hardware, expert_gemm_factor, expert_gemm_rows

    h100 = Hardware(989, 0.62, 3.35, 450, 50, 8, 1979)
    v3 = _deepseek_v3()
    wide = Layout(tp=1, pp=16, ep=64, etp=1, dp=128, micro_batch_size=1)
    assert expert_gemm_rows(v3, wide) == 4096 * 64 * 8 / 256
    assert expert_gemm_factor(v3, wide, h100) == pytest.approx(8192 / (8192 + 32))
    small = Shape.of(model_from({"preset": "qwen3-30b-a3b"}))
    split = Layout(tp=8, pp=1, ep=1, etp=8, dp=8, micro_batch_size=1, sequence_parallel=True)
    assert expert_gemm_rows(small, split) == 4096 / 8 * 8 * 8 / 128
    assert expert_gemm_factor(small, split, h100) < 0.6
    one = expert_gemm_factor(small, replace(split, etp=1, ep=8), h100)
    assert expert_gemm_factor(small, split, h100) < one
    factors = [expert_gemm_factor(small, replace(split, micro_batch_size=b), h100) for b in (1, 2, 4, 8)]
    assert factors == sorted(factors) and factors[0] < factors[-1]


def test_mixtral_experts_over_ep_8_beat_ep_4_with_tp_2(tmp_path: Path) -> None:
    """Megatron-LM's own MoE guide (megatron/core/transformer/moe/README.md, "Prefer EP over TP
    for Expert Layers"): for Mixtral 8x7B, EP8×TP1 outperforms EP4×TP2 — the estimate ranks the
    two layouts (8 nodes of H100, pp 4, full recompute, the same batch) in that order."""
    def tokens_per_s(tp: int, ep: int) -> float:
        spec = spec_dict(cluster={"nodes": 8, "gpus_per_node": 8, "gpu": "h100-80gb"},
                         parallelism={"tp": tp, "pp": 4, "ep": ep, "etp": 1, "sequence_parallel": tp > 1,
                                      "distributed_optimizer": True},
                         batch={"micro_batch_size": 1, "global_batch_size": 1024,
                                "gradient_accumulation_steps": None},
                         training={"precision": "bf16", "recompute": "full"})
        spec["model"] = {"preset": "mixtral-8x7b", "seq_length": 4096}
        return plan_of(tmp_path, spec, f"tp{tp}.yaml").estimate().performance.tokens_per_s

    assert tokens_per_s(1, 8) > tokens_per_s(2, 4) * 1.02


def test_the_compile_speedup_is_fitted_on_the_published_eager_and_compiled_pair() -> None:
    """performance.COMPILE_SPEEDUP is the fit on the PyTorch blog's FSDP Llama-2-7B, 57% MFU eager
    and 68% compiled (to 0.01)."""
    from generator.estimate.calibration import fit_compile_speedup
    from generator.estimate.performance import COMPILE_SPEEDUP

    assert fit_compile_speedup() == pytest.approx(COMPILE_SPEEDUP, abs=0.01)


def test_a_compiled_torchtitan_run_is_faster_and_keeps_fewer_activations(tmp_path: Path) -> None:
    """torchtitan.compile (one node): the compute and memory-bound work run COMPILE_SPEEDUP times
    faster (the collectives do not), and the backward keeps neither the norms' outputs (4 bytes a token and
    channel of h) nor the SwiGLU's output (2 of the FFN width), which Inductor recomputes."""
    from generator.estimate.memory import activation_bytes_per_layer
    from generator.estimate.performance import COMPILE_SPEEDUP
    from generator.estimate.plan import layout_of, shape_of

    def plan(compiled: bool):
        spec = spec_dict(framework="torchtitan", cluster={"nodes": 1, "gpus_per_node": 8, "gpu": "h100-80gb"},
                         parallelism={"tp": 2, "pp": 1, "dp_shard": 4},
                         batch={"micro_batch_size": 1, "gradient_accumulation_steps": 2},
                         torchtitan={"version": "0.3", "compile": compiled})
        spec["model"] = {"preset": "llama3-8b", "seq_length": 4096}
        return plan_of(tmp_path, spec, f"c{compiled}.yaml")

    eager, compiled = plan(False), plan(True)
    e, c = eager.estimate().performance, compiled.estimate().performance
    assert c.compute_s == pytest.approx(e.compute_s / COMPILE_SPEEDUP)
    assert c.memory_s == pytest.approx(e.memory_s / COMPILE_SPEEDUP)
    assert c.tp_comm_s == pytest.approx(e.tp_comm_s) and c.step_time_s < e.step_time_s
    shape, eager_layout, compiled_layout = shape_of(eager), layout_of(eager), layout_of(compiled)
    assert compiled_layout.compiled and not eager_layout.compiled
    saved = activation_bytes_per_layer(shape, eager_layout) - activation_bytes_per_layer(shape, compiled_layout)
    tokens = 4096 * 1
    split = 2 if eager_layout.sequence_parallel else 1  # the norms' outputs are split only with SP
    assert saved == pytest.approx(tokens * (4 * shape.hidden_size / split + 2 * shape.ffn_hidden_size / 2))


def test_torchtitan_selective_checkpointing_keeps_every_other_linear_and_attention() -> None:
    """torchtitan's selective recompute is per op (SelectiveAC: it saves attention's output and
    every other linear's, counted from the layer's first, and reruns the rest): a torchtitan 0.3.0
    Llama-3-8B layer (linears fused wqkv, wo, w1, w3, w2) keeps its input, wqkv's output,
    attention's, w1's and w2's — 2h + 2(q + 2kv) + 2q + 2f + 2h bytes a token, 16·s·b·h (q = h =
    4096, kv 1024, f 14336) — where Megatron-LM's selective recompute (the attention core, which
    flash attention never stores) keeps 30·s·b·h; tp splits it; full recompute keeps the layer
    input alike. (Measured on the CPU it cannot be: torchtitan 0.3.0's attention is FlexAttention
    or varlen, and FlexAttention has no CPU backward.)"""
    from generator.estimate.memory import activation_bytes_per_layer

    shape = Shape.of(model_from({"preset": "llama3-8b", "seq_length": 8192}))
    sbh = 8192 * 4096

    def per_layer(framework: str, recompute: str, tp: int = 1) -> float:
        layout = Layout(framework=framework, sharding="zero3", dp=8, tp=tp, sequence_parallel=tp > 1,
                        recompute=recompute)
        return activation_bytes_per_layer(shape, layout) / sbh

    assert per_layer("torchtitan", "selective") == pytest.approx(16.0)
    assert per_layer("megatron-lm", "selective") == pytest.approx(30.0)
    assert per_layer("torchtitan", "selective", tp=2) == pytest.approx(16.0 / 2)
    assert per_layer("torchtitan", "full") == per_layer("megatron-lm", "full") == pytest.approx(2.0)
    assert per_layer("torchtitan", "none") == per_layer("megatron-lm", "none")


def test_fully_sharded_runs_hold_two_layers_unsharded_and_one_layers_gradients(tmp_path: Path) -> None:
    """FSDP2 gathers a layer's parameters before it runs and prefetches the next one's, and the
    backward holds one layer's unsharded gradients for the reduce-scatter: torchtitan's Llama-3-8B
    on 8 GPUs (dp_shard 8) holds 2 × 2 bytes of its largest unit (the output layer, 128256 × 4096,
    over a layer's 218,112,000) beyond its shards, and 4 bytes of it in gradients (torchtitan
    reduces in fp32); DeepSpeed's ZeRO-3 one unit's parameters and gradients in 16 bits, as its
    own estimator counts (4 bytes of the largest layer)."""
    from generator.estimate.memory import estimate_memory
    from generator.estimate.plan import layout_of, shape_of

    spec = spec_dict(framework="torchtitan", cluster={"nodes": 1, "gpus_per_node": 8, "gpu": "h100-80gb"},
                     parallelism={"tp": 1, "pp": 1, "dp_shard": 8},
                     batch={"micro_batch_size": 1, "gradient_accumulation_steps": 1},
                     torchtitan={"version": "0.3", "compile": False})
    spec["model"] = {"preset": "llama3-8b", "seq_length": 8192}
    plan = plan_of(tmp_path, spec)
    shape, layout = shape_of(plan), layout_of(plan)
    sharded = estimate_memory(shape, replace(layout, sharding="zero2"), None)
    full = estimate_memory(shape, layout, None)
    unit = 128256 * 4096
    shards = count_params(shape).total / 8
    assert full.weights == pytest.approx(shards * 2 + 2 * 2 * unit)
    assert full.gradients == pytest.approx(shards * 2 + 4 * unit)
    assert sharded.weights == pytest.approx(count_params(shape).total * 2)
    deepspeed = estimate_memory(shape, replace(layout, framework="deepspeed"), None)
    assert deepspeed.weights == pytest.approx(shards * 2 + 2 * unit)
    assert deepspeed.gradients == pytest.approx(shards * 2 + 2 * unit)
