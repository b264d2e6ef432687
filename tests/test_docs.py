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
