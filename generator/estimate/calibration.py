"""Published measurements the estimates are checked (and the A100 efficiency calibrated) against.

SC21 Table 1 (Narayanan et al. 2021, weak scaling on A100-80GB, seq 2048, V 51200, fp16, full
recompute; heads, t, p, micro batch and interleaving from the paper's run_table_1.sh).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from generator.estimate.memory import Layout
from generator.estimate.params import Shape
from generator.estimate.performance import Hardware, estimate_performance

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


@dataclass(frozen=True)
class Row:
    params_b: float
    gpus: int
    published_tflops: float
    predicted_tflops: float

    @property
    def error(self) -> float:
        return (self.predicted_tflops - self.published_tflops) / self.published_tflops


def sc21_shape(heads: int, hidden: int, layers: int) -> Shape:
    return Shape(layers, hidden, heads, heads, 4 * hidden, 51200, 2048)


def sc21_rows(a100: dict) -> list[Row]:
    """Predicted TFLOP/s per GPU (hardware FLOPs, as the paper counts them) for every row, from
    the model alone: one efficiency constant for all rows, no per-row tuning."""
    hw = Hardware(a100["bf16_tflops"], a100["efficiency"], a100["hbm_tbps"],
                  a100["intranode_gbps"], a100["internode_gbps"], 8)
    rows = []
    for params_b, heads, hidden, layers, t, p, gpus, batch, micro, vpp, tflops in SC21_TABLE1:
        dp = gpus // (t * p)
        layout = Layout(tp=t, pp=p, vpp=vpp, dp=dp, micro_batch_size=micro,
                        num_microbatches=batch // (micro * dp), recompute="full",
                        precision="fp16", flash_attention=False)
        perf = estimate_performance(sc21_shape(heads, hidden, layers), layout, hw, batch)
        rows.append(Row(params_b, gpus, tflops, perf.hardware_flops / perf.step_time_s / gpus / 1e12))
    return rows


def median_abs_error(rows: list[Row]) -> float:
    return statistics.median(abs(r.error) for r in rows)
