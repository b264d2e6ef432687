"""Command line: ``gen-launch generate|explain|schema|rules`` and the short ``gen-launch SPEC``.

Only this module touches files, the terminal and exit codes: 0 success, 1 findings or drift
(later commands), 2 bad input or usage. No traceback reaches a user (GEN_LAUNCH_DEBUG=1 shows
one for internal errors).
"""

from __future__ import annotations

import copy
import enum
import gc
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from generator import __version__
from generator.errors import UserError


def _usage_pieces(self, ctx) -> list[str]:
    """A required argument in the usage line as ``SPEC`` (``SPEC...`` for several), an optional
    one as ``[SPEC]``: the convention of man pages (typer writes ``{spec}``)."""
    name = (self.metavar or self.name or "").upper()
    return [(name if self.required else f"[{name}]") + ("..." if self.nargs != 1 else "")]


typer.core.TyperArgument.get_usage_pieces = _usage_pieces

app = typer.Typer(
    name="gen-launch",
    help="One YAML run spec -> one consistent plan -> DeepSpeed JSON, Megatron-LM arguments, "
    "Hugging Face Trainer arguments, an accelerate config and a Slurm sbatch script that agree by "
    "construction. `gen-launch SPEC` is short for `gen-launch generate SPEC`.",
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
)
T = TypeVar("T")


class Target(str, enum.Enum):
    deepspeed = "deepspeed"
    megatron = "megatron"
    trainer = "trainer"
    accelerate = "accelerate"
    slurm = "slurm"
    # the other executors' files (launch.executor; data/executors.yaml)
    trainjob = "trainjob"
    pytorchjob = "pytorchjob"
    jobset = "jobset"
    skypilot = "skypilot"
    all = "all"


class Format(str, enum.Enum):
    text = "text"
    json = "json"


class LintFormat(str, enum.Enum):
    text = "text"
    json = "json"
    github = "github"
    sarif = "sarif"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gen-launch {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """gen-launch: launch files for Megatron-LM, DeepSpeed and Slurm from one spec."""


def _guarded(action: Callable[[], T]) -> T:
    """Run ``action``; bad input -> message on stderr and exit 2, never a traceback."""
    try:
        return action()
    except UserError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    except (typer.Exit, typer.Abort):
        raise
    except BrokenPipeError:  # e.g. `gen-launch explain spec.yaml | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0) from None
    except Exception as exc:  # an internal error: still no traceback unless asked for
        if os.environ.get("GEN_LAUNCH_DEBUG"):
            raise
        typer.echo(f"gen-launch: internal error: {type(exc).__name__}: {exc} "
                   "(set GEN_LAUNCH_DEBUG=1 for a traceback)", err=True)
        raise typer.Exit(2) from None


SetOption = Annotated[list[str] | None, typer.Option(
    "--set", help="Override a spec value: --set parallelism.tp=8 (repeatable; typed by the schema).")]


SpecArg = Annotated[Path, typer.Argument(help="The run spec (YAML).", show_default=False)]


@app.command()
def generate(
    specs: Annotated[list[Path], typer.Argument(
        metavar="SPEC", help="Run spec(s) (YAML); several only without --out (e.g. from "
        "pre-commit), each to its default folder. With --check, a generated file stands for the "
        "spec its plan.json names.", show_default=False)],
    target: Annotated[Target, typer.Option("--target", "-t", help="Which artifact to render.")] = Target.all,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output folder (default for "
                   "--target all: launch/<name>/). A single target without --out prints to stdout.")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings (e.g. GL020: the estimate "
                      "does not fit in GPU memory) as errors: exit 1, write nothing.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Write nothing: compare with the files in "
                     "the output folder and exit 1 if any differs, is missing or is extra.")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="With --check: print a unified diff.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Leave out the notes (roundings, "
                     "auto-plan's choice); warnings and errors still print.")] = False,
    overrides: SetOption = None,
) -> None:
    """Render the plan into ds_config.json, megatron_args.sh, trainer_args.sh,
    accelerate_config.yaml, torchtitan_args.sh, torchtitan_config.py (those the framework and
    launcher use), the executor's file (launch.sbatch, trainjob.yaml, pytorchjob.yaml, jobset.yaml
    or sky.yaml with launch.sh) and plan.json."""

    if len(specs) > 1 and out is not None:
        typer.echo("--out takes one spec; several specs each go to launch/<name>/", err=True)
        raise typer.Exit(2)
    if check and out is None:  # pre-commit passes the generated files a commit touches too
        # deferred: generate --check only; the CLI imports each command's modules when it runs (start-up)
        from generator.drift import specs_of

        specs, notes = specs_of(specs)
        for note in notes:
            typer.echo(note, err=True)
    codes = [_guarded(lambda spec=spec: _generate_one(spec, target, out, strict, check, diff,
                                                      overrides, quiet))
             for spec in specs]
    if any(codes):
        raise typer.Exit(max(codes))


def _generate_one(spec: Path, target: Target, out: Path | None, strict: bool, check: bool,
                  diff: bool, overrides: list[str] | None, quiet: bool = False) -> int:
    """Render one spec (its stages, or its sweep points) as {relative path: text}, then write,
    print or --check it; returns the exit code: 0, or 1 for drift or --strict."""
    # deferred: generate's modules, imported when it runs (start-up of --version and the other commands)
    from generator.artifacts import spec_files
    from generator.render import ARTIFACTS
    from generator.run import load_spec

    loaded = load_spec(spec, str(spec), tuple(overrides or ()))
    wanted = None if target is Target.all else ARTIFACTS[target.value][0]
    files, reports, problems = spec_files(loaded, wanted)
    for line in reports:
        if not (quiet and re.match(r"(\S+: )?note: ", line)):  # a sweep point's lines carry its name
            typer.echo(line, err=True)
    if wanted is not None and out is None and not check:
        if len(files) != 1:
            raise UserError(f"{spec}: {len(files)} files (stages or sweep points); give --out to "
                            "write each into its folder")
        sys.stdout.write(next(iter(files.values())))
        return 0
    if strict and problems:
        typer.echo(f"--strict: {problems} warning(s) or invalid point(s); nothing written", err=True)
        return 1
    folder = out if out is not None else Path("launch") / loaded.name
    if check:
        return _check(folder, files, diff, extras=wanted is None)
    _write(folder, files)
    return 0


def _check(folder: Path, expected: dict[str, str], show_diff: bool, extras: bool) -> int:
    from generator.drift import compare  # deferred: generate --check only (start-up)

    drift = compare(expected, folder, extras)
    if drift.clean:
        typer.echo(f"{folder}: {len(expected)} file(s) up to date", err=True)
        return 0
    typer.echo(drift.summary())
    if show_diff:
        sys.stdout.write(drift.diff)
    typer.echo(f"{folder}: generated files drifted from the spec; regenerate with "
               "gen-launch generate", err=True)
    return 1


def _write(folder: Path, files: dict[str, str]) -> None:
    # deferred: generate's writing (all or nothing, staged beside the folder), imported when it runs
    from generator.artifacts import write_files

    try:
        for path in write_files(folder, files):
            typer.echo(f"wrote {path}")
    except OSError as exc:
        raise UserError(f"cannot write: {exc.strerror}", None) from None


@app.command()
def explain(
    spec: SpecArg,
    output_format: Annotated[Format, typer.Option("--format", "-f", help="text or json.")] = Format.text,
    overrides: SetOption = None,
) -> None:
    """Print the plan's derivation step by step (or the plan as JSON); a sweep's index table."""

    def run() -> None:
        # deferred: explain's modules, imported when it runs (start-up)
        from generator.run import load_spec, resolve_run

        loaded = load_spec(spec, str(spec), tuple(overrides or ()))
        if loaded.doc.data.get("sweep"):
            from generator.sweep import index, sweep_points  # deferred: a sweep only (start-up)

            markdown, data = index(sweep_points(loaded.doc))
            sys.stdout.write(data if output_format is Format.json else markdown)
            return
        plans = resolve_run(loaded)
        if output_format is Format.json:
            payload = plans[0].to_json() if len(plans) == 1 and plans[0].spec.stage is None \
                else {"stages": [plan.to_json() for plan in plans]}
            typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))
            return
        from generator.explain import explain_text  # deferred: explain's text only (start-up)
        from generator.plan.stages import stage_folder, timeline

        if len(plans) == 1 and plans[0].spec.stage is None:
            sys.stdout.write(explain_text(plans[0]))
            return
        sys.stdout.write("\n".join(timeline(plans)) + "\n")
        for index, plan in enumerate(plans, start=1):
            sys.stdout.write(f"\n=== {stage_folder(index, plan)} ===\n" + explain_text(plan))

    _guarded(run)


@app.command("plan")
def plan_(
    spec: SpecArg,
    top: Annotated[int, typer.Option("--top", min=1, help="How many ranked layouts to show.")] = 10,
    output_format: Annotated[Format, typer.Option("--format", "-f", help="text or json.")] = Format.text,
    overrides: SetOption = None,
    memory_margin: Annotated[float, typer.Option(  # the default: autoplan.search.MARGIN
        "--memory-margin", metavar="PERCENT", min=0, max=50,
        help="Memory kept free of every fitting layout's estimate, in % of the GPU's memory "
             "(beyond cluster.memory_headroom_gib); generate's choice keeps the default.")] = 5.0,
) -> None:
    """Search the layouts the spec leaves to auto-plan (tp, pp, cp, ep, vpp, zero_stage,
    distributed_optimizer, micro_batch_size, recompute: auto or a list) and rank those that fit
    (a margin free) by estimated step time. Exit 0, or 1 when nothing fits."""

    def run() -> int:
        # deferred: plan's search (numpy), imported when it runs (start-up)
        from generator.autoplan import run_search
        from generator.autoplan.report import nothing_fits, plan_json, summary, table, why_best
        from generator.spec.model import load_document

        doc = load_document(spec, str(spec), tuple(overrides or ()))
        if doc.data.get("sweep"):
            raise UserError(f"{spec}: plan searches one spec; a sweep's points are each a spec "
                            "(gen-launch explain lists them)")
        template, given, result = run_search(doc, keep=top, margin=memory_margin / 100)
        missing = None if result.ranked else nothing_fits(template, given, result)
        if output_format is Format.json:
            typer.echo(json.dumps(plan_json(template, given, result, missing), indent=2,
                                  ensure_ascii=False))
        else:
            lines = [summary(template, result)]
            if not given:
                lines.append("the spec fixes every layout field; give one (e.g. parallelism.tp: "
                             "auto) to search")
            if result.ranked:
                other = f"generate keeps a 5 % margin, not {memory_margin:g} %: its choice may differ from #1"
                lines += ["", table(result, top), "", why_best(result.ranked, result.fitting),
                          "generate uses #1" if memory_margin == 5.0 else other]
            else:
                lines += ["", missing]
            sys.stdout.write("\n".join(lines) + "\n")
        return 0 if result.ranked else 1

    code = _guarded(run)
    if code:
        raise typer.Exit(code)


@app.command()
def report(
    spec: SpecArg,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="The page to write (default: "
                   "launch/<name>/report.html).")] = None,
    overrides: SetOption = None,
) -> None:
    """Write one self-contained HTML page of the plan: memory per GPU by pipeline stage, the
    learning rate and batch over the run, one step's pipeline timeline, and auto-plan's ranking
    (a sweep: one page per point). Needs the report extra: pip install 'gen-launch[report]'."""

    def run() -> None:
        # deferred: the report's modules (matplotlib), imported when it runs (start-up)
        from generator.report import report_pages

        name, pages = report_pages(spec, str(spec), tuple(overrides or ()))
        if out is not None and len(pages) != 1:
            raise UserError(f"{spec}: a sweep's {len(pages)} points each get a page in "
                            f"launch/{name}/<point>/; give no --out")
        for relative, page in pages.items():
            target = out if out is not None else Path("launch") / name / relative
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(page, encoding="utf-8")
            except OSError as exc:
                raise UserError(f"cannot write {target}: {exc.strerror}") from None
            typer.echo(f"wrote {target}")

    _guarded(run)


@app.command()
def lint(
    paths: Annotated[list[Path], typer.Argument(
        help="Launch scripts, DeepSpeed JSON, specs or folders.", show_default=False)],
    output_format: Annotated[LintFormat, typer.Option("--format", "--output-format", "-f",
                                                      help="text, json, github or sarif.")] = LintFormat.text,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report to a file.")] = None,
    select: Annotated[list[str] | None, typer.Option("--select", help="Only these codes or prefixes "
                      "(GL0, GL004); repeat or separate with commas.")] = None,
    ignore: Annotated[list[str] | None, typer.Option(
        "--ignore", help="Skip these codes or prefixes.")] = None,
    dialect: Annotated[str | None, typer.Option(
        "--dialect", help="The parser every script runs (megatron-lm, megatron-lm@core_v0.14, "
        "megatron-deepspeed/microsoft, …), over the project's configuration and the repository's "
        "own parser.")] = None,
) -> None:
    """Find batch and parallelism inconsistencies in existing launch files (static: nothing runs).
    Exit 0 clean, 1 errors found (an unreadable file is one: GL900), 2 usage errors."""

    def run() -> int:
        from generator.lint import lint_paths  # deferred: lint's modules, imported when it runs (start-up)
        from generator.lint.report import REPORTERS

        def codes(values: list[str] | None) -> list[str]:
            return [c.strip().upper() for v in values or [] for c in v.split(",") if c.strip()]

        report = lint_paths(paths, codes(select), codes(ignore), dialect)
        rendered = REPORTERS[output_format.value](report.items)
        if output is not None:
            try:
                output.write_text(rendered, encoding="utf-8")
            except OSError as exc:
                raise UserError(f"cannot write {output}: {exc.strerror}") from None
        else:
            sys.stdout.write(rendered)
        if output_format is LintFormat.text:
            typer.echo(report.summary(), err=True)
        return 1 if report.errors else 0

    code = _guarded(run)
    if code:
        raise typer.Exit(code)


@app.command("import")
def import_(
    paths: Annotated[list[Path], typer.Argument(
        help="One run's launch files: its script (with what it sources), its DeepSpeed JSON, or "
        "their folder; or a Hugging Face config.json (the model section).", show_default=False)],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the spec to this file "
                   "(default: stdout).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
) -> None:
    """Write the spec that existing launch files imply (static: nothing runs). Values the files
    do not determine are marked in the YAML and listed on stderr."""

    def run() -> None:
        # deferred: import's modules, imported when it runs (start-up)
        from generator.importer import import_paths
        from generator.lint.report import locate

        if out is not None and out.exists() and not force:
            raise UserError(f"--out {out}: exists; give --force to overwrite it")
        imported = import_paths(paths)
        for where, what in imported.problems:
            typer.echo(f"{where}: cannot read: {what}", err=True)
        for finding in imported.findings:
            item = locate(finding)
            typer.echo(f"{item.path}:{item.line}:{item.column}: {finding.severity}: {finding.code} "
                       f"{finding.message}", err=True)
        if imported.findings:
            typer.echo(f"the files disagree or break a rule ({len(imported.findings)} finding(s) "
                       "above); where they disagree the spec follows the training script's arguments",
                       err=True)
        for path, why in imported.draft.marks.items():
            typer.echo(f"not determined: {path}: {why}", err=True)
        for note in imported.draft.notes:  # (also in the spec's header)
            typer.echo(f"note: {note}", err=True)
        if out is None:
            sys.stdout.write(imported.text)
            return
        try:
            out.write_text(imported.text, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write {out}: {exc.strerror}") from None
        typer.echo(f"wrote {out} from {', '.join(imported.sources)}; "
                   f"{len(imported.draft.marks)} value(s) to check", err=True)

    _guarded(run)


@app.command("resume-check")
def resume_check(
    old: Annotated[Path, typer.Argument(help="The run that saved the checkpoint: its spec, its generated "
                                         "folder or plan.json.", show_default=False)],
    new: Annotated[Path, typer.Argument(help="The run that resumes it: a spec, a folder or a plan.json.",
                                         show_default=False)],
    output_format: Annotated[Format, typer.Option("--format", "-f", help="text or json.")] = Format.text,
    overrides: Annotated[list[str] | None, typer.Option(
        "--set", help="Override a value of NEW's spec: --set parallelism.tp=8 (repeatable), e.g. NEW the "
        "same spec as OLD with one change.")] = None,
) -> None:
    """Say, change by change, whether NEW can resume OLD's checkpoint: as it is, with schedule
    flags, after a conversion (which), or not at all. Exit 0 when it resumes as it is, 1 otherwise."""

    def run() -> int:
        from generator.resume import check  # deferred: resume-check only (start-up)

        result = check(old, new, tuple(overrides or ()))
        if output_format is Format.json:
            typer.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        else:
            sys.stdout.write(result.text())
        return 0 if result.verdict == "safe" else 1

    code = _guarded(run)
    if code:
        raise typer.Exit(code)


@app.command()
def schema() -> None:
    """Print the spec's JSON Schema (draft-07)."""
    # deferred: resources (hashlib) is not needed by --version or a command that fails early
    from generator.resources import data_dir

    sys.stdout.write((data_dir("schemas") / "spec.schema.json").read_text(encoding="utf-8"))


@app.command()
def rules(code: Annotated[str | None, typer.Argument(help="A rule code such as GL003.")] = None) -> None:
    """List the checks and their stable codes, or explain one."""
    # deferred: the rules command only; the rule modules load on use (start-up)
    from generator.rules import RULES

    if code is None:
        for rule in RULES.values():
            typer.echo(f"{rule.code}  {rule.name:40} {rule.summary}")
        return
    rule = RULES.get(code.upper())
    if rule is None:
        typer.echo(f"unknown rule {code!r}; `gen-launch rules` lists them", err=True)
        raise typer.Exit(2)
    text = f"{rule.code} {rule.name} ({rule.severity})\n\n{rule.summary}\n\n{rule.explanation}"
    typer.echo(text.replace("``", "`"))  # the docstrings' reST literals, as a terminal shows code


def entrypoint(argv: list[str] | None = None) -> None:
    """Console script: ``gen-launch SPEC ...`` is short for ``gen-launch generate SPEC ...``."""
    if argv is None:  # the program itself, not a caller in its own process (the tests)
        # a run is short and frees what it allocates by reference counting; the cyclic
        # collector would only walk the imported modules' objects again and again (~10 %)
        gc.disable()
    args = list(sys.argv[1:] if argv is None else argv)
    commands = {info.name or typer.main.get_command_name(info.callback.__name__): info
                for info in app.registered_commands}
    if args and not args[0].startswith("-") and args[0] not in commands:
        args = ["generate", *args]
    runs = app
    if args and args[0] in commands:
        # typer builds every registered command's parameters from its signature before it
        # parses anything (~6 ms of each run): a run gets the app with just the command it
        # calls (`gen-launch --help`, with no command, lists them all from the whole app)
        runs = copy.copy(app)
        runs.registered_commands = [commands[args[0]]]
    runs(args=args, prog_name="gen-launch")
