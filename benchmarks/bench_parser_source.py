"""Static parser reading: milliseconds per file for the four oracle parsers (shared/oracles),
read from their archives (best of N runs, one process, one core).

    python benchmarks/bench_parser_source.py [N]
"""

from __future__ import annotations

import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ORACLES = ROOT.parent / "shared" / "oracles"
PARSERS = {
    "megatron-deepspeed-bigscience-8387ae17": "megatron/arguments.py",
    "megatron-deepspeed-microsoft-f4157bea": "megatron/arguments.py",
    "megatron-lm-core_v0.16.1": "megatron/training/arguments.py",
    "megatron-lm-main-d98e8a64dd": "megatron/training/arguments.py",
}


def main(runs: int = 20) -> None:
    from generator.readers.parser_source import read_parser_source

    for archive, inner in PARSERS.items():
        with tarfile.open(ORACLES / f"{archive}.tar.gz") as tar:
            text = tar.extractfile(f"./{inner}").read().decode("utf-8")
        best = float("inf")
        for _ in range(runs):
            start = time.perf_counter()
            source = read_parser_source(text, inner)
            best = min(best, time.perf_counter() - start)
        print(f"{archive:42} {text.count(chr(10)):5} lines {len(source.options):4} options "
              f"{best * 1000:6.1f} ms")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
