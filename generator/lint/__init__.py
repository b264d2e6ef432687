"""`gen-launch lint`: read existing launch scripts and DeepSpeed JSON statically, reconstruct the
run they imply, and report every inconsistency with the same rules the generator uses."""

from __future__ import annotations

import re
from dataclasses import field
from pathlib import Path

from generator.errors import UserError
from generator.lint.discover import discover, looks_like_accelerate_config, looks_like_spec, read_text
from generator.lint.engine import lint_texts
from generator.lint.report import Located, locate
from generator.readers.bash.lexer import STOPPED
from generator.readers.neox_config import looks_like_neox_config
from generator.rules import RULES, Fact
from generator.values import record

_NOQA = re.compile(r"gen-launch:\s*noqa(?::?\s*(?P<codes>[A-Z]{2}\d{3}(?:[\s,]+[A-Z]{2}\d{3})*))?")


@record
class Report:
    """Findings of a lint run, located in their files."""

    items: list[Located] = field(default_factory=list)
    files: int = 0

    @property
    def errors(self) -> int:
        return sum(1 for i in self.items if i.level == "error")


def gather(paths: list[Path], specs: list[Path] | None = None):
    """(launch files as {path: text}, [(path, why it cannot be read)], ``extra``: reads a file
    the launch files name, such as a sourced script, on demand). YAML files go to ``specs``
    when they are gen-launch specs, and are skipped otherwise."""
    explicit, found = discover(paths)
    texts: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for path in [*explicit, *found]:
        text, why = read_text(path)
        if text is None:
            problems.append((str(path), why))
        elif path.suffix not in (".yaml", ".yml") or looks_like_accelerate_config(text) or \
                looks_like_neox_config(text):
            texts[str(path)] = text
        elif specs is not None and looks_like_spec(text):
            specs.append(path)

    def extra(candidate: str) -> tuple[str, str] | None:
        path = Path(candidate)
        if path.is_file():
            text, _ = read_text(path)
            return (candidate, text) if text is not None else None
        return None

    return texts, problems, extra


def lint_paths(paths: list[Path], select: list[str] = (), ignore: list[str] = ()) -> Report:
    """Every finding of the files given (folders walked): rule findings, what could not be read
    at all (GL900), where a reading stopped at the reader's bounds (GL902) and what parts were
    not followed (GL901). A path that does not exist is a
    usage error (UserError, exit 2); one unreadable file never stops the others."""
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise UserError(f"{missing[0]}: file not found")
    report = Report()
    specs: list[Path] = []
    texts, unreadable, extra = gather(paths, specs)
    for path in specs:
        _lint_spec(path, report, unreadable)
    report.files = len(texts) + len(specs)
    result = lint_texts(texts, extra)
    unreadable += result.unreadable
    report.items += [locate(f) for f in result.findings]
    report.items += [locate(_reading("GL900", "unreadable_file", where, what)) for where, what in unreadable]
    for where, what in result.problems:  # a stopped reading is an error, a part not followed a note
        stopped = what.startswith(STOPPED)
        report.items.append(locate(_reading("GL902" if stopped else "GL901",
                                            "reading_stopped" if stopped else "not_checked", where, what)))
    report.items = sorted(
        (i for i in report.items if _selected(i.finding.code, select, ignore) and not _suppressed(i, texts)),
        key=lambda i: (i.path, i.line, i.column, i.finding.code))
    return report


def _reading(code: str, fact: str, where: str, what: str):
    return RULES[code].run({fact: Fact(what, where)})


def _lint_spec(path: Path, report: Report, unreadable: list[tuple[str, str]]) -> None:
    """A gen-launch spec is linted by resolving it: its plan errors are its findings."""
    # deferred: a spec among the linted files only: the calculator and auto-plan (lint start-up)
    from generator.calculator.resolve import PlanError
    from generator.run import load_spec, resolve_run

    try:
        for plan in resolve_run(load_spec(path)):
            report.items += [locate(w) for w in plan.warnings]
    except PlanError as exc:
        report.items += [locate(f) for f in exc.findings]
    except UserError as exc:
        unreadable.append((str(exc.location or path), exc.message))


def _selected(code: str, select: list[str], ignore: list[str]) -> bool:
    if select and not any(code.startswith(p) for p in select):
        return False
    return not any(code.startswith(p) for p in ignore)


def _suppressed(item: Located, texts: dict[str, str]) -> bool:
    """`# gen-launch: noqa` (all codes) or `# gen-launch: noqa GL004` on the finding's line."""
    text = texts.get(item.path)
    if text is None:
        return False
    lines = text.splitlines()
    if not 0 < item.line <= len(lines):
        return False
    m = _NOQA.search(lines[item.line - 1])
    return bool(m) and (not m["codes"] or item.finding.code in re.split(r"[\s,]+", m["codes"]))
