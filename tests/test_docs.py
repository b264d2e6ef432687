"""The README's generated sections are current, and CI runs the README's test command."""

from __future__ import annotations

import subprocess

from generator.docs import render_sections

from .conftest import ROOT


def test_readme_sections_are_current() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert render_sections(text) == text, "run: python -m generator.docs README.md"


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
    assert "pytest" in command and "[test,oracle]" in command


def test_no_docstring_cites_a_file_the_repository_lacks() -> None:
    """Citations of design notes (a reference folder's markdown file, or one cited with a section
    sign) name files in the repository."""
    import re

    cited = re.compile(r"(reference/[\w-]+\.md|[\w./-]+\.md(?=\s*§))")
    missing = []
    for folder in ("generator", "tests", "scripts", "benchmarks"):
        for path in sorted(p for p in (ROOT / folder).rglob("*.py") if p.name != "test_docs.py"):
            for match in cited.finditer(path.read_text(encoding="utf-8")):
                if not (ROOT / match.group(1)).exists():
                    missing.append(f"{path.relative_to(ROOT)}: {match.group(1)}")
    assert not missing, "\n".join(missing)
