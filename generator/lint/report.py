"""Output formats for findings: text, json, github (workflow annotations), sarif (2.1.0).
One registry keyed by format name supplies the CLI's choices."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from generator import __version__
from generator.rules import RULES, Finding
from generator.values import value

_LOCATION = re.compile(r"^(?P<path>.*?):(?P<line>\d+):(?P<col>\d+)(?: \((?P<note>.*)\))?$")


@value
class Located:
    """A finding at its file, line and column."""

    finding: Finding
    path: str
    line: int
    column: int

    @property
    def level(self) -> str:
        return self.finding.severity


def locate(finding: Finding) -> Located:
    """The finding's primary place (its first located value)."""
    for _, source in finding.values:
        m = _LOCATION.match(source)
        if m:
            return Located(finding, m["path"], int(m["line"]), int(m["col"]))
    return Located(finding, finding.sources[0] if finding.sources else "-", 1, 1)


def text(items: list[Located]) -> str:
    lines = []
    for item in items:
        body = str(item.finding).split(": ", 1)[1]
        level = "" if item.level == "error" else f" ({item.level})"
        code, _, rest = body.partition(" ")
        lines.append(f"{item.path}:{item.line}:{item.column}: {code}{level} {rest}")
    return "".join(f"{line}\n" for line in lines)


def as_json(items: list[Located]) -> str:
    return json.dumps([{
        "code": i.finding.code, "name": i.finding.name, "level": i.level, "path": i.path,
        "line": i.line, "column": i.column, "message": i.finding.message,
        "values": [{"fact": name, "source": source} for name, source in i.finding.values],
        **({"parser": i.finding.parser} if i.finding.parser else {}),
    } for i in items], indent=2, ensure_ascii=False) + "\n"


def _escape(value: str, prop: bool = False) -> str:
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return value.replace(":", "%3A").replace(",", "%2C") if prop else value


_GITHUB_LEVEL = {"error": "error", "warning": "warning", "note": "notice"}


def github(items: list[Located]) -> str:
    return "".join(
        f"::{_GITHUB_LEVEL[i.level]} file={_escape(i.path, True)},line={i.line},col={i.column},"
        f"title={_escape(f'{i.finding.code} {i.finding.name}', True)}::{_escape(i.finding.message)}\n"
        for i in items)


_REPOSITORY = "https://github.com/gen-launch/gen-launch"  # each rule's page is docs/rules/CODE.md there


def sarif(items: list[Located]) -> str:
    rules = sorted(RULES.values(), key=lambda r: r.code)
    index = {r.code: k for k, r in enumerate(rules)}
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "gen-launch",
                "version": __version__,
                "informationUri": _REPOSITORY,
                "rules": [{
                    "id": r.code, "name": r.name,
                    "shortDescription": {"text": r.summary},
                    "fullDescription": {"text": r.explanation},
                    "help": {"text": f"{r.summary}\n\n{r.explanation}"},
                    "helpUri": f"{_REPOSITORY}/blob/main/docs/rules/{r.code}.md",
                    "defaultConfiguration": {"level": r.severity},
                } for r in rules],
            }},
            "results": [{
                "ruleId": i.finding.code,
                "ruleIndex": index[i.finding.code],
                "level": i.level,
                "message": {"text": i.finding.message},
                "locations": [{"physicalLocation": {
                    "artifactLocation": {"uri": i.path},
                    "region": {"startLine": i.line, "startColumn": i.column,
                               "endLine": i.line, "endColumn": i.column + 1},
                }}],
                **({"properties": {"parser": i.finding.parser}} if i.finding.parser else {}),
            } for i in items],
        }],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


REPORTERS: dict[str, Callable[[list[Located]], str]] = {
    "text": text, "json": as_json, "github": github, "sarif": sarif}
