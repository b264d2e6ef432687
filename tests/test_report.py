"""gen-launch report: the chart data (golden files per sample, and the numbers plan.json has),
the pipeline timeline against the estimate's bubble, the learning rate against megatron-core's
own scheduler, and the command (its page, its errors, the missing extra, start-up)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from generator.cli import app
from generator.report import chart_data, pipeline
from generator.report.data import lr_at, report_data
from generator.run import load_spec, resolve_run
from generator.spec.model import load_document
from generator.sweep import sweep_points

from .conftest import MINIMAL, ROOT, SAMPLES, require_oracle

GOLDEN = ROOT / "tests" / "golden_report"
runner = CliRunner()


def _runs(sample: Path) -> dict[str, list]:
    """{label: the plans of one run}: the sample, or each point of a sweep."""
    display = f"samples/{sample.name}"
    doc = load_document(sample, display)
    if doc.data.get("sweep"):
        return {point.label: point.plans for point in sweep_points(doc) if point.error is None}
    return {"": resolve_run(load_spec(sample, display))}


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, list]]:
    return {sample.stem: _runs(sample) for sample in SAMPLES}


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.stem for s in SAMPLES])
def test_chart_data_golden(sample: Path, update_golden: bool) -> None:
    """The numbers every chart draws (not its pixels), as the page gets them: auto-plan's
    ranking included, a sweep's points each."""
    pages = chart_data(load_document(sample, f"samples/{sample.name}"))[1]
    data = json.loads(json.dumps({relative: data for relative, (_, data) in pages.items()}))
    path = GOLDEN / f"{sample.stem}.json"
    text = json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    if update_golden:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.is_file(), f"no golden chart data for {sample.name}; run pytest --update-golden"
    assert json.loads(path.read_text(encoding="utf-8")) == data, \
        f"chart data of {sample.name} changed (pytest --update-golden to accept; review the diff)"


def test_no_orphaned_golden_chart_data() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == sorted(s.stem for s in SAMPLES)


def _all_plans(runs) -> list:
    return [plan for by_label in runs.values() for plans in by_label.values() for plan in plans]


def test_most_loaded_stage_is_plan_json_memory(runs) -> None:
    """Every pipeline stage is drawn; the largest is the stage and total plan.json reports."""
    for plan in _all_plans(runs):
        memory = report_data([plan])["memory"][0]
        record = plan.to_json()["memory"]
        assert len(memory["stages"]) == plan.pp
        assert max(s["total_gib"] for s in memory["stages"]) == record["total_gib"], plan.spec.name
        assert memory["plan"] == {"total_gib": record["total_gib"], "fits": record["fits"],
                                  "stage": record["stage"]}


def test_timeline_bubble_is_the_estimate_bubble(runs) -> None:
    """The schedule laid out operation by operation idles exactly the estimate's bubble, and
    the step ends at plan.json's step time."""
    for plan in _all_plans(runs):
        step = report_data([plan])["step"][0]
        performance = plan.to_json()["performance"]
        if performance is None:
            assert step is None
            continue
        t = step["timeline"]
        assert round(t["bubble_s"], 3) == pytest.approx(performance["step_breakdown_s"]["pipeline_bubble"],
                                                         abs=1e-3), plan.spec.name
        total = t["pipeline_s"] + sum(t["exposed_s"].values()) + t["optimizer_s"]
        assert total == pytest.approx(performance["step_time_s"], abs=0.01), plan.spec.name


@pytest.mark.parametrize(("pp", "vpp", "m"), [(1, 1, 4), (4, 1, 2), (4, 1, 8), (4, 2, 8), (8, 3, 24), (2, 4, 2)])
def test_pipeline_schedule_keeps_every_dependency(pp: int, vpp: int, m: int) -> None:
    """Each stage runs one operation at a time; a chunk's forward follows the previous virtual
    stage's, its backward follows the next one's (and its own forward); every micro-batch passes
    every chunk forward and back once; the bubble is (p − 1)/(v·m) of the busy time."""
    ops = pipeline.schedule(pp, vpp, m, busy_s=3.0 * m)
    assert len(ops) == 2 * pp * vpp * m
    end = {(o.forward, o.chunk * pp + o.stage, o.micro): o for o in ops}
    assert len(end) == len(ops)
    last = pp * vpp - 1
    for o in ops:
        virtual = o.chunk * pp + o.stage
        if o.forward and virtual:
            assert end[(True, virtual - 1, o.micro)].end <= o.start
        if not o.forward:
            before = end[(True, last, o.micro)] if virtual == last else end[(False, virtual + 1, o.micro)]
            assert before.end <= o.start and end[(True, virtual, o.micro)].end <= o.start
    for stage in range(pp):
        mine = sorted((o for o in ops if o.stage == stage), key=lambda o: o.start)
        assert all(a.end <= b.start + 1e-12 for a, b in zip(mine, mine[1:], strict=False))
    assert max(o.end for o in ops) - 3.0 * m == pytest.approx(3.0 * m * (pp - 1) / (vpp * m))


def test_learning_rate_is_megatron_cores(runs) -> None:
    """The curve drawn is megatron-core's OptimizerParamScheduler.get_lr at every point, for
    a cosine run, a batch ramp-up (counted in samples) and a run in stages."""
    require_oracle("megatron.core")
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

    class Optimizer:  # what the scheduler reads of an optimizer: its parameter groups
        param_groups: list = [{}]

    for name in ("seed-pretrain-256", "bloom-176b-rampup", "llama3-8b-progressive"):
        plans = runs[name][""]
        s = plans[0].to_json()["scheduler"]
        style = {"cosine": "cosine", "linear": "linear", "constant": "constant", "wsd": "WSD"}[s["decay_style"]]
        megatron = OptimizerParamScheduler(Optimizer(), 0.0, s["lr"], s["min_lr"], s["warmup_steps"],
                                           s["decay_steps"], style, 0.1, 0.1, s["decay_steps"], "constant",
                                           wsd_decay_steps=s["wsd_decay_steps"], lr_wsd_decay_style="linear")
        run = report_data(plans)["run"]
        assert run["counts_in"] == "samples"
        for point in run["points"]:
            position = _position(plans, point["step"])
            megatron.num_steps = position
            assert point["lr"] == pytest.approx(megatron.get_lr({}), rel=1e-5), (name, point)
            assert lr_at(s, position) == pytest.approx(megatron.get_lr({}), rel=1e-12)


def _position(plans: list, step: int) -> int:
    """Samples consumed after ``step`` steps of the run, stage by stage (an independent walk)."""
    consumed = 0
    for plan in plans:
        taken = min(step, plan.schedule.train_iters)
        consumed += plan.batch_ramp.samples_after(taken) if plan.batch_ramp else taken * plan.global_batch_size
        step -= taken
    return consumed


def test_run_over_time_follows_the_plans(runs) -> None:
    """Tokens end at the run's tokens; the batch ramp's sizes in order; stages where each starts."""
    bloom = runs["bloom-176b-rampup"][""][0]
    run = report_data([bloom])["run"]
    assert run["points"][-1]["tokens"] == bloom.train_tokens
    assert [size for _, size in run["batch_changes"]] == [size for _, size in bloom.batch_ramp.entries]
    assert run["points"][0]["global_batch"] == 192 and run["points"][-1]["global_batch"] == 2048
    stages = runs["llama3-8b-progressive"][""]
    run = report_data(stages)["run"]
    assert [s["step"] for s in run["stages"]] == [0, stages[0].schedule.train_iters]
    assert run["total_steps"] == sum(p.schedule.train_iters for p in stages)
    assert run["points"][-1]["tokens"] == sum(p.train_tokens for p in stages)
    assert run["warmup_end_step"] is not None
    assert [a is not None for a in run["allocations"]] == [bool(p.allocations) for p in stages]


def test_the_chosen_layout_is_the_plan() -> None:
    """Auto-plan's chart marks one layout, the one the plan has: its memory, step time and MFU
    are plan.json's; the rules' rejections are counted by code."""
    sample = ROOT / "samples" / "llama3.1-405b-auto.yaml"
    data = chart_data(load_document(sample, f"samples/{sample.name}"))[1]["report.html"][1]
    record = resolve_run(load_spec(sample))[0].to_json()
    chosen = [row for row in data["layouts"]["ranked"] if row["chosen"]]
    assert len(chosen) == 1 and chosen[0]["rank"] == 1
    row = chosen[0]
    assert (row["tp"], row["pp"], row["cp"], row["dp"]) == tuple(record["parallelism"][k] for k in ("tp", "pp", "cp", "dp"))
    assert row["memory_gib"] == record["memory"]["total_gib"] and row["mfu"] == record["performance"]["mfu"]
    assert round(row["step_time_s"], 3) == record["performance"]["step_time_s"]
    assert data["layouts"]["rejected"] and all(r["count"] > 0 and r["code"].startswith("GL")
                                               for r in data["layouts"]["rejected"])


def test_report_writes_the_page(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["report", str(ROOT / "samples" / "seed-sft-64.yaml")])
    assert result.exit_code == 0, result.output
    page = tmp_path / "launch" / "seed-sft-64" / "report.html"
    assert result.output.strip() == "wrote launch/seed-sft-64/report.html" and page.is_file()
    html = page.read_text(encoding="utf-8")
    assert html.count("<svg") == 3 and "<script" not in html
    links = re.findall(r"""(?:href|src)\s*=\s*["']([^"']*)|url\(\s*["']?([^)"']*)""", html)
    assert links and all(target.startswith(("#", "data:")) for pair in links for target in pair if target)
    out = tmp_path / "elsewhere" / "r.html"
    assert runner.invoke(app, ["report", str(ROOT / "samples" / "seed-sft-64.yaml"), "-o", str(out)]).exit_code == 0
    assert out.read_text(encoding="utf-8") == html


def test_bad_input_reads_as_explain_does(tmp_path: Path, write_spec) -> None:
    """A missing spec, a schema error and a plan error: the same located lines and exit 2."""
    bad = write_spec(MINIMAL.replace("tp: 2, pp: 2", "tp: 3, pp: 2"))
    schema = write_spec("name: t\nframework: megatron-lm\ncluster: {nodes: two}\n", "schema.yaml")
    for spec in (tmp_path / "missing.yaml", bad, schema):
        explained = runner.invoke(app, ["explain", str(spec)])
        reported = runner.invoke(app, ["report", str(spec), "-o", str(tmp_path / "r.html")])
        assert explained.exit_code == reported.exit_code == 2
        assert reported.output == explained.output and str(spec) in reported.output
    assert not (tmp_path / "r.html").exists()


def test_a_sweep_writes_a_page_per_point(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    sweep = str(ROOT / "samples" / "sweep-tp-micro.yaml")
    refused = runner.invoke(app, ["report", sweep, "-o", "one.html"])
    assert refused.exit_code == 2 and "give no --out" in refused.output
    result = runner.invoke(app, ["report", sweep])
    assert result.exit_code == 0, result.output
    pages = sorted(p.parent.name for p in (tmp_path / "launch" / "sweep-tp-micro").glob("*/report.html"))
    points = sweep_points(load_document(ROOT / "samples" / "sweep-tp-micro.yaml", sweep))
    assert pages == sorted(p.label for p in points if p.error is None) and len(pages) >= 2


def _run_cli(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)


def test_missing_matplotlib_names_the_extra(tmp_path: Path) -> None:
    """Without matplotlib (hidden from the import system): exit 2, the pip line, no traceback."""
    out = tmp_path / "r.html"
    code = ("import sys\nsys.modules['matplotlib'] = None\nfrom generator.cli import entrypoint\n"
            f"entrypoint(['report', 'samples/seed-sft-64.yaml', '-o', {str(out)!r}])")
    done = _run_cli(code)
    assert done.returncode == 2, done.stderr
    assert "pip install 'gen-launch[report]'" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()


def test_other_commands_do_not_import_the_report() -> None:
    """The plain CLI starts as before: neither matplotlib nor the report package is imported by
    explain (or --version); report imports them."""
    probe = ("import sys\nfrom generator.cli import entrypoint\ntry:\n    entrypoint({args})\n"
             "except SystemExit:\n    pass\n"
             "print(sorted(m for m in ('matplotlib', 'generator.report') if m in sys.modules), file=sys.stderr)")
    for args, expected in ((["--version"], "[]"), (["explain", "samples/seed-sft-64.yaml"], "[]")):
        done = _run_cli(probe.format(args=args))
        assert done.stderr.strip().splitlines()[-1] == expected, done.stderr
