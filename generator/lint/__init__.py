"""`gen-launch lint`: read existing launch scripts and DeepSpeed JSON statically, reconstruct the
run they imply, and report every inconsistency with the same rules the generator uses."""

from __future__ import annotations

import dataclasses
import os
import re
from collections import Counter
from dataclasses import field
from pathlib import Path

from generator.errors import UserError
from generator.lint.config import NONE, Configurations, LintConfig, dialect_problem
from generator.lint.discover import (
    discover,
    looks_like_accelerate_config,
    looks_like_executor_file,
    looks_like_spec,
    read_text,
)
from generator.lint.engine import Context, lint_texts
from generator.lint.report import Located, locate
from generator.lint.repository import Parsers, repository_root
from generator.readers.bash.lexer import STOPPED
from generator.readers.neox_config import looks_like_neox_config
from generator.rules import RULES, Fact
from generator.values import record

_NOQA = re.compile(r"gen-launch:\s*noqa(?::?\s*(?P<codes>[A-Z]{2}\d{3}(?:[\s,]+[A-Z]{2}\d{3})*))?")


@record
class Report:
    """Findings of a lint run, located in their files, and the files that held no launch."""

    items: list[Located] = field(default_factory=list)
    files: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why it was not checked)

    @property
    def errors(self) -> int:
        return sum(1 for i in self.items if i.level == "error")

    def summary(self) -> str:
        """"12 file(s) checked, 3 skipped (2 JSON that is not a DeepSpeed config, 1 …), …"."""
        checked = self.files - len(self.skipped)
        notes = sum(1 for i in self.items if i.level == "note")
        out = f"{checked} file(s) checked"
        if self.skipped:
            why = Counter(reason for _, reason in self.skipped)
            out += f", {len(self.skipped)} skipped ({', '.join(f'{n} {r}' for r, n in why.most_common())})"
        out += f", {self.errors} error(s), {len(self.items) - self.errors - notes} warning(s)"
        return out + (f", {notes} note(s)" if notes else "")


def gather(paths: list[Path], specs: list[Path] | None = None, skipped: list | None = None,
           excluded=lambda path: False):
    """(launch files as {path: text}, [(path, why it cannot be read)], ``extra``: reads a file
    the launch files name, such as a sourced script, on demand). YAML files go to ``specs``
    when they are gen-launch specs; other YAML is counted in ``skipped``; files found in folders
    that the configuration excludes are left out."""
    explicit, found = discover(paths)
    texts: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for path in [*explicit, *(p for p in found if not excluded(p))]:
        text, why = read_text(path)
        if text is None:
            problems.append((str(path), why))
        elif path.suffix not in (".yaml", ".yml") or looks_like_accelerate_config(text) or \
                looks_like_neox_config(text) or looks_like_executor_file(text):
            texts[str(path)] = text
        elif specs is not None and looks_like_spec(text):
            specs.append(path)
        elif skipped is not None:
            skipped.append((str(path), "YAML that is not a launch config"))

    def extra(candidate: str) -> tuple[str, str] | None:
        path = Path(candidate)
        if path.is_file():
            text, _ = read_text(path)
            return (candidate, text) if text is not None else None
        return None

    return texts, problems, extra


class _OnDisk(Context):
    """Files on disk: each script's repository root and configuration, and the parser it runs."""

    def __init__(self, paths: list[Path], dialect: str | None) -> None:
        self.given = [(p if p.is_dir() else p.parent).resolve() for p in paths]
        self.dialect = dialect
        self.parsers = Parsers()
        self.configurations = Configurations()
        self._roots: dict[str, tuple[str, Path]] = {}

    def config(self, name: str) -> LintConfig:
        config = self.configurations.of(name)
        if self.dialect is not None:
            return dataclasses.replace(config, dialect=self.dialect, per_path_dialects=(),
                                       where={**config.where, "dialect": "--dialect"})
        return config

    def _root(self, name: str) -> tuple[str, Path]:
        folder = os.path.dirname(name) or "."  # a folder's files share their root
        if folder not in self._roots:
            resolved = Path(folder).resolve()
            given = next((g for g in self.given if resolved.is_relative_to(g)), resolved)
            root = repository_root(resolved, given)
            shown = str(root) if os.path.isabs(name) else os.path.relpath(root)
            self._roots[folder] = (shown, root)
        return self._roots[folder]

    def root(self, name: str) -> str | None:
        return self._root(name)[0]

    def parser(self, name: str, facts: dict[str, Fact]):
        if "megatron_dialect" not in facts:  # not Megatron's arguments: the entry point's own
            if "megatron_flags" not in facts or "trainer" in facts:
                return None
            return self.parsers.for_entry_point(Path(name), facts, self._root(name)[1])
        return self.parsers.for_script(Path(name), facts, self._root(name)[1], self.config(name))


def lint_paths(paths: list[Path], select: list[str] = (), ignore: list[str] = (),
               dialect: str | None = None) -> Report:
    """Every finding of the files given (folders walked): rule findings, what could not be read
    at all (GL900), where a reading stopped at the reader's bounds (GL902), what parts were not
    followed (GL901) and named files that exist nowhere (GL903). Each file is judged with the
    project configuration nearest to it (lint/config.py), ``dialect`` (--dialect) over it. A
    path that does not exist is a usage error (UserError, exit 2); one unreadable file never
    stops the others."""
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise UserError(f"{missing[0]}: file not found")
    if dialect is not None and (problem := dialect_problem(dialect)):
        raise UserError(f"--dialect: {problem}")
    context = _OnDisk(paths, dialect)
    report = Report()
    specs: list[Path] = []
    texts, unreadable, extra = gather(paths, specs, report.skipped,
                                      excluded=lambda p: context.config(str(p)).excluded(p))
    for path in specs:
        _lint_spec(path, report, unreadable)
    result = lint_texts(texts, extra, context)
    report.files = len(texts) + len(specs) + len(report.skipped)
    report.skipped += result.skipped
    unreadable += result.unreadable
    report.items += [locate(f) for f in result.findings]
    report.items += [locate(_reading("GL900", "unreadable_file", where, what)) for where, what in unreadable]
    report.items += [locate(_reading("GL903", "named_file_missing", where, what))
                     for where, what in result.missing]
    for where, what in result.problems:  # a stopped reading is an error, a part not followed a note
        stopped = what.startswith(STOPPED)
        report.items.append(locate(_reading("GL902" if stopped else "GL901",
                                            "reading_stopped" if stopped else "not_checked", where, what)))

    def kept(item: Located) -> bool:
        config = context.config(item.path) if item.path != "-" else NONE
        chosen = list(select) or list(config.select)
        return _selected(item.finding.code, chosen, [*ignore, *config.ignored(item.path)]) and \
            not _suppressed(item, texts)

    report.items = sorted((i for i in report.items if kept(i)),
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
