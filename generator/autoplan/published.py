"""Published layouts the search is checked against (the README table and the tests): the ten
rows of SC21 Table 1 (Narayanan et al. 2021; micro batch as published, tp/pp/vpp searched),
GPT-NeoX-20B, BLOOM-176B and NeMo's GPT-3 175B recipe (micro batch searched too).
Sources: SC21 Table 1 and its run_table_1.sh; BigScience's tr11-176B-ml script; GPT-NeoX's
configs/20B.yml; NeMo's GPT-3 175B recipe."""

from __future__ import annotations

from typing import Any

import yaml

from generator.autoplan import run_search
from generator.autoplan.search import Candidate
from generator.estimate.calibration import SC21_TABLE1
from generator.spec.load import load_yaml
from generator.spec.schema import validate
from generator.values import value


@value
class Published:
    """A published layout (paper or blog) that auto-plan's ranking is checked against."""

    name: str
    source: str
    spec: dict[str, Any]
    layout: dict[str, int]  # the published tp, pp (and vpp) to find in the ranking


@value
class Ranked:
    """Where the published parallel layout (tp × pp) ranks among the rows of the search, each a
    parallel layout with the model's best schedule (vpp), micro batch and settings for it."""

    case: Published
    rank: int | None  # among the parallel layouts that fit (None: not feasible)
    layouts: int
    published: Candidate | None
    best: Candidate


def _spec(name: str, framework: str, gpus: int, gpu: str, model: dict, global_batch: int,
          micro: Any, parallelism: dict, training: dict) -> dict[str, Any]:
    return {"name": name, "framework": framework,
            "cluster": {"nodes": gpus // 8, "gpus_per_node": 8, "gpu": gpu}, "model": model,
            "parallelism": parallelism,
            "batch": {"micro_batch_size": micro, "global_batch_size": global_batch},
            "training": {"train_iters": 1000, "lr": 1.0e-4, "warmup": {"iters": 10}, **training},
            # BLOOM trained with its own fork (ALiBi); NeoX's configs are microsoft's flags
            **({"megatron": {"fork": "bigscience"}} if name == "bloom-176b" else {})}


_SOURCES = {"GPT-NeoX-20B": "EleutherAI/gpt-neox configs/20B.yml",
            "BLOOM-176B": "bigscience-workshop/bigscience tr11-176B-ml slurm script",
            "NeMo GPT-3 175B": "NeMo's GPT-3 175B training recipe"}


def cases() -> list[Published]:
    out = []
    for params_b, heads, hidden, layers, t, p, gpus, batch, micro, vpp, _ in SC21_TABLE1:
        model = {"num_layers": layers, "hidden_size": hidden, "num_attention_heads": heads,
                 "vocab_size": 51200, "seq_length": 2048}
        out.append(Published(
            f"SC21 {params_b:g}B", "SC21 Table 1 (fp16, full recompute)",
            _spec(f"sc21-{params_b:g}b", "megatron-lm", gpus, "a100-80gb", model, batch, micro,
                  {"tp": "auto", "pp": "auto", "vpp": "auto"},
                  {"precision": "fp16", "recompute": "full", "flash_attention": False}),
            {"tp": t, "pp": p, "vpp": vpp}))
    # BLOOM's layout was chosen among layouts that all ran --checkpoint-activations (the
    # tr11-176B-ml slurm script and every layout measured in its chronicles-prequel.md): without a
    # flash kernel in its fork, its search was over full recompute only
    for name, framework, gpus, gpu, preset, batch, extra, precision, layout, recompute in (
            ("GPT-NeoX-20B", "megatron-deepspeed", 96, "a100-40gb", "gpt-neox-20b", 1536,
             {"zero_stage": "auto"}, "fp16", {"tp": 2, "pp": 4}, "auto"),
            ("BLOOM-176B", "megatron-deepspeed", 384, "a100-80gb", "bloom-176b", 2048,
             {"zero_stage": "auto"}, "bf16", {"tp": 4, "pp": 12}, "full"),
            ("NeMo GPT-3 175B", "megatron-lm", 1024, "a100-80gb", "gpt3-175b", 2048,
             {"vpp": "auto", "distributed_optimizer": "auto"}, "bf16", {"tp": 4, "pp": 8, "vpp": 6},
             "auto")):
        # GPT-NeoX's parallel residual is its own (no Megatron dialect builds it); the layout
        # search costs the same layers either way
        model = {"preset": preset, **({"parallel_residual": False} if preset == "gpt-neox-20b" else {})}
        out.append(Published(
            name, _SOURCES[name], _spec(name.lower().replace(" ", "-"), framework, gpus, gpu,
                                               model, batch, "auto",
                                               {"tp": "auto", "pp": "auto", **extra},
                                               {"precision": precision, "recompute": recompute}),
            layout))
    return out


def rank(case: Published) -> Ranked:
    doc = load_yaml(yaml.safe_dump(case.spec, sort_keys=False), f"<{case.name}>")
    validate(doc)
    _, _, result = run_search(doc, keep=100_000)
    for index, candidate in enumerate(result.ranked, start=1):  # rows: tp × pp (× cp × ep)
        if all(getattr(candidate, k) == v for k, v in case.layout.items() if k != "vpp"):
            return Ranked(case, index, len(result.ranked), candidate, result.ranked[0])
    return Ranked(case, None, len(result.ranked), None, result.ranked[0])
