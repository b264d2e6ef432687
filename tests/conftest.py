"""Shared fixtures: the repository paths, spec writing, and the --update-golden switch."""

from __future__ import annotations

import os
import tempfile
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# auto-plan's cache of choices (generator/autoplan/cache.py): the session's own, not the user's
os.environ.setdefault("GEN_LAUNCH_CACHE", tempfile.mkdtemp(prefix="gen-launch-cache-"))
SAMPLES = sorted((ROOT / "samples").glob("*.yaml"))


def pytest_sessionfinish(session: pytest.Session) -> None:
    from .oracle.workers import close_all

    close_all()


@pytest.fixture(scope="session")
def trees(tmp_path_factory) -> dict[str, Path]:
    """The Megatron trees of shared/oracles, unpacked once: {archive name: folder}."""
    import tarfile

    from .oracle.workers import ORACLES, TREES

    missing = [name for name in TREES.values() if not (ORACLES / f"{name}.tar.gz").is_file()]
    if missing:
        how = (f"scripts/fetch-oracles.sh fetches them into {ORACLES} (it needs network access to "
               "github.com), or set GEN_LAUNCH_ORACLES to a folder that has them")
        if os.environ.get("CI"):
            pytest.fail(f"oracle archives missing in {ORACLES}: {missing}; {how}")
        pytest.skip(f"oracle archives not found in {ORACLES}: {how}")
    base = tmp_path_factory.mktemp("oracles")
    out = {}
    for name in TREES.values():
        with tarfile.open(ORACLES / f"{name}.tar.gz") as archive:
            archive.extractall(base / name, filter="data")
        out[name] = base / name
    return out


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden/ from the current output instead of comparing")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


MINIMAL = """\
name: t
framework: megatron-lm
cluster: {nodes: 2, gpus_per_node: 8, gpu: h100-80gb}
model: {num_layers: 8, hidden_size: 1024, num_attention_heads: 16, vocab_size: 32000, seq_length: 2048}
parallelism: {tp: 2, pp: 2}
batch: {micro_batch_size: 2, gradient_accumulation_steps: 4}
training: {train_iters: 1000, lr: 1.0e-4, warmup: {iters: 10}}
"""


@pytest.fixture
def write_spec(tmp_path: Path):
    """Write a spec (dedented text or bytes) to a file and return its path."""

    def write(content: str | bytes, name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content), encoding="utf-8")
        return path

    return write


def require_oracle(module: str):
    """Import an oracle dependency; in CI a missing one fails instead of skipping."""
    try:
        return __import__(module)
    except ImportError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{module} is required in CI (install the oracle extra): {exc}")
        pytest.skip(f"{module} not installed (pip install '.[oracle]')")
