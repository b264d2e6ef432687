"""Auto-plan: the search finds the valid layouts of hand-checkable cases, picks the fastest that
fits, respects every fixed field, never proposes a layout the calculator or the real DeepSpeed and
megatron-core parsers refuse, and ranks published layouts near the top."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from generator.artifacts import render_all
from generator.autoplan import run_search
from generator.autoplan.published import cases, rank
from generator.autoplan.search import MARGIN, TIE, _ranking, concrete
from generator.calculator.resolve import resolve
from generator.cli import app
from generator.estimate.memory import GIB, Layout, estimate_memory
from generator.estimate.params import Shape
from generator.run import load_spec
from generator.spec.model import load_document

from .conftest import ROOT, SAMPLES
from .helpers import BASE, plan_of, spec_dict
from .test_deepspeed_oracle import deepspeed_config  # noqa: F401  (fixture)
from .test_megatron_oracle import calculator  # noqa: F401  (fixture)

runner = CliRunner()
SAMPLE_405B = ROOT / "samples" / "llama3.1-405b-auto.yaml"


def search_of(folder: Path, data: dict, keep: int = 10):
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return run_search(load_document(path), keep)


def test_the_one_valid_layout_is_found(tmp_path: Path) -> None:
    """2 GPUs, 3 heads, 3 layers, global batch 2: tp 2 breaks the heads (GL008), pp 2 the layers
    (GL009, and 3 layers on 2 stages have no uneven split), micro 2 the batch (GL002)."""
    data = spec_dict(cluster={"nodes": 1, "gpus_per_node": 2},
                     model={"num_layers": 3, "hidden_size": 192, "num_attention_heads": 3},
                     parallelism={"tp": "auto", "pp": "auto"},
                     batch={"micro_batch_size": "auto", "gradient_accumulation_steps": None,
                            "global_batch_size": 2})
    _, _, result = search_of(tmp_path, data)
    assert result.layouts == 1 and len(result.ranked) == 1
    best = result.ranked[0]
    assert (best.tp, best.pp, best.micro_batch_size, best.dp, best.gradient_accumulation_steps) == \
        (1, 1, 1, 2, 1)
    assert {"GL008", "GL009", "GL002"} <= set(result.rejected)


@pytest.mark.parametrize("micro", [1, 2, 4, 8])
def test_recompute_is_the_cheapest_that_fits(tmp_path: Path, micro: int) -> None:
    """Llama-3-8B at 8K on one H100 node, tp 2: the choice is the first of none, selective, full
    whose memory estimate fits (each costs more compute than the one before)."""
    data = spec_dict(cluster={"nodes": 1, "gpus_per_node": 8},
                     model={"num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                            "num_query_groups": 8, "ffn_hidden_size": 14336, "seq_length": 8192,
                            "vocab_size": 128256},
                     parallelism={"tp": 2, "pp": 1},
                     batch={"micro_batch_size": micro, "gradient_accumulation_steps": None,
                            "global_batch_size": 64},
                     training={"recompute": "auto"})
    template, _, result = search_of(tmp_path, data)
    shape = Shape.of(template.model)
    fits = [r for r in ("none", "selective", "full") if estimate_memory(
        shape, Layout(tp=2, dp=4, micro_batch_size=micro, num_microbatches=64 // (micro * 4),
                      recompute=r, sequence_parallel=True), 79.6 * (1 - MARGIN)).fits]
    if not fits:
        assert not result.ranked
    else:
        assert result.ranked[0].recompute == fits[0]


def test_the_best_is_the_fastest_fitting_layout(tmp_path: Path) -> None:
    data = spec_dict(cluster={"nodes": 4, "gpus_per_node": 8},
                     model={"num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32},
                     parallelism={"tp": "auto", "pp": "auto", "vpp": "auto"},
                     batch={"micro_batch_size": "auto", "gradient_accumulation_steps": None,
                            "global_batch_size": 512}, training={"recompute": "auto"})
    _, _, result = search_of(tmp_path, data, keep=1000)
    assert len(result.ranked) > 10
    # fastest first, but for those within TIE of the fastest (ranked by the memory they leave free)
    times = [c.step_time for c in result.ranked]
    tied = [t for t in times if t <= min(times) * (1 + TIE)]
    assert times[:len(tied)] == tied and times[len(tied):] == sorted(times[len(tied):])
    assert all(c.memory.total <= result.limit_gib * GIB for c in result.ranked)
    assert len({c.layout for c in result.ranked}) == len(result.ranked)  # one row per layout


def test_fixed_fields_are_kept(tmp_path: Path) -> None:
    data = spec_dict(cluster={"nodes": 4, "gpus_per_node": 8},
                     model={"num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32},
                     parallelism={"tp": [2, 4], "pp": "auto", "cp": 1},
                     batch={"micro_batch_size": "auto", "gradient_accumulation_steps": None,
                            "global_batch_size": 256}, training={"recompute": "selective"})
    _, _, result = search_of(tmp_path, data, keep=100)
    assert result.ranked
    for c in result.ranked:
        assert c.tp in (2, 4) and c.cp == 1 and c.recompute == "selective"
        assert c.global_batch_size == 256 and c.tp * c.pp * c.cp * c.dp == 32


def test_plain_deepspeed_gets_no_tensor_or_pipeline_parallelism(tmp_path: Path) -> None:
    data = spec_dict(framework="deepspeed", cluster={"nodes": 2, "gpus_per_node": 8},
                     parallelism={"tp": "auto", "pp": "auto", "zero_stage": "auto"},
                     batch={"micro_batch_size": "auto", "gradient_accumulation_steps": None,
                            "global_batch_size": 128})
    _, _, result = search_of(tmp_path, data, keep=100)
    assert result.ranked and {(c.tp, c.pp) for c in result.ranked} == {(1, 1)}
    assert {c.zero_stage for c in result.ranked} <= {0, 1, 2, 3}
    # the pipeline engine when listed
    data["parallelism"]["pp"] = [1, 2]
    data["parallelism"]["zero_stage"] = [1, 3]
    _, _, result = search_of(tmp_path, data, keep=100)
    assert {c.pp for c in result.ranked} == {1, 2}
    assert all(c.zero_stage == 1 for c in result.ranked if c.pp == 2)  # GL104 prunes ZeRO-3


def test_uneven_pipeline_for_405b() -> None:
    template, _, result = run_search(load_document(SAMPLE_405B), keep=1000)
    stages16 = [c for c in result.ranked if c.pp == 16]
    assert stages16 and all((c.first_stage_layers, c.last_stage_layers) == (7, 7) for c in stages16)
    assert result.ranked[0].pp > 1 and template.model.num_layers % result.ranked[0].pp != 0
    plan = resolve(concrete(template, result.ranked[0]))
    args = render_all(plan)["megatron_args.sh"]
    assert f"--decoder-first-pipeline-num-layers {result.ranked[0].first_stage_layers}" in args


@st.composite
def auto_specs(draw) -> dict:
    framework = draw(st.sampled_from(["megatron-lm", "megatron-deepspeed", "deepspeed"]))
    gpus_per_node = draw(st.sampled_from([1, 2, 4, 8]))
    nodes = draw(st.integers(1, 8))
    heads = draw(st.sampled_from([4, 8, 12, 16, 32]))
    data = spec_dict(framework=framework,
                     cluster={"nodes": nodes, "gpus_per_node": gpus_per_node,
                              "gpu": draw(st.sampled_from(["h100-80gb", "a100-40gb", "b200"]))},
                     model={"num_layers": draw(st.integers(2, 48)),
                            "hidden_size": heads * draw(st.sampled_from([64, 128])),
                            "num_attention_heads": heads,
                            "seq_length": draw(st.sampled_from([512, 2048, 4096]))},
                     batch={"gradient_accumulation_steps": None,
                            "global_batch_size": nodes * gpus_per_node * draw(st.integers(1, 8)),
                            "micro_batch_size": "auto"},
                     parallelism={"tp": 1, "pp": 1})
    for field in draw(st.sets(st.sampled_from(["tp", "pp", "cp", "vpp", "zero_stage",
                                               "distributed_optimizer"]))):
        data["parallelism"][field] = "auto"
    data["training"]["recompute"] = draw(st.sampled_from(["auto", "none", ["selective", "full"]]))
    return data


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(auto_specs())
def test_proposals_resolve_and_keep_fixed_fields(data: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        template, given_fields, result = search_of(Path(tmp), data, keep=5)
    for c in result.ranked:
        plan = resolve(concrete(template, c))  # raises if the calculator refuses it
        assert (plan.global_batch_size, plan.micro_batch_size, plan.dp) == \
            (c.global_batch_size, c.micro_batch_size, c.dp)
        render_all(plan)  # read back and compared inside
        for key in ("tp", "pp", "cp", "vpp"):
            if f"parallelism.{key}" not in given_fields:
                assert getattr(c, key) == data["parallelism"].get(key, 1)
        if isinstance(data["training"]["recompute"], list):
            assert c.recompute in data["training"]["recompute"]


@pytest.mark.oracle
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(auto_specs())
def test_proposals_pass_deepspeed_and_megatron_core(deepspeed_config, calculator,  # noqa: F811
                                                    data: dict) -> None:
    from .test_deepspeed_oracle import check_with_deepspeed
    from .test_megatron_oracle import check_plan

    with tempfile.TemporaryDirectory() as tmp:
        template, _, result = search_of(Path(tmp), data, keep=3)
    for c in result.ranked:
        plan = resolve(concrete(template, c))
        files = render_all(plan)
        if "ds_config.json" in files:
            check_with_deepspeed(deepspeed_config, plan, files["ds_config.json"])
        if plan.framework != "deepspeed":
            check_plan(calculator, plan)


# Published parallel layouts (tp × pp) rank in the model's top 10 (generator/autoplan/published.py
# names the sources); the README lists where the model's schedule for them differs.
@pytest.mark.parametrize("case", cases(), ids=[c.name for c in cases()])
def test_published_layouts_rank_near_the_top(case) -> None:
    ranked = rank(case)
    assert ranked.rank is not None, f"{case.name}: the published layout is not feasible"
    assert ranked.rank <= 10, (case.name, ranked.rank, ranked.best.layout)
    assert ranked.published.step_time <= ranked.best.step_time * 1.10


def test_plan_cli_prints_the_ranking(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", str(SAMPLE_405B), "--top", "3"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "candidates/s" in lines[1] and "generate uses #1" in lines[-1]
    assert sum(1 for line in lines if line.strip()[:2] in ("1 ", "2 ", "3 ")) == 3
    as_json = json.loads(runner.invoke(app, ["plan", str(SAMPLE_405B), "-f", "json"]).stdout)
    assert len(as_json["ranked"]) == 10 and as_json["fitting"] > 0
    assert as_json["ranked"][0]["step_time_s"] <= as_json["ranked"][1]["step_time_s"]
    assert as_json["candidates_evaluated"] >= as_json["fitting"] and as_json["nothing_fits"] is None


def test_nothing_fits_says_why_and_what_would(tmp_path: Path) -> None:
    """Llama-2-70B on one A100 node (18 bytes per parameter of state): nothing fits; on 4 nodes
    with pp 4 it does."""
    data = spec_dict(cluster={"nodes": 1, "gpus_per_node": 8, "gpu": "a100-80gb"},
                     model={k: None for k in BASE["model"]} | {"preset": "llama2-70b"},
                     parallelism={"tp": "auto", "pp": "auto"},
                     batch={"micro_batch_size": 1, "gradient_accumulation_steps": None,
                            "global_batch_size": 64})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == 1
    assert "nothing fits in 76.0 GiB (80.0 less a 4.0 GiB margin); the smallest estimate is" in result.stdout
    assert "weights" in result.stdout and "what would fit:" in result.stdout
    assert "4× the nodes (4):" in result.stdout and "training.recompute: auto" in result.stdout
    assert "parallelism.distributed_optimizer: auto" in result.stdout
    generated = runner.invoke(app, ["generate", str(path), "--out", str(tmp_path / "out")])
    assert generated.exit_code == 2 and "nothing fits" in generated.stderr
    assert not (tmp_path / "out").exists()


def test_generate_records_the_choice(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["generate", str(SAMPLE_405B), "--out", str(out)]).exit_code == 0
    plan = json.loads((out / "plan.json").read_text())
    auto = plan["auto_plan"]
    assert auto["chosen"]["parallelism.tp"] == plan["parallelism"]["tp"]
    assert auto["candidates_evaluated"] >= auto["fitting"] > 1 and auto["why"].startswith("#1")
    spec = load_spec(SAMPLE_405B)
    assert spec.auto is not None and spec.parallelism.pp == plan["parallelism"]["pp"]
    explained = runner.invoke(app, ["explain", str(SAMPLE_405B)]).stdout
    assert "chosen by auto-plan from" in explained


def test_errors_of_the_fixed_values_are_reported_before_searching(tmp_path: Path) -> None:
    data = spec_dict(model={"max_position_embeddings": 1024}, parallelism={"tp": "auto"})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == 2 and "GL205" in result.stderr and "spec.yaml:" in result.stderr


def test_auto_values_are_checked_by_the_schema(tmp_path: Path) -> None:
    data = spec_dict(parallelism={"tp": "autoo", "pp": [1, -2]}, training={"recompute": ["sometimes"]})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == 2
    assert "$.parallelism.tp: expected an integer ≥ 1, \"auto\" or a list" in result.stderr
    assert "did you mean 'auto'?" in result.stderr
    assert "$.parallelism.pp[1]: must be at least 1, got -2" in result.stderr
    assert "$.training.recompute[0]: 'sometimes' is not one of none, selective, full" in result.stderr


FIXED = [s for s in SAMPLES if not load_spec(s).doc.data.get("sweep") and load_spec(s).auto is None
         and not load_spec(s).stage_names]


@pytest.mark.parametrize("sample", FIXED, ids=[s.stem for s in FIXED])
def test_plan_and_explain_estimate_the_same_layout_alike(sample) -> None:
    """One layout definition for both: auto-plan's row of a fixed spec is the plan's estimate
    (HSDP's shard group included: sft-llama3-8b-fsdp2 was 22.27 vs 30.12 GiB)."""
    from generator.calculator.resolve import resolve
    from generator.estimate.memory import GIB

    result = CliRunner().invoke(app, ["plan", str(sample), "--format", "json"])
    row = json.loads(result.stdout)["ranked"][0]
    estimate = resolve(load_spec(sample)).estimate()
    assert row["memory_gib"] == pytest.approx(estimate.memory.total / GIB, abs=0.01)
    if estimate.performance is not None:
        assert row["step_time_s"] == pytest.approx(estimate.performance.step_time_s, rel=1e-3)


def test_one_parallel_layout_among_many_fitting_candidates_is_said_so(tmp_path: Path) -> None:
    """With tp and pp fixed and the micro batch searched, one parallel layout row fits in several
    candidates: the summary says that, not "the only layout that fits"."""
    from generator.autoplan.report import why_best

    data = spec_dict(parallelism={"tp": 2, "pp": 2}, batch={"micro_batch_size": "auto",
                                                           "gradient_accumulation_steps": None,
                                                           "global_batch_size": 64})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    _, _, result = run_search(load_document(path))
    assert len(result.ranked) == 1 and result.fitting > 1, (len(result.ranked), result.fitting)
    text = why_best(result.ranked, result.fitting)
    assert "is the only parallel layout that fits; the other" in text
    assert f"{result.fitting - 1:,} candidates that fit are it with another micro batch" in text


def test_plan_picks_no_layout_above_the_memory_headroom(tmp_path) -> None:
    """cluster.memory_headroom_gib keeps memory free of every fit: the search's layouts all
    fit in the GPU's memory less it, and some that fit without it no longer do."""
    import yaml

    from generator.autoplan import run_search
    from generator.estimate.memory import GIB
    from generator.spec.model import load_document

    data = spec_dict(model={"preset": "llama3-8b", "num_layers": None, "hidden_size": None,
                            "num_attention_heads": None, "vocab_size": None, "seq_length": None},
                     parallelism={"tp": "auto", "pp": "auto"},
                     batch={"micro_batch_size": "auto", "gradient_accumulation_steps": None, "global_batch_size": 256})
    results = {}
    for headroom in (0, 30):
        path = tmp_path / f"h{headroom}.yaml"
        path.write_text(yaml.safe_dump({**data, "cluster": {**data["cluster"], "memory_headroom_gib": headroom}}))
        results[headroom] = run_search(load_document(path, str(path)), keep=1000)[2]
    assert results[30].fitting < results[0].fitting
    assert all(c.memory.total / GIB <= 79.6 - 30 for c in results[30].ranked)
    assert any(c.memory.total / GIB > 79.6 - 30 for c in results[0].ranked)


def test_the_choice_is_cached_by_spec_and_read_back_without_searching(tmp_path, monkeypatch) -> None:
    """generate / --check / explain of a spec searched before read auto-plan's choice from the
    cache: the same plan, no search; another spec searches anew; a damaged file is ignored."""
    import yaml

    import generator.autoplan.search as search_module
    from generator.calculator.resolve import resolve
    from generator.run import load_spec

    monkeypatch.setenv("GEN_LAUNCH_CACHE", str(tmp_path / "cache"))
    searches = []
    real = search_module.search
    monkeypatch.setattr(search_module, "search", lambda *a, **k: searches.append(1) or real(*a, **k))
    data = spec_dict(parallelism={"tp": "auto", "pp": "auto"})
    path = tmp_path / "auto.yaml"
    path.write_text(yaml.safe_dump(data))
    first = resolve(load_spec(path))
    again = resolve(load_spec(path))
    assert len(searches) == 1
    assert (again.tp, again.pp, again.spec.auto) == (first.tp, first.pp, first.spec.auto)
    path.write_text(yaml.safe_dump({**data, "batch": {"micro_batch_size": 1, "gradient_accumulation_steps": 8}}))
    resolve(load_spec(path))
    assert len(searches) == 2  # another spec
    for count, damage in enumerate(("{not json", "[1, 2]", '{"values": {}}'), start=3):
        for cached in (tmp_path / "cache" / "autoplan").glob("*.json"):
            cached.write_text(damage)
        resolve(load_spec(path))
        assert len(searches) == count  # a damaged entry is searched again (and rewritten)
    resolve(load_spec(path))
    assert len(searches) == 5


def test_a_long_search_reports_its_progress(monkeypatch) -> None:
    """Past PROGRESS_AFTER_S the search reports the candidates it has evaluated, and once more
    when it is done; a quick search says nothing."""
    import generator.autoplan.search as search_module
    from generator.autoplan import run_search
    from generator.spec.model import load_document

    from .conftest import ROOT

    doc = load_document(ROOT / "samples" / "llama3.1-405b-auto.yaml")
    calls: list[tuple[int, bool]] = []
    real = search_module.search
    monkeypatch.setattr(search_module, "search", lambda *a, **k: real(
        *a, **k, progress=lambda n, s, done: calls.append((n, done))))
    monkeypatch.setattr(search_module, "PROGRESS_AFTER_S", 0.0)
    result = run_search(doc, keep=1)[2]
    assert calls and calls[-1] == (result.evaluated, True) and all(not d for _, d in calls[:-1])
    assert [n for n, _ in calls[:-1]] == sorted(n for n, _ in calls[:-1])
    calls.clear()
    monkeypatch.setattr(search_module, "PROGRESS_AFTER_S", 3600.0)
    run_search(doc, keep=1)
    assert calls == []


AUTO_CASES = {  # sample -> the fields opened to the search
    "llama3.1-405b-auto.yaml": {},
    "mixtral-8x7b-moe.yaml": {"parallelism": ["tp", "pp", "ep", "distributed_optimizer"],
                              "batch": ["micro_batch_size"], "training": ["recompute"]},
    "llama3-8b-fp8.yaml": {"parallelism": ["tp", "pp", "cp", "vpp", "distributed_optimizer"],
                           "batch": ["micro_batch_size"]},
    "deepspeed-zero3-llama2-7b.yaml": {"parallelism": ["zero_stage"], "batch": ["micro_batch_size"],
                                       "training": ["recompute"]},
    "sft-llama3-8b-fsdp2.yaml": {"batch": ["micro_batch_size"], "training": ["recompute"]},
    "cpu-tiny.yaml": {"parallelism": ["tp", "pp"], "batch": ["micro_batch_size"]},  # no peak: no time
}


def auto_case(sample: str, tmp_path: Path):
    """(template spec, the search's choices) of a sample with AUTO_CASES' fields opened."""
    from generator.autoplan.space import domains, placeholders, searched
    from generator.run import build_spec
    from generator.spec.load import Document

    data = yaml.safe_load((ROOT / "samples" / sample).read_text(encoding="utf-8"))
    for section, fields in AUTO_CASES[sample].items():
        for name in fields:
            data[section][name] = "auto"
    path = tmp_path / sample
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    doc = load_document(path)
    spec = build_spec(Document(doc.file, placeholders(doc.data), doc.root, doc.digest))
    return spec, domains(searched(doc.data), spec)


@pytest.mark.parametrize("sample", sorted(AUTO_CASES))
def test_rules_that_cannot_fire_are_left_out_without_changing_the_search(sample: str, tmp_path: Path) -> None:
    """The search leaves out the rules a fact the spec leaves unset keeps silent (a Megatron
    run's ZeRO stage, a dp the spec does not give): the layouts it keeps and the rejections it
    counts, rule by rule, are those of every rule run."""
    from generator.autoplan import search as s

    class EveryRule(s._Rules):
        def _can_fire(self, rule) -> bool:
            return True

    spec, choices = auto_case(sample, tmp_path)
    facts = s.spec_facts(spec)
    pruned, every = s._Rules(facts, choices), EveryRule(facts, choices)
    kept = sum(len(level) for level in pruned.by_level)
    assert kept < sum(len(level) for level in every.by_level)  # some are left out
    searches = s.Search(), s.Search()
    rows = [list(s._layouts(spec, choices, rules, out))
            for rules, out in zip((pruned, every), searches, strict=True)]
    assert rows[0] == rows[1]
    assert searches[0].rejected == searches[1].rejected


@pytest.mark.parametrize("sample", sorted(AUTO_CASES))
def test_the_search_estimates_every_candidate_as_the_plan_does(sample: str, tmp_path: Path) -> None:
    """The search estimates its candidates as arrays through the plan's own formulas: every
    candidate's memory and step time are exactly (bit for bit) what the one-layout estimate
    gives, so the ranking is the plan's."""
    from generator.autoplan import search as s
    from generator.estimate.plan import hardware_of, usable_memory_gib

    spec, choices = auto_case(sample, tmp_path)
    rows = list(s._layouts(spec, choices, s._Rules(s.spec_facts(spec), choices), s.Search()))
    gpu = s._gpu(spec.cluster.gpu)
    capacity = usable_memory_gib(spec, gpu)
    hardware = hardware_of(gpu, spec.training.precision, spec.cluster.gpus_per_node)
    recomputes = choices["recompute"]
    totals, steps = s._estimate_all(spec, rows, recomputes, capacity, hardware)
    assert len(rows) > 1 and len(totals) == len(rows) * len(recomputes)
    shapes: dict = {}
    differ = []
    for i in range(len(totals)):
        v = rows[i // len(recomputes)]
        one = s._estimate(spec, s._shape(spec, v["tp"], shapes), v, recomputes[i % len(recomputes)],
                          capacity, hardware)
        if (one.memory.total, one.step_time) != (totals[i], steps[i]):
            differ.append((v, recomputes[i % len(recomputes)], one.memory.total, totals[i],
                           one.step_time, steps[i]))
    assert not differ, differ[:3]
    assert (hardware is None) == (not steps.any())


def test_auto_tp_reaches_across_gb200_trays_within_the_nvlink_domain(tmp_path: Path) -> None:
    """tp "auto" tries the divisors of the NVLink domain up to 8: on GB200 NVL72 (Slurm nodes of
    4 GPUs, one NVLink fabric across 18 trays) tp 8 too, where it was held to a tray's 4; on
    8-GPU H100 nodes the node's divisors as before."""
    from generator.autoplan.space import domains

    for gpu, per_node, tps in (("gb200", 4, [1, 2, 3, 4, 6, 8]), ("h100-80gb", 8, [1, 2, 4, 8])):
        spec = plan_of(tmp_path, spec_dict(cluster={"nodes": 4, "gpus_per_node": per_node, "gpu": gpu}),
                       f"{gpu}.yaml").spec
        assert domains({"parallelism.tp": "auto"}, spec)["tp"] == tps


def test_within_two_percent_of_the_fastest_more_memory_free_wins() -> None:
    """Issue 41: a layout at 78.6 of 79.6 GiB came first over one at 67 GiB 0.1 % slower. Within
    TIE of the fastest the memory free decides (up to a quarter of the memory free: beyond, the
    faster); outside it the step time."""
    import numpy

    def order(gib: list[float], seconds: list[float]) -> list[int]:
        index = numpy.arange(len(gib))
        return list(_ranking(index, numpy.array(gib) * GIB, numpy.array(seconds), 79.6))

    assert order([78.6, 67.0], [1.000, 1.001]) == [1, 0]
    assert order([78.6, 67.0], [1.000, 1.050]) == [0, 1]  # 5 % slower: the step time decides
    assert order([20.0, 11.0], [1.000, 1.007]) == [0, 1]  # both leave plenty free: the faster
    assert order([70.0, 60.0, 40.0], [1.03, 1.0, 1.01]) == [2, 1, 0]


def test_the_memory_margin_is_kept_free_and_can_be_set(tmp_path: Path) -> None:
    """plan keeps 5 % of the GPU's memory free of every fit by default; --memory-margin sets it
    (0 judges against the usable memory alone), and the summary says what fits within."""
    data = spec_dict(model={"preset": "llama3-8b", "num_layers": None, "hidden_size": None,
                            "num_attention_heads": None, "vocab_size": None, "seq_length": None},
                     parallelism={"tp": "auto", "pp": "auto"},
                     batch={"micro_batch_size": "auto", "gradient_accumulation_steps": None, "global_batch_size": 256})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    runs = {margin: json.loads(runner.invoke(app, ["plan", str(path), "-f", "json", "--memory-margin",
                                                   str(margin)]).stdout) for margin in (0, 5, 40)}
    assert runs[0]["memory_limit_gib"] == 79.6 and runs[5]["memory_limit_gib"] == pytest.approx(79.6 - 3.98)
    assert runs[0]["fitting"] >= runs[5]["fitting"] > runs[40]["fitting"]
    assert all(row["memory_gib"] <= 79.6 - 0.4 * 79.6 for row in runs[40]["ranked"])
    text = runner.invoke(app, ["plan", str(path)]).stdout
    assert "fit (within 75.6 GiB: 79.6 usable less a 4.0 GiB margin of 5 %)" in text
    assert "generate uses #1" in text
    other = runner.invoke(app, ["plan", str(path), "--memory-margin", "0"]).stdout
    assert "generate keeps a 5 % margin, not 0 %: its choice may differ from #1" in other


def test_one_of_a_kind_is_said_in_the_singular(tmp_path: Path) -> None:
    """"1 layout passes", "1 fits" (not "1 layouts fit")."""
    data = spec_dict(cluster={"nodes": 1, "gpus_per_node": 2},
                     model={"num_layers": 3, "hidden_size": 192, "num_attention_heads": 3},
                     parallelism={"tp": "auto", "pp": "auto"},
                     batch={"micro_batch_size": "auto", "gradient_accumulation_steps": None,
                            "global_batch_size": 2})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    text = runner.invoke(app, ["plan", str(path)]).stdout
    assert "1 layout passes the structural rules" in text and "1 candidate estimated" in text
    assert "), 1 fits (within" in text and "1 layouts" not in text


def test_an_auto_field_the_framework_cannot_vary_is_said_so() -> None:
    """plan --set parallelism.tp=auto on plain DeepSpeed searches tp 1 alone: the summary and the
    JSON say so (and why), rather than pass it off as a search of tp."""
    spec = str(ROOT / "samples" / "deepspeed-zero3-llama2-7b.yaml")
    text = runner.invoke(app, ["plan", spec, "--set", "parallelism.tp=auto", "--set", "parallelism.pp=auto"]).stdout
    assert "note: parallelism.tp: auto searches 1 alone: plain DeepSpeed trains your script's model unsplit" in text
    assert "note: parallelism.pp: auto searches 1 alone: DeepSpeed's pipeline engine is searched only from a " \
        "list" in text
    as_json = json.loads(runner.invoke(app, ["plan", spec, "--set", "parallelism.tp=auto", "-f", "json"]).stdout)
    assert len(as_json["notes"]) == 1 and as_json["notes"][0].startswith("parallelism.tp: auto searches 1 alone")
    megatron = json.loads(runner.invoke(app, ["plan", str(SAMPLE_405B), "-f", "json"]).stdout)
    assert megatron["notes"] == []
