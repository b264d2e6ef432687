"""The test side of megatron_worker.py: one worker process per Megatron tree, started on first
use and kept for the session (conftest.py closes them), so the ≈10 s import of torch and
Megatron is paid once per tree instead of once per test."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARK = "GEN_LAUNCH_RESULTS "
ORACLES = Path(os.environ.get("GEN_LAUNCH_ORACLES", HERE.parent.parent.parent / "shared" / "oracles"))
# dialect (and release) -> the archive of shared/oracles whose parser judges it
TREES = {("megatron-lm", "core_v0.16"): "megatron-lm-core_v0.16.1",
         ("megatron-lm", "latest"): "megatron-lm-main-d98e8a64dd",
         ("megatron-deepspeed/microsoft", None): "megatron-deepspeed-microsoft-f4157bea",
         ("megatron-deepspeed/bigscience", None): "megatron-deepspeed-bigscience-8387ae17"}


class _Worker:
    def __init__(self, tree: Path) -> None:
        self.stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - open as long as the worker
        self.proc = subprocess.Popen([sys.executable, str(HERE / "megatron_worker.py"), str(tree)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, cwd=HERE)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)  # the process ended

    def _stderr_tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()[-3000:]

    def request(self, kind: str, cases: list[dict], timeout: float) -> list[dict]:
        self.proc.stdin.write(json.dumps({"kind": kind, "cases": cases}) + "\n")
        self.proc.stdin.flush()
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                tail = self._stderr_tail()
                self.proc.kill()
                raise AssertionError(f"the oracle worker gave no answer in {timeout} s:\n{tail}") from None
            if line is None:
                raise AssertionError(f"the oracle worker ended:\n{self._stderr_tail()}")
            if line.startswith(MARK):
                return json.loads(line[len(MARK):])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.stderr.close()


_WORKERS: dict[Path, _Worker] = {}


def ask(tree: Path, kind: str, cases: list[dict], timeout: float = 900) -> list[dict]:
    """The tree's answers to ``cases`` (``kind``: parse, build or resume), from its session worker."""
    worker = _WORKERS.get(tree)
    if worker is None or worker.proc.poll() is not None:
        worker = _WORKERS[tree] = _Worker(tree)
    try:
        return worker.request(kind, cases, timeout)
    except AssertionError:
        _WORKERS.pop(tree, None)
        raise


def close_all() -> None:
    while _WORKERS:
        _WORKERS.popitem()[1].close()
