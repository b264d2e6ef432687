"""Print start-up and throughput figures (a benchmark prints numbers; tests never time).

    python benchmarks/bench.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "seed-pretrain-256.yaml"


def wall(command: list[str], repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    python = sys.executable
    cli = [python, "-m", "generator"]
    # the bare import of what `pip install .` brings (typer parses its options with pydantic)
    deps = "import jinja2, jsonschema, pydantic, typer, yaml"
    commands = {
        "python -c pass": [python, "-c", "pass"],
        "import the dependencies": [python, "-c", deps],
        "gen-launch --version": [*cli, "--version"],
        "gen-launch explain (seed)": [*cli, "explain", str(SAMPLE)],
        "gen-launch generate --target all": [*cli, "generate", str(SAMPLE), "--out", "/tmp/gen-launch-bench"],
    }
    times = {label: wall(command) for label, command in commands.items()}
    for label, seconds in times.items():
        print(f"{label + ':':34} {seconds * 1000:7.1f} ms")
    ratio = times["gen-launch generate --target all"] / times["import the dependencies"]
    print(f"{'generate / import the dependencies:':34} {ratio:7.2f} x")

    sys.path.insert(0, str(ROOT))
    from generator.plan.plan import resolve
    from generator.render import render_all
    from generator.spec.model import load_spec

    # specs with auto fields run the layout search when loaded: bench_autoplan.py measures it
    samples = [s for s in sorted((ROOT / "samples").glob("*.yaml")) if ": auto" not in s.read_text()]
    specs = [load_spec(s) for s in samples]
    render_all(resolve(specs[0]))  # warm the template cache
    rounds = 200
    start = time.perf_counter()
    for _ in range(rounds):
        for s in samples:
            load_spec(s)
    load_rate = rounds * len(samples) / (time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(rounds):
        for spec in specs:
            resolve(spec)
    resolve_rate = rounds * len(specs) / (time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(rounds):
        for spec in specs:
            render_all(resolve(spec))
    render_rate = rounds * len(specs) / (time.perf_counter() - start)
    print(f"{'load + schema-check a spec:':34} {load_rate:7.0f} /s")
    print(f"{'resolve a plan (all rules):':34} {resolve_rate:7.0f} /s")
    print(f"{'resolve + render + read back:':34} {render_rate:7.0f} /s")


if __name__ == "__main__":
    main()
