"""scripts/fetch-oracles.sh against local repositories laid out like the real ones (this machine
reaches no Git host): it packs the pinned commit's LICENSE, megatron/ (and tools/retro/) as the
shared archives hold them, skips an archive already there, and fails, saying so, when the ref
does not have the pinned commit. Its default pins cover every archive the oracle tests use."""

from __future__ import annotations

import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from .conftest import ROOT
from .oracle.workers import TREES
from .test_artifacts import shellcheck

SCRIPT = ROOT / "scripts" / "fetch-oracles.sh"
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def git(repo: Path, *args: str, date: str = "2024-12-24T14:46:00Z") -> str:
    env = {**os.environ, **GIT_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def commit(repo: Path, files: dict[str, str], date: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", f"at {date}", date=date)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def hosts(tmp_path: Path) -> dict[str, str]:
    """Two repositories under tmp/git/<owner>/<name>: a Megatron-LM with a tag and a later main,
    a Megatron-DeepSpeed whose main moved on past the pinned commit. {what: commit}."""
    lm = tmp_path / "git" / "NVIDIA" / "Megatron-LM"
    ds = tmp_path / "git" / "microsoft" / "Megatron-DeepSpeed"
    out = {}
    for repo in (lm, ds):
        repo.mkdir(parents=True)
        git(repo, "init", "--quiet", "--initial-branch=main")
    out["tagged"] = commit(lm, {"LICENSE": "BSD\n", "README.md": "not packed\n",
                                "megatron/training/arguments.py": "TAGGED = 1\n",
                                "megatron/core/__init__.py": "", "tests/test_x.py": "not packed\n"},
                           "2026-03-16T09:59:00Z")
    git(lm, "tag", "core_v0.16.1")
    out["main"] = commit(lm, {"megatron/training/arguments.py": "MAIN = 1\n"}, "2026-08-22T15:22:00Z")
    out["pinned"] = commit(ds, {"LICENSE": "BSD\n", "megatron/arguments.py": "PINNED = 1\n",
                                "tools/retro/main.py": "", "tools/other.py": "not packed\n",
                                "examples/run.sh": "not packed\n"}, "2024-12-24T14:46:00Z")
    out["later"] = commit(ds, {"megatron/arguments.py": "LATER = 1\n"}, "2025-02-01T10:00:00Z")
    git(ds, "config", "uploadpack.allowAnySHA1InWant", "true")  # as GitHub allows a full hash
    return out


def run(tmp_path: Path, pins: str, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "pins").write_text(pins)
    env = {**os.environ, **GIT_ENV, "GEN_LAUNCH_ORACLE_GIT_BASE": f"file://{tmp_path / 'git'}",
           "GEN_LAUNCH_ORACLE_PINS": str(tmp_path / "pins"), "GEN_LAUNCH_ORACLES": str(tmp_path / "env-dest")}
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120)


def members(archive: Path) -> dict[str, str]:
    with tarfile.open(archive) as tar:
        return {m.name: (tar.extractfile(m).read().decode() if m.isfile() else "/") for m in tar.getmembers()}


def test_the_pinned_commits_are_packed_as_the_shared_archives_hold_them(hosts, tmp_path: Path) -> None:
    pins = (f"lm-tag NVIDIA/Megatron-LM refs/tags/core_v0.16.1 {hosts['tagged'][:10]} - LICENSE megatron\n"
            f"ds-main microsoft/Megatron-DeepSpeed refs/heads/main {hosts['pinned'][:8]} 2024-12-23"
            " LICENSE megatron tools/retro\n"
            f"ds-full microsoft/Megatron-DeepSpeed refs/heads/main {hosts['pinned']} - LICENSE megatron\n")
    proc = run(tmp_path, pins, str(tmp_path / "dest"))
    assert proc.returncode == 0, proc.stderr
    lm = members(tmp_path / "dest" / "lm-tag.tar.gz")
    assert lm == {".": "/", "./LICENSE": "BSD\n", "./megatron": "/", "./megatron/training": "/",
                  "./megatron/training/arguments.py": "TAGGED = 1\n", "./megatron/core": "/",
                  "./megatron/core/__init__.py": ""}
    ds = members(tmp_path / "dest" / "ds-main.tar.gz")
    assert ds["./megatron/arguments.py"] == "PINNED = 1\n"  # the pinned commit, not the branch's head
    assert {n for n in ds if n.count("/") == 1} == {"./LICENSE", "./megatron", "./tools"}
    assert {n for n in ds if n.startswith("./tools/")} == {"./tools/retro", "./tools/retro/main.py"}
    assert members(tmp_path / "dest" / "ds-full.tar.gz")["./megatron/arguments.py"] == "PINNED = 1\n"
    assert sorted(p.name for p in (tmp_path / "dest").iterdir()) == ["ds-full.tar.gz", "ds-main.tar.gz",
                                                                     "lm-tag.tar.gz"]


def test_an_archive_already_there_is_skipped(hosts, tmp_path: Path) -> None:
    dest = tmp_path / "env-dest"  # GEN_LAUNCH_ORACLES, without an argument
    dest.mkdir()
    (dest / "there.tar.gz").write_text("kept")
    pins = (f"there nobody/nothing refs/heads/main {hosts['main'][:10]} - LICENSE megatron\n"
            f"lm-main NVIDIA/Megatron-LM refs/heads/main {hosts['main'][:10]} 2026-08-21 LICENSE megatron\n")
    proc = run(tmp_path, pins)
    assert proc.returncode == 0, proc.stderr
    assert "there.tar.gz is there; skipped" in proc.stdout
    assert (dest / "there.tar.gz").read_text() == "kept"
    assert members(dest / "lm-main.tar.gz")["./megatron/training/arguments.py"] == "MAIN = 1\n"


@pytest.mark.parametrize(("ref", "since"), [("refs/tags/core_v0.16.1", "-"), ("refs/heads/main", "2026-08-21")])
def test_a_ref_without_the_pinned_commit_fails_saying_so(ref: str, since: str, hosts, tmp_path: Path) -> None:
    """The tag (or the branch since the date) does not have the commit pinned (the tag moved, or
    the commit is older than the date): the script stops, names both, and writes nothing."""
    pinned = hosts["tagged"] if since != "-" else hosts["main"]
    pins = f"lm NVIDIA/Megatron-LM {ref} {pinned[:10]} {since} LICENSE megatron\n"
    proc = run(tmp_path, pins, str(tmp_path / "dest"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(rf"fetch-oracles: lm: file://\S+ {ref} does not have the pinned commit {pinned[:10]} "
                     r"\(it has [0-9a-f]{10}", proc.stderr), proc.stderr
    assert "pin the full commit hash" in proc.stderr
    assert list((tmp_path / "dest").iterdir()) == []


def test_the_default_pins_are_the_archives_the_oracle_tests_use() -> None:
    text = SCRIPT.read_text()
    pins = re.search(r"^PINS='\n(.*?)^'", text, re.S | re.M).group(1).splitlines()
    names = {line.split()[0] for line in pins}
    assert names == set(TREES.values())
    for line in pins:
        name, repo, ref, pinned, since, *paths = line.split()
        assert pinned in name or ref.endswith(name.rsplit("-", 1)[-1]), line  # the README's commit
        assert paths[:2] == ["LICENSE", "megatron"] and ("tools/retro" in paths) == ("microsoft" in name)


def test_the_script_is_shellcheck_clean() -> None:
    proc = subprocess.run([shellcheck(), "-S", "style", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
