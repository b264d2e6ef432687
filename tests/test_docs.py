"""The docs: generated pages and sections are current, links resolve, the README is a short front
door whose examples run as shown, and CI runs the README's test command."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from generator import docs
from generator.cli import app
from generator.rules import RULES

from .conftest import ROOT

PAGES = sorted((ROOT / "docs").rglob("*.md"))
README_LIMIT = 12 * 1024


def _block(text: str, name: str, fence: str) -> str:
    body = text.split(f"<!-- {name}:start -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
    return body.split(f"```{fence}\n", 1)[1].split("```", 1)[0]


def test_generated_docs_are_current() -> None:
    assert docs.stale() == [], "run: python -m generator.docs"


def test_every_rule_has_a_page_and_a_stale_or_orphan_page_is_caught(tmp_path: Path) -> None:
    assert {p.stem for p in (ROOT / "docs" / "rules").glob("*.md")} == set(RULES)
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copytree(ROOT / "schemas", tmp_path / "schemas")
    (tmp_path / "docs" / "rules" / "GL002.md").write_text("edited\n")
    (tmp_path / "docs" / "rules" / "GL999.md").write_text("a rule that does not exist\n")
    spec = tmp_path / "docs" / "spec.md"
    spec.write_text(spec.read_text().replace("| `cluster.nodes`", "| `cluster.nodez`", 1))
    schema = tmp_path / "schemas" / "spec.schema.json"  # the framework values come from the records
    schema.write_text(schema.read_text().replace('"bigscience"\n', '"bigsci"\n', 1))
    assert docs.stale(tmp_path) == ["docs/spec.md", "docs/rules/GL002.md", "schemas/spec.schema.json",
                                    "docs/rules/GL999.md"]
    docs.write(tmp_path)
    assert docs.stale(tmp_path) == [] and not (tmp_path / "docs" / "rules" / "GL999.md").exists()


def test_a_rule_page_shows_the_corpus_files_that_trigger_it() -> None:
    page = (ROOT / "docs" / "rules" / "GL002.md").read_text()
    assert page.startswith("# GL002 `global-batch-not-divisible`\n\n**error** · ")
    assert "](../../tests/lint_corpus/bad/gbs_not_divisible.sbatch) line 8" in page
    assert "``" not in page  # the docstrings' reST literals are markdown code


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"(?ms)^```.*?^```", "", path.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"(?m)^#+ (.*)$", text)}


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page: Path) -> None:
    """Relative links name files in the repository, and their #anchors headings in them."""
    text = re.sub(r"(?ms)^```.*?^```", "", page.read_text(encoding="utf-8"))
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists() or anchor and anchor not in _anchors(path):
            broken.append(target)
    assert not broken, broken


def test_the_readme_is_a_front_door_to_every_page() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= README_LIMIT, f"README.md is {len(text.encode())} bytes"
    linked = {(ROOT / target).resolve() for target in re.findall(r"\]\((docs/[^)#\s]+)", text)}
    assert linked >= {p.resolve() for p in PAGES if p.parent.name == "docs"}, "a page the README does not link"
    for heading in ("## Set up", "## Quick start", "## Commands", "## In CI: pre-commit and GitHub Actions",
                    "## Documentation"):
        assert heading in text


def test_the_quickstart_spec_generates_what_the_readme_shows(tmp_path: Path, monkeypatch) -> None:
    """The README's spec, saved as the README names it, writes the files the README lists; with
    `tp: 3` it is refused with the findings the README shows, located in the file."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    spec = _block(text, "quickstart-spec", "yaml")
    wrote = re.findall(r"^wrote (\S+)$", text.split("<!-- quickstart-spec:end -->", 1)[1], re.M)
    monkeypatch.chdir(tmp_path)
    Path("llama3-8b.yaml").write_text(spec)
    result = CliRunner().invoke(app, ["generate", "llama3-8b.yaml", "--target", "all"])
    assert result.exit_code == 0, result.output
    assert wrote and sorted(wrote) == sorted(str(p) for p in Path("launch").rglob("*") if p.is_file())
    assert "megatron_args.sh" in wrote[0]
    Path("llama3-8b.yaml").write_text(spec.replace("tp: 2,", "tp: 3,"))
    refused = CliRunner().invoke(app, ["generate", "llama3-8b.yaml", "--target", "all", "--out", "bad"])
    assert refused.exit_code == 2 and not Path("bad").exists()
    shown = [line.removesuffix(" […]") for line in _block(text, "quickstart-refusal", "text").splitlines()]
    got = [line for line in refused.output.splitlines() if ": GL" in line]
    assert len(got) == len(shown), (got, shown)
    assert all(g.startswith(s) for g, s in zip(got, shown, strict=True)), (got, shown)


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    marker = readme.index("<!-- test-command -->")
    assert readme[marker + 1] == "```bash"
    command = readme[marker + 2]
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # run the extraction part of .ci/run and compare with the README line
    extract = script[script.index("command=\"$(awk"):script.index("if [[ -z")]
    out = subprocess.run(["bash", "-c", extract + 'printf "%s" "$command"'], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert out == command
    assert "pytest" in command and "[test,oracle,report]" in command


def test_no_docstring_cites_a_file_the_repository_lacks() -> None:
    """Citations of design notes (a reference folder's markdown file, or one cited with a section
    sign) in the code and the data files' comments name files in the repository (not beside
    it: an installed package has no ../shared)."""
    cited = re.compile(r"(reference/[\w-]+\.md|[\w./-]+\.md(?=\s*§))")
    missing = []
    for folder in ("generator", "tests", "scripts", "benchmarks"):
        for path in sorted(p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".yaml")
                           and p.name != "test_docs.py"):
            for match in cited.finditer(path.read_text(encoding="utf-8")):
                if ".." in match.group(1) or not (ROOT / match.group(1)).exists():
                    missing.append(f"{path.relative_to(ROOT)}: {match.group(1)}")
    assert not missing, "\n".join(missing)
